"""Every private torch API that compiletrace touches, in one place.

The next torch release may move any of these. The measuring accessors are guarded: when
the internal they need is missing or has changed shape, they return a neutral value and the
caller degrades (with one warning, issued by :func:`warn_once`), never crashing the user's
model. The few that compiling itself needs (the backend lookup, inductor's modes and
options) raise torch's own error instead, as ``torch.compile`` would.

What is used, and why:

- ``torch._dynamo.callback.callback_handler``: start/end callbacks around each frame
  compile and each lazy backward compile. The backend alone sees neither Dynamo's
  tracing and guard building nor the lazy backward.
- The ``_compile`` frame of ``torch._dynamo.convert_frame``: at a start callback it holds
  the code object being compiled and the backend (``compiler_fn``). Reading it tells
  whether a frame compile belongs to a compiletrace backend even when the frame
  produces no graph, and gives the frame's code name.
- ``torch._dynamo.utils.get_metrics_context()``: holds the recompile reason that Dynamo
  computed just before the start callback fires.
- ``torch._dynamo.utils.counters``: FX-graph-cache and AOTAutograd-cache counters, diffed
  around one backend call to learn that graph's cache outcome.
- The chromium event logger of ``torch._dynamo.utils`` (``log_event_end``): every region
  torch times with ``dynamo_timed`` ends there with its start and end; collected during a
  backend call, they split that call into phases (AOTAutograd, Inductor, kernel compile,
  cache).
- ``torch._dynamo.utils.get_compilation_metrics()``: torch's own per-frame figures, used
  by tests and benchmarks as an independent oracle.
- What the doctor reads (``compiletrace._app.doctor``): ``torch._dynamo.utils.graph_break_reasons``
  (torch appends one ``GraphCompileReason``, reason and user stack, per graph break), the
  metrics context's ``fail_*`` entries (why Dynamo gave up on a whole frame), the chromium
  event logger's instant events ``fx_graph_cache_*`` / ``autograd_cache_*`` (each lookup's
  outcome and key), the ``example_value`` Dynamo leaves on FX nodes (shapes, for a graph's
  structural hash), and ``convert_frame.exceeds_recompile_limit`` (wrapped: a frame past
  the limit fires no compile callback and runs eagerly from then on).
- ``torch._dynamo.symbolic_convert``: ``InstructionTranslator.run`` (Dynamo tracing a
  frame's own function) and ``InliningInstructionTranslator.inline_call`` (the classmethod
  that traces one inlined call), wrapped when ``trace_cost`` is asked for, to time Dynamo's
  tracing per user function.
- ``ProcessGroup._get_backend(device).options._timeout``: the timeout a process group was
  created with. ``monitored_barrier(timeout=None)`` waits torch's 30-minute default instead,
  so ``gather(timeout=None)`` passes the group's own.
- Cache artifacts: the globals torch's artifact pickles name (``CACHE_ARTIFACT_GLOBALS``),
  where each kind of artifact is written under the inductor cache directory, that
  directory itself (``torch._inductor.runtime.cache_dir_utils.cache_dir``), and torch's
  ``torch.compiler._cache`` logger. ``compiletrace._app.cache`` checks a file against
  them before torch unpickles any of it.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import os
import re
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from compiletrace._core.phases import TimedRegion
from compiletrace._io.state import STATE, warn_once

__all__ = [
    "BACKWARD_REGION",
    "CACHE_ARTIFACT_FIELD_USES",
    "CACHE_ARTIFACT_GLOBALS",
    "CACHE_ARTIFACT_JSON_KINDS",
    "FRAME_REGION",
    "GUARD_ARGUMENT",
    "GUARD_CALLS",
    "GUARD_CONSTANTS",
    "REFUSED_ARTIFACT_GLOBALS",
    "TRIGGER_DYNAMO",
    "TRIGGER_LAZY_BACKWARD",
    "ArtifactClassShape",
    "CacheCounts",
    "Capability",
    "CompileEventCallback",
    "CompilingFrame",
    "FieldUse",
    "RecompileLimitListener",
    "backend_failure_type",
    "cache_artifact_class_shape",
    "cache_artifact_location",
    "cache_artifact_object_paths",
    "cache_counts",
    "callbacks_available",
    "capabilities",
    "collect_cache_lookups",
    "collect_timed_regions",
    "compilation_metrics",
    "compiling_frame",
    "current_compile_context",
    "current_compile_id",
    "frame_failure",
    "graph_break_mark",
    "graph_breaks_since",
    "graph_structure_hash",
    "inductor_cache_dir",
    "inductor_config_keys",
    "inductor_mode_options",
    "innermost_backend",
    "install_cache_lookup_hook",
    "install_callbacks",
    "install_recompile_limit_hook",
    "install_region_hook",
    "install_trace_cost_hook",
    "is_restart",
    "list_backends",
    "lookup_backend",
    "on_dynamo_reset",
    "process_group_timeout",
    "quiet_cache_artifact_logs",
    "recompile_limit",
    "recompile_reason",
    "restart_reasons",
    "set_trace_collector",
    "trace_collector",
    "warn_missing_capabilities",
]

TRIGGER_DYNAMO = "DYNAMO"
TRIGGER_LAZY_BACKWARD = "LAZY_BACKWARD"

# (trigger name, compile id) -> None
CompileEventCallback = Callable[[str, str], None]

# ---------------------------------------------------------------------------------------
# Compile callbacks
# ---------------------------------------------------------------------------------------


def _callback_handler() -> Any | None:
    try:
        from torch._dynamo.callback import callback_handler
    except Exception:
        return None
    required = ("register_start_callback", "register_end_callback", "start_callbacks", "clear")
    if not all(hasattr(callback_handler, name) for name in required):
        return None
    return callback_handler


def callbacks_available() -> bool:
    """Whether this torch has the compile start/end callback API compiletrace needs."""
    return _callback_handler() is not None


class _CallbackAdapter:
    """Turns torch's callback argument (absent before ~2.8, ``CallbackArgs`` since) into
    ``(trigger name, compile id)`` and keeps any exception away from Dynamo: a start
    callback that raised would abort the user's compile."""

    def __init__(self, target: CompileEventCallback) -> None:
        self._target = target

    def __call__(self, args: Any = None) -> None:
        try:
            if args is None:
                trigger, compile_id = TRIGGER_DYNAMO, current_compile_id() or "?"
            else:
                trigger = getattr(args.callback_trigger, "name", str(args.callback_trigger))
                compile_id = str(args.compile_id)
            self._target(trigger, compile_id)
        except Exception as exc:  # telemetry must never break a compile
            warn_once(f"a compile callback failed and was ignored: {exc!r}")


@dataclass
class _Installation:
    on_start: _CallbackAdapter
    on_end: _CallbackAdapter


def on_dynamo_reset(listener: Callable[[], None]) -> None:
    """Call ``listener()`` after every ``torch._dynamo.reset()`` (once compile callbacks
    are installed): compile ids start again at "0/0" from then on."""
    with STATE.lock:
        STATE.reset_listeners.append(listener)


