"""The HTML report: one file that works offline, one colour-blind-safe palette, and a
page that fits a laptop and a phone, opened in a real browser (headless Chromium)."""

from __future__ import annotations

import html
import itertools
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compiletrace import CacheOutcome, ProfileRun, __version__
from compiletrace._data.findings import Finding
from compiletrace._data.job import Job, JobProcess, ProcessInfo
from compiletrace._data.records import GraphBreak, GraphRecord
from compiletrace._data.run import Run
from compiletrace._data.timeline import PROCESS, PhaseRecord, build_timeline
from compiletrace._doctor import diagnose_records
from compiletrace.reports import (
    component_chart_svg,
    graph_timeline_svg,
    html_report,
    registry_html_table,
    report_fragment,
    summary_line,
)
from compiletrace.reports._html import PHASE_COLORS, job_html_report
from compiletrace.reports._text import cache_line, cache_state
from compiletrace.reports._timeline import timeline_html
from tests.conftest import MS, S, make_record, run_of

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
INSTALLED = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")


def needs_chromium(test: Callable[..., None]) -> Callable[..., None]:
    """Runs in a headless chromium when there is one: a process, so never in the fast loop."""
    return pytest.mark.slow(INSTALLED(test))


RECORDS = [
    make_record("0/0", "encoder", backend="inductor", graph_node_count=19, frame_ns=3 * S,
                backend_ns=2 * S, backend_start_unix_ns=0, fx_graph_cache=CacheOutcome.MISS),
    make_record("1/0", "language_model", backend="inductor", graph_node_count=75, start_unix_ns=3 * S,
                frame_ns=5 * S, backend_ns=4 * S, backend_start_unix_ns=3 * S, backward_ns=2 * S,
                backward_start_unix_ns=9 * S, fx_graph_cache=CacheOutcome.HIT),
    make_record("1/1", "language_model", backend="inductor", graph_node_count=75, start_unix_ns=10 * S,
                frame_ns=S, dynamo_ns=None, backend_ns=S // 2, backend_start_unix_ns=10 * S,
                is_recompile=True, recompile_reason="tensor 'x' size mismatch <at> index 0"),
]  # fmt: skip
# A fourth component, every backend phase, and a 12 s total (after 1, 3 and 7 s: sorted as
# text it would come second), and a multi-line recompile reason.
REASON = "0/0: tensor 'x' size mismatch at index 0\nUser stack trace:\n  File \"m.py\", line 3, in forward"
FULL = [
    *RECORDS,
    make_record("2/0", "vision_tower", backend="inductor", start_unix_ns=12 * S, frame_ns=12 * S,
                phases={"aot_autograd": 2 * S, "inductor": 3 * S, "kernel_compile": 4 * S, "cache": S,
                        "other": 500 * MS}, is_recompile=True, recompile_reason=REASON),
]  # fmt: skip
# A graph break deep in a library: the doctor's finding carries a long unbroken path.
LONG_PATH = "/usr/lib/python3.11/site-packages/transformers/models/llava/modeling_llava.py"
BREAK = make_record(
    "3/0", "multi_modal_projector", backend="inductor", start_unix_ns=24 * S, frame_ns=2 * S,
    code_filename=LONG_PATH, code_firstlineno=118,
    graph_breaks=(GraphBreak("Unsupported Tensor.item() call with capture_scalar_outputs=False\n"
                             "  Explanation: Dynamo does not support Tensor.item() when capturing scalar "
                             "outputs is off\nHint: set it", LONG_PATH, 123),),
)  # fmt: skip
META = {"model": "compiletrace.models:build_demo", "backend": "inductor", "torch_version": "2.13.0",
        "compiletrace_version": "9.8.7"}  # fmt: skip


def open_in_chromium(page: Path, tmp_path: Path, window: str = "1300,1000") -> tuple[str, list[str]]:
    """The DOM after load, and the browser's console messages."""
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         f"--window-size={window}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=90, check=True,
    )  # fmt: skip
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.stdout, console


def test_report_is_self_contained() -> None:
    page = html_report(run_of(RECORDS, {"model": "m:f", "backend": "inductor"}))
    assert "<link" not in page and "<img" not in page and "<iframe" not in page
    assert not re.search(r"(src|href)\s*=", page)
    assert "url(" not in page and "@import" not in page
    # SVG namespaces only, one per outer chart (the legends nest in their charts).
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"] * 2
    assert "&lt;at&gt;" in page  # text from records is escaped
    # One inline script, that asks the network for nothing.
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", page, re.S)
    assert len(scripts) == 1 and scripts[0][0] == ""
    for call in ("fetch", "XMLHttpRequest", "import(", "WebSocket", "eval(", "sendBeacon", ".src"):
        assert call not in scripts[0][1]
    assert len(scripts[0][1]) < 4_000  # small


