"""``compiletrace why``: two loaded runs of one program (runs, jobs, or torch's traces)
compared, every cache miss of CURRENT explained against BASE (:mod:`compiletrace._data.why`
does the comparing; the views are ``compiletrace.reports``); or the nodes of one job of
several machines compared with each other (:func:`why_nodes`).

>>> from compiletrace._data.records import CompilationTimes
>>> from compiletrace._data.run import WarmupResult
>>> empty = Run((), WarmupResult(True, 0.0, CompilationTimes()))
>>> why(("a.json", empty), ("b.json", empty)).headline()
'no graph missed the compile cache in CURRENT (it compiled none)'
"""

from __future__ import annotations

import dataclasses

from compiletrace._data.job import Job, JobProcess
from compiletrace._data.kinds import FileKind
from compiletrace._data.nodes import cold, node_name, node_of_process, warm
from compiletrace._data.run import Run
from compiletrace._data.why import Side, WhyReport, explain
from compiletrace._io.errors import UsageError

__all__ = ["ACCEPTED", "side_of", "why", "why_nodes"]

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


def _graphs(processes: list[JobProcess]) -> list[tuple[bool, bool, int]]:
    """(hit, missed, CPU ns) of each graph the processes compiled."""
    return [(warm(r), cold(r), r.cpu_or_wall_ns) for p in processes for r in p.run.graph_records]


def why_nodes(name: str, job: Job) -> WhyReport:
    """The nodes of one job of several machines (the job files of its nodes, read as one,
    ``name`` what they were read from) compared: BASE the node that hit the compile cache
    most (the share of its graphs, then their count; the first on a tie), CURRENT the node
    that missed most graphs (then spent the most compile CPU), each node's processes matched
    as :func:`why` matches a job's; the other nodes that missed are named in the notes.
    :class:`~compiletrace.UsageError` for a job of one node: it has none to compare with."""
    nodes: dict[str, list[JobProcess]] = {}
    for process in job.processes:
        nodes.setdefault(node_of_process(process), []).append(process)
    if len(nodes) < 2:
        raise UsageError(
            f"{name} is the job of one node, with no other node to compare it with; give two runs, "
            "BASE (which filled or used the cache) and CURRENT (which missed it)"
        )
    order = list(nodes)
    graphs = {node: _graphs(processes) for node, processes in nodes.items()}

    def hit_share(node: str) -> tuple[float, int, int]:
        hits = sum(hit for hit, _, _ in graphs[node])
        return hits / max(1, len(graphs[node])), hits, -order.index(node)

    def misses(node: str) -> tuple[int, int, int]:
        return (
            sum(miss for _, miss, _ in graphs[node]),
            sum(ns for _, _, ns in graphs[node]),
            -order.index(node),
        )

    base = max(order, key=hit_share)
    current = max((n for n in order if n != base), key=misses)

    def side(node: str) -> tuple[str, Job]:
        return f"{name}: {node_name(node)}", dataclasses.replace(
            job, processes=tuple(nodes[node]), missing=()
        )

    report = why(side(base), side(current))
    notes = [
        f"{node_name(base)} hit the compile cache most: it is BASE; {node_name(current)} missed most: CURRENT"
    ]
    if not hit_share(base)[1]:
        notes[0] = f"no node hit the compile cache: BASE is {node_name(base)}, CURRENT {node_name(current)}"
    others = [(n, misses(n)[0]) for n in order if n not in (base, current) and misses(n)[0]]
    if others:
        missed = ", ".join(f"{node_name(n)} {k} graph{'s' if k != 1 else ''}" for n, k in others)
        notes.append(
            f"other nodes missed too ({missed}): 'compiletrace doctor' on the same files compares every node"
        )
    return dataclasses.replace(report, notes=(*notes, *report.notes))
