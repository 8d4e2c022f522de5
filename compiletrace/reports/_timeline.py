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
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from compiletrace._data.records import NS_PER_S, GraphRecord
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
from compiletrace._io.text import printable
from compiletrace.reports._table import render_table, share

__all__ = ["GAP_FLOOR_NS", "timeline_html", "timeline_lines", "timeline_text"]

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
    return [
        f"Start-up timeline (seconds since {_origin_words(timeline)})",
        *render_table(headers, body),
        f"{_s(timeline.total_ns)} s since {_origin_words(timeline)}: {_s(timeline.covered_ns)} s in phases, "
        f"{_s(timeline.unattributed_ns)} s unattributed",
        *([note] if note else []),
    ]


def timeline_text(timeline: Timeline) -> str:
    """:func:`timeline_lines` as one string."""
    return "\n".join(timeline_lines(timeline))


# -- HTML ---------------------------------------------------------------------------------

# Okabe & Ito's colour-blind-safe set, as the report's charts use it: a colour means a kind
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
_FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
_EM_SPACE = "&#8195;"  # a nested phase's indent in HTML, one a level


def _esc(value: object) -> str:
    return html.escape(printable(value), quote=True)


def _pct(value: float) -> str:
    return f"{value:.2f}%"


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
    t0, span = timeline.start_unix_ns, max(timeline.total_ns, 1)
    compiles = _intervals(records)

    def x(t: int) -> float:
        return 100 * (t - t0) / span

    kinds = [k for k in KIND_COLORS if any(r.kind == k for r in rows)]
    legend = [(KIND_COLORS[k], _KIND_LABELS[k]) for k in kinds]
    if any(r.compile_ns for r in rows):
        legend.append((COMPILE_COLOR, "compiling"))
    legend_h, row_h = 20, 30
    top = legend_h + 8
    height = top + row_h * len(rows) + 4
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="compiletrace-startup" role="img" width="100%" '
        f'height="{height}" font-family="{_FONT}" font-size="12" fill="currentColor">'
        f"<title>Start-up timeline, {timeline.total_s:.2f} s since {_origin_words(timeline)}</title>"
    ]
    for i, (color, label) in enumerate(legend):
        parts.append(
            f'<rect x="{i * 130}" y="2" width="12" height="12" fill="{color}"/>'
            f'<text x="{i * 130 + 17}" y="12.5">{label}</text>'
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
            bx = x(e.start_unix_ns)
            width = max(x(e.end_unix_ns) - bx, 0.2)  # a sliver stays visible
            parts.append(
                f'<rect x="{_pct(bx)}" y="14" width="{_pct(width)}" height="12" '
                f'fill="{KIND_COLORS.get(r.kind, KIND_COLORS["phase"])}"/>'
            )
            for cs, ce in _compile_marks(compiles, e.start_unix_ns, e.end_unix_ns):
                parts.append(
                    f'<rect x="{_pct(x(cs))}" y="21" width="{_pct(max(x(ce) - x(cs), 0.1))}" height="5" '
                    f'fill="{COMPILE_COLOR}"/>'
                )
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def timeline_html(timeline: Timeline, records: Sequence[GraphRecord] = ()) -> str:
    """The timeline as an HTML fragment for a report or a notebook: a heading, an inline
    SVG (a row per entry on one time axis from the process's start, coloured by kind, the
    compiles of ``records`` marked inside the entries they fell in) and the table
    :func:`timeline_lines` prints. Self-contained: inline SVG, no script, no network.

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
        "<h2>Start-up timeline</h2>"
        f"<p>{_esc(summary)}</p>{before}"
        f"{_svg(timeline, rows, records)}"
        f'<table class="compiletrace"><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table>'
        "</section>"
    )
