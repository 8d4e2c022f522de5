"""The doctor: from where the compile time went to why, and what to change.

It reads plain records (live from a registry, or from a saved run on another machine) and
gives :class:`Finding` s, most seconds at stake first. Each names what it saw in the run (the
records, torch's failed guards and graph-break reasons, file:line, cache keys) and one
concrete fix. Every input is recorded live by the tracker and saved with the run:

- recompiles and their failed guards, grouped by kind (``recompiles``), and frames that hit
  torch's recompile limit and now run eagerly (``recompile_limit``);
- torch's graph-break records, with the user's line (``graph_break``);
- structurally identical graphs compiled more than once (``repeated_graph``): a regional
  compile candidate;
- compile-cache misses with their keys (``cache_miss``), and hits that still compiled
  (``expensive_hit``);
- compiles after a warm-up returned (``compile_after_warmup``);
- frames compiled by several components, sharing torch's recompile limit (``shared_frame``);
- in a gathered multi-rank result, ranks whose graphs or cache outcomes differ (``rank_divergence``);
- in runs recorded with ``trace_cost``, the user function Dynamo spent most time tracing,
  per component (``costly_trace``).

>>> diagnose_records([])
[]
"""

from __future__ import annotations

import enum
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from compiletrace._app.analysis import compile_ns, find_expensive_hits
from compiletrace._app.program_fixes import STATIC_CACHE, regional_compile_fix
from compiletrace._data.findings import DOCTOR_KIND, DOCTOR_SCHEMA_VERSION, Finding, FindingKind, doctor_dict
from compiletrace._data.gather import RankTimes
from compiletrace._data.phases import KERNEL_COMPILE, OTHER
from compiletrace._data.records import (
    NS_PER_S,
    RESUME_PREFIX,
    TRACE_OTHER,
    CacheOutcome,
    CompileStatus,
    GraphRecord,
    TraceNode,
    root_code_name,
    walk_trace,
)
from compiletrace._data.registry import Registry, get_registry
from compiletrace._data.run import WarmupResult
from compiletrace._data.timeline import Timeline

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
    "classify_guard",
    "diagnose",
    "diagnose_ranks",
    "diagnose_records",
    "diagnose_run",
    "doctor_dict",
    "guard_fix",
    "library_break_fix",
    "owners",
    "root_code_name",
]


MAX_EXAMPLES = 5  # reasons, graphs or keys quoted per finding: evidence, not a dump


# -- failed guards ---------------------------------------------------------------------------


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
# layers, past_key_values): its tensors grow every step and its flags flip as it fills.
_CACHE_STATE = re.compile(
    r"past_key_values|cache_params|\bcache\b|key_cache|value_cache|is_initialized|is_updated"
)
_GUARD_RULES: tuple[tuple[GuardKind, re.Pattern[str]], ...] = (
    (GuardKind.BACKEND, re.compile(r"BACKEND_MATCH|different backend")),
    (GuardKind.GRAD_MODE, re.compile(r"grad_mode|requires_grad mismatch")),
    (GuardKind.CACHE_STATE, _CACHE_STATE),
    (GuardKind.SHAPE, re.compile(r"(size|stride|rank) mismatch|\.size\(\)|\.stride\(\)|storage_offset")),
    (GuardKind.DTYPE_DEVICE, re.compile(r"dtype mismatch|device( index)? mismatch|dispatch key set")),
    (GuardKind.IDENTITY, re.compile(r"___check_obj_id|___check_type_id|ID_MATCH|TYPE_MATCH")),
    (GuardKind.VALUE, re.compile(r"==|!=|\blen\(| is None| is not None|___dict_contains")),
)
_ENTRY_PREFIX = re.compile(r"^\d+/\d+:\s*")  # torch prefixes the cache entry that failed: "0/1: "
_SOURCE_COMMENT = re.compile(r"\s+#.*$")  # torch pads a guard with the source line that made it
_SIZE_GUARD = re.compile(r"tensor '(.+?)' size mismatch at index (\d+)(?:\. expected (\d+), actual (\d+))?")
_VALUE_GUARD = re.compile(r"^\s*([\w.\[\]'\"]+)\s*==\s*(.*)$")
_STRING = re.compile(r"^(['\"]).*\1$")
# A value on the stack of a resume function: what the code before a graph break computed in
# Python (a .item(), a .tolist()) and handed to the graph after it.
_BREAK_VALUE = re.compile(r"^(?:L\[['\"])?___stack\d+")
_NUMBER = re.compile(r"^-?(?:[\d.]+(?:e[-+]?\d+)?|inf|nan)$")


def _break_number(text: str) -> bool:
    """Whether a guard's text compares a resume function's stack value with a number."""
    value = _VALUE_GUARD.match(text)
    return value is not None and bool(_BREAK_VALUE.match(value[1])) and bool(_NUMBER.match(value[2].strip()))


# How torch names an argument in a guard: L['x'], kwargs['input_ids'], L['kwargs']['mask'].
_ARGUMENT = re.compile(r"^(?:L\[['\"]kwargs['\"]\]|L|kwargs)\[['\"](\w+)['\"]\]")


def guard_text(reason: str | None) -> str:
    """The failed guard itself: torch's first reason line without its ``"0/1: "`` prefix.

    >>> guard_text("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3\\nUser stack ...")
    "tensor 'x' size mismatch at index 0. expected 2, actual 3"
    """
    lines = (reason or "").strip().splitlines()
    return _SOURCE_COMMENT.sub("", _ENTRY_PREFIX.sub("", lines[0])).strip() if lines else ""


