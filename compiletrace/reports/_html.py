"""HTML views: tables for notebooks (``_repr_html_``) and the one-file report.

Everything is inline (CSS and SVG, no script, no font or CDN), so a report opens offline
and a notebook cell shows the same thing.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from compiletrace._core.records import NS_PER_S, GraphRecord, component_totals
from compiletrace.reports._text import (
    COMPONENT_HEADERS,
    GRAPH_HEADERS,
    PHASE_HEADERS,
    component_rows,
    graph_rows,
    phase_rows,
    summary_line,
)

__all__ = [
    "component_chart_svg",
    "html_report",
    "registry_html_table",
    "report_fragment",
    "timeline_svg",
]

# Phase colours (colour-blind safe), then a palette for components that shares none of them.
PHASE_COLORS = {
    "dynamo": "#4477aa",
    "backend": "#ee6677",  # a backend call without a phase split
    "aot_autograd": "#ee8866",
    "inductor": "#994455",
    "kernel_compile": "#eecc66",
    "cache": "#6699cc",
    "other": "#e0e0e0",
    "backward": "#228833",
    "frame": "#bbbbbb",
}
COMPONENT_COLORS = ("#66ccee", "#ccbb44", "#aa3377", "#999933", "#882255", "#44aa99", "#dddddd")

_CSS = """
.compiletrace-report { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; }
.compiletrace-report h1 { font-size: 1.4em; margin: 0.2em 0; }
.compiletrace-report h2 { font-size: 1.1em; margin: 1.2em 0 0.4em; }
.compiletrace-report .meta { color: #555; font-size: 0.9em; }
.compiletrace-report .summary { font-size: 1.05em; font-weight: 600; }
.compiletrace-report dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
.compiletrace-report dt { color: #555; }
.compiletrace-report dd { margin: 0; }
table.compiletrace { border-collapse: collapse; font-size: 0.85em; margin: 0.3em 0; }
table.compiletrace th, table.compiletrace td { border: 1px solid #ddd; padding: 2px 6px; text-align: left; }
table.compiletrace th { background: #f3f3f3; }
.compiletrace-report svg text { font-size: 11px; fill: #222; }
"""


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="compiletrace"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def registry_html_table(records: Sequence[GraphRecord]) -> str:
    """One HTML table of every graph (what a notebook shows for a registry)."""
    return _table(GRAPH_HEADERS, graph_rows(records))


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


def component_chart_svg(records: Sequence[GraphRecord]) -> str:
    """An inline SVG bar chart: compile seconds per component, split by phase (Dynamo, the
    backend's phases (AOTAutograd, Inductor, kernel compile, cache, other), lazy backward).

    >>> component_chart_svg([]).startswith("<svg")
    True
    """
    comps = list(component_totals(records))
    label_w, bar_w, row_h, top = 130, 420, 26, 8
    present = _chart_phases(records)
    legend = [p for p in PHASE_COLORS if present[p] > 0 or p == "dynamo"]
    per_row = 4  # legend entries per line, 120 px each
    legend_rows = max(1, -(-len(legend) // per_row))
    height = top + row_h * max(1, len(comps)) + 18 + 16 * legend_rows
    longest = max(
        (sum(_chart_phases([r for r in records if r.component == c]).values()) for c in comps), default=0
    )
    scale = bar_w / longest if longest else 0.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="compiletrace-chart" role="img" '
        f'width="{label_w + bar_w + 90}" height="{height}" '
        f'viewBox="0 0 {label_w + bar_w + 90} {height}">',
        "<title>Compile time per component, by phase</title>",
    ]
    if not comps:
        parts.append(f'<text x="4" y="{top + 16}">no graphs compiled</text>')
    for i, comp in enumerate(comps):
        y = top + i * row_h
        phases = _chart_phases([r for r in records if r.component == comp])
        parts.append(f'<text x="{label_w - 6}" y="{y + 16}" text-anchor="end">{_esc(comp)}</text>')
        x = float(label_w)
        for phase, ns in phases.items():
            if ns <= 0:
                continue
            w = max(ns * scale, 0.5)
            parts.append(
                f'<rect class="phase-{phase}" x="{x:.1f}" y="{y + 4}" width="{w:.1f}" height="{row_h - 8}" '
                f'fill="{PHASE_COLORS[phase]}">'
                f"<title>{_esc(comp)} {phase}: {ns / NS_PER_S:.3f} s</title></rect>"
            )
            x += w
        total = sum(phases.values()) / NS_PER_S
        parts.append(f'<text x="{x + 6:.1f}" y="{y + 16}">{total:.2f} s</text>')
    for k, phase in enumerate(legend):
        lx = label_w + 120 * (k % per_row)
        ly = top + row_h * max(1, len(comps)) + 16 + 16 * (k // per_row)
        parts.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{PHASE_COLORS[phase]}"/>')
        parts.append(
            f'<text x="{lx + 14}" y="{ly}">{"frame (unsplit)" if phase == "frame" else phase}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def timeline_svg(records: Sequence[GraphRecord]) -> str:
    """An inline SVG timeline: one row per graph from its compile start to its end (and
    its lazy backward, if any), coloured by component, on a shared time axis.

    >>> timeline_svg([]).startswith("<svg")
    True
    """
    label_w, width, row_h, top = 170, 520, 20, 6
    rows = list(records)
    height = top + row_h * max(1, len(rows)) + 30
    comps = list(component_totals(rows))
    colors = {c: COMPONENT_COLORS[i % len(COMPONENT_COLORS)] for i, c in enumerate(comps)}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="compiletrace-timeline" role="img" '
        f'width="{label_w + width + 20}" height="{height}" viewBox="0 0 {label_w + width + 20} {height}">',
        "<title>Timeline of graph compiles</title>",
    ]
    if not rows:
        parts.append(f'<text x="4" y="{top + 14}">no graphs compiled</text></svg>')
        return "".join(parts)
    t0 = min(r.start_unix_ns for r in rows)
    t1 = max(
        max(r.end_unix_ns, (r.backward_start_unix_ns or 0) + r.backward_ns if r.backward_ns else 0)
        for r in rows
    )
    span = max(t1 - t0, 1)
    scale = width / span
    for i, r in enumerate(rows):
        y = top + i * row_h
        label = f"{r.compile_id} {r.component}"
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{_esc(label)}</text>')
        x = label_w + (r.start_unix_ns - t0) * scale
        w = max(r.frame_ns * scale, 1.0)
        parts.append(
            f'<rect class="graph" x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" '
            f'fill="{colors[r.component]}"><title>{_esc(r.compile_id)} {_esc(r.component)} '
            f"({_esc(r.code_name)}): {r.frame_s:.3f} s, cache {r.cache_outcome.value}</title></rect>"
        )
        if r.backward_ns and r.backward_start_unix_ns is not None:
            bx = label_w + (r.backward_start_unix_ns - t0) * scale
            bw = max(r.backward_ns * scale, 1.0)
            parts.append(
                f'<rect class="backward" x="{bx:.1f}" y="{y + 3}" width="{bw:.1f}" height="{row_h - 6}" '
                f'fill="{colors[r.component]}" fill-opacity="0.5"><title>{_esc(r.compile_id)} backward: '
                f"{r.backward_s:.3f} s</title></rect>"
            )
    axis_y = top + row_h * len(rows) + 14
    for k in range(5):
        x = label_w + width * k / 4
        parts.append(
            f'<text x="{x:.1f}" y="{axis_y}" text-anchor="middle">{span * k / 4 / NS_PER_S:.2f} s</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def report_fragment(
    records: Sequence[GraphRecord],
    *,
    warmup: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
) -> str:
    """The report's body (summary, chart, timeline, tables) as an HTML fragment with its
    own scoped style: what a notebook cell shows for a run. ``warmup`` is a warm-up
    result's ``to_dict()``."""
    meta = dict(meta or {})
    facts: list[tuple[str, str]] = []
    for key in ("model", "backend", "mode", "compilation_mode", "device", "created", "torch_version"):
        if meta.get(key) not in (None, ""):
            facts.append((key.replace("_", " "), str(meta[key])))
    facts.append(("graphs", str(len(records))))
    facts.append(("recompiles", str(sum(r.is_recompile for r in records))))
    if warmup is not None:
        skipped = bool(warmup.get("skipped", False))
        duration = float(warmup.get("duration_s", 0.0))
        facts.append(("warm-up", "skipped (eager)" if skipped else f"{duration:.3f} s"))
    dl = "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in facts)
    return (
        f'<div class="compiletrace-report"><style>{_CSS}</style>'
        f'<p class="summary">{_esc(summary_line(records))}</p>'
        f"<dl>{dl}</dl>"
        "<h2>Compile time per component, by phase</h2>"
        f"{component_chart_svg(records)}"
        "<h2>Timeline of graphs</h2>"
        f"{timeline_svg(records)}"
        "<h2>Per component</h2>"
        + _table(COMPONENT_HEADERS, component_rows(records))
        + "<h2>Per graph</h2>"
        + registry_html_table(records)
        + (
            "<h2>Backend phases per graph (seconds)</h2>" + _table(PHASE_HEADERS, phase_rows(records))
            if any(r.phases for r in records)
            else ""
        )
        + "</div>"
    )


def html_report(
    records: Sequence[GraphRecord],
    *,
    warmup: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
    title: str = "compiletrace report",
) -> str:
    """A complete, self-contained HTML page for a run (opens offline: no scripts, no fonts,
    no external resources).

    >>> page = html_report([])
    >>> page.startswith("<!DOCTYPE html>") and "http" not in page.replace("http://www.w3.org/2000/svg", "")
    True
    """
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title></head><body>"
        f'<div class="compiletrace-report"><h1>{_esc(title)}</h1></div>'
        f"{report_fragment(records, warmup=warmup, meta=meta)}"
        "</body></html>\n"
    )
