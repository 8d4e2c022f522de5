"""The table model every view shares: the rows of the per-graph, per-component and
per-phase tables (and which graphs a table lists), and the plain-text table itself. The
text view prints them, the HTML view renders them, compare and the benchmark print their
own tables with :func:`render_table`.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence

from compiletrace._data.phases import PHASES
from compiletrace._data.records import (
    NS_PER_S,
    GraphRecord,
    component_totals,
)
from compiletrace._io.text import printable, shorten, text_width

__all__ = [
    "COMPONENT_HEADERS",
    "GRAPH_HEADERS",
    "GRAPH_ROW_LIMIT",
    "PHASE_HEADERS",
    "by_cost",
    "component_order",
    "component_rows",
    "costliest",
    "graph_rows",
    "phase_rows",
    "render_table",
    "rest_line",
    "setup_line",
    "share",
    "wrap_prose",
]


def _fmt_s(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / NS_PER_S:.3f}"


GAP = 2  # spaces between columns
MIN_TEXT_WIDTH = 8  # a text column is never cut below this (or below its header)
_NUMBER = r"[-+]?(?:\d[\d.,]*|\.\d+)(?:%|x| s)?|-|\?"
_FIGURE = re.compile(rf"(?:{_NUMBER})(?: -> (?:{_NUMBER}))?|")  # "4", or before -> after: "4 -> 2"


def wrap_prose(lines: Iterable[str], width: int | None = None, indent: str = "  ") -> list[str]:
    """Each line longer than ``width`` (default :func:`~compiletrace._io.text.text_width`)
    wrapped at its spaces, the continuation lines ``indent`` past the line's own
    indentation; a word longer than a line (a path, a URL) is moved to a line of its own,
    never cut.

    >>> wrap_prose(["1. a finding whose title is long", "   fix: short"], width=20, indent="   ")
    ['1. a finding whose', '   title is long', '   fix: short']
    """
    limit = text_width() if width is None else width
    out: list[str] = []
    for line in lines:
        if len(line) <= limit:
            out.append(line)
            continue
        own = line[: len(line) - len(line.lstrip(" "))]
        out.extend(
            textwrap.wrap(
                line,
                limit,
                subsequent_indent=own + indent,
                break_long_words=False,
                break_on_hyphens=False,
            )
            or [line]
        )
    return out


def render_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    width: int | None = None,
    optional: Sequence[str] = (),
    cramped: Sequence[str] = (),
    keep_end: Sequence[str] = (),
) -> list[str]:
    """A plain-text table: a header, a rule, one line per row, columns two spaces apart,
    fitting ``width`` columns (default :func:`~compiletrace._io.text.text_width`: the
    terminal's, or 100 when the output is no terminal). A table too wide has its widest
    text column cut, an ellipsis marking each cut cell, then the next widest; figure
    columns are never cut. The ``optional`` columns are left out first, in the order given,
    while the table is too wide (rather than cut a name); the ``cramped`` ones only while
    it would not fit with its text columns at a readable width. A cut cell of a
    ``keep_end`` column keeps its end (where its rows differ: ``…(model.vision_tower)``).

    >>> print("\\n".join(render_table(["name", "s"], [["encoder", "1.50"]])))
    name     s
    -------  ----
    encoder  1.50
    >>> rows = [["0/1", "tensor 'kwargs['input_ids']' size mismatch at index 1", "2.040"]]
    >>> print("\\n".join(render_table(["id", "reason", "total s"], rows, width=36)))
    id   reason                  total s
    ---  ----------------------  -------
    0/1  tensor 'kwargs['input…  2.040
    """
    # Names come from run files too: a control character never reaches the terminal raw.
    head = [printable(h) for h in headers]
    body = [[printable(c) for c in row] for row in rows]
    limit = text_width() if width is None else width
    for names, measure in ((optional, _natural_width), (cramped, _readable_width)):
        for name in names:
            if name not in head or measure(head, body) <= limit:
                continue
            i = head.index(name)
            head = head[:i] + head[i + 1 :]
            body = [row[:i] + row[i + 1 :] for row in body]
    widths = _natural_widths(head, body)
    widths = _fit(widths, head, body, limit)
    from_end = [h in keep_end for h in head]

    def cut(cell: str, width: int, end: bool) -> str:
        return "…" + cell[len(cell) - width + 1 :] if end and len(cell) > width else shorten(cell, width)

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cut(c, w, e).ljust(w) for c, w, e in zip(cells, widths, from_end, strict=True)
        ).rstrip()

    out = [line(head), line(["-" * w for w in widths])]
    out.extend(line(r) for r in body)
    return out


READABLE_TEXT_WIDTH = 16  # a text column cut below this is hard to read: columns go first


def _natural_widths(head: Sequence[str], body: Sequence[Sequence[str]]) -> list[int]:
    widths = [len(h) for h in head]
    for row in body:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    return widths


def _natural_width(head: Sequence[str], body: Sequence[Sequence[str]]) -> int:
    widths = _natural_widths(head, body)
    return sum(widths) + GAP * (len(widths) - 1)


def _readable_width(head: Sequence[str], body: Sequence[Sequence[str]]) -> int:
    """The table's width with each text column cut to :data:`READABLE_TEXT_WIDTH` at most."""
    widths = _natural_widths(head, body)
    text = [not all(_FIGURE.fullmatch(row[i]) for row in body) for i in range(len(widths))]
    cut = [
        min(w, max(len(h), READABLE_TEXT_WIDTH)) if t else w
        for w, h, t in zip(widths, head, text, strict=True)
    ]
    return sum(cut) + GAP * (len(cut) - 1)


def _fit(widths: list[int], head: Sequence[str], body: Sequence[Sequence[str]], limit: int) -> list[int]:
    """Column widths within ``limit``: the widest text column narrowed first, one column
    at a time, never below :data:`MIN_TEXT_WIDTH` or its header; figures keep theirs."""
    text = [not all(_FIGURE.fullmatch(row[i]) for row in body) for i in range(len(widths))]
    floor = [max(len(h), MIN_TEXT_WIDTH) for h in head]
    widths = list(widths)
    excess = sum(widths) + GAP * (len(widths) - 1) - limit
    while excess > 0:
        cuttable = [i for i, w in enumerate(widths) if text[i] and w > floor[i]]
        if not cuttable:
            break  # only figures and short text left: wider than the screen, never cut
        widest = max(cuttable, key=lambda i: widths[i])
        others = [widths[i] for i in cuttable if i != widest] + [floor[widest]]
        # Down to the next widest (so two long columns shrink together), or as far as needed.
        step = min(excess, widths[widest] - max(max(others), floor[widest])) or 1
        widths[widest] -= step
        excess -= step
    return widths


GRAPH_HEADERS = (
    "compile id",
    "component",
    "code",
    "nodes",
    "dynamo s",
    "backend s",
    "backward s",
    "total s",
    "cache",
    "status",
    "recompile reason",
)


def graph_rows(records: Sequence[GraphRecord]) -> list[list[str]]:
    return [
        [
            r.compile_id,
            r.component,
            r.code_name,
            str(r.graph_node_count),
            _fmt_s(r.dynamo_ns),
            _fmt_s(r.backend_ns),
            _backward(r),
            _fmt_s(r.total_ns),
            r.cache_outcome.value,
            _status(r),
            _reason(r),
        ]
        for r in records
    ]


REASON_WIDTH = 60  # the table shows the failed guard; the full reason is in JSON, HTML, spans


def _backward(r: GraphRecord) -> str:
    """The lazy backward's seconds; a backward compiled ahead of time with its forward says
    so (its seconds are the backend's), not 0.000."""
    return "in forward" if r.backward_in_forward and not r.backward_ns else _fmt_s(r.backward_ns)


def _status(r: GraphRecord) -> str:
    if r.error_type is not None:
        return f"{r.status.value} ({r.error_type})"
    return f"{r.status.value} (restarted)" if r.restart_reasons else r.status.value


def _reason(r: GraphRecord) -> str:
    if r.shared_with is not None:
        return f"first graph of a frame {r.shared_with} compiled too"
    return shorten(r.first_reason_line, REASON_WIDTH)


COMPONENT_HEADERS = ("component", "graphs", "recompiles", "dynamo s", "backend s", "backward s", "total s")


def component_rows(records: Sequence[GraphRecord]) -> list[list[str]]:
    """Per component: graphs, recompiles, and seconds of Dynamo, backend, backward, total."""
    rows = []
    for name, ns in component_totals(records).items():
        mine = [r for r in records if r.component == name]
        rows.append(
            [
                name,
                str(len(mine)),
                str(sum(r.is_recompile for r in mine)),
                _fmt_s(sum(r.dynamo_ns or 0 for r in mine)),
                _fmt_s(sum(r.backend_ns for r in mine)),
                _fmt_s(sum(r.backward_ns for r in mine)),
                _fmt_s(ns),
            ]
        )
    return rows


# Past this many graphs, views list the costliest and sum up the rest in one line: a server
# that recompiles for days must not make a report of a hundred megabytes.
GRAPH_ROW_LIMIT = 2_000


def costliest(
    records: Sequence[GraphRecord], limit: int = GRAPH_ROW_LIMIT
) -> tuple[list[GraphRecord], list[GraphRecord]]:
    """(shown, rest): every record when there are at most ``limit``; else the ``limit``
    costliest (by total time), in record order, and the others.

    >>> shown, rest = costliest([], 5)
    >>> shown, rest
    ([], [])
    """
    if len(records) <= limit:
        return list(records), []
    order = sorted(range(len(records)), key=lambda i: records[i].total_ns, reverse=True)
    keep = set(order[:limit])
    shown = [r for i, r in enumerate(records) if i in keep]
    rest = [r for i, r in enumerate(records) if i not in keep]
    return shown, rest


def rest_line(rest: Sequence[GraphRecord]) -> str:
    """The line that stands for the graphs a view leaves out."""
    total = sum(r.total_ns for r in rest) / NS_PER_S
    return (
        f"... and {len(rest)} more graphs, {total:.3f} s in all "
        f"(only the {GRAPH_ROW_LIMIT} costliest are listed)"
    )


def setup_line(records: Sequence[GraphRecord]) -> str | None:
    """The one-time set-up inside these compiles, as its own line (None when there is none):
    it is counted in the graphs that paid it, the first ones, whichever component they are.

    >>> first = GraphRecord("0/0", "encoder", "inductor", "forward", 3, 0, 4_000_000_000, 1, 0, None,
    ...                     setup_ns=3_000_000_000)
    >>> later = GraphRecord("1/0", "language_model", "inductor", "forward", 9, 0, 1_000_000_000, 1, 0, None)
    >>> print(setup_line([first, later]))  # doctest: +NORMALIZE_WHITESPACE
    one-time set-up: 3.000 s (60%) of this is the process's, not the graphs': imports, torch's
    cache keys and CPU probe, paid at the first compiles (encoder 0/0: 3.000 s)
    """
    paid = [r for r in records if r.setup_ns > 0]
    if not paid:
        return None
    setup = sum(r.setup_ns for r in paid)
    overall = sum(r.total_ns for r in records)
    where = ", ".join(
        f"{printable(r.component)} {printable(r.compile_id)}: {_fmt_s(r.setup_ns)} s" for r in paid[:3]
    )
    more = f", and {len(paid) - 3} more" if len(paid) > 3 else ""
    return (
        f"one-time set-up: {_fmt_s(setup)} s ({share(setup, overall)}) of this is the process's, not the "
        "graphs': imports, torch's cache keys and CPU probe, paid at the first compiles "
        f"({where}{more})"
    )


def share(part_ns: int, total_ns: int) -> str:
    """``part_ns`` as a whole percentage of ``total_ns``: "<1%" for a non-zero sliver that
    would round to 0%, "-" when the total is zero.

    >>> share(85, 100), share(1, 1000), share(0, 100), share(0, 0)
    ('85%', '<1%', '0%', '-')
    """
    if total_ns <= 0:
        return "-"
    pct = 100 * part_ns / total_ns
    return "<1%" if 0 < pct < 0.5 else f"{pct:.0f}%"


def by_cost(records: Sequence[GraphRecord]) -> list[GraphRecord]:
    """The records costliest first (total time: frame compile plus lazy backward); ties in
    compile order (start time, then record order).

    >>> from compiletrace._data.records import GraphRecord
    >>> def rec(cid, start, end):
    ...     return GraphRecord(cid, "encoder", "eager", "forward", 1, start, end, 0, 0, None)
    >>> [r.compile_id for r in by_cost([rec("0/0", 0, 1), rec("1/0", 1, 9), rec("2/0", 9, 10)])]
    ['1/0', '0/0', '2/0']
    """
    order = sorted(range(len(records)), key=lambda i: (-records[i].total_ns, records[i].start_unix_ns, i))
    return [records[i] for i in order]


def component_order(records: Sequence[GraphRecord]) -> list[str]:
    """Component names costliest first (total time of their graphs); ties in compile order
    (the component whose first graph started first).

    >>> from compiletrace._data.records import GraphRecord
    >>> def rec(component, start, end):
    ...     return GraphRecord("0/0", component, "eager", "forward", 1, start, end, 0, 0, None)
    >>> component_order([rec("encoder", 0, 85), rec("language_model", 85, 100)])
    ['encoder', 'language_model']
    """
    totals = component_totals(records)
    first: dict[str, tuple[int, int]] = {}
    for i, r in enumerate(records):
        first[r.component] = min(first.get(r.component, (r.start_unix_ns, i)), (r.start_unix_ns, i))
    return sorted(totals, key=lambda name: (-totals[name], first[name]))


PHASE_HEADERS = ("compile id", "component", *PHASES, "backend s")


def phase_rows(records: Sequence[GraphRecord]) -> list[list[str]]:
    """Each graph's backend time split into phases (they add up to the backend time)."""
    return [
        [r.compile_id, r.component, *(_fmt_s(r.phase_ns.get(p, 0)) for p in PHASES), _fmt_s(r.backend_ns)]
        for r in records
        if r.phases
    ]
