"""Failed guards (torch's recompile reasons): what each was about (:class:`GuardKind`), the
concrete change that removes it, and the fix that applies it from outside the program. Read
by the rules on recompiles, the recompile limit and compiles after a warm-up; torch's
wording of a guard is :mod:`compiletrace._data.torch_text`'s.

>>> classify_guard("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3").value
'tensor shape/stride'
>>> guard_auto_fix("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3")
<Fix.MARK_DYNAMIC: 'mark-dynamic'>
>>> size_change("tensor 'kwargs['input_ids']' size mismatch at index 1. expected 1, actual 9").kind.value
'a new size after a size-1 graph'
"""

from __future__ import annotations

import enum
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

from compiletrace._data.fixes import Fix, is_dynamic_source
from compiletrace._data.records import GraphRecord
from compiletrace._data.torch_text import (
    GUARD_BACKEND,
    GUARD_DTYPE_DEVICE,
    GUARD_ENTRY_PREFIX,
    GUARD_GRAD_MODE,
    GUARD_IDENTITY,
    GUARD_POSITIONAL_COUNT,
    GUARD_SHAPE,
    GUARD_SOURCE_COMMENT,
    GUARD_SYMBOLIC,
    GUARD_VALUE,
    GUARD_WRAPPED_FUNCTION,
    GUARDED_ARGUMENT,
    GUARDED_POSITIONAL,
    KWARGS_COUNT_GUARD,
    NUMBER_CONSTANT,
    SIZE_MISMATCH,
    STACK_VALUE,
    STRING_CONSTANT,
    VALUE_COMPARISON,
)
from compiletrace._doctor.shared import group, unique

__all__ = [
    "MAX_FIXES_PER_KIND",
    "GuardKind",
    "SizeChange",
    "SizeChangeKind",
    "by_commonest_kind",
    "classify_guard",
    "compiled_static",
    "guard_auto_fix",
    "guard_fix",
    "guard_source",
    "guard_text",
    "guards_by_kind",
    "mark_dynamic_entries",
    "reading",
    "size_change",
    "superseded",
    "unnamed_sources",
]


class GuardKind(str, enum.Enum):
    """What a failed guard (torch's recompile reason) was about."""

    SHAPE = "tensor shape/stride"
    DTYPE_DEVICE = "dtype/device"
    VALUE = "Python value or constant"
    IDENTITY = "object identity"
    GRAD_MODE = "grad mode"
    BACKEND = "backend mismatch"
    CACHE_STATE = "generation cache state"  # a library's KV cache: its shapes and flags
    SYMBOLIC = "relation between dynamic sizes"  # a size already dynamic: a branch on it changed
    WRAPPER = "a decorator's own arguments"  # the function it wraps, how it was called
    OTHER = "other"


# A generation cache passed to the compiled forward (transformers' DynamicCache and its
# layers, past_key_values): its tensors grow every step and its flags flip as it fills. The
# names are the library's, not torch's.
_CACHE_STATE = re.compile(
    r"past_key_values|cache_params|\bcache\b|key_cache|value_cache|is_initialized|is_updated"
)
_CACHE_FLAG = re.compile(r"is_updated|is_initialized")
# Kinds in the order they are tried: the first whose pattern the guard matches.
_GUARD_RULES: tuple[tuple[GuardKind, re.Pattern[str]], ...] = (
    (GuardKind.BACKEND, GUARD_BACKEND),
    (GuardKind.GRAD_MODE, GUARD_GRAD_MODE),
    (GuardKind.WRAPPER, GUARD_WRAPPED_FUNCTION),
    (GuardKind.WRAPPER, GUARD_POSITIONAL_COUNT),
    (GuardKind.CACHE_STATE, _CACHE_STATE),
    (GuardKind.SYMBOLIC, GUARD_SYMBOLIC),
    (GuardKind.SHAPE, GUARD_SHAPE),
    (GuardKind.DTYPE_DEVICE, GUARD_DTYPE_DEVICE),
    (GuardKind.IDENTITY, GUARD_IDENTITY),
    (GuardKind.VALUE, GUARD_VALUE),
)
SPECIALISED_SIZES = {"0", "1"}  # sizes torch specialises even with dynamic=True


class SizeChangeKind(str, enum.Enum):
    """What a static size guard's failure was, read from the sizes torch gives."""

    CHANGED = "a size changed"  # N -> M, both above 1: torch compiles it dynamic on the recompile
    TO_SPECIALISED = "a size torch specialises"  # N -> 0 or 1: prefill then decode, a batch of 1
    FROM_SPECIALISED = "a new size after a size-1 graph"  # 1 -> N: generate's next prompt, say


