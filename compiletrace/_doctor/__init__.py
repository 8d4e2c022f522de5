"""The doctor: from where the compile time went to why, and what to change.

It reads plain records (live from a registry, or from a saved run on another machine) and
gives :class:`~compiletrace._data.findings.Finding` s, most seconds at stake first, each
naming what it saw (records, torch's failed guards and graph-break reasons, file:line,
cache keys) and one concrete fix. The package imports the data layer and the standard
library only: no torch, no capture, no application (``tests/test_layout.py``).

The pipeline, as the file names read::

    evidence.py      Evidence: what the rules read, built once by gather_evidence()
                     from a registry, a run, a job's process, records or ranks
    rules/           one module per kind of finding, each ending RULE = Rule(kind, check,
                     fixes, judge); rules/__init__.py lists them in order (RULES)
    rule.py          what a rule is: check(evidence) -> Iterable[Finding], its fixes, its judge
    shared.py        what rules share: owners, grouping, seconds, quoted evidence, the fix a
                     finding names
    guards.py        failed guards: their kinds and fixes (recompiles, the limit, after warm-up)
    stake.py         seconds at stake: what each finding's fix can save, each compile
                     claimed once
    verdicts.py      doctor --verify's verdict words, the judgements rules share, and
                     the seconds (paired rounds) a verdict must beat
    diagnose.py      the one entry point, diagnose_evidence(), and the callers' doors

To add a kind of finding: a member of ``FindingKind`` (``_data/findings.py``), a module in
``rules/`` with its ``check`` (and, if its fix applies from outside the program, its
``Fix`` members and judge), and its ``RULE`` in ``RULES``.

>>> diagnose_records([])
[]
"""

from __future__ import annotations

from compiletrace._data.findings import DOCTOR_KIND, DOCTOR_SCHEMA_VERSION, Finding, FindingKind, doctor_dict
from compiletrace._doctor.diagnose import (
    baseline_evidence,
    diagnose,
    diagnose_against,
    diagnose_evidence,
    diagnose_job,
    diagnose_ranks,
    diagnose_records,
    diagnose_run,
    judge,
    rule_for,
)
from compiletrace._doctor.evidence import Evidence, RunContext, gather_evidence, job_evidence
from compiletrace._doctor.guards import GuardKind, classify_guard, guard_fix, guard_text
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.rules import RULES
from compiletrace._doctor.rules.graph_break import break_auto_fix, break_fix, break_summary, library_break_fix
from compiletrace._doctor.shared import automatic_fix, fix_of, fixes_to_verify, owners
from compiletrace._doctor.stake import AT_STAKE, Claim, claim_once
from compiletrace._doctor.verdicts import (
    BROKE,
    COMPILES,
    DID_NOT_HELP,
    GATE_HELD,
    MANUAL,
    NOT_JUDGED,
    PARTLY,
    SLOWER,
    UNCOMPILED,
    VERDICTS,
    VERIFIED,
    Effect,
    Measured,
    SecondsEffect,
    seconds_effect,
    uncompiled_why,
    why_not_verified,
    with_seconds,
)

__all__ = [
    "AT_STAKE",
    "BROKE",
    "COMPILES",
    "DID_NOT_HELP",
    "DOCTOR_KIND",
    "DOCTOR_SCHEMA_VERSION",
    "GATE_HELD",
    "MANUAL",
    "NOT_JUDGED",
    "PARTLY",
    "RULES",
    "SLOWER",
    "UNCOMPILED",
    "VERDICTS",
    "VERIFIED",
    "Claim",
    "Effect",
    "Evidence",
    "Finding",
    "FindingKind",
    "GuardKind",
    "Measured",
    "Rule",
    "RunContext",
    "SecondsEffect",
    "automatic_fix",
    "baseline_evidence",
    "break_auto_fix",
    "break_fix",
    "break_summary",
    "claim_once",
    "classify_guard",
    "diagnose",
    "diagnose_against",
    "diagnose_evidence",
    "diagnose_job",
    "diagnose_ranks",
    "diagnose_records",
    "diagnose_run",
    "doctor_dict",
    "fix_of",
    "fixes_to_verify",
    "gather_evidence",
    "guard_fix",
    "guard_text",
    "job_evidence",
    "judge",
    "library_break_fix",
    "owners",
    "rule_for",
    "seconds_effect",
    "uncompiled_why",
    "why_not_verified",
    "with_seconds",
]
