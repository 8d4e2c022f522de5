"""What the rules read: one :class:`Evidence`, built once by :func:`gather_evidence` from
whatever the caller has (a registry, a run, a job's process, plain records, the ranks of a
distributed job), so that every caller runs the rules on the same thing.

>>> from compiletrace._data.registry import Registry
>>> evidence = gather_evidence(Registry())
>>> evidence.records, evidence.context
((), RunContext(loaded_artifacts=False, device=None))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from compiletrace._data.cache_keys import RunCacheKeys
from compiletrace._data.gather import RankTimes
from compiletrace._data.job import Job, JobProcess
from compiletrace._data.nodes import node_of_process
from compiletrace._data.ready import ReadyMark, default_mark
from compiletrace._data.records import GraphRecord, RuntimeEvent
from compiletrace._data.registry import Registry
from compiletrace._data.run import Run, WarmupResult
from compiletrace._data.run_meta import RunMeta
from compiletrace._data.timeline import PhaseRecord, Timeline
from compiletrace._doctor.shared import Owner, owners

__all__ = ["Evidence", "RunContext", "gather_evidence", "job_evidence"]


@dataclass(frozen=True)
class RunContext:
    """What a run's meta says that changes the advice, not the findings."""

    loaded_artifacts: bool = False  # cache artifacts were loaded before it compiled (--cache-artifacts)
    device: str | None = None  # where it ran ("cpu", "cuda:0"), where the run says

    @classmethod
    def of(cls, meta: RunMeta | Mapping[str, Any] | None) -> RunContext:
        """What ``meta`` says (a dict is read as a run file's meta is, every field checked)."""
        known = RunMeta.of(meta)
        return cls(known.cache_artifacts is not None, known.device)

    @property
    def on_cpu(self) -> bool:
        return self.device is not None and self.device.startswith("cpu")