def test_notebook_fragment_has_no_script_and_no_dead_control() -> None:
    fragment = report_fragment(run_of(FULL, META))
    assert "<script" not in fragment and "ct-filter" not in fragment
    page = html_report(run_of(FULL, META))
    # The filter shows only where the script runs (the script un-hides it).
    assert '<p class="ct-filter-line" hidden>' in page
    assert '<option value="vision_tower">vision_tower</option>' in page
    assert "<select" not in html_report(RECORDS[:1])  # one component: nothing to filter


def test_chart_splits_each_component_by_phase() -> None:
    svg = component_chart_svg(RECORDS)
    # language_model: Dynamo 1 s, backend 4 s + (unsplit frame 1 s), backward 2 s.
    assert "language_model dynamo: 1.000 s" in svg
    assert "language_model backend: 4.000 s" in svg
    assert "language_model backward: 2.000 s" in svg
    assert "language_model frame: 1.000 s" in svg
    assert "encoder backend: 2.000 s" in svg
    assert ">8.00 s<" in svg and ">3.00 s<" in svg  # per-component totals beside the bars
    timeline = graph_timeline_svg(RECORDS)
    assert timeline.count('class="graph"') == 3
    assert [phase for phase, _ in _bars(timeline)].count("backward") == 1


def _bars(svg: str) -> list[tuple[str, str]]:
    """(phase, fill) of every bar of a chart, its legend left out."""
    body = re.sub(r'<svg class="legend".*?</svg>', "", svg, flags=re.S)
    return re.findall(r'<rect class="phase-(\w+)"[^>]*? fill="(#\w+)"', body)


def _legend(svg: str) -> list[tuple[str, str, str]]:
    """(phase, swatch fill, label) of each legend entry of a chart, in order."""
    legend = re.search(r'<svg class="legend".*?</svg>', svg, re.S)
    assert legend, "every chart has a legend"
    return re.findall(
        r'data-phase="(\w+)">.*?fill="(#\w+)".*?<text[^>]*>([^<]+)</text>', legend.group(), re.S
    )


def test_one_palette_a_legend_for_each_chart() -> None:
    assert len(set(PHASE_COLORS.values())) == len(PHASE_COLORS)  # a colour, one phase
    for svg in (component_chart_svg(FULL), graph_timeline_svg(FULL)):
        bars, legend = _bars(svg), _legend(svg)
        assert bars and all(PHASE_COLORS[phase] == fill for phase, fill in bars)
        # The legend names each colour the chart draws, once, in one order, and no other.
        assert [phase for phase, _, _ in legend] == [p for p in PHASE_COLORS if p in dict(bars)]
        assert all(PHASE_COLORS[phase] == fill for phase, fill, _ in legend)
        # Evenly spaced: 3 columns of 120 px, a line every 18 px.
        legend_svg = svg.split('<svg class="legend"')[1].split("</svg>")[0]
        positions = re.findall(r'<text x="([\d.]+)" y="([\d.]+)">', legend_svg)
        assert [(float(x), float(y)) for x, y in positions] == [
            (120 * (k % 3) + 17, 18 * (k // 3) + 12.5) for k in range(len(legend))
        ]
    # Components are rows, never colours: the timeline colours the same graph as the chart does.
    timeline_phases = {phase for phase, _ in _bars(graph_timeline_svg(FULL))}
    assert timeline_phases <= set(PHASE_COLORS) and "kernel_compile" in timeline_phases


# Colour-vision deficiency simulation (Machado, Oliveira & Fernandes 2009, severity 1), on
# linear RGB; distances in CIELAB (D65).
_CVD = {
    "normal": ((1, 0, 0), (0, 1, 0), (0, 0, 1)),
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602),
                   (0.004733, 0.691367, 0.303900)),
}  # fmt: skip