def _argument(expr: str) -> str:
    """The name a user knows a guarded argument by: ``kwargs['input_ids']`` is ``input_ids``.

    >>> _argument("L['kwargs']['attention_mask']"), _argument("L['self'].step")
    ('attention_mask', 'self.step')
    """
    return _ARGUMENT.sub(r"\1", expr)


def classify_guard(reason: str | None) -> GuardKind:
    """The kind of torch's recompile reason.

    >>> classify_guard("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3").value
    'tensor shape/stride'
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
        size = _SIZE_GUARD.search(text)
        if size is None:
            return (
                "compile with dynamic=True, or mark the changing dimension dynamic before the first "
                "call: torch._dynamo.mark_dynamic(t, dim)"
            )
        name, dim = _argument(size[1]), size[2]
        if {size[3], size[4]} & {"0", "1"}:
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
        if _KWARGS_COUNT.match(text):
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
        value = _VALUE_GUARD.match(text)
        if value is not None and _STRING.match(value[2].strip()):
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


_CACHE_FLAG = re.compile(r"is_updated|is_initialized")
_KWARGS_COUNT = re.compile(r"^len\((?:L\[['\"])?kwargs")


def _cache_state_fix(text: str) -> str:
    size = _SIZE_GUARD.search(text)
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


def _guard_auto_fix(reason: str | None) -> str | None:
    """The fix for a failed guard that applies from outside the program, by name: dynamic
    shapes for a size that changes (not one torch specialises: 0 or 1); a static cache for
    a generation cache's growing tensors or state (not a flag that flips once as it fills)."""
    kind = classify_guard(reason)
    if kind is GuardKind.CACHE_STATE:
        # A cache that grows: a static one keeps one shape. A flag, or the cache's other
        # state, is no static cache's to change.
        text = guard_text(reason)
        return STATIC_CACHE if _SIZE_GUARD.search(text) and not _CACHE_FLAG.search(text) else None
    if kind is GuardKind.VALUE:
        return "capture-scalar-outputs" if _break_number(guard_text(reason)) else None
    if kind is not GuardKind.SHAPE:
        return None
    size = _SIZE_GUARD.search(guard_text(reason))
    if size is not None and {size[3], size[4]} & {"0", "1"}:
        return None
    return "dynamic-shapes"


def automatic_fix(finding: Finding) -> str | None:
    """The name of the fix (``compiletrace run --apply NAME``) that applies a finding's
    advice with no edit to the program, if there is one.

    >>> automatic_fix(Finding("recompiles", "lm", 1.0, "t", "f", evidence={"auto_fix": "dynamic-shapes"}))
    'dynamic-shapes'
    """
    name = finding.evidence.get("auto_fix")
    return name if isinstance(name, str) else None


MAX_FIXES_PER_KIND = 3  # distinct fixes one kind of guard gets (one per tensor or flag seen)


def _kind_fix(kind: GuardKind, reasons: Sequence[str]) -> str:
    """One fix per distinct cause among a kind's reasons: a cache's growth and its flag are
    two changes, while shape guards on several tensors are one (dynamic shapes), apart from
    the sizes torch specialises."""
    by_cause: dict[str, str] = {}
    for reason in reasons:
        fix = guard_fix(kind, reason)
        cause = fix
        if kind is GuardKind.SHAPE:
            cause = "dynamic" if _guard_auto_fix(reason) else fix
        by_cause.setdefault(cause, fix)
    return "; ".join(list(by_cause.values())[:MAX_FIXES_PER_KIND])


def _by_commonest_kind(records: Sequence[GraphRecord]) -> list[GraphRecord]:
    """``records`` with the commonest kind of failed guard first (ties: first seen)."""
    counts = Counter(classify_guard(r.recompile_reason) for r in records)
    return sorted(records, key=lambda r: -counts[classify_guard(r.recompile_reason)])


def _guards(records: Sequence[GraphRecord]) -> tuple[dict[str, Any], str]:
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
            "reasons": _unique(guard_text(r) or "(torch gave no reason)" for r in reasons),
            "fix": fixes[kind],
        }
        for kind, reasons in ordered
    }
    fix = "; and for the ".join(
        f"{kind.value} guards: {fixes[kind]}" if i else fixes[kind] for i, (kind, _) in enumerate(ordered)
    )
    return guards, fix


# -- helpers ---------------------------------------------------------------------------------


def _s(records: Iterable[GraphRecord]) -> float:
    return sum(r.total_ns for r in records) / NS_PER_S


def _unique(items: Iterable[str], limit: int = MAX_EXAMPLES) -> list[str]:
    return list(dict.fromkeys(items))[:limit]


def _times(n: int) -> str:
    return f"{n} time{'s' if n != 1 else ''}"


def _ids(records: Iterable[GraphRecord]) -> list[str]:
    return [r.compile_id for r in records]


def _frame(r: GraphRecord) -> tuple[str, str]:
    """A frame's identity: its code name and where the code is (torch's frame number when
    the location is unknown; those restart after ``torch._dynamo.reset()``)."""
    return r.code_name, r.code_location or f"frame {r.compile_id.partition('/')[0]}"


def _group(records: Iterable[GraphRecord], key: Any) -> dict[Any, list[GraphRecord]]:
    groups: dict[Any, list[GraphRecord]] = {}
    for r in records:
        groups.setdefault(key(r), []).append(r)
    return groups


# The user's function a record belongs to: (component, file, function name, first line). A
# graph break turns its rest into resume functions, separate frames to torch; a fix to the
# function is a fix to all of them, so findings about recompiles and breaks are per function.
Owner = tuple[str, str, str, int]


