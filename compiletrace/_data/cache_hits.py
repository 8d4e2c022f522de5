"""Which cache hits still cost much of a compile: a pure reading of records, for the doctor
(``expensive_hit``), ``compare`` and ``report``.

>>> find_expensive_hits([])
[]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compiletrace._data.phases import AOT_AUTOGRAD, CACHE, INDUCTOR, KERNEL_COMPILE, OTHER
from compiletrace._data.records import NS_PER_S, CacheOutcome, GraphRecord, graph_keys

__all__ = ["COMPILE_PHASES", "ExpensiveHit", "compile_ns", "find_expensive_hits"]

DEFAULT_MIN_SHARE = 0.25  # a hit still costing a quarter of the same graph's cold compile is no hit
DEFAULT_MIN_SECONDS = 1.0  # nor is one that costs a second, whatever the cold compile cost

# The work a cache hit exists to skip. Loading from the cache and the rest of the backend
# call (the first graph of a process also pays for importing the compiler) are not it.
COMPILE_PHASES = (AOT_AUTOGRAD, INDUCTOR, KERNEL_COMPILE)

_PHASE_WORDS = {
    KERNEL_COMPILE: "compiling kernels",
    CACHE: "loading from the cache",
    "inductor": "in Inductor lowering and code generation",
    "aot_autograd": "in AOTAutograd",
    OTHER: "elsewhere in the backend",
}


@dataclass(frozen=True)
class ExpensiveHit:
    """A cache hit that still cost much of a compile."""

    record: GraphRecord
    dominant_phase: str  # the phase that took most of the backend time
    dominant_ns: int
    share_of_cold: float | None  # backend time / the same graph's cold backend time, if known

    def explanation(self) -> str:
        """``FX graph cache hit, but 11.8 s compiling kernels (graph 0/0, encoder)``."""
        r = self.record
        which = "FX graph cache" if r.fx_graph_cache is CacheOutcome.HIT else "AOTAutograd cache"
        share = "" if self.share_of_cold is None else f"; {self.share_of_cold:.0%} of its cold compile"
        words = _PHASE_WORDS.get(self.dominant_phase, self.dominant_phase)
        return (
            f"{which} hit, but {self.dominant_ns / NS_PER_S:.1f} s {words} "
            f"(graph {r.compile_id} {r.code_name}, {r.component}{share})"
        )


def find_expensive_hits(
    records: Sequence[GraphRecord],
    *,
    cold: Sequence[GraphRecord] | None = None,
    min_share: float = DEFAULT_MIN_SHARE,
    min_seconds: float = DEFAULT_MIN_SECONDS,
) -> list[ExpensiveHit]:
    """Cache hits that still spent at least ``min_seconds`` compiling (AOTAutograd, Inductor,
    kernels), or at least ``min_share`` of what the same graph spent compiling in ``cold`` (a
    cold run of the same model), if given.

    >>> find_expensive_hits([])
    []
    """
    cold_by_key = {k: r for k, r in graph_keys(cold or ())}
    flagged = []
    for key, r in graph_keys(records):
        if r.cache_outcome is not CacheOutcome.HIT:
            continue
        base = cold_by_key.get(key)
        cost = compile_ns(r)
        base_cost = compile_ns(base) if base is not None else 0
        share = cost / base_cost if base_cost > 0 else None
        if cost < min_seconds * NS_PER_S and (share is None or share < min_share):
            continue
        phases = {p: ns for p, ns in r.phase_ns.items() if p in COMPILE_PHASES} or {OTHER: r.backend_ns}
        phase, ns = max(phases.items(), key=lambda kv: kv[1])
        flagged.append(ExpensiveHit(r, phase, ns, share))
    return flagged


def compile_ns(record: GraphRecord) -> int:
    """Backend time spent compiling (not loading): the compile phases, or the whole backend
    time for a record without a phase split."""
    if not record.phases:
        return record.backend_ns
    return sum(ns for phase, ns in record.phases if phase in COMPILE_PHASES)
