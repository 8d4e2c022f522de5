"""Failed guards (torch's recompile reasons): what each was about (:class:`GuardKind`), the
concrete change that removes it, and the fix that applies it from outside the program. Read
by the rules on recompiles, the recompile limit and compiles after a warm-up; torch's
wording of a guard is :mod:`compiletrace._data.torch_text`'s.

>>> classify_guard("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3").value
'tensor shape/stride'
>>> guard_auto_fix("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3")
<Fix.DYNAMIC_SHAPES: 'dynamic-shapes'>
"""

from __future__ import annotations

import enum
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from compiletrace._data.fixes import Fix
from compiletrace._data.records import GraphRecord
from compiletrace._data.torch_text import (
    GUARD_BACKEND,
    GUARD_DTYPE_DEVICE,
    GUARD_ENTRY_PREFIX,
    GUARD_GRAD_MODE,
    GUARD_IDENTITY,
    GUARD_SHAPE,
    GUARD_SOURCE_COMMENT,
    GUARD_VALUE,
    GUARDED_ARGUMENT,
    KWARGS_COUNT_GUARD,
    NUMBER_CONSTANT,
    SIZE_MISMATCH,
    STACK_VALUE,
    STRING_CONSTANT,
    VALUE_COMPARISON,
)
from compiletrace._doctor.shared import unique

__all__ = [
    "MAX_FIXES_PER_KIND",
    "GuardKind",
    "by_commonest_kind",
    "classify_guard",
    "guard_auto_fix",
    "guard_fix",
    "guard_text",
    "guards_by_kind",
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
    (GuardKind.CACHE_STATE, _CACHE_STATE),
    (GuardKind.SHAPE, GUARD_SHAPE),
    (GuardKind.DTYPE_DEVICE, GUARD_DTYPE_DEVICE),
    (GuardKind.IDENTITY, GUARD_IDENTITY),
    (GuardKind.VALUE, GUARD_VALUE),
)
SPECIALISED_SIZES = {"0", "1"}  # sizes torch specialises even with dynamic=True
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


def _argument(expr: str) -> str:
    """The name a user knows a guarded argument by: ``kwargs['input_ids']`` is ``input_ids``.

    >>> _argument("L['kwargs']['attention_mask']"), _argument("L['self'].step")
    ('attention_mask', 'self.step')
    """
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


def guard_fix(kind: GuardKind, reason: str | None = None) -> str:
    """The concrete change for a failed guard of ``kind`` (naming the tensor, dimension or
    value from torch's reason where it gives them)."""
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
        name, dim = _argument(size[1]), size[2]
        if {size[3], size[4]} & SPECIALISED_SIZES:
            return (
                f"{name} changed from size {size[3]} to {size[4]} in dimension {dim}, and torch "
                "specialises sizes 0 and 1 even with dynamic=True: neither dynamic=True nor "
                "mark_dynamic removes this recompile (it happens once per size-1 case, e.g. prefill "
                "then decode). Warm up with both sizes before timing matters, or, if the code never "
                f"branches on that size, torch._dynamo.mark_unbacked({name}, {dim}) drops the "
                "specialisation"
            )
        return (
            "compile with dynamic=True, or mark the changing dimension dynamic before the first call: "
            f"torch._dynamo.mark_dynamic({name}, {dim})"
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
            f"{_argument(size[1])} grows by a step every call (a dynamic cache): generate with a "
            "static cache, model.generate(..., cache_implementation='static'), whose tensors keep "
            "one shape; or pass use_cache=False to calls that need no cache"
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
    """The fix for a failed guard that applies from outside the program: dynamic shapes for
    a size that changes (not one torch specialises: 0 or 1); a static cache for a generation
    cache's growing tensors (not a flag that flips once as it fills); captured scalars for a
    number a graph break handed on."""
    kind = classify_guard(reason)
    text = guard_text(reason)
    if kind is GuardKind.CACHE_STATE:
        # A cache that grows: a static one keeps one shape. A flag, or the cache's other
        # state, is no static cache's to change.
        return Fix.STATIC_CACHE if SIZE_MISMATCH.search(text) and not _CACHE_FLAG.search(text) else None
    if kind is GuardKind.VALUE:
        return Fix.CAPTURE_SCALAR_OUTPUTS if _break_number(text) else None
    if kind is not GuardKind.SHAPE:
        return None
    size = SIZE_MISMATCH.search(text)
    if size is not None and {size[3], size[4]} & SPECIALISED_SIZES:
        return None
    return Fix.DYNAMIC_SHAPES


def _kind_fix(kind: GuardKind, reasons: Sequence[str]) -> str:
    """One fix per distinct cause among a kind's reasons: a cache's growth and its flag are
    two changes, while shape guards on several tensors are one (dynamic shapes), apart from
    the sizes torch specialises."""
    by_cause: dict[str, str] = {}
    for reason in reasons:
        fix = guard_fix(kind, reason)
        cause = fix
        if kind is GuardKind.SHAPE:
            cause = "dynamic" if guard_auto_fix(reason) else fix
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
    by_kind: dict[GuardKind, list[str]] = {}
    for r in records:
        by_kind.setdefault(classify_guard(r.recompile_reason), []).append(r.recompile_reason or "")
    ordered = sorted(by_kind.items(), key=lambda kv: -len(kv[1]))
    fixes = {kind: _kind_fix(kind, reasons) for kind, reasons in ordered}
    guards = {
        kind.value: {
            "count": len(reasons),
            "reasons": unique(guard_text(r) or "(torch gave no reason)" for r in reasons),
            "fix": fixes[kind],
        }
        for kind, reasons in ordered
    }
    fix = "; and for the ".join(
        f"{kind.value} guards: {fixes[kind]}" if i else fixes[kind] for i, (kind, _) in enumerate(ordered)
    )
    return guards, fix
