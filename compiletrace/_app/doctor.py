"""The doctor's names where callers have imported them from: the doctor itself is the
package :mod:`compiletrace._doctor` (its rules, one module each, and the one entry point
every caller runs them through).

>>> diagnose_records([])
[]
"""

from __future__ import annotations

from compiletrace._data.records import root_code_name
from compiletrace._doctor import (
    DOCTOR_KIND,
    DOCTOR_SCHEMA_VERSION,
    Finding,
    FindingKind,
    GuardKind,
    RunContext,
    automatic_fix,
    break_auto_fix,
    break_fix,
    break_summary,
    classify_guard,
    diagnose,
    diagnose_ranks,
    diagnose_records,
    diagnose_run,
    doctor_dict,
    guard_fix,
    guard_text,
    library_break_fix,
    owners,
)

__all__ = [
    "DOCTOR_KIND",
    "DOCTOR_SCHEMA_VERSION",
    "Finding",
    "FindingKind",
    "GuardKind",
    "RunContext",
    "automatic_fix",
    "break_auto_fix",
    "break_fix",
    "break_summary",
    "classify_guard",
    "diagnose",
    "diagnose_ranks",
    "diagnose_records",
    "diagnose_run",
    "doctor_dict",
    "guard_fix",
    "guard_text",
    "library_break_fix",
    "owners",
    "root_code_name",
]
