"""``repeated_graph``: structurally identical graphs compiled in several frames (the same
block's code, compiled once per block): a regional-compile candidate, and, where every
graph is one block class's call, ``run --apply regional-compile=CLASS``."""

from __future__ import annotations

from collections.abc import Iterator

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.fixes import Fix
from compiletrace._data.torch_text import RESUME_PREFIX
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.shared import AUTO_FIX, MAX_EXAMPLES
from compiletrace._doctor.stake import Claim, named_records
from compiletrace._doctor.verdicts import regional_by_counts

KIND = FindingKind.REPEATED_GRAPH
FIXES = (Fix.REGIONAL_COMPILE,)


def check(evidence: Evidence) -> Iterator[Finding]:
    owner_of = {id(r): owner for r, owner in evidence.owned()}
    hashed = [r for r in evidence.records if r.structure_hash and r.graph_node_count > 0]
    for (component, structure), group in shared.group(
        hashed, lambda r: (r.component, r.structure_hash)
    ).items():
        frames = shared.frames_of(group)
        if len(frames) < 2:
            continue  # one frame compiled again: a recompile, which that finding covers
        blocks = {r.graph_block for r in group}
        block = next(iter(blocks)) if len(blocks) == 1 else ""
        if not block and len({owner_of[id(r)] for r in group}) == 1:
            # Pieces of one function that graph breaks cut apart, and no block's call: there
            # is nothing to compile on its own (the graph_break finding says what to fix).
            continue
        repeats = group[1:]
        auto_fix = Fix.REGIONAL_COMPILE.offered(block) if block else None  # a class name, checked
        if block:
            of = f" (each a call of {block})"
            what = f"compile {block} on its own, once: torch.compile(block, backend=be) for each {block}"
        else:
            classes = shared.unique(r.module_class for r in group if r.module_class)
            of = f" ({', '.join(classes)}{shared.at(group)})" if classes else ""
            what = (
                "compile the repeated block on its own, once: torch.compile(block, backend=be) for each block"
            )
        yield Finding(
            KIND,
            component,
            shared.seconds(repeats),
            f"{len(group)} structurally identical graphs of {group[0].graph_node_count} nodes "
            f"compiled in {len(frames)} frames{of}: a regional-compile candidate",
            f"{what} with one backend object be, so one compiled graph serves every block (and the "
            "model around the blocks runs as it is, or is compiled separately)",
            shared.model_location(group[0]),
            {
                "structure_hash": structure,
                "compile_ids": shared.ids(group),
                "frames": frames[:MAX_EXAMPLES],
                "modules": shared.modules(group),
                **({"block": block} if block else {}),
                **({AUTO_FIX: auto_fix} if auto_fix else {}),
                "estimated_saving_s": shared.seconds(repeats),
            },
        )


def claims(finding: Finding, evidence: Evidence) -> list[Claim]:
    """Every graph but the first, whole; half of one that follows a graph break (removing
    the break saves it too: the graph_break finding claims the other half)."""
    repeats = named_records(finding, evidence)[1:]
    return [Claim(r, 0.5 if r.code_name.startswith(RESUME_PREFIX) else 1.0) for r in repeats]


RULE = Rule(KIND, check, FIXES, regional_by_counts, claims)
