"""``compile_after_warmup``: a function compiled after ``compiletrace.warm_up`` returned (a
latency spike while serving), with the guards that failed and their fixes."""

from __future__ import annotations

from collections.abc import Iterator

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.guards import guards_by_kind
from compiletrace._doctor.rule import Rule

KIND = FindingKind.COMPILE_AFTER_WARMUP


def check(evidence: Evidence) -> Iterator[Finding]:
    for owner, group in evidence.by_owner(lambda r: r.after_warmup).items():
        reasons = [r for r in group if r.recompile_reason]
        guards, guard_fixes = guards_by_kind(reasons) if reasons else ({}, "")
        fix = "warm up with every shape, dtype and mode serving sees, before serving"
        if guard_fixes:
            fix = f"{guard_fixes}; or {fix}"
        yield Finding(
            KIND,
            owner[0],
            shared.seconds(group),
            f"{owner[2]}{shared.at(group)} compiled {shared.times(len(group))} after warm-up returned: a "
            "latency spike while serving",
            fix + " (compiletrace.expect_no_compiles() makes a test fail on it)",
            shared.located(owner),
            {
                "compile_ids": shared.ids(group),
                "frames": shared.frames_of(group),
                "modules": shared.modules(group),
                "guards": guards,
            },
        )


RULE = Rule(KIND, check)