class SizeChange(NamedTuple):
    """A failed static size guard: the tensor (as the guard names it and as torch's sources
    do), the dimension, and the sizes the entry had and the call brought (None: not given)."""

    name: str  # "kwargs['input_ids']"
    dim: int
    expected: int | None
    actual: int | None

    @property
    def kind(self) -> SizeChangeKind:
        if self.actual is not None and str(self.actual) in SPECIALISED_SIZES:
            return SizeChangeKind.TO_SPECIALISED
        if self.expected is not None and str(self.expected) in SPECIALISED_SIZES:
            return SizeChangeKind.FROM_SPECIALISED
        return SizeChangeKind.CHANGED

    @property
    def source(self) -> str:
        """The tensor's dimension as torch's sources name it (``L['kwargs']['input_ids']:1``):
        what ``mark-dynamic`` takes. torch writes a guard's names with its local scope
        stripped (``L['x']`` as ``x``); globals keep theirs."""
        return f"{guard_source(self.name)}:{self.dim}"


def reading(reason: str | None) -> str:
    """What a failed guard says happened, in a few words: for a size, which of the three
    (a size changed, one torch specialises, a new size after a size-1 graph) or a growing
    cache; else its kind.

    >>> reading("0/3: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 1, actual 9")
    'a new size after a size-1 graph'
    >>> reading("0/2: tensor 'kwargs['cache'].layers[0].keys' size mismatch at index 2. expected 5, actual 6")
    'the generation cache grew'
    """
    kind = classify_guard(reason)
    change = size_change(reason)
    if change is None or kind not in (GuardKind.SHAPE, GuardKind.CACHE_STATE):
        return kind.value
    if kind is GuardKind.CACHE_STATE and change.kind is not SizeChangeKind.TO_SPECIALISED:
        return "the generation cache grew"
    return change.kind.value


def guard_source(name: str) -> str:
    """A name as a guard writes it, as torch's sources do.

    >>> guard_source("kwargs['input_ids']"), guard_source("x"), guard_source("L['x']")
    ("L['kwargs']['input_ids']", "L['x']", "L['x']")
    """
    if name.startswith(("L[", "G[")):
        return name
    head = re.match(r"^([A-Za-z_]\w*)(.*)$", name, re.S)
    return name if head is None else f"L['{head[1]}']{head[2]}"


def size_change(reason: str | None) -> SizeChange | None:
    """The failed static size guard of a recompile reason, if that is what it is."""
    size = SIZE_MISMATCH.search(guard_text(reason))
    if size is None:
        return None
    return SizeChange(
        size[1],
        int(size[2]),
        None if size[3] is None else int(size[3]),
        None if size[4] is None else int(size[4]),
    )


MAX_FIXES_PER_KIND = 3  # distinct fixes one kind of guard gets (one per tensor or flag seen)


def _break_number(text: str) -> bool:
    """Whether a guard's text compares a resume function's stack value with a number."""
    value = VALUE_COMPARISON.match(text)
    return (
        value is not None
        and bool(STACK_VALUE.match(value[1]))
        and bool(NUMBER_CONSTANT.match(value[2].strip()))
    )


def guard_text(reason: str | None) -> str:
    """The failed guard itself: torch's first reason line without its ``"0/1: "`` prefix.

    >>> guard_text("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3\\nUser stack ...")
    "tensor 'x' size mismatch at index 0. expected 2, actual 3"
    """
    lines = (reason or "").strip().splitlines()
    return GUARD_SOURCE_COMMENT.sub("", GUARD_ENTRY_PREFIX.sub("", lines[0])).strip() if lines else ""


def _argument(expr: str, arg_names: Sequence[str] = ()) -> str:
    """The name a user knows a guarded argument by: ``kwargs['input_ids']`` is ``input_ids``;
    a decorator's ``args[0]`` is the parameter of the method it wraps (``arg_names``, kept in
    the record), where known.

    >>> _argument("L['kwargs']['attention_mask']"), _argument("L['self'].step")
    ('attention_mask', 'self.step')
    >>> _argument("args[0]", ("pixel_values",)), _argument("L['args'][1]", ("pixel_values",))
    ('pixel_values', 'args[1]')
    """
    positional = GUARDED_POSITIONAL.match(expr)
    if positional is not None and int(positional[1]) < len(arg_names):
        return arg_names[int(positional[1])] + expr[positional.end() :]
    return GUARDED_ARGUMENT.sub(r"\1", expr)