def install_callbacks(on_start: CompileEventCallback, on_end: CompileEventCallback) -> bool:
    """Register ``on_start``/``on_end`` with Dynamo, once per process, so that they survive
    ``torch._dynamo.reset()`` (which clears every registered callback).

    Returns False when this torch has no callback API; the caller then falls back to
    timing inside the backend alone.
    """
    handler = _callback_handler()
    if handler is None:
        return False
    with STATE.lock:
        if STATE.callbacks is None:
            STATE.callbacks = _Installation(_CallbackAdapter(on_start), _CallbackAdapter(on_end))
            _patch_clear(handler)
        ensure_callbacks_registered()
    return True


def ensure_callbacks_registered() -> bool:
    """Re-register the installed callbacks if something removed them. Returns True when
    they had to be re-registered."""
    handler = _callback_handler()
    inst: _Installation | None = STATE.callbacks
    if handler is None or inst is None:
        return False
    if inst.on_start in handler.start_callbacks:
        return False
    handler.register_start_callback(inst.on_start)
    handler.register_end_callback(inst.on_end)
    return True


def _patch_clear(handler: Any) -> None:
    # torch._dynamo.reset() calls callback_handler.clear(); re-register right after it so
    # that measuring never silently stops. Patched on the instance, not the class.
    original_clear = handler.clear
    if getattr(original_clear, "_compiletrace_patched", False):
        return

    def clear_and_reregister() -> None:
        original_clear()
        try:
            ensure_callbacks_registered()
            with STATE.lock:
                listeners = tuple(STATE.reset_listeners)
            for listener in listeners:
                listener()
        except Exception as exc:
            warn_once(f"could not re-register compile callbacks: {exc!r}")

    clear_and_reregister._compiletrace_patched = True  # type: ignore[attr-defined]
    handler.clear = clear_and_reregister


def uninstall_callbacks_for_tests() -> None:
    """Remove compiletrace's callbacks from Dynamo (test helper)."""
    handler = _callback_handler()
    inst: _Installation | None = STATE.callbacks
    if handler is None or inst is None:
        return
    for lst, cb in ((handler.start_callbacks, inst.on_start), (handler.end_callbacks, inst.on_end)):
        while cb in lst:
            lst.remove(cb)


# ---------------------------------------------------------------------------------------
# What is being compiled right now
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompilingFrame:
    """What a start callback can learn about the frame Dynamo is compiling."""

    code_name: str  # co_name of the frame's code ("forward", "torch_dynamo_resume_in_...")
    compiler_fn: Any  # the backend Dynamo will call, possibly wrapped by torch
    filename: str = ""  # co_filename of the frame's code
    first_line: int = 0  # co_firstlineno of the frame's code


_COMPILE_FRAME_NAME = "_compile"
_MAX_STACK_WALK = 40


def compiling_frame() -> CompilingFrame | None:
    """Find Dynamo's ``_compile`` frame on this thread's stack (called from a start
    callback) and read its code object and backend. None if not found."""
    try:
        frame = sys._getframe(1)
        for _ in range(_MAX_STACK_WALK):
            if frame is None:
                return None
            code = frame.f_code
            if code.co_name == _COMPILE_FRAME_NAME and "convert_frame" in code.co_filename:
                return _compiling_frame_of(frame)
            frame = frame.f_back  # type: ignore[assignment]
    except Exception:
        return None
    return None


def _compiling_frame_of(compile_frame: Any) -> CompilingFrame:
    """What Dynamo's ``_compile`` frame holds: the code it compiles and the backend."""
    f_locals = compile_frame.f_locals
    compiled_code = f_locals.get("code")
    return CompilingFrame(
        code_name=str(getattr(compiled_code, "co_name", "?")),
        compiler_fn=f_locals.get("compiler_fn"),
        filename=str(getattr(compiled_code, "co_filename", "") or ""),
        first_line=int(getattr(compiled_code, "co_firstlineno", 0) or 0),
    )


def innermost_backend(fn: Any) -> Any:
    """Unwrap torch's backend wrappers (debug wrappers, ``torch.compile``'s wrapper) down to
    the backend the user passed."""
    seen = 0
    while seen < 16:
        inner = getattr(fn, "_torchdynamo_orig_backend", None)
        if inner is None:
            # torch.compile(backend=callable) wraps it in _TorchCompileWrapper(compiler_fn=...)
            inner = getattr(fn, "compiler_fn", None) if type(fn).__name__ == "_TorchCompileWrapper" else None
        if inner is None or inner is fn:
            return fn
        fn = inner
        seen += 1
    return fn


def current_compile_id() -> str | None:
    """The compile id ("frame/attempt") of the compile running on this thread, if any."""
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
    except Exception:
        return None
    return None if cid is None else str(cid)


def current_compile_context() -> Any | None:
    """The ``CompileContext`` object of the compile running on this thread: its identity
    tells one compile from another after ``torch._dynamo.reset()`` reuses compile ids (a
    lazy backward runs under its forward's context)."""
    try:
        from torch._guards import CompileContext

        return CompileContext.try_get()
    except Exception:
        return None


def is_restart(exc: BaseException) -> bool:
    """Whether ``exc`` is Dynamo restarting its analysis of a frame (e.g. to turn a Python
    float into a tensor): Dynamo catches it and compiles the frame again, the user sees no
    error."""
    try:
        from torch._dynamo.exc import RestartAnalysis
    except Exception:
        return False
    return isinstance(exc, RestartAnalysis)


def backend_failure_type() -> str:
    """The exception type torch raises when a backend fails, or returns something that is
    not callable (as recorded in ``error_type``)."""
    try:
        from torch._dynamo.exc import BackendCompilerFailed
    except Exception:
        return "BackendCompilerFailed"
    return f"{BackendCompilerFailed.__module__}.{BackendCompilerFailed.__qualname__}"


def recompile_limit() -> int | None:
    """How many entries torch keeps per frame before it runs the frame eagerly."""
    try:
        return int(torch._dynamo.config.recompile_limit)
    except Exception:
        return None


def restart_reasons() -> list[str] | None:
    """Why Dynamo restarted its analysis of the frame compile ending on this thread (a
    graph break, a float turned into a tensor ...): torch's own set, filled in by the time
    its frame region ends. None when torch does not say."""
    try:
        from torch._dynamo.utils import get_metrics_context

        reasons = getattr(get_metrics_context(), "_metrics", {}).get("restart_reasons")
    except Exception:
        return None
    return None if reasons is None else sorted(str(r) for r in reasons)


def recompile_reason() -> str | None:
    """Dynamo's recompile reason for the frame compile in progress on this thread."""
    try:
        from torch._dynamo.utils import get_metrics_context

        metrics = getattr(get_metrics_context(), "_metrics", {})
        reason = metrics.get("recompile_reason")
    except Exception:
        return None
    return None if reason is None else str(reason)


