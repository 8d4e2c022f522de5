"""``costly_trace``: in a run recorded with ``trace_cost``, the user function whose own body
held much of its component's Dynamo time; a block's forward traced once per call gets
``run --apply regional-compile=CLASS``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.fixes import Fix
from compiletrace._data.records import NS_PER_S, TRACE_OTHER, TraceNode, walk_trace
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.shared import AUTO_FIX
from compiletrace._doctor.verdicts import regional_by_counts

KIND = FindingKind.COSTLY_TRACE
FIXES = (Fix.REGIONAL_COMPILE,)

# A traced function is a finding when its own body (not the functions it calls) holds this
# much of its component's Dynamo time. Ranked by self time: by inclusive time, the wrappers a
# library puts around every forward (and the forward itself) would always win, and moving a
# wrapper out of the graph would make the whole model eager.
COSTLY_TRACE_SHARE = 0.25
COSTLY_TRACE_MIN_S = 0.1
REPEATED_CALLS = 4  # a function traced this many times or more in one compile is a repeated block


def _function_costs(roots: Sequence[TraceNode]) -> dict[tuple[str, str], list[int]]:
    """(name, location) -> [self ns, total ns, calls] of every function below the frames'
    own. Self time is exclusive, so a recursive call adds its own; the total counts a call
    nested in a call of the same function once."""
    costs: dict[tuple[str, str], list[int]] = {}
    for path in walk_trace(roots):
        node = path[-1]
        key = (node.name, node.location)
        if len(path) == 1:
            continue  # the frame's own function: it cannot be hoisted out of itself
        entry = costs.setdefault(key, [0, 0, 0])
        entry[0] += node.self_ns
        entry[2] += node.calls
        if not any((p.name, p.location) == key for p in path[:-1]):
            entry[1] += node.total_ns
    return costs


def _costly_trace_fix(calls: int) -> str:
    if calls >= REPEATED_CALLS:
        return (
            f"Dynamo traces it {calls} times in one compile, once per call: compile the repeated "
            "block it belongs to regionally (torch.compile each block, so its code is traced once "
            "and reused), or hoist it out of the compiled region"
        )
    return (
        "the time is in its own code, not in the functions it calls: a Python loop, which Dynamo "
        "unrolls, or many small tensor operations. Simplify or vectorise it, hoist what does not "
        "depend on the inputs out of the compiled region (precompute it), or mark it "
        "torch.compiler.disable if it need not be in the graph (it then runs eagerly, with a graph "
        "break on each side)"
    )


def _block_of(function: str, calls: int) -> str | None:
    """The block class whose forward Dynamo traced once per call (``Block.forward`` traced
    ``calls`` times): what compiling regionally compiles on its own."""
    owner, _, method = function.rpartition(".")
    if calls < REPEATED_CALLS or method != "forward" or not owner.isidentifier():
        return None
    return owner


def check(evidence: Evidence) -> Iterator[Finding]:
    components = dict.fromkeys(r.component for r in evidence.records if r.trace_cost)
    for component in components:
        group = [r for r in evidence.records if r.component == component and r.trace_cost]
        roots = [n for r in group for n in r.trace_cost]
        dynamo = sum(n.total_ns for n in roots)
        costs = _function_costs([n for n in roots if n.name != TRACE_OTHER])
        if not costs or not dynamo:
            continue
        (name, location), (self_ns, total, calls) = max(costs.items(), key=lambda kv: kv[1][0])
        if self_ns < COSTLY_TRACE_SHARE * dynamo or self_ns < COSTLY_TRACE_MIN_S * NS_PER_S:
            continue
        share = self_ns / dynamo
        times = f" over {calls} calls" if calls > 1 else ""
        block = _block_of(name, calls)
        auto_fix = Fix.REGIONAL_COMPILE.offered(block) if block else None  # a class name, checked
        yield Finding(
            KIND,
            component,
            self_ns / NS_PER_S,
            f"Dynamo spent {self_ns / NS_PER_S:.2f} s ({share:.0%} of {component}'s Dynamo time) "
            f"tracing the body of {name}{times}",
            _costly_trace_fix(calls),
            location,
            {
                "function": name,
                "self_s": self_ns / NS_PER_S,
                "total_s": total / NS_PER_S,
                "calls": calls,
                "share": round(share, 4),
                "compile_ids": shared.ids(group),
                **({AUTO_FIX: auto_fix} if auto_fix else {}),
            },
        )


RULE = Rule(KIND, check, FIXES, regional_by_counts)
