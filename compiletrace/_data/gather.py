"""The figures of a distributed job: one rank's (:class:`RankTimes`) and every rank's
(:class:`GatherResult`), plain data that saves to and loads from JSON (the doctor's view
of them and their table live with the applications: ``compiletrace.distributed``)."""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Self

from compiletrace._data.kinds import FileKind
from compiletrace._data.records import CacheOutcome, CompilationTimes, graph_keys, ordered_components
from compiletrace._data.registry import Registry
from compiletrace._io.envelope import Fields
from compiletrace._io.errors import UsageError

__all__ = ["GATHER_KIND", "GATHER_SCHEMA_VERSION", "GatherResult", "RankTimes"]

GATHER_KIND = FileKind.GATHER.value
GATHER_SCHEMA_VERSION = FileKind.GATHER.schema_version


@dataclass(frozen=True)
class RankTimes:
    """One rank's compile figures."""

    rank: int  # rank in the gathering group
    by_component: dict[str, float]  # compile seconds per component, as its registry has them
    graphs: int = 0  # graph records in the rank's registry
    host: str = ""  # the machine the rank ran on
    pid: int = 0
    # Each graph ("component/code_name#occurrence", as compare matches graphs) and its cache
    # outcome: what the doctor compares across ranks.
    graph_cache: dict[str, str] = field(default_factory=dict)

    @property
    def cache(self) -> dict[str, int]:
        """Graphs per cache outcome ("hit", "miss", ...)."""
        return dict(Counter(self.graph_cache.values()))

    @property
    def compilation_times(self) -> CompilationTimes:
        return CompilationTimes.from_components(self.by_component)

    @property
    def total_s(self) -> float:
        return sum(self.by_component.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "host": self.host,
            "pid": self.pid,
            "graphs": self.graphs,
            "compilation_times": self.compilation_times._asdict(),
            "by_component": dict(self.by_component),
            "total_s": self.total_s,
            "cache": self.cache,
            "graph_cache": dict(self.graph_cache),
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "rank figures", where: str = "") -> RankTimes:
        f = Fields(data, source, where)
        return cls(
            rank=f.integer("rank", minimum=0),
            by_component=f.seconds_by_name("by_component"),
            graphs=f.integer("graphs", minimum=0),
            host=f.string("host"),
            pid=f.integer("pid", minimum=0),
            graph_cache=_graph_cache(f.obj("graph_cache")),
        )

    @classmethod
    def of(cls, registry: Registry, rank: int) -> RankTimes:
        graph_cache = {
            f"{component}/{code_name}#{n}": r.cache_outcome.value
            for (component, code_name, n), r in graph_keys(registry.records())
        }
        return cls(
            rank, registry.by_component(), len(registry), socket.gethostname(), os.getpid(), graph_cache
        )


def _graph_cache(f: Fields) -> dict[str, str]:
    return {key: f.choice(key, CacheOutcome).value for key in f.data}


@dataclass(frozen=True)
class GatherResult:
    """Every rank's compile figures, the same on every rank.

    ``maximum`` is the job's compile time per component: ranks compile in parallel, so each
    component is ready when its slowest rank is. The slowest rank is the one with the
    largest total (the lowest such rank on a tie).

    >>> r = GatherResult.of([RankTimes(0, {"language_model": 2.0}), RankTimes(1, {"language_model": 3.0})])
    >>> r.maximum, r.slowest_rank
    (CompilationTimes(language_model=3.0, encoder=0.0), 1)
    """

    ranks: tuple[RankTimes, ...]  # in rank order
    rank: int = 0  # the rank of the process holding this result
    max_by_component: dict[str, float] = field(default_factory=dict)  # per-component maximum
    slowest_rank: int = 0

    @classmethod
    def of(cls, ranks: Iterable[RankTimes], rank: int = 0) -> Self:
        ordered = tuple(sorted(ranks, key=lambda r: r.rank))
        if not ordered:
            raise UsageError("a gather result needs at least one rank")
        names = ordered_components(n for r in ordered for n in r.by_component)
        maximum = {n: max(r.by_component.get(n, 0.0) for r in ordered) for n in names}
        slowest = max(ordered, key=lambda r: (r.total_s, -r.rank))
        return cls(ordered, rank, maximum, slowest.rank)

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def compilation_times(self) -> tuple[CompilationTimes, ...]:
        """Each rank's :class:`CompilationTimes`, in rank order."""
        return tuple(r.compilation_times for r in self.ranks)

    @property
    def by_component(self) -> tuple[dict[str, float], ...]:
        """Each rank's seconds per component, in rank order."""
        return tuple(dict(r.by_component) for r in self.ranks)

    @property
    def maximum(self) -> CompilationTimes:
        """The per-component maximum over ranks: the job's compile time."""
        return CompilationTimes.from_components(self.max_by_component)

    @property
    def slowest(self) -> RankTimes:
        return self.ranks[self.slowest_rank_index]

    @property
    def slowest_rank_index(self) -> int:
        return next(i for i, r in enumerate(self.ranks) if r.rank == self.slowest_rank)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        return FileKind.GATHER.envelope(
            {
                "world_size": self.world_size,
                "ranks": [r.to_dict() for r in self.ranks],
                "maximum": {
                    "compilation_times": self.maximum._asdict(),
                    "by_component": dict(self.max_by_component),
                },
                "slowest_rank": self.slowest_rank,
                "slowest_total_s": self.slowest.total_s,
            },
        )

    @classmethod
    def from_dict(cls, data: Any, rank: int = 0, source: str = "gather result") -> Self:
        """Read :meth:`to_dict` output, checking every field."""
        f = Fields(data, source)
        FileKind.GATHER.check(f, "a compiletrace gather result")
        ranks = [RankTimes.from_dict(item.data, source, item.where) for item in f.items("ranks")]
        if not ranks:
            raise f.fail("ranks", "a non-empty list", [])
        return cls.of(ranks, rank)