def classify_guard(reason: str | None) -> GuardKind:
    """The kind of torch's recompile reason.

    >>> classify_guard("0/2: self.step == 2  # self.step += 1").value
    'Python value or constant'
    """
    text = guard_text(reason)
    for kind, pattern in _GUARD_RULES:
        if pattern.search(text):
            return kind
    return GuardKind.OTHER


def compiled_static(records: Sequence[GraphRecord]) -> bool:
    """Whether torch compiled these records' sizes static (``torch.compile(dynamic=False)``):
    it never makes a size dynamic on its own, so each new size is a static graph of its own."""
    return any(dict(r.settings).get("dynamic") == "False" for r in records)


def guard_fix(
    kind: GuardKind, reason: str | None = None, arg_names: Sequence[str] = (), *, static: bool = False
) -> str:
    """The concrete change for a failed guard of ``kind`` (naming the tensor, dimension or
    value from torch's reason where it gives them, by the user's names: ``arg_names``, what a
    decorator's ``*args`` stand for); ``static``: the code was compiled with
    ``dynamic=False`` (:func:`compiled_static`), so no recompile was compiled dynamic."""
    text = guard_text(reason)
    if kind is GuardKind.CACHE_STATE:
        return _cache_state_fix(text)
    if kind is GuardKind.SHAPE:
        size = SIZE_MISMATCH.search(text)
        if size is None:
            return (
                "compile with dynamic=True, or mark the changing dimension dynamic before the first "
                "call: torch._dynamo.mark_dynamic(t, dim)"
            )
        name, dim = _argument(size[1], arg_names), size[2]
        change = size_change(reason)
        assert change is not None
        if change.kind is SizeChangeKind.TO_SPECIALISED:
            return (
                f"{name} changed from size {size[3]} to {size[4]} in dimension {dim}, and torch "
                "specialises sizes 0 and 1 even with dynamic=True: no setting removes this "
                "recompile (it happens once per size-1 case, e.g. prefill then decode). Warm up with "
                "both sizes before timing matters, or, if the code never branches on that size, "
                f"torch._dynamo.mark_unbacked({name}, {dim}) drops the specialisation"
            )
        if change.kind is SizeChangeKind.FROM_SPECIALISED:
            return (
                f"{name} came with size {size[4]} in dimension {dim} after a graph compiled for size "
                f"{size[3]}: a new length (in generate, the next prompt's prefill checked against the "
                "decode step's graph), compiled dynamic in that dimension from here on. Mark the "
                "dimension dynamic before the first call (run --apply mark-dynamic, or "
                f"torch._dynamo.maybe_mark_dynamic({name}, {dim})) so every length shares one graph, "
                "or pad inputs to a few lengths"
            )
        what = (
            f"under dynamic=False torch compiled a static graph for each size of {name} in dimension "
            f"{dim}, never one dynamic"
            if static
            else f"torch compiled {name} dynamic in dimension {dim} on this recompile"
        )
        return (
            f"{what}: mark that dimension "
            "dynamic before the first call and the static graph before it is never compiled "
            f"(run --apply mark-dynamic, or torch._dynamo.maybe_mark_dynamic({name}, {dim})); "
            "dynamic=True also makes every other dimension and every float of every module dynamic, "
            "which costs more"
        )
    if kind is GuardKind.SYMBOLIC:
        return (
            "the size is dynamic already: the guard is a relation between sizes that the code "
            "branches on (the line after '#' in the reason), and torch compiles one graph per "
            "outcome; dynamic=True cannot remove it. Make the branch not depend on the size, or "
            "pad inputs to sizes where it holds"
        )
    if kind is GuardKind.WRAPPER:
        if GUARD_POSITIONAL_COUNT.search(text):
            return (
                "the compiled function is a decorator's wrapper, guarded on how many arguments came "
                "positionally: pass the inputs the same way on every call (by keyword, as a "
                "library's generate does)"
            )
        return (
            "the compiled code is a decorator's wrapper shared by every function it wraps (a "
            "library's decorator around each module's forward): each wrapped function is a graph "
            "of its own, as it should be; nothing in your code to change. To keep them apart, "
            "compile each module (torch.compile(module)) rather than a shared forward"
        )
    if kind is GuardKind.VALUE:
        if KWARGS_COUNT_GUARD.match(text):
            return (
                "the compiled function was called with another set of keyword arguments, and each "
                "set is its own graph: pass the same keywords on every call (None for unused ones); "
                "where a library makes the calls (generate's first step and the later ones), expect "
                "one compile per set"
            )
        if _break_number(text):
            return (
                "a number computed before a graph break (a .item()) is handed to the graph after it, "
                "which torch compiles for that one value: capture scalar outputs "
                "(torch._dynamo.config.capture_scalar_outputs = True), so the .item() stays in the "
                "graph and no value is baked in, or keep the value a tensor"
            )
        value = VALUE_COMPARISON.match(text)
        if value is not None and STRING_CONSTANT.match(value[2].strip()):
            return (
                f"{_argument(value[1])} is a string, and torch compiles one graph per string it sees: "
                "call the compiled code with one value, or compile one function per value (a string "
                "cannot become a graph input)"
            )
        name = f"{_argument(value[1])} changes" if value else "a Python value changes"
        return (
            f"{name} between calls and torch bakes it into the graph as a constant: hold it in a tensor "
            "(a registered buffer, or pass torch.tensor(value)) so it becomes a graph input"
        )
    if kind is GuardKind.IDENTITY:
        return (
            "pass the same object on every call (build modules and functions once, outside the "
            "compiled call), or pass tensors instead of objects"
        )
    if kind is GuardKind.DTYPE_DEVICE:
        return (
            "cast inputs to one dtype and device before the compiled call, or compile one model "
            "per dtype/device"
        )
    if kind is GuardKind.GRAD_MODE:
        return (
            "call the model under one grad mode (warm up under torch.no_grad() or torch.inference_mode() "
            "if that is how it serves), and keep the inputs' requires_grad the same"
        )
    if kind is GuardKind.BACKEND:
        return (
            "create the backend once and reuse it for every call of this model: a new backend object "
            "(compiletrace.compile or torch.compile called again) recompiles the same code"
        )
    return "make the guarded value the same on every call (TORCH_LOGS=recompiles prints every reason)"


