"""What a rule is: a :class:`Rule` names its finding kind, its check (one signature for
every rule: ``check(evidence) -> Iterable[Finding]``), the fixes its findings can name for
``compiletrace run --apply`` (in ``evidence["auto_fix"]``: see
:func:`compiletrace._doctor.shared.automatic_fix`), and the judge ``doctor --verify`` reads
a fix's before and after with.

>>> Rule(FindingKind.USELESS_WARMUP, lambda evidence: ()).fixes
()
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.fixes import Fix
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.verdicts import Judge

__all__ = ["Check", "Rule"]

Check = Callable[[Evidence], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """One kind of finding: how to find it, and how to judge the fix it names."""

    kind: FindingKind
    check: Check
    fixes: tuple[Fix, ...] = ()  # the fixes its findings may name (evidence["auto_fix"])
    judge: Judge | None = None  # doctor --verify's reading of a fix, for a rule with fixes
    # Its judge reads the exit status itself: a fix that is a gate ends the program otherwise
    # on purpose (else a run that ends otherwise with the fix "broke the program").
    reads_exit_status: bool = False
