"""``shared_frame``: one frame compiled by several components (a wrapper they all call
through), which share torch's recompile limit for it.

Blocks of one class compiled one by one (regional compilation, whose blocks stay in the
model's component) share their forward's frame by design; where each compiled a graph of its own,
the guards say why (each fails on another index of one attribute: its own layer of
transformers' cache, ``args[1].layers[i].is_initialized``), and the finding says what the
blocks need: an entry each in the frame's recompile limit, or no specialisation."""

from __future__ import annotations

from collections.abc import Iterator

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.fixes import Fix, apply_line
from compiletrace._data.records import GraphRecord
from compiletrace._data.torch_text import GUARD_SUBSCRIPT
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.guards import GuardKind, classify_guard, guard_text
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.shared import NO_CLASS_LINE
from compiletrace._doctor.stake import Claim

KIND = FindingKind.SHARED_FRAME


def check(evidence: Evidence) -> Iterator[Finding]:
    for (name, where), group in shared.group(evidence.records, shared.frame).items():
        components = list(dict.fromkeys(r.component for r in group))
        blocks = _blocks(group)
        # Blocks compiled one by one share a frame within one component too (a regional fix
        # keeps them under the model's): their shared limit matters all the same.
        if (len(components) < 2 or not any(r.shared_with for r in group)) and blocks is None:
            continue
        used = max(r.frame_attempt for r in group) + 1
        limits = [r.recompile_limit for r in group if r.recompile_limit is not None]
        limit = max(limits) if limits else None
        later = [r for r in group if r.component != components[0]]
        shown = limit if limit is not None else "?"
        title = (
            f"{name} ({where}) is compiled by {' and '.join(components)}: they share torch's {shown} "
            f"entries for it and have used {used}"
        )
        fix = (
            "compile below the shared wrapper (each component's inner module, not the function they "
            "all call through), so each has its own frame; or raise torch._dynamo.config.recompile_limit"
        )
        found: dict[str, object] = {}
        if blocks is not None:
            block, attribute, guard, cache = blocks
            auto_fix = Fix.REGIONAL_COMPILE.offered(block)  # None for a name no class has
            how = f"{apply_line([auto_fix])} does so" if auto_fix else NO_CLASS_LINE
            paths = list(dict.fromkeys(r.module_path for r in group))
            own = "its own layer of the cache" if cache else f"its own {attribute}[i]"
            title = (
                f"{len(paths)} {block} blocks compiled one by one share {name} ({where}), and each "
                f"specialises on {own} ({guard}): a graph per block, {used} of torch's {shown} entries"
            )
            fix = (
                f"each {block} needs an entry of its own in the frame they share: raise "
                f"torch._dynamo.config.recompile_limit to at least the number of blocks plus torch's "
                f"allowance ({how}), or the blocks past the limit "
                "run uncompiled"
                + (
                    "; or keep the blocks from specialising, so that one graph serves them all: "
                    "use_cache=False where no cache is needed, or a static cache"
                    if cache
                    else ""
                )
            )
            found = {"block": block, "specialises_on": guard, "blocks": len(paths)}
        yield Finding(
            KIND,
            components[0],
            shared.seconds(later),
            title,
            fix,
            group[0].code_location,
            {
                "components": components,
                "modules": shared.modules(group),
                "entries_used": used,
                "recompile_limit": limit,
                "compile_ids": shared.ids(group),
                **found,
            },
        )


def _blocks(group: list[GraphRecord]) -> tuple[str, str, str, bool] | None:
    """(the block's class, the attribute indexed, a guard, whether it is a cache's flag) when
    the group is blocks of one class compiled one by one, each after the first failing a
    guard on another index of one attribute (its own); else None."""
    classes = {r.module_class.rpartition(".")[2] for r in group}
    if len(classes) != 1 or "" in classes:
        return None
    indexed: dict[str, set[str]] = {}
    first: dict[str, str] = {}
    for r in group[1:]:
        text = guard_text(r.recompile_reason)
        for attribute, index in GUARD_SUBSCRIPT.findall(text):
            indexed.setdefault(attribute, set()).add(index)
            first.setdefault(attribute, text)
    own = [a for a, indices in indexed.items() if len(indices) == len(group) - 1 and len(indices) > 1]
    if not own:
        return None
    guard = first[own[0]]
    cache = any(classify_guard(r.recompile_reason) is GuardKind.CACHE_STATE for r in group[1:])
    return classes.pop(), own[0], guard, cache


def claims(finding: Finding, evidence: Evidence) -> list[Claim]:
    """None of the seconds: compiling below the shared wrapper keeps each component's
    compiles (the finding is about the recompile limit they share, not about time)."""
    return []


RULE = Rule(KIND, check, claims=claims)
