"""``shared_frame``: one frame compiled by several components (a wrapper they all call
through), which share torch's recompile limit for it."""

from __future__ import annotations

from collections.abc import Iterator

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.stake import Claim

KIND = FindingKind.SHARED_FRAME


def check(evidence: Evidence) -> Iterator[Finding]:
    for (name, where), group in shared.group(evidence.records, shared.frame).items():
        components = list(dict.fromkeys(r.component for r in group))
        if len(components) < 2 or not any(r.shared_with for r in group):
            continue
        used = max(r.frame_attempt for r in group) + 1
        limits = [r.recompile_limit for r in group if r.recompile_limit is not None]
        limit = max(limits) if limits else None
        later = [r for r in group if r.component != components[0]]
        yield Finding(
            KIND,
            components[0],
            shared.seconds(later),
            f"{name} ({where}) is compiled by {' and '.join(components)}: they share torch's "
            f"{limit if limit is not None else '?'} entries for it and have used {used}",
            "compile below the shared wrapper (each component's inner module, not the function they "
            "all call through), so each has its own frame; or raise torch._dynamo.config.recompile_limit",
            group[0].code_location,
            {
                "components": components,
                "modules": shared.modules(group),
                "entries_used": used,
                "recompile_limit": limit,
                "compile_ids": shared.ids(group),
            },
        )


def claims(finding: Finding, evidence: Evidence) -> list[Claim]:
    """None of the seconds: compiling below the shared wrapper keeps each component's
    compiles (the finding is about the recompile limit they share, not about time)."""
    return []


RULE = Rule(KIND, check, claims=claims)
