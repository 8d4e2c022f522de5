"""The tracker: turns torch's compile events into graph records.

Three kinds of event reach it:

1. Dynamo's start/end callbacks around each frame compile (trigger DYNAMO). They bound
   the whole frame compile: tracing, the backend call(s), guard building.
2. Calls of a compiletrace backend, which happen inside a frame compile on the same thread
   (Dynamo compiles one frame at a time, under its compile lock). The backend reports its
   own time, graph size and cache outcome to the frame that is open on its thread.
3. Start/end callbacks around a lazy backward compile (trigger LAZY_BACKWARD), carrying the
   forward's compile id; the time is added to that forward's record.

Timing uses an injectable clock (integer nanoseconds), so tests drive the tracker with a
fake clock and fake events and assert exact figures.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from compiletrace._core import torch_compat as tc
from compiletrace._core.phases import TimedRegion, fit_to, split_phases
from compiletrace._core.records import CacheOutcome, CompileStatus, GraphRecord, qualified_type_name
from compiletrace._core.registry import Registry
from compiletrace._io.state import STATE, warn_once

__all__ = ["Attribution", "Clock", "FrameObserver", "Tracker", "get_tracker", "register_observer_factory"]

Clock = Callable[[], int]  # monotonic nanoseconds, like time.perf_counter_ns


class Attribution(Protocol):
    """What a compiletrace backend tells the tracker about the graphs it compiles."""

    @property
    def component(self) -> str: ...
    @property
    def registry(self) -> Registry: ...
    @property
    def backend_name(self) -> str: ...


class FrameObserver(Protocol):
    """Receives records as frames finish (telemetry implements this)."""

    def frame_started(self) -> Any: ...  # returns an opaque token, e.g. the OTel context

    def record_finished(self, record: GraphRecord, token: Any) -> None: ...

    def backward_finished(
        self, record: GraphRecord, start_unix_ns: int, end_unix_ns: int, token: Any
    ) -> None: ...


def _merge_cache(old: CacheOutcome, hits: int, misses: int, bypasses: int) -> CacheOutcome:
    if misses or old is CacheOutcome.MISS:
        return CacheOutcome.MISS
    if hits or old is CacheOutcome.HIT:
        return CacheOutcome.HIT
    if bypasses or old is CacheOutcome.BYPASS:
        return CacheOutcome.BYPASS
    return CacheOutcome.NONE


@dataclass
class _OpenFrame:
    """A frame compile between its start and end callbacks."""

    compile_id: str
    start_ns: int
    code_name: str
    recompile_reason: str | None
    owner: Attribution | None  # None until known to be a compiletrace backend's frame
    token: Any = None  # observer's token from frame start (the OTel parent context)
    backend_ns: int = 0
    backend_start_ns: int | None = None
    node_count: int = 0
    fx: CacheOutcome = CacheOutcome.NONE
    aot: CacheOutcome = CacheOutcome.NONE
    status: CompileStatus = CompileStatus.OK
    error_type: str | None = None
    phases: dict[str, int] = field(default_factory=dict)


@dataclass
class _OpenBackward:
    start_ns: int
    token: Any


@dataclass
class _ThreadState(threading.local):
    frames: list[_OpenFrame] = field(default_factory=list)
    backwards: dict[str, _OpenBackward] = field(default_factory=dict)


def _is_recompile(compile_id: str) -> bool:
    # "frame/attempt": attempt > 0 is a recompile of the same frame.
    _, _, attempt = compile_id.rpartition("/")
    try:
        return int(attempt.split("_")[0]) > 0
    except ValueError:
        return False


class Tracker:
    """Builds :class:`GraphRecord` s from compile events. One is installed into torch per
    process (:func:`get_tracker`); tests build their own with a fake clock and call the
    ``on_*`` methods directly.
    """

    def __init__(self, clock: Clock | None = None, epoch_offset_ns: int | None = None) -> None:
        self._clock: Clock = clock or time.perf_counter_ns
        # Timestamps in records are Unix epoch ns: clock reading + a fixed offset.
        if epoch_offset_ns is None:
            epoch_offset_ns = time.time_ns() - self._clock()
        self._epoch_offset_ns = epoch_offset_ns
        self._state = _ThreadState()
        self._lock = threading.Lock()
        self._owner_of: dict[str, Registry] = {}  # compile id -> registry, for lazy backward
        self.observer: FrameObserver | None = None
        # Split backend time into torch's phases (benchmarks turn it off to measure its cost).
        self.phase_split_enabled = True

    def now_ns(self) -> int:
        return self._clock()

    def to_unix_ns(self, clock_ns: int) -> int:
        return clock_ns + self._epoch_offset_ns

    # -- Dynamo callbacks ---------------------------------------------------------------

    def on_start(
        self,
        trigger: str,
        compile_id: str,
        *,
        frame: tc.CompilingFrame | None = None,
        recompile_reason: str | None = None,
    ) -> None:
        now = self._clock()
        if trigger == tc.TRIGGER_LAZY_BACKWARD:
            with self._lock:
                ours = compile_id in self._owner_of
            if ours:
                self._state.backwards[compile_id] = _OpenBackward(now, self._observer_token())
            return
        if trigger != tc.TRIGGER_DYNAMO:
            return
        if self._state.frames:
            self._close_stale_frames(now)
        owner = None
        code_name = "?"
        if frame is not None:
            code_name = frame.code_name
            owner = _attribution_of(frame.compiler_fn)
        self._state.frames.append(
            _OpenFrame(compile_id, now, code_name, recompile_reason, owner, self._observer_token())
        )

    def _close_stale_frames(self, now: int) -> None:
        # Dynamo compiles one frame at a time and fires only the outermost callback pair, so a
        # frame still open when the next one starts lost its end callback: torch's pending
        # counter is process-wide, and a lazy backward on another thread overlapping this
        # compile swallows the end. Keep what is known (the backend figures); Dynamo's share
        # of that frame is unknown.
        warn_once(
            "a frame compile's end went unseen (a lazy backward compiled on another thread at the "
            "same time); its record has backend time only",
        )
        stale = list(self._state.frames)
        self._state.frames.clear()
        for frame in stale:
            if frame.owner is not None:
                # The last instant known to belong to the frame: its backend call's end.
                last = (
                    frame.start_ns
                    if frame.backend_start_ns is None
                    else frame.backend_start_ns + frame.backend_ns
                )
                self._finish_frame(frame, min(last, now), dynamo_known=False)

    def on_end(self, trigger: str, compile_id: str) -> None:
        now = self._clock()
        if trigger == tc.TRIGGER_LAZY_BACKWARD:
            bw = self._state.backwards.pop(compile_id, None)
            if bw is not None:
                self._finish_backward(compile_id, bw, now)
            return
        if trigger != tc.TRIGGER_DYNAMO:
            return
        frames = self._state.frames
        # Match by compile id: an unmatched end (callbacks registered mid-compile) is ignored.
        for i in range(len(frames) - 1, -1, -1):
            if frames[i].compile_id == compile_id:
                frame = frames.pop(i)
                break
        else:
            return
        if frame.owner is not None:
            self._finish_frame(frame, now)

    # -- Backend calls ------------------------------------------------------------------

    def compile_graph(
        self,
        owner: Attribution,
        inner: Callable[..., Any],
        gm: Any,
        example_inputs: Any,
        kwargs: dict[str, Any],
        node_count: int,
    ) -> Any:
        """Run the inner backend on one graph, timing it and reading its cache outcome."""
        frames = self._state.frames
        orphan = not frames
        frame = self._orphan_frame(owner) if orphan else frames[-1]
        if frame.owner is None:
            frame.owner = owner
        before = tc.cache_counts()
        collector: contextlib.AbstractContextManager[list[TimedRegion]] = (
            tc.collect_timed_regions() if self.phase_split_enabled else contextlib.nullcontext([])
        )
        with collector as regions:
            wall_start = time.time_ns()
            start = self._clock()
            try:
                return inner(gm, example_inputs, **kwargs)
            except BaseException as exc:
                frame.status = CompileStatus.EAGER_FALLBACK if tc.suppress_errors() else CompileStatus.ERROR
                frame.error_type = qualified_type_name(exc)
                raise
            finally:
                end = self._clock()
                wall_end = time.time_ns()
                self._account_backend_call(frame, start, end, before, node_count)
                # torch's regions are on the wall clock; fit them to this call's duration.
                for phase, ns in fit_to(split_phases(regions, wall_start, wall_end), end - start).items():
                    frame.phases[phase] = frame.phases.get(phase, 0) + ns
                if orphan:
                    # No frame callbacks: the backend call is all that is known. Recording must
                    # not replace the backend's result (or its exception) with one of its own.
                    frame.start_ns = start
                    try:
                        self._finish_frame(frame, end, dynamo_known=False)
                    except Exception as exc:
                        warn_once(f"recording a graph failed and was skipped: {exc!r}")

    def _account_backend_call(
        self, frame: _OpenFrame, start: int, end: int, before: tc.CacheCounts, node_count: int
    ) -> None:
        delta = tc.cache_counts() - before
        frame.backend_ns += end - start
        if frame.backend_start_ns is None:
            frame.backend_start_ns = start
        frame.node_count += node_count
        frame.fx = _merge_cache(frame.fx, delta.fx_hit, delta.fx_miss, delta.fx_bypass)
        frame.aot = _merge_cache(frame.aot, delta.aot_hit, delta.aot_miss, delta.aot_bypass)

    def _orphan_frame(self, owner: Attribution) -> _OpenFrame:
        # A backend call with no open frame: the callbacks are missing (old torch) or were
        # removed behind our back. Re-register and say once that this graph lacks Dynamo time.
        if tc.callbacks_available():
            if tc.ensure_callbacks_registered():
                warn_once(
                    "torch's compile callbacks were removed (torch._dynamo.callback_handler "
                    "was cleared); re-registered them. The graph compiling now is timed "
                    "inside the backend only.",
                )
        else:
            warn_once(
                "this torch has no compile-callback API; compiletrace times the backend "
                "only and misses Dynamo tracing, guards and lazy backward compiles.",
            )
        cid = tc.current_compile_id() or "?"
        return _OpenFrame(cid, 0, "?", tc.recompile_reason(), owner, self._observer_token())

    # -- Finishing ----------------------------------------------------------------------

    def _finish_frame(self, frame: _OpenFrame, end_ns: int, dynamo_known: bool = True) -> None:
        owner = frame.owner
        assert owner is not None
        frame_ns = end_ns - frame.start_ns
        rank, world_size = _rank_and_world_size()
        record = GraphRecord(
            compile_id=frame.compile_id,
            component=owner.component,
            backend=owner.backend_name,
            code_name=frame.code_name,
            graph_node_count=frame.node_count,
            start_unix_ns=self.to_unix_ns(frame.start_ns),
            end_unix_ns=self.to_unix_ns(end_ns),
            dynamo_ns=max(frame_ns - frame.backend_ns, 0) if dynamo_known else None,
            backend_ns=frame.backend_ns,
            backend_start_unix_ns=(
                None if frame.backend_start_ns is None else self.to_unix_ns(frame.backend_start_ns)
            ),
            is_recompile=_is_recompile(frame.compile_id),
            recompile_reason=frame.recompile_reason,
            fx_graph_cache=frame.fx,
            aot_autograd_cache=frame.aot,
            status=frame.status,
            error_type=frame.error_type,
            rank=rank,
            world_size=world_size,
            phases=tuple(sorted(frame.phases.items())),
        )
        with self._lock:
            self._owner_of[record.compile_id] = owner.registry
        owner.registry.add(record)
        if self.observer is not None:
            self._notify(self.observer.record_finished, record, frame.token)

    def _finish_backward(self, compile_id: str, bw: _OpenBackward, end_ns: int) -> None:
        with self._lock:
            registry = self._owner_of.get(compile_id)
        if registry is None:
            return
        start_unix = self.to_unix_ns(bw.start_ns)
        record = registry.add_backward(compile_id, start_unix, end_ns - bw.start_ns)
        if record is not None and self.observer is not None:
            end_unix = self.to_unix_ns(end_ns)
            self._notify(self.observer.backward_finished, record, start_unix, end_unix, bw.token)

    # -- Observer (telemetry): its failures never reach the user's compile -----------------

    def _observer_token(self) -> Any:
        if self.observer is None:
            return None
        try:
            return self.observer.frame_started()
        except Exception as exc:
            warn_once(f"telemetry failed and was disabled for this event: {exc!r}")
            return None

    def _notify(self, method: Callable[..., None], *args: Any) -> None:
        try:
            method(*args)
        except Exception as exc:
            warn_once(f"telemetry failed and was disabled for this event: {exc!r}")

    def forget_compile_ids(self) -> None:
        """After ``torch._dynamo.reset()`` compile ids restart at "0/0": a later lazy backward
        with an old id must not land on a graph compiled before the reset."""
        with self._lock:
            self._owner_of.clear()

    def open_frames(self) -> int:
        """Frames open on this thread (test helper: 0 between compiles)."""
        return len(self._state.frames)


def _rank_and_world_size() -> tuple[int, int]:
    """This process's torch.distributed rank and world size; (0, 1) outside a process group."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _attribution_of(compiler_fn: Any) -> Attribution | None:
    backend = tc.innermost_backend(compiler_fn)
    return backend if getattr(backend, "_is_compiletrace_backend", False) else None


