"""The start-up timeline as text and as an HTML fragment (an inline SVG and a table).

Both show one row per top-level entry in time order (the phases nested in one indented
under it), each with its start since the process started, its seconds, its share of the
whole, and the compile time inside it per component with the rest (a warm-up's run of the
model, minus its compiles). Whatever no phase covers is an "unattributed" row; stretches of
it shorter than :data:`GAP_FLOOR_NS` are summed into one row at the end instead of a row
each. The last row is the total: the process's wall time, phases and unattributed.

Where the process ran another program before exec'ing this one (a shell's ``cmd; exec
python``), the timeline starts at the exec and a last line gives the time before it, not in
the total; where that cannot be told, a last line says the start is the fork.

A job (``compiletrace run``) has one timeline per process: :func:`job_timeline_html` lays
them out as tracks on the job's one wall-clock axis (a track per process that compiled or
recorded a phase, the others folded into one line), then each process's own timeline.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from compiletrace._data.job import Job, JobProcess, ProcessInfo
from compiletrace._data.records import NS_PER_S, GraphRecord, component_totals
from compiletrace._data.timeline import (
    ORIGIN_EXEC,
    ORIGIN_FORK,
    ORIGIN_PROCESS,
    PROCESS,
    SPAN,
    UNATTRIBUTED,
    Timeline,
    TimelineEntry,
)
from compiletrace._io.text import printable, shorten
from compiletrace.reports._svg import LegendItem, TimeAxis, esc, legend, rect, svg_open
from compiletrace.reports._table import render_table, share, wrap_prose

__all__ = [
    "GAP_FLOOR_NS",
    "job_timeline_html",
    "timeline_html",
    "timeline_lines",
    "timeline_text",
]

GAP_FLOOR_NS = 10_000_000  # unattributed stretches shorter than 10 ms are summed into one row


@dataclass(frozen=True)
class _Row:
    label: str
    kind: str
    depth: int
    start_ns: int | None  # since the timeline's start; None for the folded short gaps
    seconds_ns: int
    counted_ns: int  # its share of the whole (0 for nested rows)
    compile: tuple[tuple[str, int], ...]
    entries: tuple[TimelineEntry, ...]  # what the row stands for (several for folded gaps)

    @property
    def compile_ns(self) -> int:
        return sum(ns for _, ns in self.compile)


def _label(e: TimelineEntry, main_thread: str) -> str:
    thread = f" [{e.thread}]" if e.thread and e.thread != main_thread and e.kind != UNATTRIBUTED else ""
    failed = " (failed)" if e.status == "error" else ""
    return f"{e.name}{thread}{failed}"


def _rows(timeline: Timeline) -> list[_Row]:
    main = next((e.thread for e in timeline.entries if e.kind == PROCESS and e.thread), "MainThread")
    rows: list[_Row] = []
    short: list[TimelineEntry] = []
    for e in timeline.entries:
        if e.kind == UNATTRIBUTED and e.duration_ns < GAP_FLOOR_NS:
            short.append(e)
            continue
        rows.append(
            _Row(
                _label(e, main),
                e.kind,
                e.depth,
                e.start_unix_ns - timeline.start_unix_ns,
                e.duration_ns,
                e.counted_ns,
                e.compile,
                (e,),
            )
        )
    folded = [e for e in short if e.duration_ns > 0]
    if folded:
        compile: dict[str, int] = {}
        for e in folded:
            for comp, ns in e.compile:
                compile[comp] = compile.get(comp, 0) + ns
        total = sum(e.duration_ns for e in folded)
        label = f"unattributed ({len(folded)} gap{'s' if len(folded) > 1 else ''} < 10 ms)"
        rows.append(_Row(label, UNATTRIBUTED, 0, None, total, total, tuple(compile.items()), tuple(folded)))
    return rows


def _s(ns: int) -> str:
    return f"{ns / NS_PER_S:.3f}"


def _by_component(compile: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{name} {_s(ns)}" for name, ns in compile if ns > 0)


def _origin_words(timeline: Timeline) -> str:
    if timeline.origin == ORIGIN_EXEC:
        return "the exec of this program"
    if timeline.origin in (ORIGIN_PROCESS, ORIGIN_FORK):
        return "the process started"
    return "compiletrace was imported"


def _exec_note(timeline: Timeline) -> str | None:
    """What came before the timeline's start, where the process exec'd this program."""
    if timeline.origin == ORIGIN_EXEC and timeline.before_exec_ns is not None:
        return (
            f"before the exec: {_s(timeline.before_exec_ns)} s in the program that exec'd this one "
            "(a shell's earlier commands), not in the total"
        )
    if timeline.origin == ORIGIN_FORK:
        return (
            "the process's start is its fork: any time it ran another program before exec'ing this "
            "one (a shell's earlier commands) could not be told apart and is in the first entry"
        )
    return None


def _table(timeline: Timeline) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: an entry per row, the compile time of each component in it on a
    row of its own under it ("compiling encoder"), the total last."""
    rows = _rows(timeline)
    total = timeline.total_ns
    overlaps = any(r.depth == 0 and r.counted_ns != r.seconds_ns for r in rows)
    compiles = any(r.compile_ns for r in rows)
    headers = ["phase", "start s", "seconds", "share"]
    if overlaps:
        headers.append("counted s")  # its time no earlier phase covers: what adds up
    if compiles:
        headers += ["compile s", "other s"]
    body = []
    for r in rows:
        cells = [
            "  " * r.depth + r.label,
            "" if r.start_ns is None else _s(r.start_ns),
            _s(r.seconds_ns),
            share(r.counted_ns, total) if r.depth == 0 else "",
        ]
        if overlaps:
            cells.append(_s(r.counted_ns) if r.depth == 0 else "")
        if compiles:
            cells += [_s(r.compile_ns), _s(max(0, r.seconds_ns - r.compile_ns))] if r.compile_ns else ["", ""]
        body.append(cells)
        for component, ns in r.compile if compiles else ():
            if ns > 0:
                sub = ["  " * (r.depth + 1) + f"compiling {component}", "", "", ""]
                body.append([*sub, *([""] if overlaps else []), _s(ns), ""])
    closing = ["total", "", _s(total), share(total, total)]
    if overlaps:
        closing.append(_s(total))
    if compiles:
        closing += ["", ""]
    body.append(closing)
    return headers, body