def owners(records: Sequence[GraphRecord]) -> list[Owner]:
    """Each record's :data:`Owner`. The forward of a module (a decorator around it, or its
    resume function after a graph break) is the class's forward, at that forward's own file
    and line: a library's decorator is shared by every forward it wraps, and is not the
    model. A resume function of any other function goes to the nearest function of that
    name above it in that file. Records without a location (older runs) are their own, by
    torch's frame number."""
    starts: dict[tuple[str, str, str], list[int]] = {}
    for r in records:
        if r.code_filename and not r.code_name.startswith(RESUME_PREFIX):
            starts.setdefault((r.component, r.code_filename, r.code_name), []).append(r.code_firstlineno)
    found: list[Owner] = []
    for r in records:
        forward = _module_forward(r)
        if forward is not None:
            found.append((r.component, forward[0], f"{r.module_class}.forward", forward[1]))
            continue
        if not r.code_filename:
            found.append((r.component, f"frame {r.compile_id.partition('/')[0]}", r.code_name, 0))
            continue
        base = (r.component, r.code_filename, root_code_name(r.code_name))
        above = [line for line in starts.get(base, ()) if line <= r.code_firstlineno]
        found.append((*base, max(above) if above else r.code_firstlineno))
    return found


def _module_forward(r: GraphRecord) -> tuple[str, int] | None:
    filename, _, line = r.module_forward.rpartition(":")
    if not r.module_class or not filename or not line.isdigit():
        return None
    return filename, int(line)


def _at(group: Iterable[GraphRecord], limit: int = 3) -> str:
    """ " at model.layers.0, model.layers.1": where the group's modules sit in the model."""
    paths = list(dict.fromkeys(r.module_path for r in group if r.module_path))
    if not paths:
        return ""
    more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
    return f" at {', '.join(paths[:limit])}{more}"


def _modules(group: Iterable[GraphRecord]) -> list[str]:
    """The modules a group compiled, for the evidence ("LlamaDecoderLayer at model.layers.0")."""
    return _unique((r.module_label for r in group if r.module_label), limit=MAX_EXAMPLES * 4)


def _model_location(r: GraphRecord) -> str:
    """Where the record's code is in the model: its module's own forward, not a decorator
    around it; else the compiled code's location."""
    return r.module_forward if _module_forward(r) is not None else r.code_location


def _located(owner: Owner) -> str:
    """file:line of an owner ("" when unknown)."""
    _, filename, _, line = owner
    return "" if filename.startswith("frame ") else f"{filename}:{line}"


def _by_owner(
    records: Sequence[GraphRecord], found: Sequence[Owner], keep: Any
) -> dict[Owner, list[GraphRecord]]:
    groups: dict[Owner, list[GraphRecord]] = {}
    for r, owner in zip(records, found, strict=True):
        if keep(r):
            groups.setdefault(owner, []).append(r)
    return groups


def _frames_of(group: Sequence[GraphRecord]) -> list[str]:
    return _unique((f"{name} ({where})" for name, where in map(_frame, group)), limit=len(group))


# -- the findings, one function per kind ----------------------------------------------------


def _recompiles(records: Sequence[GraphRecord], found: Sequence[Owner]) -> list[Finding]:
    findings = []
    recompiled = _by_owner(records, found, lambda r: r.is_recompile and not r.recompile_limit_hit)
    for owner, group in recompiled.items():
        guards, fix = _guards(group)
        # The commonest cause's fix that applies from outside, when one does.
        auto_fix = next(
            (name for r in _by_commonest_kind(group) if (name := _guard_auto_fix(r.recompile_reason))), None
        )
        kinds = ", ".join(f"{kind} ({g['count']})" for kind, g in guards.items())
        findings.append(
            Finding(
                FindingKind.RECOMPILES,
                owner[0],
                _s(group),
                f"{owner[2]}{_at(group)} recompiled {_times(len(group))}: {kinds}",
                fix,
                _located(owner),
                {
                    "compile_ids": _ids(group),
                    "frames": _frames_of(group),
                    "modules": _modules(group),
                    "guards": guards,
                    **({"auto_fix": auto_fix} if auto_fix else {}),
                },
            )
        )
    return findings


def _recompile_limits(records: Sequence[GraphRecord], found: Sequence[Owner]) -> list[Finding]:
    findings = []
    spent_by = _by_owner(records, found, lambda r: True)
    for owner, refused in _by_owner(records, found, lambda r: r.recompile_limit_hit).items():
        spent = spent_by[owner]
        last = refused[-1]
        limit = last.recompile_limit
        kind = classify_guard(last.recompile_reason)
        auto_fix = _guard_auto_fix(last.recompile_reason) or "raise-recompile-limit"
        findings.append(
            Finding(
                FindingKind.RECOMPILE_LIMIT,
                owner[0],
                _s(spent),
                f"{owner[2]}{_at(spent)} hit torch's recompile limit ({limit if limit is not None else '?'}) "
                "and now runs eagerly, uncompiled",
                f"{guard_fix(kind, last.recompile_reason)}; or, if every variant is needed, raise "
                "torch._dynamo.config.recompile_limit",
                _located(owner),
                {
                    "compile_ids": _ids(spent),
                    "frames_refused": _frames_of(refused),
                    "modules": _modules(spent),
                    "recompile_limit": limit,
                    "last_guard": {"kind": kind.value, "reason": guard_text(last.recompile_reason)},
                    "auto_fix": auto_fix,
                },
            )
        )
    return findings


