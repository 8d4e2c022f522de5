"""``nothing_compiled``: frames compiled and no graph came of them (0 nodes everywhere), so
the code ran uncompiled: a whole process, or components of one. It comes first in the
list, with the cause torch gave (the first break of each frame) and the known fix, and the
graph-break findings it explains fold under it.

``torch.compile(DDP(model))`` is the case met most: Dynamo does not trace
DistributedDataParallel's forward (it marks its ``_inside_ddp_forward`` skipped), and when
the model inside is torch's own (``nn.Sequential``) it compiles no frame of its own: every
frame breaks, nothing compiles. With a model class of the user's, the model compiles as a
frame of its own beside DDP's empty frames, traced for nothing on every rank. The fix in
both: compile the model inside DDP, ``DDP(torch.compile(model))``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.fixes import Fix
from compiletrace._data.records import CompileStatus, GraphRecord
from compiletrace._data.torch_text import BREAK_ITEM, DDP_BREAK, DDP_CLASS
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.rules.graph_break import break_summary, recorded_break_auto_fix, recorded_break_fix
from compiletrace._doctor.shared import AUTO_FIX, MAX_EXAMPLES
from compiletrace._doctor.verdicts import DID_NOT_HELP, VERIFIED, Measured, still_there

KIND = FindingKind.NOTHING_COMPILED
FIXES = (Fix.CAPTURE_SCALAR_OUTPUTS, Fix.REORDERABLE_PRINT)

RAN_UNCOMPILED = "ran_uncompiled"  # evidence: the code ran uncompiled (not DDP's wrapper beside a model)

_DDP_FIX = (
    "compile the model inside DDP instead of DDP itself: DDP(torch.compile(model)) (Dynamo does "
    "not trace DistributedDataParallel's forward; with the model compiled inside, DDP's hooks run "
    "around the compiled graph)"
)


def _empty(r: GraphRecord) -> bool:
    """A frame that compiled no graph and ran on: not one past the recompile limit (its own
    finding), nor one whose compile raised (the program saw the error: a fullgraph compile
    that broke is the graph-break finding's ``failed to compile``)."""
    return r.graph_node_count == 0 and not r.recompile_limit_hit and r.status is not CompileStatus.ERROR


def _ddp(records: Sequence[GraphRecord]) -> bool:
    return any(
        r.module_class == DDP_CLASS or any(DDP_BREAK.search(b.reason) for b in r.graph_breaks)
        for r in records
    )


def _causes(records: Sequence[GraphRecord]) -> list[dict[str, str]]:
    """The first break of each frame, as torch gave it: the cause."""
    causes = []
    for r in records:
        if r.graph_breaks:
            b = r.graph_breaks[0]
            causes.append(
                {
                    "frame": f"{r.compile_id} {r.code_name}",
                    "location": b.location,
                    "reason": break_summary(b.reason),
                }
            )
    return causes[:MAX_EXAMPLES]


def _auto_fix(records: Sequence[GraphRecord]) -> Fix | None:
    """The fix of the breaks that left the frames empty, where one applies from outside (not
    for a scalar the code then branches on)."""
    for r in records:
        for b in r.graph_breaks:
            if BREAK_ITEM.search(b.reason) and b.scalar_in_branch:
                return None  # the branch would break it again, whatever else is fixed
            fix = recorded_break_auto_fix(b)
            if fix is not None:
                return fix
    return None


def check(evidence: Evidence) -> Iterator[Finding]:
    records = evidence.records
    if not records:
        return
    by_component = shared.group(records, lambda r: r.component)
    empty = {name: group for name, group in by_component.items() if all(map(_empty, group))}
    if not empty:
        return
    everything = len(empty) == len(by_component)
    frames = [r for group in empty.values() for r in group]
    ddp = _ddp(frames)
    units: list[tuple[str, Sequence[GraphRecord]]]
    if ddp:
        units = [("", frames)]  # DDP's frames are one thing: its wrapper
    elif everything:
        units = [("", records)]
    else:
        units = list(empty.items())
    for component, group in units:
        yield _finding(component, group, ddp=ddp, everything=everything)


def _finding(component: str, group: Sequence[GraphRecord], *, ddp: bool, everything: bool) -> Finding:
    causes = _causes(group)
    n = f"{len(group)} frame{'s' if len(group) != 1 else ''}"
    if ddp and everything:
        title = (
            f"torch.compile(DDP(model)) compiled nothing: {n}, no graph; the model ran uncompiled "
            "(Dynamo does not trace DDP's forward, and a model of torch's own, such as nn.Sequential, "
            "compiles no frame of its own)"
        )
        fix = _DDP_FIX
    elif ddp:
        title = (
            f"torch.compile(DDP(model)) traced DDP's wrapper for nothing: {n} of DDP's compiled no "
            "graph beside the model's"
        )
        fix = _DDP_FIX
    else:
        where = "this process" if everything else component
        first = causes[0]["reason"] if causes else "torch gave no break"
        title = f"nothing compiled in {where}: {n}, no graph; the code ran uncompiled ({first})"
        fixes = list(dict.fromkeys(recorded_break_fix(b).rstrip(". ") for r in group for b in r.graph_breaks))
        fix = "; ".join(fixes) if fixes else "see the frames' graph breaks (TORCH_LOGS=graph_breaks)"
    auto_fix = None if ddp else _auto_fix(group)
    return Finding(
        KIND,
        component,
        shared.seconds(group),
        title,
        fix,
        next((c["location"] for c in causes if c["location"]), shared.model_location(group[0])),
        {
            "compile_ids": shared.ids(group),
            "frames": shared.frames_of(group)[: MAX_EXAMPLES * 4],
            "causes": causes,
            "ddp": ddp,
            RAN_UNCOMPILED: everything or not ddp,
            **({AUTO_FIX: auto_fix.spelled()} if auto_fix else {}),
        },
    )


def seconds_judged(finding: Finding) -> bool:
    """DDP's wrapper traced beside a model that compiled: its fix saves seconds, and is
    judged by them; code that ran uncompiled compiles with its fix, which costs seconds."""
    return finding.evidence.get(RAN_UNCOMPILED) is False


def judge(finding: Finding, before: Measured, after: Measured) -> str:
    """Verified when the finding is gone and graphs compiled: the code runs compiled now
    (more frames, more seconds, by design)."""
    if still_there(finding, after) is not None or not after.graph_nodes:
        return DID_NOT_HELP
    return VERIFIED


RULE = Rule(KIND, check, FIXES, judge, explains_others=True, seconds_judged=seconds_judged)