def timeline_lines(timeline: Timeline) -> list[str]:
    """The timeline as text lines: a title, the table (a row per entry, nested phases
    indented, the total last) and a line saying what the total is made of.

    >>> from compiletrace._data.timeline import PhaseRecord, build_timeline
    >>> S = 1_000_000_000
    >>> tl = build_timeline([PhaseRecord("load weights", 0, 3 * S, phase_id=1)], [], 0, 4 * S)
    >>> print("\\n".join(timeline_lines(tl)))
    Start-up timeline (seconds since the process started)
    phase         start s  seconds  share
    ------------  -------  -------  -----
    load weights  0.000    3.000    75%
    unattributed  3.000    1.000    25%
    total                  4.000    100%
    4.000 s since the process started: 3.000 s in phases, 1.000 s unattributed
    """
    headers, body = _table(timeline)
    note = _exec_note(timeline)
    total = (
        f"{_s(timeline.total_ns)} s since {_origin_words(timeline)}: {_s(timeline.covered_ns)} s in phases, "
        f"{_s(timeline.unattributed_ns)} s unattributed"
    )
    return [
        *wrap_prose([f"Start-up timeline (seconds since {_origin_words(timeline)})"]),
        *render_table(headers, body),
        *wrap_prose([total, *([note] if note else [])]),
    ]


def timeline_text(timeline: Timeline) -> str:
    """:func:`timeline_lines` as one string."""
    return "\n".join(timeline_lines(timeline))


# -- HTML ---------------------------------------------------------------------------------

# The report's colour-blind-safe set, as its charts use it: a colour means a kind
# of entry here; "compiling" marks where graphs compiled, inside the entries.
KIND_COLORS = {
    PROCESS: "#56B4E9",  # sky blue: interpreter start, imports
    "phase": "#0072B2",  # blue
    SPAN: "#009E73",  # bluish green: instrumented functions
    UNATTRIBUTED: "#D55E00",  # vermillion: time no phase covers
}
COMPILE_COLOR = "#E69F00"  # orange
_KIND_LABELS = {
    PROCESS: "process start",
    "phase": "phase",
    SPAN: "instrumented",
    UNATTRIBUTED: "unattributed",
}
_EM_SPACE = "&#8195;"  # a nested phase's indent in HTML, one a level