def _cache_state_fix(text: str) -> str:
    size = SIZE_MISMATCH.search(text)
    if size is not None:
        return (
            f"{_argument(size[1])} grows by a step every call (a dynamic cache): torch compiles it "
            "dynamic after this one recompile; marking it dynamic before the first call (run --apply "
            "mark-dynamic) saves the static graph. A static cache "
            "(generate(..., cache_implementation='static')) keeps one shape, but generate's calls "
            "then differ in their keyword arguments and recompile on that"
        )
    if _CACHE_FLAG.search(text):
        return (
            "a flag of the cache flips once as it fills (the cross-attention cache after the first "
            "step, a layer on its first use): one recompile, once per process, that no setting "
            "removes from outside the model; warm up with one full call (a short generate) before "
            "timing matters"
        )
    return (
        "the guard reads the generation cache's Python state: generate with a static cache "
        "(cache_implementation='static'), or pass use_cache=False to calls that need no cache"
    )


def guard_auto_fix(reason: str | None) -> Fix | None:
    """The fix for a failed guard that applies from outside the program: the changed
    dimension marked dynamic from the first call for a size that changes or grows (a
    generation cache's too; not a size torch specialises, 0 or 1); captured scalars for a
    number a graph break handed on. None for a relation between sizes already dynamic, a
    cache's flag, or a decorator's own arguments: no setting removes those."""
    kind = classify_guard(reason)
    text = guard_text(reason)
    if kind is GuardKind.VALUE:
        return Fix.CAPTURE_SCALAR_OUTPUTS if _break_number(text) else None
    if kind not in (GuardKind.SHAPE, GuardKind.CACHE_STATE) or _CACHE_FLAG.search(text):
        return None
    change = size_change(reason)
    if change is None or change.kind is SizeChangeKind.TO_SPECIALISED:
        return None
    return Fix.MARK_DYNAMIC


def _kind_fix(kind: GuardKind, reasons: Sequence[tuple[str, Sequence[str]]]) -> str:
    """One fix per distinct cause among a kind's reasons (each with its record's
    ``arg_names``): a cache's growth and its flag are two changes, while shape guards on
    several tensors are one (dynamic shapes), apart from the sizes torch specialises."""
    by_cause: dict[str, str] = {}
    for reason, arg_names in reasons:
        fix = guard_fix(kind, reason, arg_names)
        cause = fix
        if kind is GuardKind.SHAPE:
            change = size_change(reason)
            cause = change.kind.value if change is not None else fix
        by_cause.setdefault(cause, fix)
    return "; ".join(list(by_cause.values())[:MAX_FIXES_PER_KIND])


def by_commonest_kind(records: Sequence[GraphRecord]) -> list[GraphRecord]:
    """``records`` with the commonest kind of failed guard first (ties: first seen)."""
    counts = Counter(classify_guard(r.recompile_reason) for r in records)
    return sorted(records, key=lambda r: -counts[classify_guard(r.recompile_reason)])


