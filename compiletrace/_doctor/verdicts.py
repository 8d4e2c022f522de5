"""How ``doctor --verify`` reads a fix's before and after: the verdict words, what a trial
must tell (:class:`Measured`), and the judgements rules share. Each rule with a fix that
applies from outside the program names its judge (``Rule.judge``); running the trials is
``compiletrace._app.verify``'s.

Frame compiles and findings are counts, the same on a busy machine as on an idle one: the
verdicts rest on them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from compiletrace._data.findings import Finding
from compiletrace._data.fixes import Fix
from compiletrace._doctor.shared import fix_of

__all__ = [
    "BROKE",
    "DID_NOT_HELP",
    "MANUAL",
    "PARTLY",
    "VERIFIED",
    "Judge",
    "Measured",
    "by_counts",
    "recompiles_of",
    "regional_by_counts",
    "still_there",
]

VERIFIED = "verified"
DID_NOT_HELP = "did not help"
PARTLY = "helped in part"
BROKE = "broke the program"
MANUAL = "cannot be applied automatically"


class Measured(Protocol):
    """One run of the program (with no fix, or with one), as the judges read it."""

    @property
    def fix(self) -> str | None:
        """The fix this run was made with (None: the baseline)."""
        ...

    @property
    def exit_status(self) -> int: ...

    @property
    def refused_after_ready(self) -> bool:
        """Whether torch's stance refused a compile after ready (run --apply fail-after-ready)."""
        ...

    @property
    def frame_compiles(self) -> int: ...

    @property
    def graph_nodes(self) -> int:
        """Nodes of every graph compiled: what Dynamo traced, as a count."""
        ...

    @property
    def recompile_limit_hit(self) -> bool:
        """Whether any code hit torch's recompile limit (and runs eagerly)."""
        ...

    @property
    def findings(self) -> Sequence[Finding]: ...


Judge = Callable[[Finding, Measured, Measured], str]  # (finding, before, after) -> a verdict


def _identity(f: Finding) -> tuple[str, str, str]:
    return (f.kind.value, f.component, f.location)


def still_there(finding: Finding, after: Measured) -> Finding | None:
    """The finding as the run with the fix found it again (same kind, component and place)."""
    return next((f for f in after.findings if _identity(f) == _identity(finding)), None)


def recompiles_of(finding: Finding) -> int:
    """How many compiles a finding counts (its compile ids)."""
    found = finding.evidence.get("compile_ids")
    return len(found) if isinstance(found, list) else 0


def by_counts(finding: Finding, before: Measured, after: Measured, *, nodes_count: bool = False) -> str:
    """The judgement most fixes get: verified when the finding is gone and fewer frames
    compiled, with no code left running eagerly that compiled before. ``nodes_count``: a
    fix that compiles a block's frame in place of the model's (regional compilation) is
    verified by fewer graph nodes in no more frames, too."""
    if still_there(finding, after) is not None:
        return DID_NOT_HELP
    if after.recompile_limit_hit and not before.recompile_limit_hit:
        return DID_NOT_HELP  # the fix left code running eagerly that compiled before
    if after.frame_compiles < before.frame_compiles:
        return VERIFIED
    fewer_nodes = after.graph_nodes < before.graph_nodes and after.frame_compiles <= before.frame_compiles
    return VERIFIED if nodes_count and fewer_nodes else DID_NOT_HELP


def regional_by_counts(finding: Finding, before: Measured, after: Measured) -> str:
    """:func:`by_counts`; and for regional compilation, which compiles the block's one frame
    in place of the model's, fewer graph nodes in no more frames (the block's code traced
    once instead of once per block)."""
    fix = fix_of(finding)
    return by_counts(finding, before, after, nodes_count=fix is not None and fix[0] is Fix.REGIONAL_COMPILE)
