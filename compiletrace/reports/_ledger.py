"""The warm-start ledger as text: what a process's start still paid, line by line, with each
line's seconds, its share of the start and the fix that removes it
(:mod:`compiletrace._data.ledger`)."""

from __future__ import annotations

from collections.abc import Sequence

from compiletrace._data.job import Job
from compiletrace._data.ledger import Ledger, run_ledger
from compiletrace._data.records import NS_PER_S, GraphRecord
from compiletrace._data.run import Run
from compiletrace.reports._table import render_table
from compiletrace.reports._text import cache_state

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


_STARTS = {"cold": "cold start", "warm": "warm start", "mixed": "start (the cache partly warm)"}


def start_title(records: Sequence[GraphRecord]) -> str:
    """What start the ledger is of, by what the compile caches did: a ``cold start`` (every
    graph missed), a ``warm start`` (every graph hit), else a ``start``.

    >>> start_title([])
    'start'
    """
    return _STARTS.get(cache_state(records), "start")


def run_ledger_lines(run: Run, title: str | None = None) -> list[str]:
    """The ledger of one run (:func:`~compiletrace._data.ledger.run_ledger`) as text,
    titled by its start (:func:`start_title`) unless ``title`` is given."""
    return ledger_lines(run_ledger(run), title or start_title(run.graph_records))


def job_ledger_lines(job: Job) -> list[str]:
    """The ledger of each process of a job that compiled, one table each."""
    out: list[str] = []
    for process in job.compiling():
        if out:
            out.append("")
        title = f"{start_title(process.run.graph_records)} of {process.info.label}"
        out.extend(run_ledger_lines(process.run, title))
    return out