# ---------------------------------------------------------------------------------------
# Torch's timed regions (for the phase split)
# ---------------------------------------------------------------------------------------

# Regions arrive as phases.TimedRegion: (name, start, end) in time.time_ns() nanoseconds.

# The regions whose bounds are torch's own figures for a whole frame compile
# (``entire_frame_compile_time_s``) and a whole lazy backward compile. Their ends arrive on
# the compiling thread whether or not torch's callbacks fired (its pending-callback counter
# is process-wide, so another thread's compile can swallow them).
FRAME_REGION = "entire_frame_compile"  # dynamo_timed("_compile.compile_inner", phase_name=...)
BACKWARD_REGION = "entire_backward_compile"  # dynamo_timed("backward._backward_impl", phase_name=...)
_BOUNDARY_REGIONS = frozenset({FRAME_REGION, BACKWARD_REGION})

# (region name, compile id, start ns, end ns, the CompileContext object current at its end)
RegionListener = Callable[[str, "str | None", int, int, Any], None]


class _RegionSink(threading.local):
    regions: list[TimedRegion] | None = None
    lookups: list[tuple[str, str, str, str]] | None = None  # see collect_cache_lookups


_region_sink = _RegionSink()


def _event_logger_method(name: str) -> tuple[Any, Any] | None:
    """Torch's chromium event logger and its method ``name`` (to tee), or None when this
    torch does not have them where they were."""
    try:
        from torch._dynamo.utils import get_chromium_event_logger

        event_logger = get_chromium_event_logger()
        return event_logger, getattr(event_logger, name)
    except Exception:
        return None


def install_region_hook(listener: RegionListener | None = None) -> bool:
    """Tee every region torch's ``dynamo_timed`` closes into the collector active on the
    calling thread, if any, and the frame and lazy-backward regions to ``listener``.
    Returns False (phases then all land in "other", frame bounds come from the callbacks)
    when torch's event logger is not where it was."""
    if listener is not None:
        with STATE.lock:
            STATE.region_listener = listener
    found = _event_logger_method("log_event_end")
    if found is None:
        return False
    event_logger, original = found
    if getattr(original, "_compiletrace_patched", False):
        STATE.region_hook_installed = True
        return True

    def log_event_end(
        event_name: str, time_ns: int, metadata: Any, start_time_ns: int, *args: Any, **kwargs: Any
    ) -> Any:
        regions = _region_sink.regions
        if regions is not None:
            regions.append((event_name, start_time_ns, time_ns))
        if event_name in _BOUNDARY_REGIONS:
            _notify_region(event_name, start_time_ns, time_ns, args, kwargs)
        return original(event_name, time_ns, metadata, start_time_ns, *args, **kwargs)

    log_event_end._compiletrace_patched = True  # type: ignore[attr-defined]
    event_logger.log_event_end = log_event_end
    STATE.region_hook_installed = True
    return True


def _notify_region(name: str, start_ns: int, end_ns: int, args: Any, kwargs: Any) -> None:
    listener: RegionListener | None = STATE.region_listener
    if listener is None:
        return
    try:
        # log_event_end(name, time_ns, metadata, start_time_ns, log_pt2_compile_event, compile_id)
        explicit = kwargs.get("compile_id", args[1] if len(args) > 1 else None)
        compile_id = str(explicit) if explicit is not None else current_compile_id()
        listener(name, compile_id, start_ns, end_ns, current_compile_context())
    except Exception as exc:  # telemetry must never break a compile
        warn_once(f"reading a compile's bounds failed and was skipped: {exc!r}")


@contextmanager
def collect_timed_regions() -> Iterator[list[TimedRegion]]:
    """Collect the timed regions torch closes on this thread inside the ``with`` block."""
    previous = _region_sink.regions
    regions: list[TimedRegion] = []
    _region_sink.regions = regions
    try:
        yield regions
    finally:
        _region_sink.regions = previous


# ---------------------------------------------------------------------------------------
# Cache counters
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheCounts:
    """Process-global cache counters at one instant."""

    fx_hit: int = 0
    fx_miss: int = 0
    fx_bypass: int = 0
    aot_hit: int = 0
    aot_miss: int = 0
    aot_bypass: int = 0

    def __sub__(self, other: CacheCounts) -> CacheCounts:
        return CacheCounts(
            self.fx_hit - other.fx_hit,
            self.fx_miss - other.fx_miss,
            self.fx_bypass - other.fx_bypass,
            self.aot_hit - other.aot_hit,
            self.aot_miss - other.aot_miss,
            self.aot_bypass - other.aot_bypass,
        )


def cache_counts() -> CacheCounts:
    try:
        from torch._dynamo.utils import counters

        ind: Mapping[str, int] = counters["inductor"]
        aot: Mapping[str, int] = counters["aot_autograd"]
        return CacheCounts(
            fx_hit=ind.get("fxgraph_cache_hit", 0),
            fx_miss=ind.get("fxgraph_cache_miss", 0),
            fx_bypass=ind.get("fxgraph_cache_bypass", 0),
            aot_hit=aot.get("autograd_cache_hit", 0),
            aot_miss=aot.get("autograd_cache_miss", 0) + aot.get("autograd_cache_guard_miss", 0),
            aot_bypass=aot.get("autograd_cache_bypass", 0),
        )
    except Exception:
        return CacheCounts()


# ---------------------------------------------------------------------------------------
# What the doctor reads: graph breaks, frames given up on, cache keys, graph structure,
# recompile-limit hits
# ---------------------------------------------------------------------------------------

MAX_REASON_CHARS = 2000  # torch's reasons carry hints and a link; a traceback is not kept


def graph_break_mark() -> int:
    """A mark in torch's list of graph-break records; :func:`graph_breaks_since` reads the
    ones added after it."""
    try:
        from torch._dynamo.utils import graph_break_reasons

        return len(graph_break_reasons)
    except Exception:
        return 0


def graph_breaks_since(mark: int) -> list[tuple[str, str, int]]:
    """The graph breaks torch recorded since ``mark``, as (reason, user file, line).

    Torch appends one record per break to a process-wide list (``torch._dynamo.reset()``
    clears it). Dynamo compiles one frame at a time, so the records added between a frame's
    start and its end are that frame's.
    """
    try:
        from torch._dynamo.utils import graph_break_reasons

        end = len(graph_break_reasons)
        start = mark if mark <= end else 0  # cleared by a reset since the mark
        found = []
        for item in graph_break_reasons[start:end]:
            stack = getattr(item, "user_stack", None) or []
            where = stack[-1] if stack else None  # the user's line, innermost
            found.append(
                (
                    str(getattr(item, "reason", ""))[:MAX_REASON_CHARS],
                    str(getattr(where, "filename", "") or ""),
                    int(getattr(where, "lineno", 0) or 0),
                )
            )
        return found
    except Exception:
        return []


