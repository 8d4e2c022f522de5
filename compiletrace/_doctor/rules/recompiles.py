"""``recompiles``: a function compiled again because a guard failed, its failed guards
grouped by kind, each kind with its fix; per user function (its resume functions after a
graph break included). Frames past torch's recompile limit are ``recompile_limit``'s.

What its fix can save is read from torch's own sizes and its automatic-dynamic state, not
from the count of recompiles:

- a size that changed (N -> M): torch compiles the recompile dynamic in that one dimension;
  marking it dynamic before the first call (``mark-dynamic``, with the inputs and dimensions
  torch made dynamic) saves the static graph the guard failed against, and no more;
- a new size after a size-1 graph (1 -> N: generate's next prompt against the decode step's
  graph): the same fix saves the earlier static graph of that input (the first prefill);
- a size torch specialises (N -> 1: prefill then decode), a cache's flag, a relation between
  sizes already dynamic, a decorator's own arguments: nothing a setting removes;
- a value, an object, a dtype, the grad mode, a backend: the recompile itself, once its
  cause is fixed in the code; at stake only where the finding's first fix is that edit (where
  it is marking a dimension dynamic, the stake is what marking saves).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.fixes import Fix, apply_line
from compiletrace._data.torch_text import GUARD_POSITIONAL_COUNT, GUARDED_ARGUMENT, GUARDED_POSITIONAL
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.guards import (
    GuardKind,
    by_commonest_kind,
    classify_guard,
    compiled_static,
    guard_auto_fix,
    guard_text,
    guards_by_kind,
    mark_dynamic_entries,
    reading,
    superseded,
    unnamed_sources,
)
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.shared import AUTO_FIX, OTHER_FIXES, UNNAMED
from compiletrace._doctor.stake import Claim, named_records
from compiletrace._doctor.verdicts import PARTLY, Measured, by_counts, recompiles_of, still_there

__all__ = ["RULE"]

KIND = FindingKind.RECOMPILES
MAX_IN_CODE = 2  # the inputs a fix spells out as code (the rest: the same call)
FIXES = (Fix.MARK_DYNAMIC, Fix.DYNAMIC_SHAPES, Fix.STATIC_CACHE, Fix.CAPTURE_SCALAR_OUTPUTS)
# Guards whose recompile goes once the code's cause is fixed (a value held in a tensor, one
# object passed, one dtype): the recompile itself is what the fix saves.
_REMOVABLE = frozenset(
    {
        GuardKind.VALUE,
        GuardKind.IDENTITY,
        GuardKind.DTYPE_DEVICE,
        GuardKind.GRAD_MODE,
        GuardKind.BACKEND,
        GuardKind.SYMBOLIC,
        GuardKind.OTHER,
    }
)


def check(evidence: Evidence) -> Iterator[Finding]:
    recompiled = evidence.by_owner(lambda r: r.is_recompile and not r.recompile_limit_hit)
    every = evidence.by_owner()
    for owner, group in recompiled.items():
        guards, fix = guards_by_kind(group)
        spent = every[owner]
        saved = superseded(spent)
        entries = mark_dynamic_entries(spent) if saved else []
        unnamed = unnamed_sources(spent) if saved else []
        # The commonest cause's fix that applies from outside, when one does.
        auto_fix = next(
            (f for r in by_commonest_kind(group) if (f := guard_auto_fix(r.recompile_reason))), None
        )
        spelled: str | None = None
        if entries:
            spelled = Fix.MARK_DYNAMIC.spelled(",".join(entries))  # each entry checked: a source
            rest = [r for r in group if guard_auto_fix(r.recompile_reason) is not Fix.MARK_DYNAMIC]
            # The names a decorator's *args stand for, from the compiled method's signature.
            arg_names = next((r.arg_names for r in spent if r.arg_names), ())
            fix = _mark_dynamic_fix(entries, spelled, arg_names, compiled_static(spent)) + (
                f"; {guards_by_kind(rest)[1]}" if rest else ""
            )
        elif auto_fix is not None and auto_fix is not Fix.MARK_DYNAMIC:
            spelled = auto_fix.spelled()
        shapes = any(classify_guard(r.recompile_reason) is GuardKind.SHAPE for r in group)
        grows = any(reading(r.recompile_reason) == "the generation cache grew" for r in group)
        others = [Fix.DYNAMIC_SHAPES.spelled()] if shapes else []
        others += [Fix.STATIC_CACHE.spelled()] if grows else []
        readings = Counter(reading(r.recompile_reason) for r in by_commonest_kind(group))
        kinds = ", ".join(f"{what} ({n})" for what, n in readings.items())
        yield Finding(
            KIND,
            owner[0],
            shared.seconds(group),
            f"{owner[2]}{shared.at(group)} recompiled {shared.times(len(group))}: {kinds}",
            fix,
            shared.located(owner),
            {
                "compile_ids": shared.ids(group),
                "frames": shared.frames_of(group),
                "modules": shared.modules(group),
                "guards": guards,
                "superseded": [{"static": s.compile_id, "by": r.compile_id} for s, r in saved],
                **({"dynamic_sources": entries} if entries else {}),
                **({UNNAMED: unnamed} if unnamed else {}),
                **({AUTO_FIX: spelled} if spelled else {}),
                "readings": {r.compile_id: reading(r.recompile_reason) for r in group},
                **({OTHER_FIXES: others} if others and entries else {}),
            },
        )


def _in_code(entry: str, arg_names: Sequence[str] = ()) -> str:
    """``torch._dynamo.maybe_mark_dynamic(input_ids, 1)`` for ``L['kwargs']['input_ids']:1``;
    a decorator's ``L['args'][0]:0`` by the name of the parameter it stands for.

    >>> _in_code("L['args'][0]:0", ("pixel_values",))
    'torch._dynamo.maybe_mark_dynamic(pixel_values, 0)'
    """
    source, _, dim = entry.rpartition(":")
    positional = GUARDED_POSITIONAL.fullmatch(source)
    if positional is not None and int(positional[1]) < len(arg_names):
        return f"torch._dynamo.maybe_mark_dynamic({arg_names[int(positional[1])]}, {dim})"
    named = None if positional is not None else GUARDED_ARGUMENT.match(source)
    return f"torch._dynamo.maybe_mark_dynamic({named[1] if named else 'tensor'}, {dim})"


def _mark_dynamic_fix(
    entries: list[str], spelled: str, arg_names: Sequence[str] = (), static: bool = False
) -> str:
    names = ", ".join(entries)
    in_code = ", ".join(dict.fromkeys(_in_code(e, arg_names) for e in entries[:MAX_IN_CODE]))
    what = (
        f"under dynamic=False torch compiled a static graph for each size of {names}, never one dynamic"
        if static
        else f"torch compiled {names} dynamic on the recompile"
    )
    return (
        f"{what}: mark {'them' if len(entries) > 1 else 'it'} "
        "dynamic before the first call and the static graph before is never compiled, from outside "
        f"the program: {apply_line([spelled])} (in code, before the first call: "
        f"{in_code}, or the same names in TORCH_COMPILE_DYNAMIC_SOURCES); dynamic=True would make "
        "every other dimension and every float of every module dynamic too, which costs more"
    )


def claims(finding: Finding, evidence: Evidence) -> list[Claim]:
    """What the finding's first fix saves, whole. Marking the dimensions dynamic (its fix
    wherever torch made a size dynamic): the static graphs it would never compile, and
    nothing of the recompiles it leaves (a relation between sizes, a value: an edit removes
    those, and the finding's fix says how). With no such fix: those static graphs and the
    recompiles whose cause a code change removes (a value, an object, a call made the same
    way each time)."""
    named = named_records(finding, evidence)
    spent = evidence.first_group(named)
    statics = [static for static, _ in superseded(spent)]
    if finding.evidence.get("dynamic_sources"):  # the first fix marks them dynamic
        return [Claim(r, 1.0) for r in dict.fromkeys(statics)]
    removable = [
        r
        for r in named
        if classify_guard(r.recompile_reason) in _REMOVABLE
        or GUARD_POSITIONAL_COUNT.search(guard_text(r.recompile_reason))
    ]
    return [Claim(r, 1.0) for r in dict.fromkeys([*statics, *removable])]


def judge(finding: Finding, before: Measured, after: Measured) -> str:
    """By counts; and "helped in part" when the finding is still there with fewer
    recompiles and the program compiled fewer frames (a static cache removes the growing
    cache's recompile, not a flag's)."""
    still = still_there(finding, after)
    fewer = still is not None and recompiles_of(still) < recompiles_of(finding)
    if fewer and after.frame_compiles < before.frame_compiles:
        return PARTLY
    return by_counts(finding, before, after)


RULE = Rule(KIND, check, FIXES, judge, claims)