# A break's known cause: its fix, and the name of the setting that applies it from outside
# the program (torch_compat.CONFIG_FIXES), where one does.
_BREAK_FIXES: tuple[tuple[re.Pattern[str], str, str | None], ...] = (
    (
        re.compile(r"`print`"),
        "remove the print from the compiled code, or let Dynamo move it out of the graph: "
        "torch._dynamo.config.reorderable_logging_functions.add(print)",
        "reorderable-print",
    ),
    (
        re.compile(r"logging|logger"),
        "remove the log call from the compiled code, or let Dynamo move it out of the graph: "
        "torch._dynamo.config.reorderable_logging_functions.add(the logging function)",
        None,
    ),
    (
        re.compile(r"Tensor\.item\(\)|capture_scalar_outputs"),
        "set torch._dynamo.config.capture_scalar_outputs = True, or keep the value a tensor "
        "instead of calling .item()",
        "capture-scalar-outputs",
    ),
    (
        re.compile(r"graph_break\(\)|Call to `torch._dynamo.graph_break"),
        "remove the torch._dynamo.graph_break() call",
        None,
    ),
    (
        re.compile(r"[Dd]ata.dependent|generic_jump|jump"),
        "branch on tensors with torch.where or torch.cond instead of a Python if on a tensor's value",
        None,
    ),
)
_HINT = re.compile(r"^\s*Hint:\s*(.+)$", re.MULTILINE)


# Breaks a library's own code makes once, on a model's first call: the library's file, and
# either the break's reason there or the name of the library's function the frame is.
class _LibraryBreak(NamedTuple):
    file: re.Pattern[str]
    reason: re.Pattern[str]  # a break at a line of the file, for this reason
    function: re.Pattern[str]  # or any break in a frame of the file's functions so named
    fix: str


_LIBRARY_BREAKS: tuple[_LibraryBreak, ...] = (
    # transformers (5.x) installs its output-capturing hooks on a model's first call, under a
    # threading lock, setting attributes on classes: Dynamo traces none of it. Its per-call
    # code in the same file (reading a context variable) is not this.
    _LibraryBreak(
        re.compile(r"transformers[/\\]utils[/\\]output_capturing\.py"),
        re.compile(r"context manager"),
        re.compile(r"install"),
        "transformers installs its output-capturing hooks on the model's first call (under a lock, "
        "setting attributes Dynamo cannot trace): call the model once before compiling it, so the "
        "hooks are in place and the compiled code never installs them",
    ),
)


def library_break_fix(
    location: str, reason: str, frame_location: str = "", frame_name: str = ""
) -> str | None:
    """The fix for a break a library's own one-time code makes: by the break's file and
    reason, or the library's function the frame is.

    >>> where = "/venv/site-packages/transformers/utils/output_capturing.py:239"
    >>> library_break_fix(where, "Unsupported context manager: ... a `lock` context manager")[:38]
    'transformers installs its output-captu'
    >>> library_break_fix(where, "Unsupported Tensor.item() call") is None  # the user's own break
    True
    """
    for rule in _LIBRARY_BREAKS:
        at_line = rule.file.search(location) and rule.reason.search(reason)
        in_function = rule.file.search(frame_location) and rule.function.search(frame_name)
        if at_line or in_function:
            return rule.fix
    return None


def break_fix(reason: str) -> str:
    """The change that removes a graph break: a known cause's fix, else torch's own hint.

    >>> break_fix("Unsupported Tensor.item() call with capture_scalar_outputs=False")[:43]
    'set torch._dynamo.config.capture_scalar_out'
    """
    for pattern, fix, _ in _BREAK_FIXES:
        if pattern.search(reason):
            return fix
    hint = _HINT.search(reason)
    return hint[1].strip() if hint else "rewrite the line so that Dynamo can trace it (see torch's reason)"


def break_auto_fix(reason: str) -> str | None:
    """The fix for a graph break that applies from outside the program, by name, if any.

    >>> break_auto_fix("Failed to trace builtin operator: cannot trace `print`")
    'reorderable-print'
    """
    for pattern, _, name in _BREAK_FIXES:
        if pattern.search(reason):
            return name
    return None


def break_summary(reason: str) -> str:
    """Torch's graph-break reason in one line: its first line, with its explanation when the
    first line alone is vague.

    >>> break_summary("Failed to trace builtin operator\\n  Explanation: cannot trace `print`\\nHint: x")
    'Failed to trace builtin operator: cannot trace `print`'
    """
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    if not lines:
        return "(torch gave no reason)"
    explanation = next((line for line in lines[1:] if line.startswith("Explanation:")), None)
    if explanation is None:
        return lines[0]
    return f"{lines[0]}: {explanation.removeprefix('Explanation:').strip()}"


def _unsupported(error_type: str | None) -> bool:
    return (error_type or "").rpartition(".")[2] == "Unsupported"