def frame_failure() -> tuple[str, str, int] | None:
    """Why Dynamo gave up on the whole frame compile ending now (torch's ``Unsupported``:
    a graph break inside a loop, say), as (reason, user file, line); None when it did not.
    Read at the end of torch's frame region, once torch has filled in its metrics."""
    try:
        from torch._dynamo import exc as dynamo_exc
        from torch._dynamo.utils import get_metrics_context

        metrics = getattr(get_metrics_context(), "_metrics", {})
        fail_type = getattr(dynamo_exc, str(metrics.get("fail_type")), None)
        if not (isinstance(fail_type, type) and issubclass(fail_type, dynamo_exc.Unsupported)):
            return None
        return (
            str(metrics.get("fail_reason") or "")[:MAX_REASON_CHARS],
            str(metrics.get("fail_user_frame_filename") or ""),
            int(metrics.get("fail_user_frame_lineno") or 0),
        )
    except Exception:
        return None


# Torch's instant events for cache lookups: "<prefix><state>", state hit, miss, bypass.
_CACHE_EVENT_TIERS = (("fx_graph_cache_", "fx_graph"), ("autograd_cache_", "aot_autograd"))
_CACHE_STATES = frozenset({"hit", "miss", "bypass"})


def install_cache_lookup_hook() -> bool:
    """Tee torch's cache-lookup events (``fx_graph_cache_miss`` and the like, carrying the
    key) into the collector active on the calling thread, if any. Returns False when
    torch's event logger is not where it was (records then lack cache keys)."""
    found = _event_logger_method("log_instant_event")
    if found is None:
        return False
    event_logger, original = found
    if getattr(original, "_compiletrace_patched", False):
        return True

    def log_instant_event(
        event_name: str, time_ns: int, metadata: Any = None, *args: Any, **kwargs: Any
    ) -> Any:
        lookups = _region_sink.lookups
        if lookups is not None:
            _note_cache_lookup(lookups, event_name, metadata)
        return original(event_name, time_ns, metadata, *args, **kwargs)

    log_instant_event._compiletrace_patched = True  # type: ignore[attr-defined]
    event_logger.log_instant_event = log_instant_event
    return True


def _note_cache_lookup(lookups: list[tuple[str, str, str, str]], name: str, metadata: Any) -> None:
    try:
        for prefix, tier in _CACHE_EVENT_TIERS:
            if name.startswith(prefix) and name[len(prefix) :] in _CACHE_STATES:
                info = metadata if isinstance(metadata, Mapping) else {}
                detail = info.get("cache_bypass_reason") or ""
                lookups.append((tier, name[len(prefix) :], str(info.get("key") or ""), str(detail)[:200]))
                return
    except Exception as exc:  # measuring never breaks a compile
        warn_once(f"reading a cache lookup failed and was skipped: {exc!r}")


@contextmanager
def collect_cache_lookups() -> Iterator[list[tuple[str, str, str, str]]]:
    """Collect the cache lookups torch announces on this thread inside the ``with`` block,
    as (tier, outcome, key, bypass reason)."""
    previous = _region_sink.lookups
    lookups: list[tuple[str, str, str, str]] = []
    _region_sink.lookups = lookups
    try:
        yield lookups
    finally:
        _region_sink.lookups = previous


def graph_structure_hash(gm: Any) -> str | None:
    """A short hash of an FX graph's structure: each node's kind, target, output shape and
    dtype, and which earlier nodes and constants it takes. Node names, input names and
    parameter values are left out, so the same block compiled twice (two layers of a
    model, one per frame) hashes alike. None for something that is not an FX graph."""
    try:
        index: dict[Any, int] = {}
        # One flat token list, hashed once: far cheaper than text per node (~1 us a node).
        tokens: list[Any] = []
        for i, node in enumerate(gm.graph.nodes):
            index[node] = i
            op = node.op
            if op == "call_module":
                target = type(gm.get_submodule(node.target)).__qualname__
            elif op in ("placeholder", "get_attr", "output"):
                target = ""  # a name: two layers' inputs differ in name only
            elif isinstance(node.target, str):
                target = node.target
            else:
                target = getattr(node.target, "__qualname__", None) or type(node.target).__name__
                target = f"{getattr(node.target, '__module__', '')}.{target}"
            meta = node.meta
            tokens.append(op)
            tokens.append(target)
            _value_tokens(meta.get("example_value", meta.get("val")), tokens, 0)
            _arg_tokens(node.args, index, tokens)
            _arg_tokens(node.kwargs, index, tokens)
        return hashlib.blake2b(repr(tokens).encode(), digest_size=8).hexdigest()
    except Exception:
        return None


_CONSTANTS = (bool, int, float, str, type(None), torch.dtype, torch.device)


def _value_tokens(value: Any, tokens: list[Any], depth: int) -> None:
    if isinstance(value, torch.Tensor):
        tokens.append(value.dtype)
        tokens.append(tuple(value.shape))
    elif isinstance(value, (tuple, list)) and depth < 2:
        tokens.append(len(value))
        for v in value:
            _value_tokens(v, tokens, depth + 1)
    else:
        tokens.append(type(value).__name__)


def _arg_tokens(arg: Any, index: Mapping[Any, int], tokens: list[Any]) -> None:
    kind = type(arg)
    if kind is torch.fx.Node:
        tokens.append("%")  # an earlier node, by its position: never a constant
        tokens.append(index.get(arg, -1))
    elif kind is tuple or kind is list:
        tokens.append("(")
        for a in arg:
            _arg_tokens(a, index, tokens)
        tokens.append(")")
    elif isinstance(arg, dict):
        tokens.append("{")
        for k, v in arg.items():
            tokens.append(k)
            _arg_tokens(v, index, tokens)
        tokens.append("}")
    elif isinstance(arg, _CONSTANTS):
        tokens.append(arg)
    elif isinstance(arg, (tuple, list)):  # immutable_list and the like
        _arg_tokens(list(arg), index, tokens)
    else:
        tokens.append(type(arg).__name__)


# (compile id, the frame Dynamo refused to compile, torch's last recompile reason, the limit)
RecompileLimitListener = Callable[[str, "CompilingFrame | None", "str | None", "int | None"], None]


