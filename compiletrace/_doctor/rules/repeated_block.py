"""``repeated_block``: one module class called N times inside one graph (a model of N
identical layers compiled whole): Dynamo traced the block once per call, and the backend
compiled every copy. Compiling the block on its own (``run --apply regional-compile=CLASS``)
traces and compiles it once for all N, and leaves the model around it as it is.

Read from the module stack Dynamo leaves on each node (``GraphRecord.repeated_block``). What
it saves of a graph: the share of its operations that are not one copy of the block,
``1 - block / graph`` of the graph's compile time less set-up (Qwen2, ten layers compiled
whole: 0.91 of it estimated, 0.87 measured). The halves of one forward that a graph break
split are not this: neither holds two calls of one class.

Blocks that each update a cache layer of their own (transformers' decoder layers on
``use_cache=True``) are another matter: compiled on its own, the block specialises on its
layer and compiles a graph per call, about what the whole graph cost (GPT-2 of 12 blocks: 4.98 s
estimated, 0.20 ± 0.26 saved). There the fix is an edit, the call without a cache where none
is needed, then the block compiled on its own; regional compilation as the program is stands
as a fix to try (``--alternatives`` measures it), never first.
"""

from __future__ import annotations

from collections.abc import Iterator

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.fixes import Fix, apply_line
from compiletrace._data.records import NS_PER_S, GraphRecord, RepeatedBlock
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.shared import AUTO_FIX, NO_CLASS_LINE, OTHER_FIXES
from compiletrace._doctor.stake import Claim, claimable_ns, named_records
from compiletrace._doctor.verdicts import regional_by_counts

KIND = FindingKind.REPEATED_BLOCK
FIXES = (Fix.REGIONAL_COMPILE,)
# Compiled on its own, the block is compiled once and the model around it runs uncompiled:
# worth it where the blocks are most of the model, called several times.
MIN_INSTANCES = 4  # calls of the block inside one graph
MIN_SHARE = 0.5  # ... covering at least this share of the graph's operations
MIN_ALIKE = 0.75  # ... each near one size (identical layers: equal)
# A library whose blocks read a cache layer of their own by default (transformers'
# use_cache=True): each block then specialises on it and compiles a graph of its own.
_CACHED = "transformers."
_SPECIALISED = (
    "; if the blocks read a cache (transformers' default, use_cache=True), each {name} specialises "
    "on its own cache layer and compiles a graph of its own: {n} graphs in one shared frame (the fix "
    "raises torch's recompile limit for them), which saves less than the estimate; use_cache=False "
    "where no cache is needed keeps one graph for all"
)
# The blocks were seen updating a cache layer each (RepeatedBlock.reads_own_cache).
_OWN_CACHE = (
    "each {name} updates a cache layer of its own (use_cache=True), so compiled on its own each "
    "specialises on its layer and compiles a graph of its own: {n} graphs, about what the whole "
    "graph costs. Where no cache is needed, call the model with use_cache=False, then compile {name} "
    "on its own, once (torch.compile(block) for each {name}): one graph serves all {n}. To try as "
    "the program is: {line}"
)


def saved_share(block: RepeatedBlock) -> float:
    """The share of a graph's compile that compiling the block on its own saves: all but one
    copy of it (the rest of the model runs uncompiled, as it is).

    >>> saved_share(RepeatedBlock("L", "m", 10, 610, 61, 61, 654))
    0.9067278287461774
    """
    return max(1.0 - block.largest / block.graph_ops, 0.0) if block.graph_ops else 0.0


def _repeated(r: GraphRecord) -> RepeatedBlock | None:
    b = r.repeated_block
    if b is None or b.instances < MIN_INSTANCES or b.share < MIN_SHARE:
        return None
    return b if b.smallest >= MIN_ALIKE * b.largest else None


def check(evidence: Evidence) -> Iterator[Finding]:
    blocks = {id(r): b for r in evidence.records if (b := _repeated(r)) is not None}
    found = [r for r in evidence.records if id(r) in blocks]
    by_class = shared.group(found, lambda r: (r.component, blocks[id(r)].class_name))
    for (component, name), records in by_class.items():
        first = blocks[id(records[0])]
        estimate = sum(claimable_ns(r) * saved_share(blocks[id(r)]) for r in records) / NS_PER_S
        regional = Fix.REGIONAL_COMPILE.offered(name)  # None for a name no class has
        own_cache = any(blocks[id(r)].reads_own_cache for r in records)
        if own_cache:  # a graph per block: the fix is the edit; regional compilation, to try
            fix = _OWN_CACHE.format(
                name=name, n=first.instances, line=apply_line([regional]) if regional else NO_CLASS_LINE
            )
            auto_fix, others = None, [regional] if regional else []
        else:
            fix = (
                f"compile {name} on its own, once, instead of the whole model: torch.compile(block) for "
                f"each {name} ({apply_line([regional]) if regional else NO_CLASS_LINE}); Dynamo then "
                f"traces one {name} and its graph serves all {first.instances}, and the model around "
                "the blocks runs as it is"
                + (
                    _SPECIALISED.format(name=name, n=first.instances)
                    if first.module.startswith(_CACHED)
                    else ""
                )
            )
            auto_fix, others = regional, []
        yield Finding(
            KIND,
            component,
            shared.seconds(records),
            f"{name} traced {first.instances} times inside one graph ({first.nodes} of its "
            f"{first.graph_ops} operations{shared.at(records)}): a regional-compile candidate",
            fix,
            shared.model_location(records[0]),
            {
                "compile_ids": shared.ids(records),
                "block": name,
                "block_module": first.module,
                "instances": first.instances,
                "block_nodes": first.nodes,
                "nodes_per_block": [first.smallest, first.largest],
                "graph_ops": first.graph_ops,
                "estimated_saving_s": round(estimate, 4),
                **({"reads_own_cache": True} if own_cache else {}),
                **({AUTO_FIX: auto_fix} if auto_fix else {}),
                **({OTHER_FIXES: others} if others else {}),
            },
        )


def claims(finding: Finding, evidence: Evidence) -> list[Claim]:
    """Of each graph, all but one copy of the block."""
    return [
        Claim(r, saved_share(b)) for r in named_records(finding, evidence) if (b := _repeated(r)) is not None
    ]


RULE = Rule(KIND, check, FIXES, regional_by_counts, claims)
