"""The warm-start ledger as text: what a process's start still paid, line by line, with each
line's seconds, its share of the start and the fix that removes it
(:mod:`compiletrace._data.ledger`)."""

from __future__ import annotations

from compiletrace._data.job import Job
from compiletrace._data.ledger import Ledger, run_ledger
from compiletrace._data.records import NS_PER_S
from compiletrace._data.run import Run
from compiletrace.reports._table import render_table

__all__ = ["job_ledger_lines", "ledger_lines", "run_ledger_lines"]


def ledger_lines(ledger: Ledger, title: str = "warm start", *, width: int | None = None) -> list[str]:
    """The ledger's table: a heading with the whole window, then a row per line (seconds,
    share, fix) and the total, which the rows add up to.

    >>> from compiletrace._data.ledger import ledger
    >>> from compiletrace._data.timeline import PhaseRecord
    >>> S = 1_000_000_000
    >>> print("\\n".join(ledger_lines(ledger([], phases=[PhaseRecord("load", 0, S)], end_unix_ns=2 * S),
    ...                               width=60)))
    warm start: 2.000 s, to the end of the recording (no ready mark)
    line          s      share  fix
    ------------  -----  -----  --------------------------------
    load          1.000  50%
    unattributed  1.000  50%    mark the program's own steps wi…
    total         2.000  100%
    """
    ready = f"; ready when {ledger.ready.described}" if ledger.ready is not None else ""
    head = f"{title}: {ledger.total_ns / NS_PER_S:.3f} s, {ledger.source}{ready}"
    rows = [[line.name, f"{line.seconds:.3f}", f"{line.share:.0%}", line.fix] for line in ledger.lines]
    total = sum(line.ns for line in ledger.lines)
    rows.append(
        ["total", f"{total / NS_PER_S:.3f}", f"{total / ledger.total_ns:.0%}" if ledger.total_ns else "-", ""]
    )
    return [head, *render_table(["line", "s", "share", "fix"], rows, width=width)]


def run_ledger_lines(run: Run, title: str = "warm start") -> list[str]:
    """The ledger of one run (:func:`~compiletrace._data.ledger.run_ledger`) as text."""
    return ledger_lines(run_ledger(run), title)


def job_ledger_lines(job: Job) -> list[str]:
    """The ledger of each process of a job that compiled, one table each."""
    out: list[str] = []
    for process in job.compiling():
        if out:
            out.append("")
        out.extend(run_ledger_lines(process.run, f"warm start of {process.info.label}"))
    return out