def register_observer_factory(factory: Callable[[], FrameObserver] | None) -> None:
    """Build the process tracker's observer with ``factory()`` when the tracker is created
    (and now, if it exists already). The front door registers telemetry's span observer
    here, so the core never imports telemetry; None removes it."""
    with STATE.lock:
        STATE.observer_factory = factory
        tracker: Tracker | None = STATE.tracker
        if tracker is not None:
            tracker.observer = _build_observer()


def _build_observer() -> FrameObserver | None:
    factory = STATE.observer_factory
    if factory is None:
        return None
    try:
        return factory()  # type: ignore[no-any-return]
    except Exception as exc:  # e.g. OpenTelemetry missing or broken: measure without spans
        warn_once(f"telemetry is off: its observer could not be built: {exc!r}")
        return None


def get_tracker() -> Tracker:
    """The process tracker, installed into torch's compile callbacks on first use."""
    tracker: Tracker | None = STATE.tracker
    if tracker is not None:
        return tracker
    with STATE.lock:
        if STATE.tracker is None:
            new = Tracker()

            def on_start(trigger: str, compile_id: str) -> None:
                frame = tc.compiling_frame() if trigger == tc.TRIGGER_DYNAMO else None
                reason = tc.recompile_reason() if trigger == tc.TRIGGER_DYNAMO else None
                new.on_start(trigger, compile_id, frame=frame, recompile_reason=reason)

            tc.install_callbacks(on_start, new.on_end)
            tc.on_dynamo_reset(new.forget_compile_ids)
            tc.install_region_hook()
            new.observer = _build_observer()
            STATE.tracker = new
        return STATE.tracker  # type: ignore[no-any-return]
