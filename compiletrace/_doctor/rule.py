"""What a rule is: a :class:`Rule` names its finding kind, its check (one signature for
every rule: ``check(evidence) -> Iterable[Finding]``), the fixes its findings can name for
``compiletrace run --apply`` (in ``evidence["auto_fix"]``: see
:func:`compiletrace._doctor.shared.automatic_fix`), the judge ``doctor --verify`` reads
a fix's before and after with, and what of each compile a finding's fix can save (its
claims: :mod:`compiletrace._doctor.stake`; by default the records it names, whole).

>>> Rule(FindingKind.USELESS_WARMUP, lambda evidence: ()).fixes
()
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.fixes import Fix
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.stake import Claim
from compiletrace._doctor.verdicts import Judge

__all__ = ["Check", "Claims", "Rule"]

Check = Callable[[Evidence], Iterable[Finding]]
# What a finding's fix can save of each record (None: the finding is about no compile).
Claims = Callable[[Finding, Evidence], Sequence[Claim] | None]


@dataclass(frozen=True)
class Rule:
    """One kind of finding: how to find it, and how to judge the fix it names."""

    kind: FindingKind
    check: Check
    fixes: tuple[Fix, ...] = ()  # the fixes its findings may name (evidence["auto_fix"])
    judge: Judge | None = None  # doctor --verify's reading of a fix, for a rule with fixes
    claims: Claims | None = None  # what its fix saves of each record; None: the records it names
    # Its findings explain the others made of the same records (what did not compile: the
    # graph breaks inside it), which fold under them.
    explains_others: bool = False
    # doctor --verify reads a fix's seconds (a fix that costs seconds made it slower), for the
    # findings this keeps: not for a fix whose point is to compile what did not (it adds
    # compile seconds by design).
    seconds_judged: Callable[[Finding], bool] = lambda finding: True
    # Its judge reads the exit status itself: a fix that is a gate ends the program otherwise
    # on purpose (else a run that ends otherwise with the fix "broke the program").
    reads_exit_status: bool = False
    # Its claims come before every other rule's (stake.py's ledger is first come, first
    # served): a compile after ready is the latency a request paid, which this rule's fix (that
    # compile in the warm-up) removes from the request; no other finding's fix (one grad mode,
    # which a training step cannot use) may take its seconds first.
    claims_first: bool = False