def _graph_breaks(records: Sequence[GraphRecord], found: Sequence[Owner]) -> list[Finding]:
    frames = _by_owner(records, found, lambda r: True)
    breaks: dict[Owner, dict[tuple[str, str], dict[str, Any]]] = {}
    library_made: set[int] = set()  # the breaks a library's one-time code made (by id)
    for r, owner in zip(records, found, strict=True):
        for b in r.graph_breaks:
            where = b.location or r.code_location
            seen = breaks.setdefault(owner, {}).setdefault((where, b.reason), {})
            if not seen:
                library = library_break_fix(where, b.reason, r.code_location, r.code_name)
                seen.update(
                    location=where,
                    reason=break_summary(b.reason),
                    frame_skipped=b.frame_skipped,
                    fix=library or break_fix(b.reason),
                    seen_in=[],
                )
                if library is not None:
                    library_made.add(id(seen))
            seen["seen_in"].append(r.compile_id)
    findings = []
    # Frames whose every break is a library's one-time code: one finding per component and
    # cause, not one per internal function of the library's.
    by_library: dict[tuple[str, str], list[tuple[Owner, list[dict[str, Any]]]]] = {}
    for key, by_place in breaks.items():
        items = list(by_place.values())
        if all(id(item) in library_made for item in items):
            by_library.setdefault((key[0], items[0]["fix"]), []).append((key, items))
            continue
        component, _, root, _ = key
        frame = frames[key]
        first = items[0]
        auto_fixes = [name for _, reason in by_place if (name := break_auto_fix(reason))]
        graphs = sum(1 for g in frame if g.graph_node_count > 0)
        pieces = len({g.code_name for g in frame if g.graph_node_count > 0})
        fixes = list(dict.fromkeys(item["fix"].rstrip(". ") for item in items))
        n = f"{len(items)} graph breaks" if len(items) > 1 else "a graph break"
        root = f"{root}{_at(frame)}"
        # Dynamo's own Unsupported, raised at the break: what fullgraph=True makes of a break
        # (a backend's error is no break's doing).
        failed = [g for g in frame if g.status is CompileStatus.ERROR and _unsupported(g.error_type)]
        if failed:
            # The break raised (fullgraph=True, or error_on_graph_break): the user saw torch's
            # exception, and nothing of the frame compiled.
            where = first["location"] or "?"
            title = f"{root} failed to compile: torch raised Unsupported at the break at {where}"
            fixes.append(
                "with fullgraph=True (or torch._dynamo.config.error_on_graph_break) a graph break is an "
                "error: remove the break, or compile without fullgraph=True so Dynamo splits the graph there"
            )
        elif any(item["frame_skipped"] for item in items):
            title = f"{root} runs eagerly: Dynamo gave up on the whole frame at {first['location'] or '?'}"
            fixes.append(
                "a break inside a loop or a context manager skips the whole frame: move the call out of "
                "it, or compile the loop's body on its own"
            )
        else:
            compiled = f" ({graphs} compiled, recompiles included)" if graphs != pieces else ""
            if pieces == 0:
                title = f"{n} left {root} with no graph{compiled}"
            elif pieces == 1:  # one side of the break compiled, the other nothing: a cut
                only = next(g.code_name for g in frame if g.graph_node_count > 0)
                side = "before" if only.startswith(RESUME_PREFIX) else "past"
                title = f"{n} in {root} left it one graph, none {side} the break{compiled}"
            else:
                title = f"{n} split {root} into {pieces} graphs{compiled}"
        findings.append(
            Finding(
                FindingKind.GRAPH_BREAK,
                component,
                _s(frame),
                f"{title}: {first['reason']}",
                "; ".join(fixes),
                first["location"],
                {
                    "breaks": items,
                    "frame": f"{key[2]} ({_located(key) or key[1]})",
                    "modules": _modules(frame),
                    "graphs": graphs,
                    "frame_compile_ids": _ids(frame),
                    **({"auto_fix": auto_fixes[0]} if auto_fixes else {}),
                },
            )
        )
    for (component, fix), owned in by_library.items():
        frame = [r for key, _ in owned for r in frames[key]]
        items = [item for _, found_items in owned for item in found_items]
        roots = list(dict.fromkeys(f"{key[2]}{_at(frames[key])}" for key, _ in owned))
        n = f"{len(items)} graph breaks" if len(items) > 1 else "a graph break"
        findings.append(
            Finding(
                FindingKind.GRAPH_BREAK,
                component,
                _s(frame),
                f"{n} in a library's one-time code, in {len(roots)} frame{'s' if len(roots) != 1 else ''} "
                f"({', '.join(roots[:MAX_EXAMPLES])}): {items[0]['reason']}",
                fix,
                items[0]["location"],
                {
                    "breaks": items,
                    "frames": roots[: MAX_EXAMPLES * 4],
                    "modules": _modules(frame),
                    "graphs": sum(1 for g in frame if g.graph_node_count > 0),
                    "frame_compile_ids": _ids(frame),
                },
            )
        )
    return findings


def _repeated_graphs(records: Sequence[GraphRecord], found: Sequence[Owner]) -> list[Finding]:
    owner_of = {id(r): owner for r, owner in zip(records, found, strict=True)}
    hashed = [r for r in records if r.structure_hash and r.graph_node_count > 0]
    findings = []
    for (component, structure), group in _group(hashed, lambda r: (r.component, r.structure_hash)).items():
        frames = _frames_of(group)
        if len(frames) < 2:
            continue  # one frame compiled again: a recompile, which that finding covers
        blocks = {r.graph_block for r in group}
        block = next(iter(blocks)) if len(blocks) == 1 else ""
        if not block and len({owner_of[id(r)] for r in group}) == 1:
            # Pieces of one function that graph breaks cut apart, and no block's call: there
            # is nothing to compile on its own (the graph_break finding says what to fix).
            continue
        repeats = group[1:]
        if block:
            of = f" (each a call of {block})"
            what = f"compile {block} on its own, once: torch.compile(block, backend=be) for each {block}"
        else:
            classes = _unique(r.module_class for r in group if r.module_class)
            of = f" ({', '.join(classes)}{_at(group)})" if classes else ""
            what = (
                "compile the repeated block on its own, once: torch.compile(block, backend=be) for each block"
            )
        findings.append(
            Finding(
                FindingKind.REPEATED_GRAPH,
                component,
                _s(repeats),
                f"{len(group)} structurally identical graphs of {group[0].graph_node_count} nodes "
                f"compiled in {len(frames)} frames{of}: a regional-compile candidate",
                f"{what} with one backend object be, so one compiled graph serves every block (and the "
                "model around the blocks runs as it is, or is compiled separately)",
                _model_location(group[0]),
                {
                    "structure_hash": structure,
                    "compile_ids": _ids(group),
                    "frames": frames[:MAX_EXAMPLES],
                    "modules": _modules(group),
                    **({"block": block, "auto_fix": regional_compile_fix(block)} if block else {}),
                    "estimated_saving_s": _s(repeats),
                },
            )
        )
    return findings


