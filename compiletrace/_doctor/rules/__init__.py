"""Every rule of the doctor, one module each, in the order they run (:data:`RULES`).

A rule module holds one kind of finding: its :class:`~compiletrace._data.findings.FindingKind`,
its ``check(evidence) -> Iterable[Finding]``, the fixes its findings can name for
``run --apply`` and, where there are fixes, the judge ``doctor --verify`` uses; it ends with
``RULE = Rule(...)``. A new kind of finding is one ``FindingKind`` member, one module here,
and one line below. Findings of equal seconds keep this order within a kind, and each
compile's seconds go to the first finding (in this order) whose fix saves them
(:mod:`compiletrace._doctor.stake`): what did not compile, the recompile limit, recompiles,
blocks repeated inside a graph, then across frames, graph breaks, then the rest.
"""

from __future__ import annotations

from compiletrace._doctor.rule import Rule
from compiletrace._doctor.rules import (
    cache_miss,
    compile_after_ready,
    compile_after_warmup,
    costly_trace,
    expensive_hit,
    graph_break,
    node_cache_miss,
    nothing_compiled,
    rank_divergence,
    recompile_limit,
    recompiles,
    repeated_block,
    repeated_graph,
    shared_frame,
    useless_warmup,
)

__all__ = ["RULES"]

RULES: tuple[Rule, ...] = (
    nothing_compiled.RULE,
    recompile_limit.RULE,
    recompiles.RULE,
    repeated_block.RULE,
    repeated_graph.RULE,
    graph_break.RULE,
    cache_miss.RULE,
    expensive_hit.RULE,
    compile_after_warmup.RULE,
    compile_after_ready.RULE,
    shared_frame.RULE,
    costly_trace.RULE,
    useless_warmup.RULE,
    rank_divergence.RULE,
    node_cache_miss.RULE,
)
