"""``compile_after_ready``: something compiled after the program said it was ready to serve
(``compiletrace run --ready``, ``compiletrace.ready()``, or the end of its warm-up): a new
function, a recompile, a lazy backward, a CUDA-graph recording or a runtime autotune, each a
latency spike a request paid. One finding per compiled function and kind, with what
triggered it, the seconds it added, and its fix.

Frames compiled after ``compiletrace.warm_up`` returned are the ``compile_after_warmup``
rule's (their records say so); this rule adds the rest: the ready marks of programs that do
not use ``warm_up``, lazy backwards and the work on graphs' first calls.

Its fix that applies with no edit is torch's stance at the ready mark: ``eager-after-ready``
(a call that would compile runs eagerly: no spike, an uncompiled call, so ``doctor
--verify`` says "runs uncompiled" of it, never "verified") and, as a gate,
``fail-after-ready`` (the call raises at the compile: "gate held", apart from the fixes).

What it puts at stake, it claims before every other rule: each compile after ready (a lazy
backward: the record's backward part; a recompile or a new frame: its frame part), the
latency a request paid, which its fix (that compile in the warm-up) removes from the
request; the ``recompiles`` finding keeps the rest (a static graph that marking a size
dynamic would never compile).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.fixes import Fix
from compiletrace._data.ready import LAZY_BACKWARD, NEW_FRAME, RECOMPILE, AfterReady, after_ready
from compiletrace._data.records import AUTOTUNE, CUDAGRAPH, GraphRecord
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.guards import guards_by_kind
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.stake import Claim
from compiletrace._doctor.verdicts import BROKE, DID_NOT_HELP, GATE_HELD, UNCOMPILED, Measured, still_there

KIND = FindingKind.COMPILE_AFTER_READY

_WHAT = {
    NEW_FRAME: "compiled for the first time",
    RECOMPILE: "recompiled",
    LAZY_BACKWARD: "compiled its backward",
    CUDAGRAPH: "recorded a CUDA graph",
    AUTOTUNE: "autotuned its kernels",
}


def _fix(kind: str, code_name: str, records: Sequence[GraphRecord]) -> str:
    if kind == RECOMPILE:
        _, guard_fixes = guards_by_kind(records) if records else ({}, "")
        if guard_fixes:
            return f"{guard_fixes}; or warm up with that shape, dtype and mode"
        return "warm up with every shape, dtype and mode serving sees"
    if kind == NEW_FRAME:
        return f"call {code_name} in the warm-up, with the shapes serving sees"
    if kind == LAZY_BACKWARD:
        return (
            "run one .backward() in the warm-up (a warm AOTAutograd cache also loads the backward "
            "with the forward)"
        )
    if kind == CUDAGRAPH:
        return (
            "call each mode='reduce-overhead' graph twice per shape in the warm-up (CUDA-graph trees "
            "record on the second call)"
        )
    return "keep the autotune cache between starts (inductor's autotune_local_cache), or warm up that shape"


def check(evidence: Evidence) -> Iterator[Finding]:
    late = after_ready(evidence.records, evidence.runtime, evidence.phases, evidence.ready)
    if not late or evidence.ready is None:
        return
    warmed = {r.compile_id for r in evidence.records if r.after_warmup}
    # A compile is named by the model's function it belongs to, as the recompiles rule names
    # it (LlamaForCausalLM.forward at its own line), never a library's wrapper around it.
    owner_of = dict(zip((r.compile_id for r in evidence.records), evidence.owners, strict=True))
    groups: dict[tuple[str, str, str, str], list[AfterReady]] = {}
    for event in late:
        if event.kind in (NEW_FRAME, RECOMPILE) and event.compile_id in warmed:
            continue  # compile_after_warmup names it
        # (work on a compiled graph's calls, an autotune or a CUDA-graph recording, keeps the
        # kernel or graph it names)
        compiled = event.kind in (NEW_FRAME, RECOMPILE, LAZY_BACKWARD)
        owner = owner_of.get(event.compile_id) if compiled else None
        name, where = (owner[2], shared.located(owner)) if owner else (event.code_name, event.location)
        groups.setdefault((event.kind, event.component, name, where), []).append(event)
    by_id = {r.compile_id: r for r in evidence.records}
    mark = evidence.ready
    for (kind, component, code_name, location), events in groups.items():
        records = [by_id[e.compile_id] for e in events if e.compile_id in by_id]
        seconds = sum(e.seconds for e in events)
        triggers = shared.unique(e.trigger for e in events)
        what = code_name or "a graph"
        where = f" ({location})" if location else ""
        evidence_dict: dict[str, object] = {
            "compile_ids": shared.unique((e.compile_id for e in events), limit=20),
            "kind": kind,
            "triggers": triggers,
            "ready": mark.to_dict(),
            "after_ready_s": [round((e.start_unix_ns - mark.unix_ns) / 1e9, 3) for e in events[:20]],
        }
        if kind in (NEW_FRAME, RECOMPILE):
            evidence_dict[shared.AUTO_FIX] = Fix.EAGER_AFTER_READY.value
            evidence_dict[shared.GATE_FIX] = Fix.FAIL_AFTER_READY.value
        yield Finding(
            KIND,
            component,
            seconds,
            f"{what}{where} {_WHAT.get(kind, kind)} {shared.times(len(events))} after ready "
            f"({mark.described}): {triggers[0]}",
            _fix(kind, what, records),
            location,
            evidence_dict,
        )


def judge(finding: Finding, before: Measured, after: Measured) -> str:
    """``eager-after-ready``: "runs uncompiled" when the finding is gone, fewer frames
    compiled and the program ended alike: the calls that would have compiled ran eagerly,
    unseen (no spike, an uncompiled call: never "verified"). ``fail-after-ready``: "gate
    held" when the program stopped at a compile torch refused (a gate, not a fix: its run
    ends otherwise, as it should, and saves no seconds)."""
    if after.fix == Fix.FAIL_AFTER_READY.value:
        return GATE_HELD if after.refused_after_ready else DID_NOT_HELP
    if after.exit_status != before.exit_status:
        return BROKE
    if still_there(finding, after) is None and after.frame_compiles < before.frame_compiles:
        return UNCOMPILED
    return DID_NOT_HELP


def claims(finding: Finding, evidence: Evidence) -> list[Claim] | None:
    """Each compile after ready the finding names, the part of its record that compiled after
    ready (a lazy backward's, a frame's). A finding of no record (a CUDA-graph recording, an
    autotune) keeps its seconds."""
    kind = finding.evidence.get("kind")
    if kind not in (NEW_FRAME, RECOMPILE, LAZY_BACKWARD):
        return None
    ids = finding.evidence.get("compile_ids")
    wanted = {str(i) for i in ids} if isinstance(ids, list) else set()
    found = []
    for r in evidence.records:
        if r.compile_id not in wanted or r.total_ns <= 0:
            continue
        part = r.backward_ns if kind == LAZY_BACKWARD else r.frame_ns
        found.append(Claim(r, min(part / r.total_ns, 1.0)))
    return found


RULE = Rule(
    KIND,
    check,
    (Fix.EAGER_AFTER_READY, Fix.FAIL_AFTER_READY),
    judge,
    claims,
    reads_exit_status=True,
    claims_first=True,
)
