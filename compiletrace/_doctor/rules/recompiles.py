"""``recompiles``: a function compiled again because a guard failed, its failed guards
grouped by kind, each kind with its fix; per user function (its resume functions after a
graph break included). Frames past torch's recompile limit are ``recompile_limit``'s."""

from __future__ import annotations

from collections.abc import Iterator

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.fixes import Fix
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.guards import by_commonest_kind, guard_auto_fix, guards_by_kind
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.shared import AUTO_FIX
from compiletrace._doctor.verdicts import PARTLY, Measured, by_counts, recompiles_of, still_there

KIND = FindingKind.RECOMPILES
FIXES = (Fix.DYNAMIC_SHAPES, Fix.STATIC_CACHE, Fix.CAPTURE_SCALAR_OUTPUTS)


def check(evidence: Evidence) -> Iterator[Finding]:
    recompiled = evidence.by_owner(lambda r: r.is_recompile and not r.recompile_limit_hit)
    for owner, group in recompiled.items():
        guards, fix = guards_by_kind(group)
        # The commonest cause's fix that applies from outside, when one does.
        auto_fix = next(
            (f for r in by_commonest_kind(group) if (f := guard_auto_fix(r.recompile_reason))), None
        )
        kinds = ", ".join(f"{kind} ({g['count']})" for kind, g in guards.items())
        yield Finding(
            KIND,
            owner[0],
            shared.seconds(group),
            f"{owner[2]}{shared.at(group)} recompiled {shared.times(len(group))}: {kinds}",
            fix,
            shared.located(owner),
            {
                "compile_ids": shared.ids(group),
                "frames": shared.frames_of(group),
                "modules": shared.modules(group),
                "guards": guards,
                **({AUTO_FIX: auto_fix.spelled()} if auto_fix else {}),
            },
        )


def judge(finding: Finding, before: Measured, after: Measured) -> str:
    """By counts; and "helped in part" when the finding is still there with fewer
    recompiles and the program compiled fewer frames (a static cache removes the growing
    cache's recompile, not a flag's)."""
    still = still_there(finding, after)
    fewer = still is not None and recompiles_of(still) < recompiles_of(finding)
    if fewer and after.frame_compiles < before.frame_compiles:
        return PARTLY
    return by_counts(finding, before, after)


RULE = Rule(KIND, check, FIXES, judge)
