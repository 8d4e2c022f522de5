"""The before/after table of ``compiletrace doctor --verify``, as text and as the table the
HTML page renders: one row per finding, from plain figures
(:class:`~compiletrace._data.verify.VerifyRow`); measuring and judging them is
``compiletrace._app.verify``'s.

>>> from compiletrace._data.verify import TrialFigures, VerifyRow
>>> row = VerifyRow("recompiles (lm)", "dynamic-shapes", TrialFigures(4, 40, 1.0, 2.0),
...                 TrialFigures(2, 30, 0.5, 1.5), "verified")
>>> print("\\n".join(verify_lines([row], steady_calls=20)[:3]))
finding          fix (run --apply)  frame compiles  graph nodes  compile s     wall s      verdict
---------------  -----------------  --------------  -----------  ------------  ----------  --------
recompiles (lm)  dynamic-shapes     4 -> 2          40 -> 30     1.00 -> 0.50  2.0 -> 1.5  verified
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compiletrace._data.verify import TrialFigures, VerifyRow
from compiletrace._io.text import printable
from compiletrace.reports._table import render_table, wrap_prose

__all__ = ["VerifyTable", "verify_lines", "verify_table"]


@dataclass(frozen=True)
class VerifyTable:
    """The before/after table, one row per finding, and the lines under it (for text and
    HTML alike)."""

    header: list[str]
    rows: list[list[str]]
    notes: list[str]


def verify_table(rows: Sequence[VerifyRow], *, steady_calls: int) -> VerifyTable:
    """The before/after table: finding, fix, frame compiles, graph nodes, compile and wall
    seconds (and call ms, when a trial timed its steady state: the median of
    ``steady_calls`` calls), verdict."""
    steady = any(row.before.steady_call_s is not None for row in rows)
    slowed: dict[str | None, float] = {}
    cells = []
    for row in rows:
        pairs = _cells(row.before)  # "4", or with the fix applied "4 -> 2"
        if row.after is not None:
            pairs = [f"{b} -> {a}" for b, a in zip(pairs, _cells(row.after), strict=True)]
        line = [row.finding, row.fix or "-", *pairs[:4]]
        if steady:
            line.append(pairs[4])
            if row.slower_per_call is not None:
                slowed.setdefault(row.fix, row.slower_per_call)
        cells.append([printable(cell) for cell in [*line, row.verdict]])
    header = ["finding", "fix (run --apply)", "frame compiles", "graph nodes", "compile s", "wall s"]
    if steady:
        header.append("call ms")
    notes = [
        f"with {fix}, the compiled model is {slower:.0%} slower per call" for fix, slower in slowed.items()
    ]
    notes.append(
        "Each run: fresh processes, an empty compile cache of its own. The verdict rests on frame "
        "compiles and findings (counts); seconds are as measured"
        + (
            f"; call ms: the median of {steady_calls} calls after the warm-up."
            if steady
            else "; a command's steady-state speed is not."
        )
    )
    return VerifyTable([*header, "verdict"], cells, [printable(line) for line in notes])


def verify_lines(rows: Sequence[VerifyRow], *, steady_calls: int) -> list[str]:
    """The before/after table as text, one row per finding, and the notes under it."""
    if not rows:
        return ["No findings: nothing to verify."]
    table = verify_table(rows, steady_calls=steady_calls)
    # A verdict's why ("did not help: the hooks' breaks stay") goes under the table, whole,
    # so that the findings, which tell the rows apart, keep the room.
    body, whys = [], []
    for cells in table.rows:
        verdict, sep, why = cells[-1].partition(": ")
        body.append([*cells[:-1], verdict])
        if sep:
            whys.append(f"  {cells[0]}: {why}")
    lines = render_table(
        table.header, body, optional=("graph nodes",), cramped=("call ms", "wall s"), keep_end=("finding",)
    )
    return [*lines, *wrap_prose(whys, indent="    "), *wrap_prose(table.notes)]


def _cells(trial: TrialFigures) -> list[str]:
    """A trial's figures as the table shows them: frames, nodes, compile s, wall s, call ms."""
    return [
        f"{trial.frame_compiles}",
        f"{trial.graph_nodes}",
        f"{trial.compile_s:.2f}",
        f"{trial.wall_s:.1f}",
        _ms(trial.steady_call_s),
    ]


def _ms(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds * 1000:.2f}"