def _cache_keys(r: GraphRecord) -> dict[str, Any]:
    keys = {c.tier: c.key for c in r.cache_lookups if c.key}
    return keys or {"note": "torch announced no cache key for this graph (an older run or torch)"}


def _cache_misses(records: Sequence[GraphRecord], context: RunContext) -> list[Finding]:
    findings = []
    consulted = [r for r in records if r.cache_outcome is not CacheOutcome.NONE]
    for component, group in _group(consulted, lambda r: r.component).items():
        missed = [r for r in group if r.cache_outcome in (CacheOutcome.MISS, CacheOutcome.BYPASS)]
        if not missed:
            continue
        tiers = Counter(
            tier
            for r in missed
            for tier, outcome in (("FX graph", r.fx_graph_cache), ("AOTAutograd", r.aot_autograd_cache))
            if outcome in (CacheOutcome.MISS, CacheOutcome.BYPASS)
        )
        bypassed = [c for r in missed for c in r.cache_lookups if c.outcome == CacheOutcome.BYPASS.value]
        cold = len(missed) == len(group)
        if context.loaded_artifacts:
            fix = (
                "cache artifacts were loaded, yet these graphs missed: the artifacts hold other keys (a "
                "key changes with the graph, its input shapes and dtypes, and torch's and inductor's "
                "versions and config); save them again from a run of this model, torch and config, and "
                "compare the keys below with the saved run's"
            )
        elif cold:
            fix = (
                "the cache was cold: fill it once and start from it, keeping TORCHINDUCTOR_CACHE_DIR on "
                "persistent storage, or 'compiletrace cache save' here and --cache-artifacts where it starts"
            )
        else:
            fix = (
                "these graphs' keys changed while the others hit: a key changes with the graph, its input "
                "shapes and dtypes, and torch's and inductor's versions and config; compare the keys below "
                "with a warm run's and keep what feeds them fixed"
            )
        if bypassed:
            fix += f"; inductor bypassed its cache ({bypassed[0].detail or 'no reason given'})"
        findings.append(
            Finding(
                FindingKind.CACHE_MISS,
                component,
                sum(compile_ns(r) for r in missed) / NS_PER_S,
                f"{len(missed)} of {len(group)} graphs compiled afresh: the compile cache "
                + ", ".join(f"{tier} missed {n}" for tier, n in tiers.items())
                + (" (a cold cache)" if cold else ""),
                fix,
                _model_location(missed[0]),
                {
                    "graphs": [
                        {
                            "compile_id": r.compile_id,
                            "code_name": r.code_name,
                            "module": r.module_label,
                            "fx_graph": r.fx_graph_cache.value,
                            "aot_autograd": r.aot_autograd_cache.value,
                            "keys": _cache_keys(r),
                        }
                        for r in missed[:MAX_EXAMPLES]
                    ],
                    "missed": len(missed),
                    "consulted": len(group),
                },
            )
        )
    return findings


_HIT_FIXES = {
    KERNEL_COMPILE: (
        "the graph hit but its kernels compiled again: carry the kernel caches with the graph cache "
        "(the whole TORCHINDUCTOR_CACHE_DIR, or 'compiletrace cache save' and --cache-artifacts)"
    ),
    OTHER: (
        "the time went elsewhere in the backend: the first graph of a process pays for importing the "
        "compiler (import torch._inductor early, before timing matters)"
    ),
}
_HIT_FIX = (
    "lowering ran again despite the hit: one tier hit and the other missed; compare both tiers' keys "
    "with the cold run's"
)


# A hit that compiled its kernels again where the kernels were never in the artifacts: on the
# CPU inductor builds C++ kernels into its cache directory, which torch's portable artifacts
# do not carry (they bundle Triton kernels, the GPU's): loading them again changes nothing.
_CPU_KERNELS_FIX = (
    "the graph hit but its C++ kernels compiled again: on the CPU, torch's cache artifacts carry "
    "the graphs but not the kernels inductor builds from them, which live only in the cache "
    "directory; keep the whole TORCHINDUCTOR_CACHE_DIR between starts (a persistent volume, or a "
    "copy of the filled directory): saving and loading the artifacts again will not remove this"
)
_KERNELS_DIR_FIX = (
    "the graph hit but its kernels compiled again: carry the kernel caches with the graph cache, "
    "keeping the whole TORCHINDUCTOR_CACHE_DIR between starts (on the CPU only the directory holds "
    "the compiled kernels; on a GPU 'compiletrace cache save' and --cache-artifacts carry Triton's too)"
)


def _hit_fix(phase: str, context: RunContext) -> str:
    if phase == KERNEL_COMPILE and (context.on_cpu or context.loaded_artifacts):
        return _CPU_KERNELS_FIX if context.on_cpu else _KERNELS_DIR_FIX
    return _HIT_FIXES.get(phase, _HIT_FIX)


def _expensive_hits(records: Sequence[GraphRecord], context: RunContext) -> list[Finding]:
    return [
        Finding(
            FindingKind.EXPENSIVE_HIT,
            hit.record.component,
            compile_ns(hit.record) / NS_PER_S,
            hit.explanation(),
            _hit_fix(hit.dominant_phase, context),
            _model_location(hit.record),
            {
                "compile_id": hit.record.compile_id,
                "module": hit.record.module_label,
                "dominant_phase": hit.dominant_phase,
                "dominant_s": hit.dominant_ns / NS_PER_S,
                "keys": _cache_keys(hit.record),
            },
        )
        for hit in find_expensive_hits(records)
    ]


