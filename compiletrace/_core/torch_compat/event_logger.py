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
  read by the doctor: each cache lookup's outcome and key.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from compiletrace._core.torch_compat.frames import current_compile_context, current_compile_id
from compiletrace._data.phases import TimedRegion
from compiletrace._data.torch_text import (
    AOT_REGION,
    BACKEND_REGION,
    BACKWARD_REGION,
    CACHE_EVENT_OUTCOMES,
    CACHE_EVENT_TIERS,
    FRAME_REGION,
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


class _RegionSink(threading.local):
    regions: list[TimedRegion] | None = None
    lookups: list[tuple[str, str, str, str]] | None = None  # see collect_cache_lookups


# Per thread (the compile running on it collects its regions): not process state.
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


# Receives the frame and lazy-backward region ends (the tracker's on_region).
_REGION_LISTENER: Slot[RegionListener | None] = STATE.slot("region listener", None)


def install_region_hook(listener: RegionListener | None = None) -> bool:
    """Tee every region torch's ``dynamo_timed`` closes into the collector active on the
    calling thread, if any, and the frame and lazy-backward regions to ``listener``.
    Returns False (phases then all land in "other", frame bounds come from the callbacks)
    when torch's event logger is not where it was."""
    if listener is not None:
        with STATE.lock:
            _REGION_LISTENER.value = listener
    found = _event_logger_method("log_event_end")
    if found is None:
        return False
    event_logger, original = found
    if getattr(original, "_compiletrace_patched", False):
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
    return True


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
# (CACHE_EVENT_TIERS, CACHE_EVENT_OUTCOMES).


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
        for prefix, tier in CACHE_EVENT_TIERS:
            if name.startswith(prefix) and name[len(prefix) :] in CACHE_EVENT_OUTCOMES:
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