def guards_by_kind(records: Sequence[GraphRecord]) -> tuple[dict[str, Any], str]:
    """Failed guards by kind (most first), each with examples and its fixes (one per distinct
    cause: the cache's growth and its flag are different changes); and the fixes joined, the
    commonest kind first."""
    by_kind: dict[GuardKind, list[tuple[str, Sequence[str]]]] = {}
    for r in records:
        found = (r.recompile_reason or "", r.arg_names)
        by_kind.setdefault(classify_guard(r.recompile_reason), []).append(found)
    ordered = sorted(by_kind.items(), key=lambda kv: -len(kv[1]))
    fixes = {kind: _kind_fix(kind, reasons) for kind, reasons in ordered}
    guards = {
        kind.value: {
            "count": len(reasons),
            "reasons": unique(guard_text(r) or "(torch gave no reason)" for r, _ in reasons),
            "fix": fixes[kind],
        }
        for kind, reasons in ordered
    }
    fix = "; and for the ".join(
        f"{kind.value} guards: {fixes[kind]}" if i else fixes[kind] for i, (kind, _) in enumerate(ordered)
    )
    return guards, fix


def _code(r: GraphRecord) -> tuple[str, int, str]:
    return (r.code_filename, r.code_firstlineno, r.code_name)


def _dynamic_now(records: Sequence[GraphRecord]) -> set[str]:
    """What torch's automatic dynamic held for these records' code after the last of them."""
    return set(records[-1].dynamic_sources) if records else set()


def superseded(records: Sequence[GraphRecord]) -> list[tuple[GraphRecord, GraphRecord]]:
    """(static record, the recompile that replaced it) for each graph that marking the changed
    dimensions dynamic before the first call would never compile: per compiled code, the
    entry a changed size's guard failed against, and, for a new size after a size-1 graph,
    the earliest other static graph of that code. Only where torch made that dimension
    dynamic (its state), or, in a run without the state, where the guard says it changed."""
    found: list[tuple[GraphRecord, GraphRecord]] = []
    by_code = group(records, _code)
    for code_records in by_code.values():
        dynamic = _dynamic_now(code_records)
        taken: set[int] = set()
        specialised: set[int] = set()  # records compiled for a size torch specialises (N -> 1)
        for i, r in enumerate(code_records):
            change = size_change(r.recompile_reason) if r.is_recompile and i else None
            if change is None or (dynamic and change.source not in dynamic):
                continue
            if change.kind is SizeChangeKind.TO_SPECIALISED:
                specialised.add(id(r))
                continue
            failed_against = code_records[i - 1]
            if change.kind is SizeChangeKind.CHANGED:
                candidates = [failed_against]
            else:  # the earliest other static graph of the code: the first prefill, in generate
                candidates = [
                    e for e in code_records[: i - 1] if id(e) not in specialised and not e.recompile_limit_hit
                ]
            target = next((e for e in candidates if id(e) not in taken), None)
            if target is not None:
                taken.add(id(target))
                found.append((target, r))
    return found


def mark_dynamic_entries(records: Sequence[GraphRecord]) -> list[str]:
    """The tensor dimensions to mark dynamic for these records' code: what torch's automatic
    dynamic made dynamic (its state after the last record of each code), else, in a run
    without the state, what the failed size guards name (the first failing guard of each
    recompile only). Only inputs as torch names them (:func:`is_dynamic_source`): a run
    file's text that is none (``L['$(...)']:0``) is never offered, and never printed in a
    command; :func:`unnamed_sources` lists what was left out."""
    return [e for e in _named_dimensions(records) if is_dynamic_source(e)]


def unnamed_sources(records: Sequence[GraphRecord]) -> list[str]:
    """What :func:`mark_dynamic_entries` left out: named dimensions that are no input as
    torch names one (a run file from elsewhere, or a torch that names them otherwise)."""
    return [e for e in _named_dimensions(records) if not is_dynamic_source(e)]


def _named_dimensions(records: Sequence[GraphRecord]) -> list[str]:
    entries: list[str] = []
    for code_records in group(records, _code).values():
        entries += [e for e in code_records[-1].dynamic_sources if ":" in e.rpartition("]")[2]]
    if entries:
        return list(dict.fromkeys(entries))
    changes = (size_change(r.recompile_reason) for r in records if r.is_recompile)
    return list(
        dict.fromkeys(
            c.source for c in changes if c is not None and c.kind is not SizeChangeKind.TO_SPECIALISED
        )
    )