def _after_warmup(records: Sequence[GraphRecord], found: Sequence[Owner]) -> list[Finding]:
    findings = []
    for owner, group in _by_owner(records, found, lambda r: r.after_warmup).items():
        reasons = [r for r in group if r.recompile_reason]
        guards, guard_fixes = _guards(reasons) if reasons else ({}, "")
        fix = "warm up with every shape, dtype and mode serving sees, before serving"
        if guard_fixes:
            fix = f"{guard_fixes}; or {fix}"
        findings.append(
            Finding(
                FindingKind.COMPILE_AFTER_WARMUP,
                owner[0],
                _s(group),
                f"{owner[2]}{_at(group)} compiled {_times(len(group))} after warm-up returned: a "
                "latency spike while serving",
                fix + " (compiletrace.expect_no_compiles() makes a test fail on it)",
                _located(owner),
                {
                    "compile_ids": _ids(group),
                    "frames": _frames_of(group),
                    "modules": _modules(group),
                    "guards": guards,
                },
            )
        )
    return findings


def _shared_frames(records: Sequence[GraphRecord]) -> list[Finding]:
    findings = []
    for (name, where), group in _group(records, _frame).items():
        components = list(dict.fromkeys(r.component for r in group))
        if len(components) < 2 or not any(r.shared_with for r in group):
            continue
        used = max(r.frame_attempt for r in group) + 1
        limits = [r.recompile_limit for r in group if r.recompile_limit is not None]
        limit = max(limits) if limits else None
        later = [r for r in group if r.component != components[0]]
        findings.append(
            Finding(
                FindingKind.SHARED_FRAME,
                components[0],
                _s(later),
                f"{name} ({where}) is compiled by {' and '.join(components)}: they share torch's "
                f"{limit if limit is not None else '?'} entries for it and have used {used}",
                "compile below the shared wrapper (each component's inner module, not the function they "
                "all call through), so each has its own frame; or raise torch._dynamo.config.recompile_limit",
                group[0].code_location,
                {
                    "components": components,
                    "modules": _modules(group),
                    "entries_used": used,
                    "recompile_limit": limit,
                    "compile_ids": _ids(group),
                },
            )
        )
    return findings


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


def _costly_traces(records: Sequence[GraphRecord]) -> list[Finding]:
    findings = []
    components = dict.fromkeys(r.component for r in records if r.trace_cost)
    for component in components:
        group = [r for r in records if r.component == component and r.trace_cost]
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
        findings.append(
            Finding(
                FindingKind.COSTLY_TRACE,
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
                    "compile_ids": _ids(group),
                    **({"auto_fix": regional_compile_fix(b)} if (b := _block_of(name, calls)) else {}),
                },
            )
        )
    return findings


@dataclass(frozen=True)
class RunContext:
    """What a run's meta says that changes the advice, not the findings."""

    loaded_artifacts: bool = False  # cache artifacts were loaded before it compiled (--cache-artifacts)
    device: str | None = None  # where it ran ("cpu", "cuda:0"), where the run says

    @classmethod
    def of(cls, meta: Mapping[str, Any] | None) -> RunContext:
        meta = meta or {}
        device = meta.get("device")
        return cls(bool(meta.get("cache_artifacts")), str(device) if isinstance(device, str) else None)

    @property
    def on_cpu(self) -> bool:
        return self.device is not None and self.device.startswith("cpu")


def diagnose_records(records: Sequence[GraphRecord], context: RunContext | None = None) -> list[Finding]:
    """Every finding in ``records`` (a run's, in the order compiles finished), most seconds
    at stake first; ``context`` (the run's meta) fits the cache advice to what the run did.

    >>> import compiletrace
    >>> diagnose_records(compiletrace.Registry().records())
    []
    """
    records = tuple(records)
    found = owners(records)
    findings = [
        *_recompile_limits(records, found),
        *_recompiles(records, found),
        *_graph_breaks(records, found),
        *_repeated_graphs(records, found),
        *_cache_misses(records, context or RunContext()),
        *_expensive_hits(records, context or RunContext()),
        *_after_warmup(records, found),
        *_shared_frames(records),
        *_costly_traces(records),
    ]
    return _ranked(findings)


# Phases of a start-up that are warm-ups by their names: compiletrace's own ("Warmup (CPU)"),
# and what engines call theirs (vLLM's profiling and dummy runs, "warm up", "warmup").
_WARMUP_NAME = re.compile(r"warm[ _-]?up|profile[ _]run|dummy[ _]run", re.IGNORECASE)


def diagnose_run(
    records: Sequence[GraphRecord],
    warmup: WarmupResult | None = None,
    timeline: Timeline | None = None,
    meta: Mapping[str, Any] | None = None,
) -> list[Finding]:
    """:func:`diagnose_records`, plus what only a whole run shows: warm-ups that ran and
    compiled nothing (the run's own warm-up, and any phase of its start-up timeline named
    as one), most seconds at stake first. ``meta`` (the run's) fits the cache advice to what
    the run did: loaded artifacts, the device.

    >>> from compiletrace._data.records import CompilationTimes
    >>> [f.kind.value for f in diagnose_run([], WarmupResult(False, 2.5, CompilationTimes()))]
    ['useless_warmup']
    """
    context = RunContext.of(meta)
    return _ranked([*diagnose_records(records, context), *_useless_warmups(records, warmup, timeline)])


