"""``recompile_limit``: a function that hit torch's recompile limit and now runs eagerly,
uncompiled: the last guard that failed, its fix, or a raised limit."""

from __future__ import annotations

from collections.abc import Iterator

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.fixes import Fix
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.guards import (
    classify_guard,
    compiled_static,
    guard_auto_fix,
    guard_fix,
    guard_text,
    mark_dynamic_entries,
    unnamed_sources,
)
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.shared import AUTO_FIX, UNNAMED
from compiletrace._doctor.verdicts import DID_NOT_HELP, VERIFIED, Measured, still_there

KIND = FindingKind.RECOMPILE_LIMIT
FIXES = (Fix.MARK_DYNAMIC, Fix.CAPTURE_SCALAR_OUTPUTS, Fix.RAISE_RECOMPILE_LIMIT)


def check(evidence: Evidence) -> Iterator[Finding]:
    spent_by = evidence.by_owner()
    for owner, refused in evidence.by_owner(lambda r: r.recompile_limit_hit).items():
        spent = spent_by[owner]
        last = refused[-1]
        limit = last.recompile_limit
        kind = classify_guard(last.recompile_reason)
        auto_fix = guard_auto_fix(last.recompile_reason) or Fix.RAISE_RECOMPILE_LIMIT
        entries = mark_dynamic_entries(spent) if auto_fix is Fix.MARK_DYNAMIC else []
        unnamed = unnamed_sources(spent) if auto_fix is Fix.MARK_DYNAMIC else []
        spelled = Fix.MARK_DYNAMIC.spelled(",".join(entries)) if entries else None
        if auto_fix is Fix.MARK_DYNAMIC and not entries:
            auto_fix = Fix.RAISE_RECOMPILE_LIMIT
        yield Finding(
            KIND,
            owner[0],
            shared.seconds(spent),
            f"{owner[2]}{shared.at(spent)} hit torch's recompile limit "
            f"({limit if limit is not None else '?'}) and now runs eagerly, uncompiled",
            f"{guard_fix(kind, last.recompile_reason, last.arg_names, static=compiled_static(spent))}; "
            "or, if every variant is needed, raise "
            "torch._dynamo.config.recompile_limit",
            shared.located(owner),
            {
                "compile_ids": shared.ids(spent),
                "frames_refused": shared.frames_of(refused),
                "modules": shared.modules(spent),
                "recompile_limit": limit,
                "last_guard": {"kind": kind.value, "reason": guard_text(last.recompile_reason)},
                AUTO_FIX: spelled or auto_fix.spelled(),
                **({UNNAMED: unnamed} if unnamed else {}),
            },
        )


def judge(finding: Finding, before: Measured, after: Measured) -> str:
    """Verified when no code is left running eagerly: raising the limit compiles every
    variant, so more frames is no failure here."""
    if still_there(finding, after) is not None or after.recompile_limit_hit:
        return DID_NOT_HELP
    return VERIFIED


RULE = Rule(KIND, check, FIXES, judge)
