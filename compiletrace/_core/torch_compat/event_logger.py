"""Torch's chromium event logger, teed: the regions torch times (the phase split of a
backend call, torch's own frame bounds) and its cache-lookup events (each lookup's key).
Both tees fill one thread-local sink, only inside a ``collect_*`` block; the frame and
lazy-backward regions also go to the one region listener.

What is used, and why:

- The chromium event logger of ``torch._dynamo.utils`` (``log_event_end``): every region
  torch times with ``dynamo_timed`` ends there with its start and end; collected during a
  backend call, they split that call into phases (AOTAutograd, Inductor, kernel compile,
  cache).
- Its instant events ``fx_graph_cache_*`` / ``autograd_cache_*`` (``log_instant_event``),
  read by the doctor: each cache lookup's outcome and key, handed to the lookups collector
  of ``cache_keys``.
- The regions torch times on a compiled graph's call, outside any compile (runtime
  autotuning, CUDA-graph recording): their ends go to the runtime listener, with the
  metadata their start carried (``log_event_start``: the kernel, forward or backward).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from compiletrace._core.torch_compat.cache_keys import note_cache_event
from compiletrace._core.torch_compat.frames import current_compile_context, current_compile_id
from compiletrace._data.phases import TimedRegion
from compiletrace._data.torch_text import (
    AOT_REGION,
    BACKEND_REGION,
    BACKWARD_REGION,
    CUDAGRAPH_REGIONS,
    FRAME_REGION,
    RUNTIME_AUTOTUNE_REGIONS,
)
from compiletrace._io.state import STATE, Slot, warn_once

# ---------------------------------------------------------------------------------------
# Torch's timed regions (for the phase split)
# ---------------------------------------------------------------------------------------

# Regions arrive as phases.TimedRegion: (name, start, end) in time.time_ns() nanoseconds.

# The regions whose bounds are torch's own figures for a whole frame compile
# (``entire_frame_compile_time_s``), a whole lazy backward compile and an ahead-of-time
# compile (their names: compiletrace._data.torch_text). Their ends arrive on the compiling
# thread whether or not torch's callbacks fired (its pending-callback counter is
# process-wide, so another thread's compile can swallow them).
_BOUNDARY_REGIONS = frozenset({FRAME_REGION, BACKWARD_REGION, AOT_REGION, BACKEND_REGION})

# (region name, compile id, start ns, end ns, the CompileContext object current at its end)
RegionListener = Callable[[str, "str | None", int, int, Any], None]

# The regions torch times on a compiled graph's first calls (its runtime metrics).
RUNTIME_REGIONS = frozenset({*RUNTIME_AUTOTUNE_REGIONS, *CUDAGRAPH_REGIONS})
# (region name, the graph's compile id or None, start ns, end ns, its start's metadata, whether
# a compile was open on the thread)
RuntimeListener = Callable[[str, "str | None", int, int, Mapping[str, Any], bool], None]


class _RegionSink(threading.local):
    regions: list[TimedRegion] | None = None
    frame: list[TimedRegion] | None = None  # every region of the frame compile open here
    runtime_starts: list[Mapping[str, Any]] | None = None  # metadata of open runtime regions


# Per thread (the compile running on it collects its regions): not process state.
_region_sink = _RegionSink()

# Receive the frame and lazy-backward region ends (the tracker's on_region), and the
# regions of a compiled graph's calls (its on_runtime_region).
_REGION_LISTENER: Slot[RegionListener | None] = STATE.slot("region listener", None)
_RUNTIME_LISTENER: Slot[RuntimeListener | None] = STATE.slot("runtime region listener", None)


def _event_logger_method(name: str) -> tuple[Any, Any] | None:
    """Torch's chromium event logger and its method ``name`` (to tee), or None when this
    torch does not have them where they were."""
    try:
        from torch._dynamo.utils import get_chromium_event_logger

        event_logger = get_chromium_event_logger()
        return event_logger, getattr(event_logger, name)
    except Exception:
        return None


def _tee(name: str, make: Callable[[Any], Any]) -> bool:
    """Replace the event logger's method ``name`` by ``make(original)`` (once: a method teed
    already is left alone); False when the logger or the method is not where it was."""
    found = _event_logger_method(name)
    if found is None:
        return False
    event_logger, original = found
    if not getattr(original, "_compiletrace_patched", False):
        teed = make(original)
        teed._compiletrace_patched = True
        setattr(event_logger, name, teed)
    return True


def install_region_hook(listener: RegionListener | None = None) -> bool:
    """Tee every region torch's ``dynamo_timed`` closes into the collector active on the
    calling thread, if any, and the frame and lazy-backward regions to ``listener``.
    Returns False (phases then all land in "other", frame bounds come from the callbacks)
    when torch's event logger is not where it was."""
    if listener is not None:
        with STATE.lock:
            _REGION_LISTENER.value = listener

    def make(original: Any) -> Any:
        def log_event_end(
            event_name: str, time_ns: int, metadata: Any, start_time_ns: int, *args: Any, **kwargs: Any
        ) -> Any:
            sink = _region_sink
            regions = sink.regions
            if regions is not None:
                regions.append((event_name, start_time_ns, time_ns))
            frame = sink.frame
            if frame is not None and frame is not regions:
                frame.append((event_name, start_time_ns, time_ns))
            if event_name in _BOUNDARY_REGIONS:
                _notify_region(event_name, start_time_ns, time_ns, args, kwargs)
            elif event_name in RUNTIME_REGIONS:
                _notify_runtime(event_name, start_time_ns, time_ns, args, kwargs)
            return original(event_name, time_ns, metadata, start_time_ns, *args, **kwargs)

        return log_event_end

    return _tee("log_event_end", make)


