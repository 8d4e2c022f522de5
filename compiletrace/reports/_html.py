"""HTML views: tables for notebooks (``_repr_html_``) and the one-file report.

Everything is inline (CSS, SVG and, in the page only, one small script; no font, no CDN, no
request of any kind), so a report opens offline and a notebook cell shows the same thing.
The charts size their bars in percent of their width and their text in pixels: they fill a
laptop's window and a phone's alike, with text that stays readable on both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from compiletrace._data.findings import Finding
from compiletrace._data.job import Job
from compiletrace._data.records import (
    NS_PER_S,
    TRACE_GC,
    TRACE_OTHER,
    GraphRecord,
    TraceNode,
    component_totals,
)
from compiletrace._data.run import RunOrRecords, run_parts
from compiletrace._data.run_meta import RunMeta
from compiletrace._io.text import shorten
from compiletrace._version import __version__
from compiletrace.reports._findings import findings_html
from compiletrace.reports._flame import component_trees
from compiletrace.reports._svg import LegendItem, TimeAxis, esc, legend, pct, rect, svg_open
from compiletrace.reports._table import (
    COMPONENT_HEADERS,
    GRAPH_HEADERS,
    PHASE_HEADERS,
    component_rows,
    costliest,
    graph_rows,
    phase_rows,
    rest_line,
    setup_line,
)
from compiletrace.reports._text import cache_line, cache_state, summary_line, warmup_fact
from compiletrace.reports._timeline import job_timeline_html, timeline_html

__all__ = [
    "PHASE_COLORS",
    "component_chart_svg",
    "doctor_html_report",
    "graph_timeline_svg",
    "html_report",
    "job_html_report",
    "registry_html_table",
    "report_fragment",
]

# One palette for every chart: a standard eight-colour colour-blind-safe set, its black
# softened to a dark grey, and a light grey for a frame not split at all. A colour always
# means a phase; components are named on their rows and never coloured, so no component can
# be read as a phase. The set's mid grey is not used: for deuteranopes it is the reddish
# purple beside it (tests/views/test_html_report.py simulates the three dichromacies).
PHASE_COLORS = {
    "dynamo": "#0072B2",  # blue
    "backend": "#E69F00",  # orange: backend time not split into phases
    "aot_autograd": "#56B4E9",  # sky blue
    "inductor": "#009E73",  # bluish green
    "kernel_compile": "#F0E442",  # yellow
    "cache": "#CC79A7",  # reddish purple
    "other": "#444444",  # dark grey: backend time in no named phase
    "backward": "#D55E00",  # vermillion
    "frame": "#DDDDDD",  # light grey: a frame whose Dynamo share is unknown
}
_LEGEND_LABELS = {"frame": "frame (unsplit)"}
_LIGHT = ("frame", "kernel_compile")  # the light grey and the yellow: outlined, to stand out from white

_REPORT_CSS = """
/* The system's UI font: a report loads nothing, fonts included. */
.compiletrace-report { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: #222; max-width: 1400px; }
.compiletrace-report h1 { font-size: 1.5em; margin: 0.2em 0 0.1em; overflow-wrap: anywhere; }
.compiletrace-report h2 { font-size: 1.15em; margin: 1.4em 0 0.3em; }
.compiletrace-report .meta { color: #555; margin: 0.2em 0 0.8em; }
.compiletrace-report .summary { font-size: 1.05em; font-weight: 600; }
/* Long values (model specs, paths) wrap rather than widen the page. */
.compiletrace-report dl { display: grid; grid-template-columns: max-content minmax(0, 1fr);
  gap: 0.1em 1em; }
.compiletrace-report dt { color: #555; }
.compiletrace-report dd { margin: 0; overflow-wrap: anywhere; }
.compiletrace-report svg { display: block; margin: 0.3em 0 0.6em; }
@media (max-width: 600px) { .compiletrace-report { font-size: 14px; } }
/* The start-up timeline's table has no scroll box around it: it scrolls in itself. */
.compiletrace-report .compiletrace-startup-timeline > table.compiletrace { display: block;
  overflow-x: auto; }
/* A job's processes: a command line wraps (at any character: a path has no spaces). */
.compiletrace-report .ct-argv, .compiletrace-report .ct-idle, .compiletrace-report .ct-missing,
.compiletrace-report .ct-process-facts { overflow-wrap: anywhere; }
.compiletrace-report .ct-process { border-top: 1px solid #ddd; margin-top: 1em; }
.compiletrace-report .ct-process h3 { font-size: 1.05em; margin: 0.6em 0 0.2em; overflow-wrap: anywhere; }
/* The findings are sentences: their table wraps to the page's width (long paths too) and
   never scrolls. Too narrow for five columns, each finding is a block of its own, each
   cell labelled with its header (the header row stays for screen readers only). */
.compiletrace-report .ct-findings td.ct-prose { overflow-wrap: anywhere; min-width: 10em; }
@media (max-width: 760px) {
  .compiletrace-report .ct-findings table, .compiletrace-report .ct-findings tbody,
  .compiletrace-report .ct-findings tr { display: block; }
  .compiletrace-report .ct-findings thead { position: absolute; width: 1px; height: 1px;
    overflow: hidden; clip-path: inset(50%); }
  .compiletrace-report .ct-findings tr { border: 1px solid #ddd; margin: 0 0 0.5em; padding: 2px 0; }
  .compiletrace-report .ct-findings td { display: inline-block; border: 0; }
  .compiletrace-report .ct-findings td.ct-prose { display: block; }
  .compiletrace-report .ct-findings td::before { content: attr(data-label) ": "; color: #555; }
}
"""

# The tables' own rules: a registry's table in a notebook carries them alone.
_TABLE_CSS = """
/* A table wider than the screen scrolls inside its own box, never the page. */
.ct-scroll { overflow-x: auto; }
table.compiletrace { border-collapse: collapse; font-size: 0.9em; margin: 0.3em 0; }
table.compiletrace th, table.compiletrace td { border: 1px solid #ddd; padding: 3px 8px;
  text-align: left; vertical-align: top; }
table.compiletrace th { background: #f3f3f3; white-space: nowrap; }
/* Figures line up: right-aligned, every digit the same width. */
table.compiletrace .num { text-align: right; font-variant-numeric: tabular-nums; }
table.compiletrace details { min-width: 16em; max-width: 48em; }
table.compiletrace pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0.3em 0 0; }
/* Headers the page's script made sortable, and the current order. */
table.compiletrace th[tabindex] { cursor: pointer; }
table.compiletrace th[aria-sort="ascending"]::after { content: " \\25B2"; }
table.compiletrace th[aria-sort="descending"]::after { content: " \\25BC"; }
"""
_CSS = _REPORT_CSS + _TABLE_CSS

# The page's only script: sort any table by a header (numeric columns as numbers), show the
# graphs of one component. Inline and offline; without it the page reads the same, in
# record order. Rows of the timeline move up when others hide, so it stays gap-free.
_SCRIPT = """
(function () {
  "use strict";
  var root = document.querySelector(".compiletrace-report");
  if (!root) return;
  var collator = new Intl.Collator(undefined, {numeric: true});  // "2/0" before "10/0"
  function key(row, col, num) {
    var text = row.cells[col].textContent.trim(), v = parseFloat(text);
    return num ? (isNaN(v) ? -Infinity : v) : text;  // "-" (unknown) sorts first
  }
  function sort(th) {
    var body = th.closest("table").tBodies[0], col = th.cellIndex;
    var num = th.classList.contains("num"), up = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(th.parentNode.cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a, col, num), y = key(b, col, num);
      var d = num ? (x > y) - (x < y) : collator.compare(x, y);
      return up ? d : -d;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  root.querySelectorAll("table.compiletrace th").forEach(function (th) {
    th.tabIndex = 0;  // sortable by keyboard too
    th.addEventListener("click", function () { sort(th); });
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(th); }
    });
  });
  function show(component) {
    root.querySelectorAll("tr[data-component]").forEach(function (tr) {
      tr.hidden = component !== "" && tr.getAttribute("data-component") !== component;
    });
    root.querySelectorAll("svg[data-row-height]").forEach(function (svg) {
      var y = +svg.getAttribute("data-rows-top"), h = +svg.getAttribute("data-row-height");
      svg.querySelectorAll("g[data-component]").forEach(function (g) {
        var on = component === "" || g.getAttribute("data-component") === component;
        g.style.display = on ? "" : "none";
        if (on) { g.setAttribute("transform", "translate(0," + y + ")"); y += h; }
      });
      svg.setAttribute("height", y + 4);
    });
  }
  var select = root.querySelector("select.ct-filter");
  if (select) {
    select.closest("p").hidden = false;  // the control shows only where it works
    select.addEventListener("change", function () { show(select.value); });
  }
})();
"""


_esc = esc


def _breakable(value: object) -> str:
    """Escaped, with a line-break opportunity after each ``.``, ``:`` and ``/`` (a model
    spec or a path wraps at its parts on a phone, not mid-word)."""
    text = _esc(value)
    for sep in ".:/":
        text = text.replace(sep, sep + "<wbr>")
    return text


_FIGURE = re.compile(r"-?\d+(?:\.\d+)?%?")  # 12, 0.250, 55%: not "nan" or "inf", which float() takes


def _is_number(text: str) -> bool:
    return _FIGURE.fullmatch(text) is not None


def _numeric_columns(rows: Sequence[Sequence[str]], width: int) -> list[bool]:
    """Columns whose cells are all figures (or "-", unknown): right-aligned, sorted as numbers."""
    return [
        bool(rows)
        and all(row[i] == "-" or _is_number(row[i]) for row in rows)
        and any(_is_number(row[i]) for row in rows)
        for i in range(width)
    ]


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    raw_last: bool = False,
    *,
    name: str,
    component_col: int | None = None,
) -> str:
    """An HTML table in its own scrolling box; every cell is escaped, except the last one of
    each row when ``raw_last`` (markup built here from escaped parts). ``name`` tells the
    tables apart (``data-table``); a row carries its ``component_col`` cell as
    ``data-component``, for the page's filter."""
    numeric = _numeric_columns(rows, len(headers))
    if raw_last:
        numeric[-1] = False  # markup, not a figure
    cls = [' class="num"' if n else "" for n in numeric]
    head = "".join(f'<th scope="col"{c}>{_esc(h)}</th>' for h, c in zip(headers, cls, strict=True))

    def tr(row: Sequence[str]) -> str:
        cells = "".join(
            f"<td{cls[i]}>{c if raw_last and i == len(row) - 1 else _esc(c)}</td>" for i, c in enumerate(row)
        )
        attr = "" if component_col is None else f' data-component="{_esc(row[component_col])}"'
        return f"<tr{attr}>{cells}</tr>"

    return (
        f'<div class="ct-scroll"><table class="compiletrace" data-table="{name}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(tr(r) for r in rows)}</tbody></table></div>"
    )


def _reason_cell(record: GraphRecord, shown: str) -> str:
    # One row per graph: the failed guard in the row, torch's whole reason (its user stack
    # trace included) one click away.
    full = (record.recompile_reason or "").strip()
    if not full or full == shown:
        return _esc(shown)
    return f"<details><summary>{_esc(shown)}</summary><pre>{_esc(full)}</pre></details>"


def _graph_table(records: Sequence[GraphRecord], process_of: Mapping[int, str] | None = None) -> str:
    """The per-graph table; with ``process_of`` (a job's: each record's process, by id) and
    more than one process, a first column says whose graph each row is (two ranks' 0/0)."""
    shown, rest = costliest(records)
    rows = [[*row[:-1], _reason_cell(r, row[-1])] for r, row in zip(shown, graph_rows(shown), strict=True)]
    headers, component_col = list(GRAPH_HEADERS), 1
    if process_of is not None and len(set(process_of.values())) > 1:
        headers, component_col = ["process", *headers], 2
        rows = [[process_of.get(id(r), "?"), *row] for r, row in zip(shown, rows, strict=True)]
    table = _table(headers, rows, raw_last=True, name="graphs", component_col=component_col)
    return table + (f"<p>{_esc(rest_line(rest))}</p>" if rest else "")


def registry_html_table(records: Sequence[GraphRecord]) -> str:
    """One HTML table of every graph (what a notebook shows for a registry), with its own
    scoped style (figures right-aligned); past ``GRAPH_ROW_LIMIT`` graphs, the costliest,
    and a line for the rest. A multi-line recompile reason shows its first line, the whole
    text one click away.

    >>> page = registry_html_table([])
    >>> '<table class="compiletrace" data-table="graphs">' in page
    True
    """
    return f"<style>{_TABLE_CSS}</style>{_graph_table(records)}"


def _phases(records: Sequence[GraphRecord]) -> dict[str, int]:
    """Nanoseconds per phase; frames whose Dynamo share is unknown count as "frame"."""
    out = {"dynamo": 0, "backend": 0, "backward": 0, "frame": 0}
    for r in records:
        if r.dynamo_ns is None:
            out["frame"] += r.frame_ns
        else:
            out["dynamo"] += r.dynamo_ns
            out["backend"] += r.frame_ns - r.dynamo_ns
        out["backward"] += r.backward_ns
    return out


def _chart_phases(records: Sequence[GraphRecord]) -> dict[str, int]:
    """Like :func:`_phases`, with the backend split into its own phases where known."""
    out = _phases(records)
    for r in records:
        if r.phases and r.dynamo_ns is not None:
            out["backend"] -= r.backend_ns
            for phase, ns in r.phases:
                out[phase] = out.get(phase, 0) + ns
    return {k: out.get(k, 0) for k in PHASE_COLORS}


_PHASE_TIPS = {
    "dynamo": "Dynamo: tracing the frame and building its guards",
    "backend": "the backend, its time not split into phases",
    "aot_autograd": "AOTAutograd: joint graph tracing, partitioning, functionalisation",
    "inductor": "Inductor: lowering, scheduling, code generation",
    "kernel_compile": "compiling the generated kernels",
    "cache": "compile-cache lookups and loading compiled artifacts",
    "other": "the rest of the backend call",
    "backward": "the lazy backward compile, at the first .backward()",
    "frame": "a frame compile whose Dynamo share is unknown",
}


def _legend(phases: Sequence[str]) -> tuple[str, int]:
    """A swatch and a name per phase (its tooltip says what the phase is)."""
    return legend(
        [
            LegendItem(
                PHASE_COLORS[phase],
                _LEGEND_LABELS.get(phase, phase),
                _PHASE_TIPS[phase],
                edge=phase in _LIGHT,
                cls=f"phase-{phase}",
                attrs=f' data-phase="{phase}"',
            )
            for phase in phases
        ]
    )


def component_chart_svg(records: Sequence[GraphRecord]) -> str:
    """An inline SVG bar chart, as wide as its container: compile seconds per component,
    split by phase (Dynamo, the backend's phases: AOTAutograd, Inductor, kernel compile,
    cache, other; the lazy backward), under a legend of the phases it shows. It carries its
    own font, so it reads the same alone (in a notebook) as in the report.

    >>> from compiletrace._data.records import GraphRecord
    >>> graph = GraphRecord("0/0", "encoder", "eager", "forward", 4, 0, 3 * 10**9, 10**9, 2 * 10**9, 10**9)
    >>> svg = component_chart_svg([graph])
    >>> svg.startswith("<svg") and 'width="100%"' in svg and "encoder backend: 2.000 s" in svg
    True
    """
    comps = list(component_totals(records))
    per_comp = {c: _chart_phases([r for r in records if r.component == c]) for c in comps}
    shown = [p for p in PHASE_COLORS if any(phases[p] > 0 for phases in per_comp.values())]
    key, legend_h = _legend(shown) if comps else ("", 0)
    top, row_h = legend_h + 8, 44  # a row: the name and the total on a line, the bar under them
    height = top + row_h * max(1, len(comps))
    longest = max((sum(phases.values()) for phases in per_comp.values()), default=0)
    parts = [svg_open("compiletrace-chart", height, "Compile time per component, by phase"), key]
    if not comps:
        parts.append(f'<text x="0" y="{top + 14}">no graphs compiled</text>')
    for i, comp in enumerate(comps):
        y, phases = top + i * row_h, per_comp[comp]
        total = sum(phases.values())
        parts.append(
            f'<g class="component" data-component="{_esc(comp)}">'
            f'<text x="0" y="{y + 14}">{_esc(shorten(comp, 40))}</text>'
            f'<text x="100%" y="{y + 14}" text-anchor="end">{total / NS_PER_S:.2f} s</text>'
        )
        x = 0.0
        for phase, ns in phases.items():
            if ns <= 0 or not longest:
                continue
            w = min(max(100 * ns / longest, 0.2), 100 - x)  # a sliver stays visible
            tip = f"{comp} {phase}: {ns / NS_PER_S:.3f} s"
            color, cls, edge = PHASE_COLORS[phase], f"phase-{phase}", phase in _LIGHT
            parts.append(rect(pct(x), y + 20, pct(w), 16, color, cls=cls, edge=edge, tip=tip))
            x += w
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def _timeline_bars(r: GraphRecord, axis: TimeAxis) -> list[tuple[str, str]]:
    """One graph's bars, as (phase, markup): its frame compile in Dynamo's colour with the
    backend's span over it, or unsplit when the Dynamo share is unknown; then its lazy
    backward. The backend's span shows its phases as the chart does, each as long as it
    took, laid end to end in the chart's order (torch does not say in which order they ran);
    unsplit, it is one "backend" bar."""

    def bar(phase: str, start: float, ns: float) -> tuple[str, str]:
        color, cls, edge = PHASE_COLORS[phase], f"phase-{phase}", phase in _LIGHT
        return phase, axis.bar(round(start), round(start + ns), 16, 12, color, cls=cls, edge=edge)

    if r.dynamo_ns is None:
        bars = [bar("frame", r.start_unix_ns, r.frame_ns)]
    else:
        bars = [bar("dynamo", r.start_unix_ns, r.frame_ns)]
        if r.backend_ns and r.backend_start_unix_ns is not None:
            start: float = r.backend_start_unix_ns
            # Inside the frame: a backend figure past its end is drawn to the end.
            scale = min(1.0, (r.end_unix_ns - start) / r.backend_ns)
            pieces = [(p, r.phase_ns.get(p, 0)) for p in PHASE_COLORS] if r.phases else []
            for phase, ns in [(p, ns) for p, ns in pieces if ns > 0] or [("backend", r.backend_ns)]:
                bars.append(bar(phase, start, ns * scale))
                start += ns * scale
    if r.backward_ns and r.backward_start_unix_ns is not None:
        bars.append(bar("backward", r.backward_start_unix_ns, r.backward_ns))
    return bars


def _timeline_tip(r: GraphRecord) -> str:
    split = (
        f", Dynamo {r.dynamo_ns / NS_PER_S:.3f} s, backend {r.backend_s:.3f} s"
        if r.dynamo_ns is not None
        else ""
    )
    backward = f"; backward {r.backward_s:.3f} s" if r.backward_ns else ""
    return (
        f"{r.compile_id} {r.component} ({r.code_name}): frame {r.frame_s:.3f} s{split}{backward}; "
        f"cache {r.cache_outcome.value}"
    )


def graph_timeline_svg(records: Sequence[GraphRecord]) -> str:
    """An inline SVG timeline, as wide as its container: one row per graph (its id,
    component and code above its bars) on a shared time axis, under a legend: the frame
    compile in Dynamo's colour with the backend's span over it (in the backend's phases),
    then its lazy backward, if any. A colour means what it means in
    :func:`component_chart_svg`. Rows carry ``data-component`` (the page's filter hides rows
    and closes the gaps).

    >>> from compiletrace._data.records import GraphRecord
    >>> graph = GraphRecord("0/0", "encoder", "eager", "forward", 4, 0, 3 * 10**9, 10**9, 2 * 10**9, 10**9)
    >>> svg = graph_timeline_svg([graph])
    >>> svg.startswith("<svg") and svg.count('class="graph"') == 1 and ">3.00 s<" in svg
    True
    """
    rows = costliest(records)[0]
    if not rows:
        empty = svg_open("compiletrace-timeline", 24, "Timeline of graph compiles")
        return f'{empty}<text x="0" y="16">no graphs compiled</text></svg>'
    t0 = min(r.start_unix_ns for r in rows)
    t1 = max(
        max(r.end_unix_ns, (r.backward_start_unix_ns or 0) + r.backward_ns if r.backward_ns else 0)
        for r in rows
    )
    axis = TimeAxis(t0, max(t1 - t0, 1))
    bars = [_timeline_bars(r, axis) for r in rows]
    key, legend_h = _legend([p for p in PHASE_COLORS if any(p == q for row in bars for q, _ in row)])
    axis_y = legend_h + 22  # tick labels' baseline
    rows_top, row_h = axis_y + 12, 34  # a row: its label on a line, its bars under it
    height = rows_top + row_h * len(rows) + 4
    parts = [
        svg_open(
            "compiletrace-timeline",
            height,
            "Timeline of graph compiles",
            attrs=f' data-rows-top="{rows_top}" data-row-height="{row_h}"',
        ),
        key,
    ]
    parts += axis.grid(axis_y, ' font-size="12"')  # seconds since the first compile began
    for i, r in enumerate(rows):
        label = f"{r.compile_id} {r.component} · {r.code_name}" + (" · recompile" if r.is_recompile else "")
        parts.append(
            f'<g class="graph" data-component="{_esc(r.component)}" '
            f'transform="translate(0,{rows_top + i * row_h})"><title>{_esc(_timeline_tip(r))}</title>'
            f'<text x="0" y="12" font-size="12">{_esc(shorten(label, 44))}</text>'
            f'<text x="100%" y="12" text-anchor="end" font-size="12">{r.total_s:.2f} s</text>'
            + "".join(markup for _, markup in bars[i])
            + "</g>"
        )
    parts.append("</svg>")
    return "".join(parts)


ICICLE_ROW = 18  # px per depth level
ICICLE_MAX_DEPTH = 16
ICICLE_MIN_SHARE = 0.002  # nodes narrower than this share of the component are left out


def trace_cost_svg(records: Sequence[GraphRecord]) -> str:
    """An icicle chart per component of Dynamo's tracing time per user function (records
    with ``trace_cost``): each function as wide as its total time, its callees below it;
    names and seconds in the labels and each box's ``<title>``. Empty without trace cost.

    >>> trace_cost_svg([])
    ''
    """
    return "".join(_icicle(component, roots) for component, roots in component_trees(records).items())


def _icicle(component: str, roots: Sequence[TraceNode]) -> str:
    total = sum(n.total_ns for n in roots)
    if not total:
        return ""
    boxes: list[str] = []
    depth_seen = 0

    def box(node: TraceNode, x: float, depth: int) -> None:
        nonlocal depth_seen
        if depth >= ICICLE_MAX_DEPTH or node.total_ns < ICICLE_MIN_SHARE * total:
            return
        depth_seen = max(depth_seen, depth + 1)
        width = 100 * node.total_ns / total
        y = depth * ICICLE_ROW
        tip = (
            f"{node.name} ({node.location or 'Dynamo'}): {node.total_ns / NS_PER_S:.3f} s total, "
            f"{node.self_ns / NS_PER_S:.3f} s self, {node.calls} call(s)"
        )
        label = f"{node.name} {node.total_ns / NS_PER_S:.3f} s"
        fill = "#bbb" if node.name in (TRACE_OTHER, TRACE_GC) else "#e8a33d"
        boxes.append(
            f'<g><title>{_esc(tip)}</title><rect x="{x:.3f}%" y="{y}" width="{width:.3f}%" '
            f'height="{ICICLE_ROW - 1}" fill="{fill}" stroke="#fff"/>'
            f'<svg x="{x:.3f}%" y="{y}" width="{width:.3f}%" height="{ICICLE_ROW}">'
            f'<text x="3" y="13" font-size="11">{_esc(label)}</text></svg></g>'
        )
        child_x = x  # callees laid out left to right under their caller, costliest first
        for child in node.children:
            box(child, child_x, depth + 1)
            child_x += 100 * child.total_ns / total

    x = 0.0
    for root in roots:
        box(root, x, 0)
        x += 100 * root.total_ns / total
    title = f"Dynamo tracing per function: {component}, {total / NS_PER_S:.3f} s"
    svg = svg_open("compiletrace-icicle", depth_seen * ICICLE_ROW, title) + "".join(boxes) + "</svg>"
    return f"<h3>{_esc(component)}</h3>{svg}"


def _header_line(records: Sequence[GraphRecord], meta: RunMeta) -> str:
    """compiletrace's and torch's versions, and what the compile caches did: the text
    report's cache line (:func:`~compiletrace.reports._text.cache_line`), its state word
    (cold, warm, mixed, none) in bold."""
    parts = [f"compiletrace {_esc(meta.compiletrace_version or __version__)}"]
    if meta.torch_version:
        parts.append(f"torch {_esc(meta.torch_version)}")
    state = cache_state(records)
    bold = f'cache: <strong class="cache-state">{state}</strong>'
    parts.append(_esc(cache_line(records)).replace(f"cache: {state}", bold, 1))
    return " · ".join(parts)


def _setup_paragraph(records: Sequence[GraphRecord]) -> str:
    line = setup_line(records)
    return f'<p class="setup">{_esc(line)}</p>' if line is not None else ""


def _filter_control(records: Sequence[GraphRecord]) -> str:
    # Hidden until the page's script shows it: no control that does nothing.
    comps = list(component_totals(records))
    if len(comps) < 2:
        return ""
    options = "".join(f'<option value="{_esc(c)}">{_esc(c)}</option>' for c in comps)
    return (
        '<p class="ct-filter-line" hidden><label>Show the graphs of '
        f'<select class="ct-filter"><option value="">every component</option>{options}</select>'
        "</label> (timeline and per-graph tables)</p>"
    )


def _body(
    run: RunOrRecords,
    *,
    title: str | None,
    interactive: bool,
    findings: Sequence[Finding] | None = None,
    startup: str | None = None,
    process_of: Mapping[int, str] | None = None,
) -> str:
    """The report's body; ``startup``, markup of the start-up (a job's), in place of the run's
    own timeline; ``process_of``, a job's process of each record (by id)."""
    records, warmup, meta, timeline = run_parts(run)
    if startup is None:
        startup = timeline_html(timeline, records) if timeline is not None else ""
    facts: list[tuple[str, str]] = []
    cmode = meta.compilation_mode.value if meta.compilation_mode is not None else None
    for name, value in (
        ("model", meta.model),
        ("backend", meta.backend),
        ("mode", meta.mode),
        ("compilation mode", cmode),
        ("device", meta.device),
        ("created", meta.created),
    ):
        if value:
            facts.append((name, value))
    facts.append(("graphs", str(len(records))))
    facts.append(("recompiles", str(sum(r.is_recompile for r in records))))
    if warmup is not None:
        facts.append(("warm-up", warmup_fact(warmup.skipped, warmup.duration_s, meta)))
    dl = "".join(f"<dt>{_esc(k)}</dt><dd>{_breakable(v)}</dd>" for k, v in facts)
    h1 = f"<h1>{_esc(title)}</h1>" if title is not None else ""
    return (
        f'<header>{h1}<p class="meta">{_header_line(records, meta)}</p></header>'
        f'<p class="summary">{_esc(summary_line(records))}</p>'
        f"<dl>{dl}</dl>"
        # Why, and what to change, before the where: most seconds at stake first.
        + (findings_html(findings) if findings is not None else "")
        + startup
        + "<h2>Compile time per component, by phase</h2>"
        f"{component_chart_svg(records)}"
        "<h2>Timeline of graphs</h2>"
        f"{_filter_control(records) if interactive else ''}"
        f"{graph_timeline_svg(records)}"
        "<h2>Per component</h2>"
        + _table(COMPONENT_HEADERS, component_rows(records), name="components")
        + _setup_paragraph(records)
        + "<h2>Per graph</h2>"
        + _graph_table(records, process_of)
        + (
            "<h2>Dynamo tracing per function</h2>" + trace_cost_svg(records)
            if any(r.trace_cost for r in records)
            else ""
        )
        + (
            "<h2>Backend phases per graph (seconds)</h2>"
            + _table(PHASE_HEADERS, phase_rows(costliest(records)[0]), name="phases", component_col=1)
            if any(r.phases for r in records)
            else ""
        )
    )


def report_fragment(run: RunOrRecords, *, findings: Sequence[Finding] | None = None) -> str:
    """The report's body (versions and cache state, summary, chart, timeline, tables) of a
    run (or of records alone) as an HTML fragment with its own scoped style and no script:
    what a notebook cell shows for a run. ``findings`` are the doctor's, shown first.

    >>> from compiletrace._data.records import CompilationTimes
    >>> from compiletrace._data.run import Run, WarmupResult
    >>> run = Run((), WarmupResult(False, 1.0, CompilationTimes()), RunMeta(compiletrace_version="0.1.0"))
    >>> fragment = report_fragment(run)
    >>> fragment.startswith('<div class="compiletrace-report">') and "<script" not in fragment
    True
    >>> 'compiletrace 0.1.0 · cache: <strong class="cache-state">none</strong>' in fragment
    True
    """
    body = _body(run, title=None, interactive=False, findings=findings)
    return f'<div class="compiletrace-report"><style>{_CSS}</style>{body}</div>'


_PAGE_CSS = """
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; padding: 12px 16px; }
/* A table scrolled in its box shows a shadow at the edge where more of it lies: white
   covers travel with the table and hide the shadow at an end reached (or at both ends of a
   table that fits). In the page only: it assumes the page's white, not a notebook's theme. */
.ct-scroll, .compiletrace-startup-timeline > table.compiletrace { background:
  linear-gradient(to right, #fff 30%, rgba(255, 255, 255, 0)) left / 2em 100% no-repeat local,
  linear-gradient(to left, #fff 30%, rgba(255, 255, 255, 0)) right / 2em 100% no-repeat local,
  radial-gradient(farthest-side at 0 50%, rgba(0, 0, 0, 0.25), transparent) left / 0.8em 100% no-repeat,
  radial-gradient(farthest-side at 100% 50%, rgba(0, 0, 0, 0.25), transparent) right / 0.8em 100% no-repeat; }
"""


def html_report(
    run: RunOrRecords, *, title: str = "compiletrace report", findings: Sequence[Finding] | None = None
) -> str:
    """A complete, self-contained HTML page for a run: it opens offline (no fonts, no
    external resources, no request; one small inline script sorts the tables by any column
    and shows the graphs of one component) and fits any width, from a phone's to a desktop's.

    >>> page = html_report([])
    >>> page.startswith("<!DOCTYPE html>") and "http" not in page.replace("http://www.w3.org/2000/svg", "")
    True
    >>> page.count("<script>"), "src=" in page
    (1, False)
    """
    return _page(title, _body(run, title=title, interactive=True, findings=findings))


def job_html_report(
    job: Job, *, title: str = "compiletrace job", findings: Sequence[Finding] | None = None
) -> str:
    """:func:`html_report` for a job (``compiletrace run``): every process's compiles in its
    charts and tables, and in place of one run's start-up timeline the job's
    (:func:`~compiletrace.reports._timeline.job_timeline_html`): a track per process on
    the job's one wall-clock axis, then each process's own timeline.

    >>> page = job_html_report(Job(("python", "x.py"), 0, ()))
    >>> "Start-up timeline of every process" in page, page.count("<script>")
    (True, 1)
    """
    process_of = {id(r): p.info.role for p in job.processes for r in p.run.graph_records}
    body = _body(
        list(job.records()),
        title=title,
        interactive=True,
        findings=findings,
        startup=job_timeline_html(job),
        process_of=process_of,
    )
    return _page(title, body)


def doctor_html_report(
    findings: Sequence[Finding],
    *,
    title: str = "compiletrace doctor",
    verify: tuple[Sequence[str], Sequence[Sequence[str]], Sequence[str]] | None = None,
) -> str:
    """A self-contained HTML page of the doctor's findings (their evidence in each row) and,
    from ``doctor --verify``, the before/after table: its header, rows and the notes under it.

    >>> page = doctor_html_report([], verify=(["finding", "verdict"], [["recompiles (lm)", "verified"]], []))
    >>> "No findings" in page and 'data-table="verify"' in page and "<td>verified</td>" in page
    True
    """
    body = f"<h1>{_esc(title)}</h1>{findings_html(findings)}"
    if verify is not None:
        header, rows, notes = verify
        body += (
            '<section class="ct-verify"><h2>Each fix, applied and measured</h2>'
            + _table(header, rows, name="verify")
            + "".join(f"<p>{_esc(note)}</p>" for note in notes)
            + "</section>"
        )
    return _page(title, body)


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{_PAGE_CSS}{_CSS}</style></head><body>"
        f'<div class="compiletrace-report">{body}</div>'
        f"<script>{_SCRIPT}</script>"
        "</body></html>\n"
    )
