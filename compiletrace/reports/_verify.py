"""The before/after table of ``compiletrace doctor --verify``, as text and as the table the
HTML page renders: one row per fix (naming every finding it answers first), from plain figures
(:class:`~compiletrace._data.verify.VerifyRow`); measuring and judging them is
``compiletrace._app.verify``'s.

>>> from compiletrace._data.verify import TrialFigures, VerifyRow
>>> row = VerifyRow("recompiles (lm)", "mark-dynamic=L['x']:0", TrialFigures(2, 40, 1.0, 2.0, None, 0.9),
...                 TrialFigures(1, 30, 0.5, 1.5, None, 0.5), "verified", at_stake_s=0.42,
...                 saved_cpu=(0.4, 0.05), saved_wall=(0.5, 0.2), calibration=0.95, rounds=3)
>>> table = verify_table([row], steady_calls=20)
>>> dict(zip(table.header, table.rows[0]))  # doctest: +NORMALIZE_WHITESPACE
{'finding': 'recompiles (lm)', 'fix (run --apply)': "mark-dynamic=L['x']:0", 'frame compiles': '2 -> 1',
 'graph nodes': '40 -> 30', 'compile CPU s': '0.90 -> 0.50', 'at stake s': '0.42',
 'saved CPU s': '0.40 ± 0.05', 'saved wall s': '0.50 ± 0.20', 'calibration': '0.95', 'verdict': 'verified'}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compiletrace._data.verify import TrialFigures, VerifyRow
from compiletrace._io.text import printable
from compiletrace.reports._table import render_table, wrap_prose

__all__ = ["VerifyTable", "verify_lines", "verify_table"]

MAX_FIX_CELL = 40  # a fix spelled longer is written under the table, whole


@dataclass(frozen=True)
class VerifyTable:
    """The before/after table, one row per fix, and the lines under it (for text and HTML
    alike)."""

    header: list[str]
    rows: list[list[str]]
    notes: list[str]


def verify_table(rows: Sequence[VerifyRow], *, steady_calls: int, notes: Sequence[str] = ()) -> VerifyTable:
    """The before/after table: finding, fix, frame compiles, graph nodes, compile CPU
    seconds, seconds at stake, seconds saved (median ± spread, CPU and wall), calibration
    (and call ms, when a trial timed its steady state: the median of ``steady_calls``
    calls), verdict."""
    steady = any(row.before.steady_call_s is not None for row in rows)
    slowed: dict[str | None, float] = {}
    cells = []
    # The gates after the fixes: a gate stops the program at a compile after ready, and saves nothing.
    rows = [*(row for row in rows if not row.gate), *(row for row in rows if row.gate)]
    for row in rows:
        pairs = _cells(row.before)  # "4", or with the fix applied "4 -> 2"
        if row.after is not None:
            pairs = [f"{b} -> {a}" for b, a in zip(pairs, _cells(row.after), strict=True)]
        fix = row.fix or "-"
        marked = f"{fix} (gate)" if row.gate else f"{fix} (also)" if row.alternative else fix
        line = [row.finding, marked, *pairs[:3]]
        line += [
            _seconds(row.at_stake_s),
            _saved(row.saved_cpu, row.rounds),
            _saved(row.saved_wall, row.rounds),
            "-" if row.calibration is None else f"{row.calibration:.2f}",
        ]
        if steady:
            line.append(pairs[3])
            if row.slower_per_call is not None:
                slowed.setdefault(row.fix, row.slower_per_call)
        verdict = f"{row.verdict}: {row.why}" if row.why else row.verdict
        cells.append([printable(cell) for cell in [*line, verdict]])
    header = ["finding", "fix (run --apply)", "frame compiles", "graph nodes", "compile CPU s"]
    header += ["at stake s", "saved CPU s", "saved wall s", "calibration"]
    if steady:
        header.append("call ms")
    given = list(notes)  # the caller's (how the trials differ from the job), first
    notes = [
        f"with {fix}, the compiled model is {slower:.0%} slower per call" for fix, slower in slowed.items()
    ]
    over = [row.finding for row in rows if row.calibration is not None and row.calibration > 1]
    if over:
        notes.append(
            f"A calibration above 1 ({', '.join(dict.fromkeys(over))}): the fix saved seconds that a "
            "finding it does not answer first put at stake (each compile's seconds are at stake in one "
            "finding only, the first whose fix saves them), or more than the doctor estimated."
        )
    if any(row.gate for row in rows):
        notes.append(
            "A gate (fix marked (gate)) is no fix: it stops the program at a compile after ready. "
            "'gate held': it did; it saves no seconds, so none are judged."
        )
    rounds = max((row.rounds for row in rows), default=1)
    notes.append(
        f"Each run: fresh processes, an empty compile cache of its own; {rounds} round"
        + ("s" if rounds != 1 else "")
        + ", base and fixes interleaved. Frame compiles and graph nodes: the first round's counts; "
        "compile CPU s: the rounds' medians; saved: the median of the rounds' paired differences ± half "
        "their range. A fix is verified when the counts say it did what it says and its CPU saving beats "
        "that spread, the baseline's own move between rounds (its whole range with two rounds) and 3% of "
        "the compile; one that costs seconds made it slower; one that leaves code "
        "uncompiled that compiled as it is runs uncompiled, whatever it saved. Calibration: saved over at "
        "stake, one per fix (the stakes of every finding it answers first, added)."
        + (f" Call ms: the median of {steady_calls} calls after the warm-up." if steady else "")
        + (" One round: the seconds are not judged." if rounds == 1 else "")
    )
    return VerifyTable([*header, "verdict"], cells, [printable(line) for line in [*given, *notes]])


def verify_lines(rows: Sequence[VerifyRow], *, steady_calls: int, notes: Sequence[str] = ()) -> list[str]:
    """The before/after table as text, one row per fix, and the notes under it."""
    if not rows:
        return ["No findings: nothing to verify."]
    table = verify_table(rows, steady_calls=steady_calls, notes=notes)
    # A verdict's why ("did not help: the hooks' breaks stay") goes under the table, whole,
    # so that the findings, which tell the rows apart, keep the room.
    body, whys = [], []
    for cells in table.rows:
        verdict, sep, why = cells[-1].partition(": ")
        fix = cells[1]
        if len(fix) > MAX_FIX_CELL:  # a long fix goes under the table whole: no column for it
            whys.append(f"  {cells[0]}: fix {fix}")
            fix = fix[: MAX_FIX_CELL - 1] + "…"
        body.append([cells[0], fix, *cells[2:-1], verdict])
        if sep:
            whys.append(f"  {cells[0]}: {why}")
    # Narrow, the counts and the CPU saving stay (what the verdict reads); the wall seconds
    # (the machine's load), then the estimate and its calibration go first, and, where the
    # findings would be cut past reading, the compile seconds before and after.
    lines = render_table(
        table.header,
        body,
        optional=("graph nodes", "saved wall s", "at stake s", "calibration"),
        cramped=("compile CPU s", "call ms"),
        keep_end=("finding",),
    )
    return [*lines, *wrap_prose(whys, indent="    "), *wrap_prose(table.notes)]


def _cells(trial: TrialFigures) -> list[str]:
    """A trial's figures as the table shows them: frames, nodes, compile CPU s, call ms."""
    cpu = trial.compile_s if trial.compile_cpu_s is None else trial.compile_cpu_s
    return [f"{trial.frame_compiles}", f"{trial.graph_nodes}", f"{cpu:.2f}", _ms(trial.steady_call_s)]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _saved(value: tuple[float, float] | None, rounds: int = 2) -> str:
    """``0.40 ± 0.05``; one round has no spread to show (``0.40``)."""
    if value is None:
        return "-"
    return f"{value[0]:.2f}" if rounds < 2 else f"{value[0]:.2f} ± {value[1]:.2f}"


def _ms(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds * 1000:.2f}"