def _esc(value: object) -> str:
    return esc(printable(value))


def _compile_marks(rec_intervals: Sequence[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    return [(max(s, start), min(e, end)) for s, e in rec_intervals if min(e, end) > max(s, start)]


def _intervals(records: Iterable[GraphRecord]) -> list[tuple[int, int]]:
    out = []
    for r in records:
        out.append((r.start_unix_ns, r.end_unix_ns))
        if r.backward_ns and r.backward_start_unix_ns is not None:
            out.append((r.backward_start_unix_ns, r.backward_start_unix_ns + r.backward_ns))
    return out


def _svg(timeline: Timeline, rows: Sequence[_Row], records: Sequence[GraphRecord]) -> str:
    axis = TimeAxis(timeline.start_unix_ns, max(timeline.total_ns, 1))
    compiles = _intervals(records)
    kinds = [k for k in KIND_COLORS if any(r.kind == k for r in rows)]
    key = [(KIND_COLORS[k], _KIND_LABELS[k]) for k in kinds]
    if any(r.compile_ns for r in rows):
        key.append((COMPILE_COLOR, "compiling"))
    legend_h, row_h = 20, 30
    top = legend_h + 8
    height = top + row_h * len(rows) + 4
    title = f"Start-up timeline, {timeline.total_s:.2f} s since {_origin_words(timeline)}"
    parts = [svg_open("compiletrace-startup", height, title, font_size=12)]
    # Its legend is one line (the graphs' charts lay theirs out in columns).
    for i, (color, label) in enumerate(key):
        parts.append(
            f'{rect(str(i * 130), 2, "12", 12, color)}<text x="{i * 130 + 17}" y="12.5">{label}</text>'
        )
    for i, r in enumerate(rows):
        tip = f"{r.label}: {_s(r.seconds_ns)} s"
        if r.compile_ns:
            tip += f", {_s(r.compile_ns)} s compiling ({_by_component(r.compile)})"
        indent = _EM_SPACE * r.depth
        parts.append(
            f'<g class="entry" data-kind="{r.kind}" transform="translate(0,{top + i * row_h})">'
            f"<title>{_esc(tip)}</title>"
            f'<text x="0" y="11">{indent}{_esc(r.label)}</text>'
            f'<text x="100%" y="11" text-anchor="end">{_s(r.seconds_ns)} s</text>'
        )
        for e in r.entries:
            parts.append(
                axis.bar(
                    e.start_unix_ns, e.end_unix_ns, 14, 12, KIND_COLORS.get(r.kind, KIND_COLORS["phase"])
                )
            )
            for cs, ce in _compile_marks(compiles, e.start_unix_ns, e.end_unix_ns):
                parts.append(axis.bar(cs, ce, 21, 5, COMPILE_COLOR, min_width=0.1))
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def timeline_html(
    timeline: Timeline, records: Sequence[GraphRecord] = (), *, heading: str | None = "Start-up timeline"
) -> str:
    """The timeline as an HTML fragment for a report or a notebook: a heading (none when
    ``heading`` is None: a job's report names the process above it), an inline SVG (a row
    per entry on one time axis from the process's start, coloured by kind, the compiles of
    ``records`` marked inside the entries they fell in) and the table :func:`timeline_lines`
    prints. Self-contained: inline SVG, no script, no network.

    >>> from compiletrace._data.timeline import PhaseRecord, build_timeline
    >>> S = 1_000_000_000
    >>> tl = build_timeline([PhaseRecord("load <weights>", 0, 3 * S, phase_id=1)], [], 0, 4 * S)
    >>> page = timeline_html(tl)
    >>> "<svg" in page and "load &lt;weights&gt;" in page and "<script" not in page
    True
    """
    rows = _rows(timeline)
    headers, body = _table(timeline)
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)

    def cell(i: int, text: str) -> str:
        if i == 0:  # a nested phase's indent, two spaces a level in text: an em space in HTML
            name = text.lstrip(" ")
            return f"<td>{_EM_SPACE * ((len(text) - len(name)) // 2)}{_esc(name)}</td>"
        cls = ' class="num"' if text[:1].isdigit() or text.endswith("%") else ""
        return f"<td{cls}>{_esc(text)}</td>"

    trs = "".join("<tr>" + "".join(cell(i, c) for i, c in enumerate(row)) + "</tr>" for row in body)
    summary = (
        f"{_s(timeline.total_ns)} s since {_origin_words(timeline)}: {_s(timeline.covered_ns)} s in "
        f"phases, {_s(timeline.unattributed_ns)} s unattributed"
    )
    note = _exec_note(timeline)
    before = f'<p class="before-exec">{_esc(note)}</p>' if note else ""
    return (
        '<section class="compiletrace-startup-timeline">'
        + (f"<h2>{_esc(heading)}</h2>" if heading is not None else "")
        + f"<p>{_esc(summary)}</p>{before}"
        f"{_svg(timeline, rows, records)}"
        f'<table class="compiletrace"><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table>'
        "</section>"
    )


# -- a job's processes, on one axis ------------------------------------------------------------

IDLE_COLOR = "#BBBBBB"  # light grey: the lifetimes of the processes folded into one line
_NO_TIMELINE_COLOR = "#DDDDDD"  # a run saved before timelines: its compiles' extent only
_TRACK_NAME_CHARS = 30  # a track's name, cut so that its pid and its seconds fit a phone's width
_TRACK_HEIGHT = 40  # px: the name on a line, the process's entries under it, its compiles under them
_IDLE_LISTED = 8  # the folded processes named in the line that folds them, as the text summary does


def _notable(process: JobProcess) -> bool:
    """Whether a process gets a track of its own in the job's timeline: it compiled, or
    recorded a phase beyond its own start and imports (an engine's, an instrumented
    function). The others fold into one line, as the job's text summary folds those that
    compiled nothing."""
    timeline = process.run.timeline
    return process.compiled or (timeline is not None and any(p.kind != PROCESS for p in timeline.phases))


def _track_name(info: ProcessInfo) -> str:
    """What a process is called in the job's timeline: its role (``main``, ``rank 0``,
    ``EngineCore_DP0``), or its command line where the role is its pid alone.

    >>> _track_name(ProcessInfo(41, 40, "pid 41", ("/srv/serve.py", "--port", "8000")))
    'serve.py --port 8000'
    >>> _track_name(ProcessInfo(42, 41, "rank 0", ("train.py",)))
    'rank 0'
    """
    if info.role != f"pid {info.pid}" or not info.argv:
        return info.role
    return " ".join([os.path.basename(info.argv[0]), *info.argv[1:]])


def _extent(process: JobProcess) -> tuple[int, int] | None:
    """Where a process lies on the job's axis: its timeline's window, widened to its
    compiles; its compiles alone in a run saved before timelines; None with neither."""
    timeline = process.run.timeline
    spans = _intervals(process.run.graph_records)
    if timeline is not None:
        spans.append((timeline.start_unix_ns, timeline.end_unix_ns))
    if not spans:
        return None
    return min(s for s, _ in spans), max(e for _, e in spans)


def _compile_ns(process: JobProcess) -> int:
    return sum(r.total_ns for r in process.run.graph_records)


def _graphs(n: int) -> str:
    return f"{n} graph{'s' if n != 1 else ''}"


def _processes(n: int, more: bool = False) -> str:
    """``3 processes``, or ``3 more processes`` after others were named."""
    return f"{n} {'more ' if more else ''}process{'es' if n != 1 else ''}"


def _argv(info: ProcessInfo) -> str:
    return " ".join(info.argv) or "?"


def _job_svg(shown: Sequence[JobProcess], folded: Sequence[JobProcess], t0: int, span: int) -> str:
    """A track per process of ``shown`` on one axis from ``t0`` (``span`` ns wide), and one
    for every process of ``folded`` together."""

    axis = TimeAxis(t0, span)

    def rect(cls: str, start: int, end: int, y: int, height: int, fill: str, attrs: str, tip: str) -> str:
        return axis.bar(start, end, y, height, fill, cls=cls, attrs=attrs, tip=printable(tip))

    kinds = {e.kind for p in shown if p.run.timeline is not None for e in p.run.timeline.top_level()}
    legend_items = [(KIND_COLORS[k], _KIND_LABELS[k]) for k in KIND_COLORS if k in kinds]
    if any(p.compiled for p in shown):
        legend_items.append((COMPILE_COLOR, "compiling"))
    if folded:
        legend_items.append((IDLE_COLOR, "compiled nothing"))
    key, legend_h = legend([LegendItem(color, printable(label)) for color, label in legend_items])
    axis_y = legend_h + 22  # tick labels' baseline
    rows_top = axis_y + 12
    height = rows_top + _TRACK_HEIGHT * (len(shown) + bool(folded)) + 4
    title = f"Start-up of {_processes(len(shown) + len(folded))} on one axis, {span / NS_PER_S:.2f} s"
    parts = [svg_open("compiletrace-job-timeline", height, title, font_size=12), key]
    parts += axis.grid(axis_y)  # seconds since the first process started
    for i, process in enumerate(shown):
        info, run = process.info, process.run
        start, end = _extent(process) or (t0, t0)  # a tracked process compiled or has a timeline
        compile_ns = _compile_ns(process)
        tip = (
            f"{info.label}: from {_s(start - t0)} s for {_s(end - start)} s; "
            f"{_graphs(len(run.graph_records))}, {_s(compile_ns)} s compiling; {_argv(info)}"
        )
        parts.append(
            f'<g class="track" data-pid="{info.pid}" data-role="{_esc(info.role)}" '
            f'transform="translate(0,{rows_top + i * _TRACK_HEIGHT})"><title>{_esc(tip)}</title>'
            f'<text class="track-name" x="0" y="12">'
            f"{_esc(shorten(_track_name(info), _TRACK_NAME_CHARS))} (pid {info.pid})</text>"
            '<text class="track-seconds" x="100%" y="12" text-anchor="end">'
            f"{(end - start) / NS_PER_S:.2f} s</text>"
        )
        if run.timeline is None:
            parts.append(
                rect("lifetime", start, end, 16, 10, _NO_TIMELINE_COLOR, "", "no start-up timeline recorded")
            )
        else:
            main = next(
                (e.thread for e in run.timeline.entries if e.kind == PROCESS and e.thread), "MainThread"
            )
            for e in run.timeline.top_level():
                if e.kind == UNATTRIBUTED and e.duration_ns < GAP_FLOOR_NS:
                    continue  # a sliver would overstate it; the table sums such gaps
                parts.append(
                    rect(
                        "entry",
                        e.start_unix_ns,
                        e.end_unix_ns,
                        16,
                        10,
                        KIND_COLORS.get(e.kind, KIND_COLORS["phase"]),
                        f' data-kind="{_esc(e.kind)}"',
                        f"{_label(e, main)}: {_s(e.duration_ns)} s",
                    )
                )
        for r in run.graph_records:
            pieces = [(r.start_unix_ns, r.end_unix_ns, "")]
            if r.backward_ns and r.backward_start_unix_ns is not None:
                pieces.append(
                    (r.backward_start_unix_ns, r.backward_start_unix_ns + r.backward_ns, " backward")
                )
            for cs, ce, what in pieces:
                parts.append(
                    rect(
                        "compile",
                        cs,
                        ce,
                        28,
                        8,
                        COMPILE_COLOR,
                        f' data-compile-id="{_esc(r.compile_id)}" data-component="{_esc(r.component)}"',
                        f"{r.compile_id} {r.component} ({r.code_name}){what}: {_s(ce - cs)} s",
                    )
                )
        parts.append("</g>")
    if folded:
        parts.append(
            f'<g class="idle" transform="translate(0,{rows_top + len(shown) * _TRACK_HEIGHT})">'
            f"<title>{_esc(', '.join(p.info.label for p in folded))}</title>"
            f'<text x="0" y="12">{_processes(len(folded), more=bool(shown))} compiled nothing</text>'
        )
        for process in folded:
            extent = _extent(process)
            if extent is not None:
                parts.append(
                    rect(
                        "lifetime",
                        *extent,
                        16,
                        6,
                        IDLE_COLOR,
                        f' data-pid="{process.info.pid}"',
                        f"{process.info.label}: {_s(extent[1] - extent[0])} s; {_argv(process.info)}",
                    )
                )
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def _process_section(process: JobProcess, t0: int) -> str:
    """A process's own start-up timeline, under its name and what it did."""
    info, run = process.info, process.run
    extent = _extent(process)
    facts = [
        f"started {_s(extent[0] - t0)} s after the first process" if extent else "",
        f"parent pid {info.ppid}",
    ]
    records = run.graph_records
    if records:
        split = ", ".join(f"{name} {ns / NS_PER_S:.2f} s" for name, ns in component_totals(records).items())
        facts.append(f"{_graphs(len(records))}, {_compile_ns(process) / NS_PER_S:.2f} s compiling ({split})")
    else:
        facts.append("compiled nothing")
    timeline = (
        timeline_html(run.timeline, records, heading=None)
        if run.timeline is not None
        else "<p>no start-up timeline recorded (a run saved before timelines were)</p>"
    )
    return (
        f'<section class="ct-process" id="ct-process-{info.pid}" data-pid="{info.pid}">'
        f"<h3>{_esc(_track_name(info))} (pid {info.pid})</h3>"
        f'<p class="ct-process-facts">{_esc(" · ".join(f for f in facts if f))}</p>'
        f'<p class="ct-argv">command: <code>{_esc(_argv(info))}</code></p>'
        f"{timeline}</section>"
    )


def job_timeline_html(job: Job) -> str:
    """A job's start-up as an HTML fragment: a heading, an inline SVG of every process on
    the job's one wall-clock axis (from the first process's start; a track per process
    that compiled or recorded a phase, named by its role or command line and its pid,
    showing its start, imports and phases as :func:`timeline_html` colours them and its
    compiles under them; the other processes folded into one track, and one line naming
    them), the processes that left no run, then each tracked process's own timeline.
    Everything read from the job (names, command lines) is escaped.

    >>> from compiletrace._data.records import CompilationTimes
    >>> from compiletrace._data.run import Run, WarmupResult
    >>> from compiletrace._data.timeline import PhaseRecord, build_timeline
    >>> S = 1_000_000_000
    >>> tl = build_timeline([PhaseRecord("load <weights>", 0, 3 * S, phase_id=1)], [], 0, 4 * S)
    >>> run = Run((), WarmupResult(False, 0.0, CompilationTimes()), {}, tl)
    >>> job = Job(("serve",), 0, (JobProcess(ProcessInfo(41, 40, "main", ("serve",)), run),))
    >>> page = job_timeline_html(job)
    >>> page.count('<g class="track"'), 'id="ct-process-41"' in page, "load &lt;weights&gt;" in page
    (1, True, True)
    """
    shown = [p for p in job.processes if _notable(p)]
    folded = [p for p in job.processes if not _notable(p)]
    extents = [e for e in map(_extent, job.processes) if e is not None]
    parts = ['<section class="compiletrace-job-timeline">', "<h2>Start-up timeline of every process</h2>"]
    if extents:
        t0, t1 = min(s for s, _ in extents), max(e for _, e in extents)
        span = max(t1 - t0, 1)
        compiled = [p for p in job.processes if p.compiled]
        graphs = sum(len(p.run.graph_records) for p in compiled)
        summary = (
            f"{_processes(len(job.processes))} on one wall-clock axis, {_s(t1 - t0)} s from the "
            "first one's start to the last one's end"
        )
        if compiled:
            summary += (
                f"; {_processes(len(compiled))} compiled {_graphs(graphs)} in "
                f"{sum(map(_compile_ns, compiled)) / NS_PER_S:.2f} s"
            )
        parts += [f"<p>{_esc(summary)}</p>", _job_svg(shown, folded, t0, span)]
    else:
        t0 = 0
        parts.append("<p>no process of this command recorded a start-up</p>")
    if folded:
        names = ", ".join(p.info.label for p in folded[:_IDLE_LISTED]) + (
            ", ..." if len(folded) > _IDLE_LISTED else ""
        )
        line = f"{_processes(len(folded), more=bool(shown))} compiled nothing and recorded no phase: {names}"
        parts.append(f'<p class="ct-idle">{_esc(line)}</p>')
    for info in job.missing:
        line = f"{info.label} left no run (killed before it could write one?): {_argv(info)}"
        parts.append(f'<p class="ct-missing">{_esc(line)}</p>')
    parts += [_process_section(p, t0) for p in shown]
    parts.append("</section>")
    return "".join(parts)
