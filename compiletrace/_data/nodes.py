"""A job of several machines read as one: each node's ``compiletrace run`` job (or a
directory of them) merged into one :class:`~compiletrace._data.job.Job`, its processes
named by node and rank (``node 1 rank 3``), and what the nodes say side by side: the
critical path (the job waits for its slowest rank), each node's figures, the ranks that
compiled alike.

Each process records its node (torchrun's ``GROUP_RANK``, Slurm's ``SLURM_NODEID``, else
its host name: :func:`~compiletrace._data.run_meta.node_of`); ranks are the launcher's
global ranks, so the ranks of one job are unique across its nodes.

>>> from compiletrace._data.run import Run, WarmupResult
>>> from compiletrace._data.records import CompilationTimes
>>> from compiletrace._data.run_meta import ProcessInfo
>>> run = Run((), WarmupResult(False, 0.0, CompilationTimes()), {})
>>> def node(n, rank):
...     info = ProcessInfo(40 + rank, 1, f"rank {rank}", (), node=str(n))
...     return Job(("torchrun",), 0, (JobProcess(info, run),))
>>> job = merge_jobs([("a.json", node(0, 0)), ("b.json", node(1, 1))])
>>> [p.info.role for p in job.processes], sorted(job.ranks())
(['node 0 rank 0', 'node 1 rank 1'], [0, 1])
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from compiletrace._data.job import Job, JobProcess, rank_of_role
from compiletrace._data.records import NS_PER_S, CacheOutcome, GraphRecord
from compiletrace._data.run_meta import is_node_name
from compiletrace._io.errors import UsageError
from compiletrace._io.text import printable

__all__ = [
    "NodeFigures",
    "RankFigures",
    "cold",
    "critical_path",
    "merge_jobs",
    "node_figures",
    "node_name",
    "node_of_process",
    "number_ranges",
    "rank_figures",
    "warm",
]

NODE_PREFIX = "node "


def node_of_process(process: JobProcess) -> str:
    """The node a process ran on: the one it recorded, else its host, else ""."""
    return process.info.node or process.info.host


def merge_jobs(jobs: Sequence[tuple[str, Job]]) -> Job:
    """Several nodes' jobs (each with the name it was read from) as one job. When they span
    more than one node, each process's role names its node (``node 1 rank 3``). A file that
    recorded no node (torch's trace of a node's ranks, a job of an older compiletrace) is a
    node of its own, named by the file (``node3/``: ``3``).

    Raises :class:`~compiletrace.UsageError` when two processes claim one global rank: such
    files are not the nodes of one job (the same file twice, or two separate jobs)."""
    if len(jobs) == 1:
        return jobs[0][1]
    named: list[tuple[str, str, JobProcess]] = []  # (node, source, process)
    for index, (source, job) in enumerate(jobs):
        for process in job.processes:
            named.append((node_of_process(process) or _node_of_source(source, index), source, process))
    several = len({node for node, _, _ in named}) > 1
    seen: dict[int, str] = {}
    processes = []
    for node, source, process in named:
        rank = rank_of_role(process.info.role)
        if rank is not None:
            if rank in seen:
                raise UsageError(
                    f"rank {rank} is in both {seen[rank]} and {source}: these are not the nodes of one job "
                    "(the same file twice, or two separate jobs?); give each node's file once"
                )
            seen[rank] = source
        info = process.info
        if several and not info.role.startswith(NODE_PREFIX):
            info = replace(info, role=f"{NODE_PREFIX}{node} {info.role}", node=node)
        processes.append(JobProcess(info, process.run))
    first = jobs[0][1]
    failed = next((job.exit_status for _, job in jobs if job.exit_status), 0)
    return Job(
        command=first.command,
        exit_status=failed,
        processes=tuple(processes),
        missing=tuple(m for _, job in jobs for m in job.missing),
        cwd=first.cwd,
        ready=first.ready,
        traffic=first.traffic,
    )


def _node_of_source(source: str, index: int) -> str:
    """The node of a file that recorded none (torch's trace, a job of an older compiletrace):
    its name (``node3.json``, ``node3/``: ``3``), else its place among the files (``file2``).

    >>> _node_of_source("/traces/node3/", 0), _node_of_source("gpu-7.json", 1), _node_of_source("a b", 1)
    ('3', 'gpu-7', 'file2')
    """
    stem = os.path.basename(os.path.normpath(source)).split(".")[0]
    stem = stem[4:] if stem.startswith("node") and len(stem) > 4 else stem
    return stem if stem and is_node_name(stem) else f"file{index + 1}"


@dataclass(frozen=True)
class RankFigures:
    """One rank's start-up as the job's report reads it."""

    rank: int
    node: str
    graphs: int
    hits: int  # graphs that hit a compile cache (:func:`warm`)
    misses: int  # graphs that missed (or bypassed) every cache they looked in (:func:`cold`)
    compile_s: float  # its compiles' wall seconds
    cpu_s: float  # ... in CPU time where measured (else wall)
    startup_s: float  # its start-up's wall seconds (its timeline's window; else its compiles')


@dataclass(frozen=True)
class NodeFigures:
    """One node: its ranks' figures together."""

    node: str
    ranks: tuple[RankFigures, ...]

    @property
    def slowest(self) -> RankFigures:
        return critical_path(self.ranks)

    @property
    def graphs(self) -> int:
        return sum(r.graphs for r in self.ranks)

    @property
    def hits(self) -> int:
        return sum(r.hits for r in self.ranks)

    @property
    def misses(self) -> int:
        return sum(r.misses for r in self.ranks)


def warm(record: GraphRecord) -> bool:
    """Whether a compile found its graph in a compile cache: a tier (FX graph, AOTAutograd)
    hit. An AOTAutograd cache that never keeps its entry misses on every start; the FX
    graph's hit still tells a warm node from a cold one."""
    return CacheOutcome.HIT in (record.fx_graph_cache, record.aot_autograd_cache)


def cold(record: GraphRecord) -> bool:
    """Whether a compile missed (or bypassed) the caches it looked in, and hit none."""
    return not warm(record) and any(
        outcome in (CacheOutcome.MISS, CacheOutcome.BYPASS)
        for outcome in (record.fx_graph_cache, record.aot_autograd_cache, record.cache_outcome)
    )


def rank_figures(job: Job) -> list[RankFigures]:
    """Each rank's figures, by global rank."""
    found = []
    for rank, process in job.ranks().items():
        records = process.run.graph_records
        compile_s = sum(r.total_ns for r in records) / NS_PER_S
        timeline = process.run.timeline
        found.append(
            RankFigures(
                rank,
                node_of_process(process),
                len(records),
                sum(1 for r in records if warm(r)),
                sum(1 for r in records if cold(r)),
                compile_s,
                sum(r.cpu_or_wall_ns for r in records) / NS_PER_S,
                max(timeline.total_s, compile_s) if timeline is not None else compile_s,
            )
        )
    return found


def critical_path(ranks: Sequence[RankFigures]) -> RankFigures:
    """The rank the job waited for: the longest start-up (then compile; the lowest rank on a tie)."""
    return max(ranks, key=lambda r: (r.startup_s, r.compile_s, -r.rank))


def node_figures(job: Job) -> list[NodeFigures]:
    """Each node's ranks, nodes in the order of their lowest rank."""
    by_node: dict[str, list[RankFigures]] = {}
    for figures in rank_figures(job):
        by_node.setdefault(figures.node, []).append(figures)
    return [NodeFigures(node, tuple(ranks)) for node, ranks in by_node.items()]


def node_name(node: str) -> str:
    """``node 3`` (a node rank) or ``node gpu-07`` (a host), for a terminal."""
    return f"{NODE_PREFIX}{printable(node)}" if node else "node ?"


def number_ranges(numbers: Sequence[int], most: int | None = None) -> str:
    """``[0, 1, 2, 3, 5]`` -> ``"0-3, 5"``; past ``most`` ranges, the first ``most`` and
    "...".

    >>> number_ranges([0, 1, 2, 3, 5, 7, 8])
    '0-3, 5, 7-8'
    >>> number_ranges([0, 2, 4, 6, 8], most=2)
    '0, 2, ...'
    """
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans[:most])
    return shown if most is None or len(spans) <= most else f"{shown}, ..."
