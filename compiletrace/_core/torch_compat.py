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
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from compiletrace._core.phases import TimedRegion
from compiletrace._io.state import STATE, warn_once

__all__ = [
    "TRIGGER_DYNAMO",
    "TRIGGER_LAZY_BACKWARD",
    "CacheCounts",
    "CompileEventCallback",
    "CompilingFrame",
    "cache_counts",
    "callbacks_available",
    "collect_timed_regions",
    "compilation_metrics",
    "compiling_frame",
    "current_compile_id",
    "inductor_config_keys",
    "inductor_mode_options",
    "innermost_backend",
    "install_callbacks",
    "install_region_hook",
    "list_backends",
    "lookup_backend",
    "on_dynamo_reset",
    "recompile_reason",
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
                f_locals = frame.f_locals
                compiled_code = f_locals.get("code")
                compiler_fn = f_locals.get("compiler_fn")
                name = getattr(compiled_code, "co_name", "?")
                return CompilingFrame(code_name=str(name), compiler_fn=compiler_fn)
            frame = frame.f_back  # type: ignore[assignment]
    except Exception:
        return None
    return None


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


class _RegionSink(threading.local):
    regions: list[TimedRegion] | None = None


_region_sink = _RegionSink()


def install_region_hook() -> bool:
    """Tee every region torch's ``dynamo_timed`` closes into the collector active on the
    calling thread, if any. Returns False (phases then all land in "other") when torch's
    event logger is not where it was."""
    try:
        from torch._dynamo.utils import get_chromium_event_logger

        event_logger = get_chromium_event_logger()
        original = event_logger.log_event_end
    except Exception:
        return False
    if getattr(original, "_compiletrace_patched", False):
        STATE.region_hook_installed = True
        return True

    def log_event_end(
        event_name: str, time_ns: int, metadata: Any, start_time_ns: int, *args: Any, **kwargs: Any
    ) -> Any:
        regions = _region_sink.regions
        if regions is not None:
            regions.append((event_name, start_time_ns, time_ns))
        return original(event_name, time_ns, metadata, start_time_ns, *args, **kwargs)

    log_event_end._compiletrace_patched = True  # type: ignore[attr-defined]
    event_logger.log_event_end = log_event_end
    STATE.region_hook_installed = True
    return True


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