def install_recompile_limit_hook(listener: RecompileLimitListener) -> bool:
    """Tell ``listener`` when Dynamo refuses to compile a frame past its recompile limit.
    Dynamo then runs that frame eagerly, on this and every later call, and fires no compile
    callback for it: its check (``exceeds_recompile_limit``, where ``convert_frame`` calls it)
    is wrapped, and its caller, Dynamo's ``_compile`` frame, names the code and the backend.
    Returns False when the check is not where it was."""
    with STATE.lock:
        STATE.limit_listener = listener
        try:
            from torch._dynamo import convert_frame

            original = convert_frame.exceeds_recompile_limit
        except Exception:
            return False
        if getattr(original, "_compiletrace_patched", False):
            return True

        def exceeds_recompile_limit(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            try:
                exceeded, limit_type = result
                if exceeded:
                    _notify_limit(sys._getframe(1), str(limit_type))
            except Exception as exc:  # measuring never breaks a compile
                warn_once(f"reading a recompile-limit hit failed and was skipped: {exc!r}")
            return result

        exceeds_recompile_limit._compiletrace_patched = True  # type: ignore[attr-defined]
        convert_frame.exceeds_recompile_limit = exceeds_recompile_limit
        return True


def _notify_limit(caller: Any, limit_type: str) -> None:
    listener: RecompileLimitListener | None = STATE.limit_listener
    if listener is None:
        return
    frame = _compiling_frame_of(caller) if caller.f_code.co_name == _COMPILE_FRAME_NAME else None
    reason = caller.f_locals.get("recompile_reason") if frame is not None else None
    try:
        limit: int | None = int(getattr(torch._dynamo.config, limit_type))
    except Exception:
        limit = recompile_limit()
    listener(current_compile_id() or "?", frame, None if reason is None else str(reason), limit)


# ---------------------------------------------------------------------------------------
# Tracing cost: Dynamo's time per user function
# ---------------------------------------------------------------------------------------


class _TraceSink(threading.local):
    # The collector of the frame compiling on this thread with trace_cost on (else None):
    # the one attribute the hooks check when tracing cost is off.
    collector: Any = None


_trace_sink = _TraceSink()
_user_files: dict[str, bool] = {}  # file -> whether its functions get nodes of their own


def set_trace_collector(collector: Any) -> None:
    """Make ``collector`` (a ``TraceCollector``, or None) receive this thread's traced calls."""
    _trace_sink.collector = collector


def trace_collector() -> Any:
    """The collector receiving this thread's traced calls, or None."""
    return _trace_sink.collector


@functools.cache
def _folded_dirs() -> tuple[str, str, tuple[str, ...]]:
    """(torch's package, Python's standard library, the site-packages inside it)."""
    paths = sysconfig.get_paths()
    site = tuple(os.path.join(os.path.realpath(paths[k]), "") for k in ("purelib", "platlib"))
    stdlib = os.path.join(os.path.realpath(paths["stdlib"]), "")
    torch_dir = os.path.join(os.path.realpath(os.path.dirname(torch.__file__)), "")
    return torch_dir, stdlib, site


def _is_user_file(filename: str) -> bool:
    # torch's and Python's own functions fold into their user caller; installed packages
    # (transformers, ...) are the user's.
    known = _user_files.get(filename)
    if known is None:
        torch_dir, stdlib, site = _folded_dirs()
        real = os.path.realpath(filename)
        known = _user_files[filename] = not (
            filename.startswith("<")
            or real.startswith(torch_dir)
            or (real.startswith(stdlib) and not real.startswith(site))
        )
    return known


def _enter(collector: Any, code: Any, always: bool) -> bool:
    try:
        if not always and not _is_user_file(code.co_filename):
            return False
        name = getattr(code, "co_qualname", code.co_name)
        collector.enter(name, code.co_filename, code.co_firstlineno)
        return True
    except Exception as exc:  # measuring never breaks a compile
        warn_once(f"timing a traced function failed and was skipped: {exc!r}")
        return False


def install_trace_cost_hook() -> bool:
    """Time Dynamo's tracing of each frame's own function (``InstructionTranslator.run``)
    and of each function it inlines (``InliningInstructionTranslator.inline_call``, the
    classmethod that traces one inlined call's body), into the thread's collector. Installed
    once; with no collector a hook costs one attribute check. Returns False (records then
    have no ``trace_cost``, with one warning) when either is not where it was."""
    with STATE.lock:  # installed once per process, as the callbacks are
        try:
            from torch._dynamo.symbolic_convert import InliningInstructionTranslator, InstructionTranslator

            inline = InliningInstructionTranslator.__dict__["inline_call"]
            inline_fn = inline.__func__
            run_fn = InstructionTranslator.run
            found = isinstance(inline, classmethod) and callable(run_fn)
        except Exception:
            found = False
        if not found:
            warn_once(
                f"this torch ({torch.__version__}) lacks inline timing: records will lack trace_cost",
                key="capability:inline timing",
            )
            return False
        if getattr(inline_fn, "_compiletrace_patched", False):
            return True

        def inline_call(cls: Any, parent: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            collector = _trace_sink.collector
            if collector is None:
                return inline_fn(cls, parent, func, *args, **kwargs)
            entered = _enter(collector, func.get_code(), always=False)
            try:
                return inline_fn(cls, parent, func, *args, **kwargs)
            finally:
                if entered:
                    collector.leave()

        def run(self: Any) -> Any:
            collector = _trace_sink.collector
            if collector is None:
                return run_fn(self)
            entered = _enter(collector, self.f_code, always=True)
            try:
                return run_fn(self)
            finally:
                if entered:
                    collector.leave()

        inline_call._compiletrace_patched = True  # type: ignore[attr-defined]
        InliningInstructionTranslator.inline_call = classmethod(inline_call)  # type: ignore[method-assign,assignment]
        InstructionTranslator.run = run  # type: ignore[method-assign]
        return True


# ---------------------------------------------------------------------------------------
# Backends and inductor configuration
# ---------------------------------------------------------------------------------------


def lookup_backend(name: str) -> Callable[..., Any]:
    """The backend torch registers under ``name`` (raises torch's error for unknown names).

    "inductor" goes straight to ``compile_fx``, as torch's registered inductor backend and
    ``torch.compile``'s own inductor wrapper do: a lookup by name first imports every
    registered backend module and scans the installed packages' entry points, seconds of
    start-up that ``torch.compile(backend="inductor")`` itself never pays.
    """
    if name == "inductor":
        return _inductor_compile_fx
    from torch._dynamo import lookup_backend as _lookup

    return _lookup(name)  # type: ignore[no-any-return]


def _inductor_compile_fx(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs, **kwargs)


def list_backends() -> list[str]:
    """Every backend name torch accepts, debug ones ("eager", "aot_eager") included."""
    try:
        from torch._dynamo import list_backends as _list

        return sorted(set(_list(exclude_tags=())))
    except Exception:
        return sorted(set(torch._dynamo.list_backends()))


def inductor_mode_options(mode: str, dynamic: bool | None) -> dict[str, Any]:
    """Inductor config patches for a ``torch.compile`` mode (raises RuntimeError for an
    unknown mode, as torch does)."""
    from torch._inductor import list_mode_options

    return dict(list_mode_options(mode, dynamic))


def inductor_modes() -> list[str]:
    from torch._inductor import list_mode_options

    return sorted(list_mode_options())


def inductor_config_keys() -> set[str]:
    from torch._inductor import config

    return set(config.get_config_copy())


# ---------------------------------------------------------------------------------------
# Oracles and resets
# ---------------------------------------------------------------------------------------


def compilation_metrics() -> list[Any]:
    """Torch's own per-compile metrics (``CompilationMetrics``), oldest first."""
    try:
        from torch._dynamo.utils import get_compilation_metrics

        return list(get_compilation_metrics())
    except Exception:
        return []


def suppress_errors() -> bool:
    """Whether Dynamo falls back to eager when a backend fails."""
    try:
        return bool(torch._dynamo.config.suppress_errors)
    except Exception:
        return False


@contextmanager
def patched_suppress_errors(value: bool) -> Iterator[None]:
    with torch._dynamo.config.patch(suppress_errors=value):
        yield


# ---------------------------------------------------------------------------------------
# Distributed
# ---------------------------------------------------------------------------------------

DEFAULT_PROCESS_GROUP_TIMEOUT_S = 1800.0  # torch's default_pg_timeout, 30 minutes


def process_group_timeout(group: Any, device: Any) -> float:
    """The timeout (seconds) ``group`` (the default group if None) was created with, read
    from its backend for ``device``. When torch no longer keeps it there: torch's default
    (30 minutes), with one warning."""
    try:
        import torch.distributed as dist

        pg = group if group is not None else dist.group.WORLD
        seconds = float(pg._get_backend(device).options._timeout.total_seconds())
        if seconds > 0:
            return seconds
    except Exception:
        pass
    warn_once(
        "could not read the process group's timeout; gather() waits up to "
        f"{DEFAULT_PROCESS_GROUP_TIMEOUT_S / 60:g} minutes for the other ranks (pass timeout= to bound it)",
        key="process_group_timeout",
    )
    return DEFAULT_PROCESS_GROUP_TIMEOUT_S


# ---------------------------------------------------------------------------------------
# Cache artifacts (torch.compiler.save_cache_artifacts / load_cache_artifacts)
# ---------------------------------------------------------------------------------------

# Every global the pickles inside torch 2.13's cache artifacts name, per artifact kind:
# the globals that real artifacts referenced when saved from CPU inductor compiles
# (functions, modules with parameters and buffers, conv + batch norm, bf16, dynamic shapes,
# max-autotune, a training step with its backward, the built-in demo model), listed with a
# stand-in unpickler; for "pgo", a job_id run with automatic dynamic shapes, plus the
# sentinels its dataclass fields hold (AutoUnset, InferStride). Nothing here runs code
# from the file while it is unpickled; see REFUSED_ARTIFACT_GLOBALS for what does.
_AOT = "torch._functorch._aot_autograd"
CACHE_ARTIFACT_GLOBALS: dict[str, frozenset[tuple[str, str]]] = {
    "inductor": frozenset(
        {
            ("collections", "Counter"),
            ("torch._inductor.cudagraph_utils", "BoxedDeviceIndex"),
            ("torch._inductor.decomposition", "select_decomp_table"),
            ("torch._inductor.metrics", "CachedMetricsDeltas"),
            ("torch._inductor.output_code", "CompiledFxGraph"),
            ("torch._inductor.triton_bundler", "TritonBundle"),
            ("torch._inductor.utils", "BoxedBool"),
            ("torch.utils._ordered_set", "OrderedSet"),
        }
    ),
    "aot_autograd": frozenset(
        {
            ("builtins", "list"),
            ("collections", "OrderedDict"),
            ("collections", "defaultdict"),
            ("torch", "Tensor"),
            ("torch._utils", "torch.contiguous_format"),
            ("torch._subclasses.functional_tensor", "FunctionalTensor"),
            *(
                ("torch._dynamo.source", name)
                for name in (
                    "AttrSource",
                    "DictGetItemSource",
                    "GetItemSource",
                    "LocalSource",
                    "TensorProperty",
                    "TensorPropertySource",
                    "UnspecializedBuiltinNNModuleSource",
                    "UnspecializedNNModuleSource",
                    "UnspecializedParamBufferSource",
                )
            ),
            *(
                (f"{_AOT}.aot_autograd_result", name)
                for name in (
                    "AOTAutogradResult",
                    "CompiledBackward",
                    "CompiledForward",
                    "SerializedGraphModule",
                )
            ),
            (f"{_AOT}.descriptors", "PlainAOTOutput"),
            (f"{_AOT}.descriptors", "TangentAOTInput"),
            (f"{_AOT}.runtime_wrappers", "AOTDedupeWrapper"),
            (f"{_AOT}.runtime_wrappers", "AOTSyntheticBaseWrapper"),
            *(
                (f"{_AOT}.schemas", name)
                for name in (
                    "CacheableAOTConfig",
                    "InputAliasInfo",
                    "MemoryFormatMeta",
                    "MutationType",
                    "OutputAliasInfo",
                    "OutputType",
                    "PlainTensorMeta",
                    "ViewAndMutationMeta",
                )
            ),
        }
    ),
    "pgo": frozenset(
        {
            ("collections", "defaultdict"),
            *(
                ("torch._dynamo.pgo", name)
                for name in (
                    "AutoDynamic",
                    "AutoUnset",
                    "CodeId",
                    "CodeState",
                    "FrameStateSizeEntry",
                    "InferStride",
                )
            ),
        }
    ),
}

# Artifact kinds whose content is JSON (read with json.loads, never unpickled).
CACHE_ARTIFACT_JSON_KINDS = frozenset({"autotune"})

# Globals torch's own artifacts use that are refused all the same, and why.
REFUSED_ARTIFACT_GLOBALS: dict[tuple[str, str], str] = {
    # A saved backward graph (CompiledBackward) is rebuilt by exec-ing Python source that
    # the file carries, the moment it is unpickled.
    ("torch.fx.graph_module", "reduce_graph_module"): (
        "which rebuilds a graph module by running Python source from the file (torch saves "
        "backward graphs this way)"
    ),
}


# What torch *does* with the fields of the classes above, beyond keeping them as data: each
# field it turns into a path, a directory, an expression it evaluates, or code it runs, or
# must find empty because what it would hold is not on the list. compiletrace._app.cache
# checks every one of them (the "use"), so an allowed class cannot carry a hostile value
# into any of these. A field absent here is data torch only keeps, compares or prints.
class FieldUse(enum.Enum):
    FILE_NAME = "a file name torch joins under the cache directory"
    GUARD_EXPRESSION = "a Python expression torch evaluates (eval) when a compile looks the entry up"
    CODE = "source code torch writes and imports when a compile hits the entry"
    MUST_BE_EMPTY = "a list whose entries torch would unpack into files and directories"


_OUTPUT_CODE = ("torch._inductor.output_code", "CompiledFxGraph")
_TRITON_BUNDLE = ("torch._inductor.triton_bundler", "TritonBundle")
CACHE_ARTIFACT_FIELD_USES: dict[tuple[tuple[str, str], str], FieldUse] = {
    # CompiledFxGraph.write_to_disk: get_path(cache_key, "py") -> <cache>/<key[1:3]>/<key>.py
    (_OUTPUT_CODE, "cache_key"): FieldUse.FILE_NAME,
    # GuardedCache.iterate_over_candidates -> ShapeEnv.evaluate_guards_expression -> eval
    (_OUTPUT_CODE, "guards_expr"): FieldUse.GUARD_EXPRESSION,
    # after_deserialization writes it to the .py above and PyCodeCache imports it
    (_OUTPUT_CODE, "source_code"): FieldUse.CODE,
    # TritonBundler.read_and_emit: os.path.join(triton dir, kernel_hash), then each
    # artifact's filename under it (the Triton kernel classes are not on the list: CPU only)
    (_TRITON_BUNDLE, "kernel_artifacts"): FieldUse.MUST_BE_EMPTY,
    # TritonBundler.load_autotuners rebuilds kernels from them
    (_TRITON_BUNDLE, "static_autotuners"): FieldUse.MUST_BE_EMPTY,
    # FxGraphCacheLoadable.load: FxGraphCache.load_with_key(fx_graph_cache_info[0]) ->
    # <cache>/fxgraph/<key[1:3]>/<key>
    ((f"{_AOT}.aot_autograd_result", "CompiledForward"), "fx_graph_cache_info"): FieldUse.FILE_NAME,
    ((f"{_AOT}.aot_autograd_result", "CompiledBackward"), "fx_graph_cache_info"): FieldUse.FILE_NAME,
    # AOTAutogradResult.wrap_post_compile / AOTAutogradCache lookups evaluate it as above
    ((f"{_AOT}.aot_autograd_result", "AOTAutogradResult"), "guards_expr"): FieldUse.GUARD_EXPRESSION,
}

# The guard expressions torch writes (ShapeEnv.produce_guards_expression with the Python
# printer of torch.utils._sympy.printers): arguments L['t0'], L['t1'], ..., these calls
# and constants, and operators. It evaluates them with the globals of SYMPY_INTERP, which
# hold the modules ``torch`` and ``math``, so any other name or attribute could reach any
# code: the check admits these and nothing else.
GUARD_ARGUMENT = re.compile(r"t[0-9]{1,6}")
GUARD_CALLS = frozenset(
    {
        "IsNonOverlappingAndDenseIndicator",
        "cast_symbool_to_symint_guardless",
        "abs",
        "max",
        "min",
        "round",
        "torch.sym_float",
        "torch._sym_sqrt",
        *(
            f"math.{name}"
            for name in ("floor", "ceil", "trunc", "cos", "cosh", "acos", "sin", "sinh", "asin", "tan")
        ),
        *(f"math.{name}" for name in ("tanh", "atan", "log2")),
    }
)
GUARD_CONSTANTS = frozenset({"math.inf", "math.nan"})


@dataclass(frozen=True)
class ArtifactClassShape:
    """What an object of an allowed global may look like in a pickle, read off the class
    the installed torch defines (not written down by hand, so it moves with torch)."""

    attributes: frozenset[str] | None  # names its state may set; None: it takes no state
    max_args: int  # positional arguments a REDUCE or NEWOBJ may pass it
    items: bool  # it is a container that APPENDS / SETITEMS may fill


_CONTAINERS = frozenset(
    {
        ("builtins", "list"),
        ("collections", "Counter"),
        ("collections", "OrderedDict"),
        ("collections", "defaultdict"),
        ("torch.utils._ordered_set", "OrderedSet"),
    }
)


def _resolve_global(ref: tuple[str, str]) -> Any:
    """The object ``module.name`` names in the installed torch (imports torch's or the
    standard library's own module, never anything from a file), or None."""
    import importlib

    module, name = ref
    try:
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except Exception:
        return None
    return obj


def _attributes_assigned_in(klass: type) -> set[str]:
    """The attributes a class's own methods set on ``self`` (``self.x = ...``,
    ``object.__setattr__(self, "x", ...)``), read from its source: what ``__post_init__``
    or ``__init__`` adds beyond the declared fields."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
    except (OSError, TypeError, SyntaxError, ValueError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                found.add(node.attr)
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            func = node.func
            is_setattr = (isinstance(func, ast.Name) and func.id == "setattr") or (
                isinstance(func, ast.Attribute) and func.attr == "__setattr__"
            )
            target, name = node.args[0], node.args[1]
            if (
                is_setattr
                and isinstance(target, ast.Name)
                and target.id == "self"
                and isinstance(name, ast.Constant)
                and isinstance(name.value, str)
            ):
                found.add(name.value)
    return found


@functools.cache
def cache_artifact_class_shape(ref: tuple[str, str]) -> ArtifactClassShape | None:
    """The shape objects of the allowed global ``ref`` take in a pickle, derived from the
    installed torch's own class: a dataclass's fields, a class's annotated and slotted
    attributes, a function's parameters. None when this torch has no such global (an
    artifact naming it cannot be checked, so it is refused).

    >>> cache_artifact_class_shape(("torch._inductor.utils", "BoxedBool")).attributes
    frozenset({'value'})
    >>> cache_artifact_class_shape(("collections", "Counter")).items
    True
    """
    import dataclasses
    import inspect

    obj = _resolve_global(ref)
    if obj is None:
        return None
    if ref in _CONTAINERS:
        return ArtifactClassShape(None, 1, True)
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        return ArtifactClassShape(None, 1, False)
    if isinstance(obj, type):
        names: set[str] = set()
        for klass in obj.__mro__:
            if klass is object:
                continue
            names.update(inspect.get_annotations(klass))
            slots = klass.__dict__.get("__slots__", ())
            names.update((slots,) if isinstance(slots, str) else slots)
            names.update(_attributes_assigned_in(klass))
            # a cached_property keeps its value in the instance dict, under its own name
            names.update(k for k, v in klass.__dict__.items() if isinstance(v, functools.cached_property))
        if dataclasses.is_dataclass(obj):
            names.update(f.name for f in dataclasses.fields(obj))
        try:
            params = inspect.signature(obj).parameters.values()
            max_args = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        except (TypeError, ValueError):
            max_args = len(names)
        return ArtifactClassShape(frozenset(n for n in names if not n.startswith("__")), max_args, False)
    if callable(obj):  # a function torch calls with arguments from the file
        try:
            params = inspect.signature(obj).parameters.values()
            max_args = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        except (TypeError, ValueError):
            max_args = 0
        return ArtifactClassShape(None, max_args, False)
    return ArtifactClassShape(None, 0, False)  # a constant (a memory format, say)


def cache_artifact_location(kind: str, key: str) -> tuple[str, ...] | None:
    """The path, as parts under the inductor cache directory, where torch 2.13 writes an
    artifact of ``kind`` with ``key`` when it loads it; None for a kind compiletrace does
    not know (``precompile`` writes under a prefix of its own).

    >>> cache_artifact_location("inductor", "fabcdef")
    ('fxgraph', 'ab', 'fabcdef')
    >>> cache_artifact_location("autotune", "ab/cd.best_config")
    ('ab', 'cd.best_config')
    """
    if kind == "inductor":  # FxGraphCache._get_tmp_dir_for_key
        return ("fxgraph", key[1:3], key)
    if kind == "aot_autograd":  # AOTAutogradCache._get_tmp_dir_for_key
        return ("aotautograd", key)
    if kind == "autotune":  # AutotuneCacheArtifact.populate_cache joins the key as a path
        return tuple(key.split("/"))
    if kind == "pgo":  # pgo.code_state_path sanitises the key into one file name
        return ("dynamo", re.sub(r'[<>:"/\\|?*]', "_", f"code_state_{key}.pkl"))
    return None


def cache_artifact_object_paths(
    cls: tuple[str, str], fields: Mapping[str, Any]
) -> list[tuple[str, str, tuple[str, ...]]]:
    """Paths under the inductor cache directory that torch builds from the fields of an
    unpickled artifact object ``cls``, as (field, value, parts): a compiled graph writes its source
    to ``<key[1:3]>/<cache_key>.py`` (``CompiledFxGraph.write_to_disk``); a compiled forward
    or backward looks its graph up in ``fxgraph/<key[1:3]>/<key>``."""
    found: list[tuple[str, str, tuple[str, ...]]] = []
    if cls == ("torch._inductor.output_code", "CompiledFxGraph"):
        key = fields.get("cache_key")
        if isinstance(key, str):
            found.append(("cache_key", key, (key[1:3], f"{key}.py")))
    elif cls[0] == f"{_AOT}.aot_autograd_result" and cls[1] in ("CompiledForward", "CompiledBackward"):
        info = fields.get("fx_graph_cache_info")
        key = info[0] if isinstance(info, tuple) and info else None
        if isinstance(key, str):
            found.append(("fx_graph_cache_info", key, ("fxgraph", key[1:3], key)))
    return found


def inductor_cache_dir() -> str | None:
    """The directory torch's on-disk compile caches live under now (created if missing),
    or None, with one warning, when this torch does not say."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        return str(cache_dir())
    except Exception as exc:
        warn_once(
            f"cannot tell where torch keeps its compile caches ({exc!r}); cache artifacts are "
            "checked for absolute paths and '..' only",
            key="inductor_cache_dir",
        )
        return None


@contextmanager
def quiet_cache_artifact_logs() -> Iterator[None]:
    """Keep torch's cache-artifact logger from printing a traceback for a file it cannot
    read (it logs one and returns None): compiletrace reports the failure on one line."""
    import logging

    logger = logging.getLogger("torch.compiler._cache")
    previous = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = previous


# ---------------------------------------------------------------------------------------
# Capabilities: which of the above this torch gives, checked once at install
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Capability:
    """One torch internal compiletrace measures with, and what records lack without it."""

    name: str
    available: bool
    lacking: str  # what the records lack when it is missing


def _has(probe: Callable[[], object]) -> bool:
    try:
        return bool(probe())
    except Exception:
        return False


def _frame_identity() -> bool:
    from torch._dynamo import convert_frame

    names = convert_frame._compile.__code__.co_varnames
    return "code" in names and "compiler_fn" in names


def _recompile_reasons() -> bool:
    from torch._dynamo.utils import get_metrics_context

    return hasattr(get_metrics_context(), "_metrics")


def _cache_counters() -> bool:
    from torch._dynamo.utils import counters

    return isinstance(counters["inductor"], Mapping)


def _timed_regions() -> bool:
    from torch._dynamo.utils import get_chromium_event_logger

    return callable(get_chromium_event_logger().log_event_end)


def _lazy_backward_callbacks() -> bool:
    from torch._dynamo.callback import CallbackTrigger

    return hasattr(CallbackTrigger, TRIGGER_LAZY_BACKWARD)


def _compile_context() -> bool:
    from torch._guards import CompileContext

    return callable(CompileContext.try_get)


def _portable_caches() -> bool:
    return callable(torch.compiler.save_cache_artifacts) and callable(torch.compiler.load_cache_artifacts)


def _metrics_oracle() -> bool:
    from torch._dynamo.utils import get_compilation_metrics

    return callable(get_compilation_metrics)


def _graph_break_records() -> bool:
    from torch._dynamo.utils import graph_break_reasons

    return isinstance(graph_break_reasons, list)


def _cache_lookup_events() -> bool:
    from torch._dynamo.utils import ChromiumEventLogger

    return callable(ChromiumEventLogger.log_instant_event)


def _inline_timing() -> bool:
    from torch._dynamo.symbolic_convert import InliningInstructionTranslator, InstructionTranslator

    inline = InliningInstructionTranslator.__dict__.get("inline_call")
    return isinstance(inline, classmethod) and callable(InstructionTranslator.run)


def _recompile_limit_check() -> bool:
    from torch._dynamo import convert_frame

    return callable(convert_frame.exceeds_recompile_limit)


# (name, probe, what records lack without it), in the order the table shows them.
_CAPABILITIES: tuple[tuple[str, Callable[[], object], str], ...] = (
    ("frame callbacks", callbacks_available, "Dynamo tracing and guard time (backend time only)"),
    ("frame identity", _frame_identity, "code names and locations, and frames that compile no graph"),
    ("recompile reasons", _recompile_reasons, "recompile reasons"),
    ("cache counters", _cache_counters, "cache outcomes (hit, miss, bypass)"),
    (
        "timed regions",
        _timed_regions,
        "the backend phase split, torch's exact frame bounds, and lazy backwards compiled "
        "while another thread compiles",
    ),
    (
        "lazy-backward callbacks",
        _lazy_backward_callbacks,
        "lazy backward time where timed regions are missing",
    ),
    ("compile context", _compile_context, "a lazy backward's graph after torch._dynamo.reset()"),
    ("portable caches", _portable_caches, "cache save/load and portable start-up iterations"),
    ("compilation metrics", _metrics_oracle, "nothing (torch's own figures, used to check compiletrace's)"),
    ("graph-break records", _graph_break_records, "graph-break reasons and locations"),
    ("cache lookup events", _cache_lookup_events, "cache keys"),
    (
        "recompile-limit check",
        _recompile_limit_check,
        "frames that hit torch's recompile limit and run eagerly",
    ),
    ("inline timing", _inline_timing, "trace_cost (Dynamo's time per user function)"),
)


def capabilities() -> tuple[Capability, ...]:
    """What this torch gives compiletrace to measure with.

    >>> all(c.available for c in capabilities())  # on the torch the package is tested on
    True
    """
    return tuple(Capability(name, _has(probe), lacking) for name, probe, lacking in _CAPABILITIES)


def warn_missing_capabilities() -> list[Capability]:
    """Warn once per missing capability, naming what the records will lack; returns them."""
    missing = [c for c in capabilities() if not c.available]
    for cap in missing:
        warn_once(
            f"this torch ({torch.__version__}) lacks {cap.name}: records will lack {cap.lacking}",
            key=f"capability:{cap.name}",
        )
    return missing