def _useless_warmups(
    records: Sequence[GraphRecord], warmup: WarmupResult | None, timeline: Timeline | None
) -> list[Finding]:
    fix = (
        "skip the warm-up when nothing will compile: guard it on the compilation mode, as "
        "compiletrace.warm_up does (CompilationMode.NONE: no compile, no warm-up); a warm-up "
        "that compiled nothing only costs its run"
    )
    spans: list[tuple[str, int, int]] = []
    if timeline is not None:
        named = (p for p in timeline.phases if _WARMUP_NAME.search(p.name))
        spans = [(p.name, p.start_unix_ns, p.end_unix_ns) for p in named]
    # No timeline to place it in: the warm-up's own figures say whether it compiled.
    untimed = not spans and warmup is not None and not warmup.skipped and warmup.duration_s > 0
    if untimed and warmup is not None and not records and sum(warmup.by_component.values()) == 0:
        spans = [("warm-up", 0, int(warmup.duration_s * NS_PER_S))]
        records = ()
    findings = []
    for name, start, end in spans:
        if any(r.start_unix_ns < end and r.end_unix_ns > start for r in records):
            continue  # it compiled: a warm-up doing its work
        seconds = (end - start) / NS_PER_S
        findings.append(
            Finding(
                FindingKind.USELESS_WARMUP,
                "",
                seconds,
                f"the start-up phase {name!r} ran for {seconds:.2f} s and compiled nothing",
                fix,
                evidence={"phase": name, "seconds": seconds},
            )
        )
    return findings


def _ranked(findings: list[Finding]) -> list[Finding]:
    order = {kind: i for i, kind in enumerate(FindingKind)}
    return sorted(findings, key=lambda f: (-f.seconds, order.get(f.kind, len(order))))


def diagnose(registry: Registry | None = None) -> list[Finding]:
    """The doctor's findings on a registry's records (the process registry by default): why
    the compile time went where it went and what to change, most seconds at stake first.

    >>> import torch, compiletrace
    >>> reg = compiletrace.Registry()
    >>> f = compiletrace.compile(lambda x: x * 2, backend="eager", dynamic=False, registry=reg)
    >>> _ = f(torch.ones(2)), f(torch.ones(3))
    >>> [(str(d.kind), list(d.evidence["guards"])) for d in compiletrace.diagnose(reg)]
    [('recompiles', ['tensor shape/stride'])]
    """
    return diagnose_records((registry if registry is not None else get_registry()).records())


# -- ranks -----------------------------------------------------------------------------------


# When ranks disagree evenly, the slower outcome is the odd one out.
_OUTCOME_COST = {"miss": 3, "bypass": 2, "none": 1, "hit": 0, "absent": 4}


def diagnose_ranks(ranks: Sequence[RankTimes]) -> list[Finding]:
    """Findings on a gathered multi-rank result: ranks whose graphs or cache outcomes differ
    from the others', per component (``rank_divergence``).

    >>> diagnose_ranks([])
    []
    """
    if len(ranks) < 2:
        return []
    if not all(r.graph_cache for r in ranks):
        return _graph_count_divergence(ranks)
    keys = list(dict.fromkeys(k for r in ranks for k in r.graph_cache))
    by_component: dict[str, list[tuple[str, dict[int, str]]]] = {}
    for key in keys:
        outcomes = {r.rank: r.graph_cache.get(key, "absent") for r in ranks}
        if len(set(outcomes.values())) > 1:
            by_component.setdefault(key.partition("/")[0], []).append((key, outcomes))
    findings = []
    for component, diverging in by_component.items():
        odd: set[int] = set()
        for _, outcomes in diverging:
            counts = Counter(outcomes.values())
            usual = max(counts, key=lambda o: (counts[o], -_OUTCOME_COST.get(o, 0)))
            odd |= {rank for rank, o in outcomes.items() if o != usual}
        seconds = [r.by_component.get(component, 0.0) for r in ranks]
        absent = [key for key, outcomes in diverging if "absent" in outcomes.values()]
        names = ", ".join(str(r) for r in sorted(odd))
        fixes = []
        if len(absent) < len(diverging):
            fixes.append(
                "give every rank the same warm cache: 'compiletrace cache save' once, then load it on every "
                "rank (--cache-artifacts), or point every rank's TORCHINDUCTOR_CACHE_DIR at one filled cache"
            )
        if absent:
            fixes.append(
                "make every rank compile the same graphs: rank-dependent shapes, inputs or branches compile "
                "graphs the others do not (pad to one shape, or mark the dimension dynamic)"
            )
        findings.append(
            Finding(
                FindingKind.RANK_DIVERGENCE,
                component,
                max(seconds) - min(seconds),
                f"rank{'s' if len(odd) > 1 else ''} {names} diverge{'' if len(odd) > 1 else 's'} from the "
                f"others on {len(diverging)} graph{'s' if len(diverging) > 1 else ''} of {component}",
                "; and ".join(fixes),
                "",
                {
                    "ranks": sorted(odd),
                    "graphs": {key: {str(k): v for k, v in o.items()} for key, o in diverging[:MAX_EXAMPLES]},
                    "graphs_diverging": len(diverging),
                    "seconds_by_rank": {str(r.rank): r.by_component.get(component, 0.0) for r in ranks},
                },
            )
        )
    return _ranked(findings)


def _graph_count_divergence(ranks: Sequence[RankTimes]) -> list[Finding]:
    # Figures from a compiletrace that did not save each graph's outcome: counts only.
    counts = Counter(r.graphs for r in ranks)
    usual = counts.most_common(1)[0][0]
    odd = sorted(r.rank for r in ranks if r.graphs != usual)
    if not odd:
        return []
    totals = [sum(r.by_component.values()) for r in ranks]
    return [
        Finding(
            FindingKind.RANK_DIVERGENCE,
            "",
            max(totals) - min(totals),
            f"ranks {', '.join(map(str, odd))} compiled a different number of graphs than the others "
            f"({usual})",
            "make every rank compile the same graphs: rank-dependent shapes, inputs or branches compile "
            "graphs the others do not",
            "",
            {"graphs_by_rank": {str(r.rank): r.graphs for r in ranks}, "ranks": odd},
        )
    ]
