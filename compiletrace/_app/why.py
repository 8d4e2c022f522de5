"""``compiletrace why``: two loaded runs of one program (runs, jobs, or torch's traces)
compared, every cache miss of CURRENT explained against BASE (:mod:`compiletrace._data.why`
does the comparing; the views are ``compiletrace.reports``).

>>> from compiletrace._data.records import CompilationTimes
>>> from compiletrace._data.run import WarmupResult
>>> empty = Run((), WarmupResult(True, 0.0, CompilationTimes()))
>>> why(("a.json", empty), ("b.json", empty)).headline()
'no graph missed the compile cache in CURRENT (it compiled none)'
"""

from __future__ import annotations

from compiletrace._data.job import Job
from compiletrace._data.kinds import FileKind
from compiletrace._data.run import Run
from compiletrace._data.why import Side, WhyReport, explain

__all__ = ["ACCEPTED", "side_of", "why"]

# What each side may be: a run (one process, torch's trace of one included) or a job.
ACCEPTED = frozenset({FileKind.RUN, FileKind.JOB})


def side_of(name: str, loaded: Run | Job) -> Side:
    """One side of the comparison from a run (one process) or a job (every process, each
    by its role; a trace's "pid N", which differs from run to run, by its place)."""
    if isinstance(loaded, Run):
        return Side.of_runs(name, [(loaded.graph_records, loaded.meta)])
    roles = [
        f"process {i + 1}" if p.info.role.startswith("pid ") else p.info.role
        for i, p in enumerate(loaded.processes)
    ]
    roles = [role if roles.count(role) == 1 else f"{role} #{i + 1}" for i, role in enumerate(roles)]
    return Side.of_runs(name, [(p.run.graph_records, p.run.meta) for p in loaded.processes], roles)


def why(base: tuple[str, Run | Job], current: tuple[str, Run | Job]) -> WhyReport:
    """Every graph CURRENT missed, explained against BASE; each side is (its name, what
    was loaded from it)."""
    return explain(side_of(*base), side_of(*current))