def _notify_region(name: str, start_ns: int, end_ns: int, args: Any, kwargs: Any) -> None:
    listener = _REGION_LISTENER.value
    if listener is None:
        return
    try:
        # log_event_end(name, time_ns, metadata, start_time_ns, log_pt2_compile_event, compile_id)
        explicit = kwargs.get("compile_id", args[1] if len(args) > 1 else None)
        compile_id = str(explicit) if explicit is not None else current_compile_id()
        listener(name, compile_id, start_ns, end_ns, current_compile_context())
    except Exception as exc:  # telemetry must never break a compile
        warn_once(f"reading a compile's bounds failed and was skipped: {exc!r}")


def install_runtime_hook(listener: RuntimeListener) -> bool:
    """Tell ``listener`` of every region torch times on a compiled graph's call (runtime
    autotuning, CUDA-graph recording), with the kernel and direction its start carried.
    Needs the region hook (:func:`install_region_hook`); False when torch's event logger is
    not where it was."""
    with STATE.lock:
        _RUNTIME_LISTENER.value = listener

    def make(original: Any) -> Any:
        def log_event_start(event_name: str, time_ns: int, metadata: Any, *args: Any, **kwargs: Any) -> Any:
            if event_name in RUNTIME_REGIONS:
                starts = _region_sink.runtime_starts
                if starts is None:
                    starts = _region_sink.runtime_starts = []
                starts.append(metadata if isinstance(metadata, Mapping) else {})
            return original(event_name, time_ns, metadata, *args, **kwargs)

        return log_event_start

    return _tee("log_event_start", make)


def _notify_runtime(name: str, start_ns: int, end_ns: int, args: Any, kwargs: Any) -> None:
    starts = _region_sink.runtime_starts
    metadata = starts.pop() if starts else {}
    listener = _RUNTIME_LISTENER.value
    if listener is None:
        return
    try:
        explicit = kwargs.get("compile_id", args[1] if len(args) > 1 else None)
        current = current_compile_id()
        compile_id = str(explicit) if explicit is not None else current
        listener(name, compile_id, start_ns, end_ns, metadata, current is not None)
    except Exception as exc:  # measuring must never break the model's call
        warn_once(f"reading a compiled graph's first-call work failed and was skipped: {exc!r}")


def frame_region_sink(regions: list[TimedRegion] | None) -> list[TimedRegion] | None:
    """Collect every region torch closes on this thread into ``regions`` (a frame compile's,
    from its start to its end; None stops); the sink it replaces."""
    previous = _region_sink.frame
    _region_sink.frame = regions
    return previous


def current_frame_region_sink() -> list[TimedRegion] | None:
    """The list :func:`frame_region_sink` set on this thread, if any."""
    return _region_sink.frame


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
# Torch's cache-lookup events (for each graph's cache keys)
# ---------------------------------------------------------------------------------------

# Torch's instant events for cache lookups: "<prefix><state>", state hit, miss, bypass
# (CACHE_EVENT_TIERS, CACHE_EVENT_OUTCOMES), collected by cache_keys.collect_cache_lookups.


def install_cache_lookup_hook() -> bool:
    """Tee torch's cache-lookup events (``fx_graph_cache_miss`` and the like, carrying the
    key) into the lookups collector active on the calling thread, if any. Returns False when
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
        note_cache_event(event_name, metadata)
        return original(event_name, time_ns, metadata, *args, **kwargs)

    log_instant_event._compiletrace_patched = True  # type: ignore[attr-defined]
    event_logger.log_instant_event = log_instant_event
    return True