def _lab(hex_color: str, vision: str) -> tuple[float, float, float]:
    def linear(c: int) -> float:
        v = c / 255
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    rgb = [linear(int(hex_color[i : i + 2], 16)) for i in (1, 3, 5)]
    r, g, b = (min(1.0, max(0.0, sum(m * c for m, c in zip(row, rgb, strict=True)))) for row in _CVD[vision])
    x, y, z = (
        (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
        0.2126 * r + 0.7152 * g + 0.0722 * b,
        (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883,
    )

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


@pytest.mark.parametrize("vision", list(_CVD))
def test_phases_stay_apart_for_colour_blind_readers(vision: str) -> None:
    # Any two phases may share a bar: every pair must stay apart (CIELAB distance; the old
    # palette's dynamo and cache blues were 20 apart with normal vision, its mid grey "other"
    # and purple "cache" 7 apart for deuteranopes).
    labs = {phase: _lab(color, vision) for phase, color in PHASE_COLORS.items()}
    closest = min(
        (sum((a - b) ** 2 for a, b in zip(labs[p], labs[q], strict=True)) ** 0.5, p, q)
        for p, q in itertools.combinations(labs, 2)
    )
    assert closest[0] >= 15, closest


@pytest.mark.parametrize(
    ("outcomes", "state"),
    [
        ((CacheOutcome.MISS, CacheOutcome.MISS), "cold"),
        ((CacheOutcome.HIT, CacheOutcome.HIT), "warm"),
        ((CacheOutcome.HIT, CacheOutcome.MISS), "mixed"),
        ((CacheOutcome.HIT, CacheOutcome.NONE), "mixed"),
        ((CacheOutcome.NONE, CacheOutcome.NONE), "none"),  # no graph consulted a cache
    ],
)
def test_header_shows_versions_and_how_warm_the_cache_was(
    outcomes: tuple[CacheOutcome, ...], state: str
) -> None:
    records = [make_record(f"{i}/0", aot_autograd_cache=o) for i, o in enumerate(outcomes)]
    assert cache_state(records) == state
    header = re.search(r"<header>(.*?)</header>", html_report(run_of(records, META), title="t"), re.S)
    assert header and "<h1>t</h1>" in header.group(1)
    assert f'cache: <strong class="cache-state">{state}</strong>' in header.group(1)
    # The text report's words, so the two views never disagree.
    line = html.unescape(re.sub(r"<[^>]+>", "", header.group(1)))
    assert line == f"tcompiletrace 9.8.7 · torch 2.13.0 · {cache_line(records)}"
    # A notebook's fragment says the same; without meta, the version is the one installed.
    assert f"compiletrace {__version__} · cache: <strong" in report_fragment(records)


def test_figures_are_right_aligned_in_tabular_digits() -> None:
    page = html_report(run_of(FULL, META))
    graphs = re.search(r'<table class="compiletrace" data-table="graphs">.*?</table>', page, re.S)
    assert graphs
    heads = re.findall(r'<th scope="col"( class="num")?>([^<]+)</th>', graphs.group())
    numeric = [name for cls, name in heads if cls]
    assert numeric == ["nodes", "dynamo s", "backend s", "backward s", "total s"]
    assert '<td class="num">12.000</td>' in graphs.group() and '<td class="num">-</td>' in graphs.group()
    assert "<td>vision_tower</td>" in graphs.group()  # text stays left
    assert ".num { text-align: right; font-variant-numeric: tabular-nums; }" in page
    for name in ("components", "phases"):
        assert f'data-table="{name}"' in page


def test_multi_line_reasons_show_their_first_line_and_expand() -> None:
    for markup in (html_report(FULL), registry_html_table(FULL)):
        assert (
            "<details><summary>0/0: tensor &#x27;x&#x27; size mismatch at index 0</summary>"
            "<pre>0/0: tensor &#x27;x&#x27; size mismatch at index 0\nUser stack trace:" in markup
        )
    # The notebook's table carries its own style (figures right-aligned there too).
    assert registry_html_table(FULL).startswith("<style>")


@needs_chromium
def test_report_renders_in_chromium_without_errors(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(html_report(run_of(RECORDS, {"model": "compiletrace.models:build_demo"})))
    dom, console = open_in_chromium(page, tmp_path)
    assert console == []
    assert summary_line(RECORDS) in dom
    for heading in (
        "Compile time per component, by phase",
        "Timeline of graphs",
        "Per component",
        "Per graph",
    ):
        assert f"<h2>{heading}</h2>" in dom
    assert dom.count('class="compiletrace-chart"') == 1 and dom.count('class="compiletrace-timeline"') == 1
    assert "tensor 'x' size mismatch &lt;at&gt; index 0" in dom
    assert re.search(r"<td>1/1</td><td>language_model</td>", dom)


# The report in three frames, a laptop's width, a tablet's (just wider than where the
# findings turn into blocks, their table at its tightest) and a phone's (headless Chromium
# will not make a window narrower than 500 px; a frame is a viewport of its own, media
# queries included). After load, a script measures each, sorts and filters in the wide one,
# and writes what it saw into the page as JSON, for --dump-dom.
_HARNESS = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="wide" width="1300" height="5000" style="border:0;display:block" srcdoc="{page}"></iframe>
<iframe id="tablet" width="768" height="5000" style="border:0;display:block" srcdoc="{page}"></iframe>
<iframe id="phone" width="390" height="5000" style="border:0;display:block" srcdoc="{page}"></iframe>
<pre id="result"></pre>
<script>
var each = function (list, f) { return Array.prototype.map.call(list, f); };
function measure(doc) {
  var root = doc.documentElement, win = doc.defaultView;
  // The graphs' two charts (not the start-up timeline's, laid out on rules of its own).
  var charts = "svg.compiletrace-chart, svg.compiletrace-timeline";
  var chartText = "svg.compiletrace-chart text, svg.compiletrace-timeline text";
  return {
    width: win.innerWidth, client: root.clientWidth, scroll: root.scrollWidth,
    boxes: each(doc.querySelectorAll(".ct-scroll"), function (b) { return [b.scrollWidth, b.clientWidth]; }),
    text: each(doc.querySelectorAll(chartText), function (t) {
      var r = t.getBoundingClientRect(), chart = t.closest(charts).getBoundingClientRect();
      return {text: t.textContent, height: r.height, left: r.left - chart.left, right: chart.right - r.right};
    }),
    legends: each(doc.querySelectorAll("svg.legend"), function (legend) {
      return each(legend.querySelectorAll(".legend-item"), function (g) {
        var r = g.getBoundingClientRect();
        return {phase: g.getAttribute("data-phase"), left: r.left, right: r.right, top: r.top};
      });
    }),
    num: each(doc.querySelectorAll("td.num"), function (td) {
      var style = win.getComputedStyle(td);
      return style.textAlign + " " + style.fontVariantNumeric;
    }),
    tables: tables(doc),
    // A job's chart: the text of each of its rows, where it lies in the chart.
    job: each(doc.querySelectorAll(".compiletrace-job-timeline g.track, .compiletrace-job-timeline g.idle"),
      function (g) {
        var chart = g.closest("svg").getBoundingClientRect();
        return each(g.querySelectorAll("text"), function (t) {
          var r = t.getBoundingClientRect();
          return {cls: t.getAttribute("class"), height: r.height, left: r.left - chart.left,
                  right: chart.right - r.right, start: r.left, end: r.right};
        });
      }),
  };
}
// Where a cell's text lies: its box and its text's own boxes (text that overflows its cell
// lies outside the cell's box).
function extent(doc, cell) {
  var range = doc.createRange(), r = cell.getBoundingClientRect(), left = r.left, right = r.right;
  range.selectNodeContents(cell);
  Array.prototype.forEach.call(range.getClientRects(), function (t) {
    if (t.width > 0) { left = Math.min(left, t.left); right = Math.max(right, t.right); }
  });
  return [left, right];
}
// Per table, per column: its header, whether every cell is a figure, and how far left and
// right its cells' text reaches, the table's scroll box at rest and scrolled to its end.
function columns(doc, table) {
  var heads = table.tHead ? each(table.tHead.rows[0].cells, function (th) { return th.textContent; }) : [];
  var cols = [];
  Array.prototype.forEach.call(table.tBodies[0].rows, function (tr) {
    Array.prototype.forEach.call(tr.cells, function (td, i) {
      var c = cols[i] || (cols[i] = {head: heads[i] || "", num: true, left: 1e9, right: -1e9});
      var x = extent(doc, td);
      c.num = c.num && td.classList.contains("num");
      c.left = Math.min(c.left, x[0]); c.right = Math.max(c.right, x[1]);
    });
  });
  return cols;
}
// The table's scroll box: the table itself or the nearest element around it that scrolls.
function scrollBox(doc, table) {
  for (var el = table; el && el !== doc.body; el = el.parentElement) {
    var overflow = doc.defaultView.getComputedStyle(el).overflowX;
    if (overflow === "auto" || overflow === "scroll") return el;
  }
  return null;
}
function tables(doc) {
  var details = Array.prototype.filter.call(doc.querySelectorAll("table details"), function (d) {
    return !d.open;
  });
  details.forEach(function (d) { d.open = true; });
  var out = each(doc.querySelectorAll("table"), function (table) {
    var section = table.closest("section");  // a table without a name: its section's
    var name = table.getAttribute("data-table") || (section ? section.className : "");
    var found = {name: name, columns: columns(doc, table), box: null};
    var box = scrollBox(doc, table);
    if (box) {
      var r = box.getBoundingClientRect(), style = doc.defaultView.getComputedStyle(box);
      found.box = {left: r.left, right: r.right, height: r.height, scroll: box.scrollWidth,
                   client: box.clientWidth, overflow: style.overflowX, cue: style.backgroundImage};
      box.scrollLeft = box.scrollWidth;
      found.box.scrolled = columns(doc, table);
      box.scrollLeft = 0;
    }
    return found;
  });
  details.forEach(function (d) { d.open = false; });
  return out;
}
function column(doc, table, col) {
  var rows = doc.querySelectorAll('table[data-table="' + table + '"] tbody tr');
  return each(rows, function (tr) { return tr.hidden ? null : tr.cells[col].textContent; })
    .filter(function (v) { return v !== null; });
}
function header(doc, table, name) {
  var heads = doc.querySelectorAll('table[data-table="' + table + '"] th');
  return Array.prototype.find.call(heads, function (th) { return th.textContent === name; });
}
function interact(doc) {
  var out = {}, total = header(doc, "graphs", "total s");
  total.click();
  out.up = column(doc, "graphs", 0);
  out.upSort = total.getAttribute("aria-sort");
  total.click();
  out.down = column(doc, "graphs", 0);
  header(doc, "graphs", "component").click();
  out.byComponent = column(doc, "graphs", 1);
  var select = doc.querySelector("select.ct-filter");
  out.filterShown = !select.closest("p").hidden;
  var timeline = doc.querySelector("svg.compiletrace-timeline");
  out.heightBefore = +timeline.getAttribute("height");
  select.value = "language_model";
  select.dispatchEvent(new doc.defaultView.Event("change"));
  out.filtered = column(doc, "graphs", 0);
  out.filteredPhases = column(doc, "phases", 0);
  out.rows = each(timeline.querySelectorAll("g.graph"), function (g) {
    return [g.getAttribute("data-component"), g.style.display, g.getAttribute("transform")];
  });
  out.heightAfter = +timeline.getAttribute("height");
  return out;
}
window.addEventListener("load", function () {
  var result = {};
  try {
    var wide = document.getElementById("wide").contentDocument;
    result.wide = measure(wide);
    result.tablet = measure(document.getElementById("tablet").contentDocument);
    result.phone = measure(document.getElementById("phone").contentDocument);
    result.interaction = interact(wide);
  } catch (e) { result.error = String(e); }
  document.getElementById("result").textContent = JSON.stringify(result);
});
</script></body></html>"""


def _measure_in_chromium(page: str, tmp_path: Path) -> tuple[dict[str, Any], list[str]]:
    harness = tmp_path / "harness.html"
    harness.write_text(_HARNESS.replace("{page}", html.escape(page, quote=True)))
    dom, console = open_in_chromium(harness, tmp_path, window="1400,1000")
    found = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert found and found.group(1), dom[-2000:]
    result: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    assert "error" not in result, result.get("error")
    return result, console


def _long_findings(records: list[GraphRecord]) -> list[Finding]:
    """The doctor's findings on ``records``, and one whose fix names a long path: long
    sentences and long unbroken tokens, as a real model gives."""
    found = diagnose_records(records)
    assert any(LONG_PATH in f.location for f in found)  # the doctor located the break
    return [
        *found,
        Finding("costly_trace", "multi_modal_projector", 0.8,
                f"{LONG_PATH}:123 (LlavaMultiModalProjector.forward) holds 80% of the component's "
                "Dynamo time in 412 calls",
                f"trace it once: wrap the loop in {LONG_PATH}:140 with torch.compiler.disable, or "
                "compile the loop's body on its own (torch.compile(fn, dynamic=True))", f"{LONG_PATH}:123",
                {"calls": 412, "location": f"{LONG_PATH}:123"}),
    ]  # fmt: skip


def _off_screen(seen: dict[str, Any]) -> list[str]:
    """Each text column of the page's tables whose text lies outside the viewport, unless the
    table scrolls in its own box that is on-screen, scrollable and brings every column in:
    what a reader cannot read."""
    width, problems = seen["width"], []
    for table in seen["tables"]:
        cols = [c for c in table["columns"] if not c["num"]]
        off = [c for c in cols if c["left"] < -0.5 or c["right"] > width + 0.5]
        box = table["box"]
        if not off:
            continue
        if box and box["left"] >= -0.5 and box["right"] <= width + 0.5 and box["height"] > 0:
            # A box of its own: it scrolls, shows that it does, and scrolled to its end
            # brings the last columns in.
            assert box["overflow"] in ("auto", "scroll") and box["scroll"] > box["client"], box
            assert "gradient" in box["cue"], box  # the edge shadow: more lies that way
            assert all(c["right"] <= box["right"] + 0.5 for c in box["scrolled"]), box["scrolled"]
            continue
        problems += [
            f"{table['name'] or 'table'}/{c['head']}: {c['left']:.0f}..{c['right']:.0f}" for c in off
        ]
    return problems


@needs_chromium
@pytest.mark.parametrize("width", ["wide", "tablet", "phone"])
def test_report_fits_a_laptop_and_a_phone(tmp_path: Path, width: str) -> None:
    records = [*FULL, BREAK]
    run = run_of(records, META, warmup_s=2.5)
    phases = [
        PhaseRecord(f"load weights from {LONG_PATH}", 0, 3 * S, thread="loader", phase_id=1),
        PhaseRecord("warm up", 3 * S, 27 * S, phase_id=2),
    ]
    timeline = build_timeline(phases, run.records(), 0, 30 * S)  # its own table too
    run = ProfileRun(run.records(), run.warmup, run.meta, timeline)
    page = html_report(run, findings=_long_findings(records))
    result, console = _measure_in_chromium(page, tmp_path)
    assert console == []
    seen = result[width]
    assert seen["width"] == {"wide": 1300, "tablet": 768, "phone": 390}[width]  # the frame is the viewport
    assert seen["scroll"] <= seen["client"] <= seen["width"]  # no sideways scrolling of the page
    # Every table readable: its text on-screen, or in a box of its own that scrolls.
    assert _off_screen(seen) == []
    # The findings' text wraps: on a phone too, what to change is on-screen, not in a box.
    findings = next(t for t in seen["tables"] if t["name"] == "findings")
    assert findings["box"] is None
    cols = {c["head"]: c for c in findings["columns"]}
    for name in ("kind", "component", "what", "fix"):
        assert cols[name]["left"] >= 0 and cols[name]["right"] <= seen["width"], (name, cols[name])
    if width == "phone":  # the per-graph table is wider than a phone: it scrolls in its own box
        assert any(scroll > client for scroll, client in seen["boxes"])
    # Chart text is readable (rendered 12-13 px, never scaled up or down with the width)
    # and inside its chart.
    heights = [t["height"] for t in seen["text"]]
    assert heights and min(heights) >= 12 and max(heights) <= 20, heights
    assert all(t["left"] >= -0.5 and t["right"] >= -0.5 for t in seen["text"]), seen["text"]
    # Each legend: entries evenly spaced on every line, none overlapping the next.
    assert len(seen["legends"]) == 2
    for legend in seen["legends"]:
        lines = itertools.groupby(legend, key=lambda item: round(item["top"]))
        gaps = []
        for _, items in lines:
            row = list(items)
            gaps += [b["left"] - a["left"] for a, b in itertools.pairwise(row)]
            assert all(a["right"] < b["left"] for a, b in itertools.pairwise(row)), row
        assert gaps and max(gaps) - min(gaps) < 0.5, gaps
    assert {item["phase"] for item in seen["legends"][0]} >= {"dynamo", "kernel_compile", "backward"}
    # Figures right-aligned, in tabular digits.
    assert seen["num"] and set(seen["num"]) == {"right tabular-nums"}


@needs_chromium
def test_tables_sort_by_any_column_and_graphs_filter_by_component(tmp_path: Path) -> None:
    result, console = _measure_in_chromium(html_report(run_of(FULL, META)), tmp_path)
    assert console == []
    done = result["interaction"]
    # Totals 1, 3, 7 and 12 s: as numbers, not as text (where "12.000" comes before "3.000").
    assert done["up"] == ["1/1", "0/0", "1/0", "2/0"] and done["upSort"] == "ascending"
    assert done["down"] == ["2/0", "1/0", "0/0", "1/1"]  # a second click: descending
    assert done["byComponent"] == ["encoder", "language_model", "language_model", "vision_tower"]
    # The filter: shown by the script, it keeps one component's graphs in the tables and
    # the timeline, whose rows close up.
    assert done["filterShown"]
    assert sorted(done["filtered"]) == ["1/0", "1/1"] and done["filteredPhases"] == []
    shown = [(c, t) for c, display, t in done["rows"] if display != "none"]
    assert [c for c, _ in shown] == ["language_model", "language_model"]
    first, second = (float(re.findall(r"[\d.]+", t)[-1]) for _, t in shown)
    assert second - first == 34  # adjacent rows
    assert done["heightAfter"] == done["heightBefore"] - 2 * 34


@needs_chromium
def test_the_console_check_catches_errors(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>undefinedFn();</script></body></html>")
    _, console = open_in_chromium(page, tmp_path)
    assert any("undefinedFn is not defined" in line for line in console)


# -- a job's report: every process's start-up on one axis ----------------------------------


def _job() -> Job:
    """Four processes on a 10 s axis (every x in the tracks is 10 % a second): ``main``
    from 0 s, an engine core from 2 s, an idle child from 1 s and a server from 3 s named
    by its command line (markup in its argv); and a rank that left no run."""

    def process(
        pid: int,
        role: str,
        argv: tuple[str, ...],
        window: tuple[int, int],
        phases: list[PhaseRecord],
        records: list[GraphRecord],
    ) -> JobProcess:
        run = run_of(records, {"backend": "eager"})
        timeline = build_timeline(phases, records, *window)
        return JobProcess(
            ProcessInfo(pid, 99, role, argv), Run(run.records(), run.warmup, run.meta, timeline)
        )

    main = process(
        100,
        "main",
        ("train.py",),
        (0, 10 * S),
        [
            PhaseRecord("interpreter start + earlier imports", 0, S, kind=PROCESS, phase_id=1),
            PhaseRecord("load weights", 2 * S, 4 * S, phase_id=2),
        ],
        [
            make_record(
                "0/0",
                "encoder",
                start_unix_ns=4 * S,
                frame_ns=2 * S,
                backward_ns=S,
                backward_start_unix_ns=8 * S,
            )
        ],
    )
    engine = process(
        101,
        "EngineCore_DP0",
        ("train.py",),
        (2 * S, 8 * S),
        [
            PhaseRecord("interpreter start + earlier imports", 2 * S, 3 * S, kind=PROCESS, phase_id=1),
        ],
        [make_record("0/0", "language_model", start_unix_ns=5 * S, frame_ns=S)],
    )
    idle = process(
        102,
        "pid 102",
        ("/srv/<idle>.py",),
        (S, 3 * S),
        [
            PhaseRecord("interpreter start + earlier imports", S, 2 * S, kind=PROCESS, phase_id=1),
        ],
        [],
    )
    server = process(
        103,
        "pid 103",
        ("/srv/serve.py", "<b>bold</b>"),
        (3 * S, 9 * S),
        [
            PhaseRecord("serve <first> request", 4 * S, 5 * S, phase_id=1),
        ],
        [],
    )
    missing = (ProcessInfo(104, 99, "rank 1", ("train.py", "<rank>")),)
    return Job(("train.py",), 0, (main, idle, engine, server), missing)  # fmt: skip


_TRACK = re.compile(
    r'<g class="track" data-pid="(\d+)" data-role="([^"]*)" transform="([^"]*)">(.*?)</g>', re.S
)


def _tracks(page: str) -> dict[int, tuple[str, str]]:
    """(role, markup) of each track of the job's timeline, by pid, in order."""
    return {int(pid): (role, body) for pid, role, _, body in _TRACK.findall(page)}


def _rects(markup: str, cls: str) -> list[tuple[str, str, str]]:
    """(its data attributes, x, width) of each rect of class ``cls``."""
    return re.findall(rf'<rect class="{cls}"([^>]*?) x="([\d.]+%)" y="\d+" width="([\d.]+%)"', markup)


def test_a_job_report_has_a_track_per_process_on_one_axis() -> None:
    page = job_html_report(_job(), title="compiletrace run: train.py")
    tracks = _tracks(page)
    # A track per process that compiled or recorded a phase, in start order; the idle one folds.
    assert [(pid, role) for pid, (role, _) in tracks.items()] == [
        (100, "main"), (101, "EngineCore_DP0"), (103, "pid 103"),
    ]  # fmt: skip
    names = {
        pid: re.findall(r'<text class="track-name"[^>]*>([^<]*)</text>', body)
        for pid, (_, body) in tracks.items()
    }
    assert names == {100: ["main (pid 100)"], 101: ["EngineCore_DP0 (pid 101)"],
                     103: ["serve.py &lt;b&gt;bold&lt;/b&gt; (pid 103)"]}  # fmt: skip
    # Each process's start, imports and phases where they happened on the job's axis ...
    assert _rects(tracks[100][1], "entry") == [
        (' data-kind="process"', "0.00%", "10.00%"), (' data-kind="unattributed"', "10.00%", "10.00%"),
        (' data-kind="phase"', "20.00%", "20.00%"), (' data-kind="unattributed"', "40.00%", "60.00%"),
    ]  # fmt: skip
    assert _rects(tracks[101][1], "entry")[0] == (' data-kind="process"', "20.00%", "10.00%")
    assert _rects(tracks[103][1], "entry")[1] == (' data-kind="phase"', "40.00%", "10.00%")
    # ... and its compiles in its own track: two "0/0"s, one a process.
    assert _rects(tracks[100][1], "compile") == [
        (' data-compile-id="0/0" data-component="encoder"', "40.00%", "20.00%"),
        (' data-compile-id="0/0" data-component="encoder"', "80.00%", "10.00%"),  # its backward
    ]
    assert _rects(tracks[101][1], "compile") == [
        (' data-compile-id="0/0" data-component="language_model"', "50.00%", "10.00%")
    ]
    assert _rects(tracks[103][1], "compile") == []
    # The rows stack, 40 px apart, and the folded processes share one row under them.
    transforms = [float(t.split(",")[1].rstrip(")")) for _, _, t, _ in _TRACK.findall(page)]
    assert [b - a for a, b in itertools.pairwise(transforms)] == [40, 40]
    idle = re.search(r'<g class="idle"[^>]*>(.*?)</g>', page, re.S)
    assert idle and ">1 more process compiled nothing</text>" in idle.group(1)
    assert _rects(idle.group(1), "lifetime") == [(' data-pid="102"', "10.00%", "20.00%")]
    assert (
        '<p class="ct-idle">1 more process compiled nothing and recorded no phase: pid 102 (pid 102)</p>'
        in page
    )
    assert "pid 104 (rank 1) left no run (killed before it could write one?): train.py &lt;rank&gt;" in page


def test_a_job_report_shows_each_processs_own_timeline_after_the_tracks() -> None:
    job = _job()
    page = job_html_report(job)
    sections = re.findall(
        r'<section class="ct-process" id="ct-process-(\d+)" data-pid="\d+">(.*?)</section></section>',
        page,
        re.S,
    )
    assert [int(pid) for pid, _ in sections] == [100, 101, 103]  # the idle one has none
    assert page.index("compiletrace-job-timeline") < page.index('id="ct-process-100"')
    own = dict(sections)
    # Each, as the process's own report shows it (its heading left to the process's name).
    for process in (job.processes[0], job.processes[2], job.processes[3]):
        assert process.run.timeline is not None
        alone = timeline_html(process.run.timeline, process.run.graph_records, heading=None)
        assert alone.removesuffix("</section>") in own[str(process.info.pid)]
    assert "<h3>main (pid 100)</h3>" in own["100"]
    assert "started 2.000 s after the first process · parent pid 99 · 1 graph, 1.00 s compiling" in own["101"]
    assert "compiled nothing" in own["103"] and "serve &lt;first&gt; request" in own["103"]
    assert '<p class="ct-argv">command: <code>/srv/serve.py &lt;b&gt;bold&lt;/b&gt;</code></p>' in own["103"]


def test_a_job_report_escapes_what_the_processes_wrote_and_stays_offline() -> None:
    page = job_html_report(_job())
    for raw in ("<b>", "<idle>", "<rank>", "<first>"):
        assert raw not in page
    assert not re.search(r"(src|href)\s*=", page) and "url(" not in page
    assert set(re.findall(r"https?://[^\"' ]+", page)) == {"http://www.w3.org/2000/svg"}
    assert page.count("<script>") == 1
    # A job with no process, or every process idle: the folded line alone.
    assert "no process of this command recorded a start-up" in job_html_report(Job(("true",), 0, ()))
    idle = _job().processes[1]
    page = job_html_report(Job(("x",), 0, (idle,)))
    assert _tracks(page) == {} and "1 process compiled nothing and recorded no phase" in page


@needs_chromium
@pytest.mark.parametrize("width", ["wide", "tablet", "phone"])
def test_a_job_report_fits_a_laptop_and_a_phone(tmp_path: Path, width: str) -> None:
    result, console = _measure_in_chromium(job_html_report(_job()), tmp_path)
    assert console == []
    seen = result[width]
    assert seen["scroll"] <= seen["client"] <= seen["width"]  # no sideways scrolling of the page
    assert _off_screen(seen) == []  # each process's table on-screen, or scrolling in its box
    # The job's chart: each track's name and seconds readable, inside the chart, apart.
    rows = seen["job"]
    assert len(rows) == 4  # three tracks and the folded one
    for texts in rows:
        assert all(t["left"] >= -0.5 and t["right"] >= -0.5 and 12 <= t["height"] <= 20 for t in texts), texts
        name = [t for t in texts if t["cls"] != "track-seconds"]
        seconds = [t for t in texts if t["cls"] == "track-seconds"]
        assert all(n["end"] < s["start"] for n in name for s in seconds), texts