@dataclass(frozen=True)
class Evidence:
    """Everything a rule may read about one process's start-up (or, with ``ranks``, about the
    ranks of a distributed job). Build it with :func:`gather_evidence`; every field but
    ``records`` may be empty, and a rule finds nothing in what it lacks."""

    records: tuple[GraphRecord, ...] = ()  # every graph compiled, in the order compiles finished
    context: RunContext = RunContext()  # what the run's meta says (artifacts loaded, the device)
    warmup: WarmupResult | None = None  # the run's own warm-up (compiletrace.warm_up, profile)
    phases: tuple[PhaseRecord, ...] = ()  # the start-up's phases (its timeline's, or a registry's)
    timeline: Timeline | None = None  # the start-up timeline, when the run has one
    ranks: tuple[RankTimes, ...] = ()  # each rank's figures, for a distributed job's evidence
    process: str = ""  # the job's process it is ("pid 41 (rank 1)"), named in each finding
    baseline: Evidence | None = None  # a run to compare with (the same program, another start)
    cache_keys: RunCacheKeys | None = None  # the run's cache keys' process parts and facts, if saved
    ready: ReadyMark | None = None  # when the process became ready to serve (compiletrace run --ready)
    runtime: tuple[RuntimeEvent, ...] = ()  # work on compiled graphs' first calls (autotune, CUDA graphs)
    # A job of several nodes: each node's name and rank processes, for comparing nodes' caches.
    nodes: tuple[tuple[str, tuple[JobProcess, ...]], ...] = ()
    # Each record's owner (the user's function it belongs to), in order: derived, once.
    owners: tuple[Owner, ...] = field(init=False, repr=False, compare=False)
    # Indexes derived once, since rules ask them once per finding (thousands, in a long job):
    # the records' positions by compile id and by record, and the positions of each owner's records.
    _by_id: Mapping[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)
    _position: Mapping[int, int] = field(init=False, repr=False, compare=False)
    _by_owner: Mapping[Owner, tuple[int, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", tuple(self.records))
        object.__setattr__(self, "owners", tuple(owners(self.records)))
        by_id: dict[str, list[int]] = {}
        by_owner: dict[Owner, list[int]] = {}
        for i, (r, owner) in enumerate(zip(self.records, self.owners, strict=True)):
            by_id.setdefault(r.compile_id, []).append(i)
            by_owner.setdefault(owner, []).append(i)
        object.__setattr__(self, "_by_id", {k: tuple(v) for k, v in by_id.items()})
        object.__setattr__(self, "_position", {id(r): i for i, r in enumerate(self.records)})
        object.__setattr__(self, "_by_owner", {k: tuple(v) for k, v in by_owner.items()})

    def with_ids(self, ids: Iterable[str]) -> list[GraphRecord]:
        """The records of these compile ids (every record of an id a reset reused), in order."""
        found = sorted({i for compile_id in ids for i in self._by_id.get(compile_id, ())})
        return [self.records[i] for i in found]

    def first_group(self, records: Iterable[GraphRecord]) -> list[GraphRecord]:
        """The records of the first owner (in the order first seen) that owns one of
        ``records``: ``by_owner()``'s group holding them, without grouping every record."""
        found = [self._position[id(r)] for r in records if id(r) in self._position]
        if not found:
            return []
        group = min((self._by_owner[self.owners[i]] for i in found), key=lambda g: g[0])
        return [self.records[i] for i in group]

    def by_owner(
        self, keep: Callable[[GraphRecord], bool] = lambda r: True
    ) -> dict[Owner, list[GraphRecord]]:
        """The records ``keep`` keeps, by owner, in the order first seen."""
        groups: dict[Owner, list[GraphRecord]] = {}
        for r, owner in zip(self.records, self.owners, strict=True):
            if keep(r):
                groups.setdefault(owner, []).append(r)
        return groups

    def owned(self) -> Iterable[tuple[GraphRecord, Owner]]:
        """Each record with its owner."""
        return zip(self.records, self.owners, strict=True)


Source = Registry | Run | JobProcess | Sequence[GraphRecord]


def gather_evidence(
    source: Source = (),
    *,
    warmup: WarmupResult | None = None,
    timeline: Timeline | None = None,
    meta: RunMeta | Mapping[str, Any] | None = None,
    context: RunContext | None = None,
    ranks: Iterable[RankTimes] = (),
    baseline: Evidence | None = None,
    cache_keys: RunCacheKeys | None = None,
    ready: ReadyMark | None = None,
) -> Evidence:
    """The evidence in ``source``: a registry (its records and phases), a run (its records,
    warm-up, meta and timeline), a job's process (its run, and its name), or plain records.
    ``warmup``, ``timeline`` and ``meta`` (or the ``context`` read from it), when given,
    stand for what a source of plain records lacks; ``ranks`` are a distributed job's.
    ``ready``: the mark to judge compiles after ready by (default: the run's own, else the
    end of its first warm-up phase).

    >>> gather_evidence(ranks=[RankTimes(0, {"lm": 1.0})]).ranks
    (RankTimes(rank=0, by_component={'lm': 1.0}, graphs=0, host='', pid=0, graph_cache={}),)
    """
    process = ""
    if isinstance(source, JobProcess):
        process, source = source.info.label, source.run
    phases: tuple[PhaseRecord, ...] = ()
    runtime: tuple[RuntimeEvent, ...] = ()
    if isinstance(source, Registry):
        records, phases, runtime = source.records(), source.phase_records(), source.runtime_events()
    elif isinstance(source, Run):
        records = source.graph_records
        runtime = source.runtime_events
        warmup = source.warmup if warmup is None else warmup
        timeline = source.timeline if timeline is None else timeline
        meta = source.meta if meta is None else meta
    else:
        records = tuple(source)
    if timeline is not None:
        phases = tuple(timeline.phases)
    if cache_keys is None and meta is not None:
        cache_keys = RunMeta.of(meta).cache_keys
    if ready is None:
        ready = RunMeta.of(meta).ready or default_mark(phases)
    return Evidence(
        records=tuple(records),
        context=context if context is not None else RunContext.of(meta),
        warmup=warmup,
        phases=phases,
        timeline=timeline,
        ranks=tuple(ranks),
        process=process,
        baseline=baseline,
        cache_keys=cache_keys,
        ready=ready,
        runtime=runtime,
    )


def job_evidence(job: Job) -> list[Evidence]:
    """A job's evidence: each process's, then its ranks' together (a distributed job's
    processes compared with each other)."""
    # A process with no ready mark of its own is judged by the job's earliest.
    marks = [p.mark for p in job.after_ready().processes]
    found = [gather_evidence(process, ready=mark) for process, mark in zip(job.processes, marks, strict=True)]
    ranks = []
    for rank, process in job.ranks().items():
        registry = Registry()
        for record in process.run.graph_records:
            registry.add(record)
        ranks.append(replace(RankTimes.of(registry, rank), pid=process.info.pid, host=""))
    by_node: dict[str, list[JobProcess]] = {}
    for process in job.ranks().values():
        by_node.setdefault(node_of_process(process), []).append(process)
    nodes = tuple((node, tuple(processes)) for node, processes in by_node.items()) if len(by_node) > 1 else ()
    found.append(replace(gather_evidence(ranks=ranks), nodes=nodes))
    return found
