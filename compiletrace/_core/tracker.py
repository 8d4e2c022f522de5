"""The tracker: turns torch's compile events into graph records.

These kinds of event reach it:

1. Dynamo's start/end callbacks around each frame compile (trigger DYNAMO). The start
   opens a frame and tells which backend will compile it; the end closes it.
2. Calls of a compiletrace backend, which happen inside a frame compile on the same thread
   (Dynamo compiles one frame at a time, under its compile lock). The backend reports its
   own time, graph size and cache outcome to the frame that is open on its thread.
3. The ends of torch's own timed regions for a whole frame compile and a whole lazy
   backward compile (when torch's event logger can be teed: ``bounds_from_regions``).
   Their bounds are torch's own figures (``entire_frame_compile_time_s``), and they arrive
   even when another thread's compile swallowed the callbacks (torch's pending-callback
   counter is process-wide). A lazy backward is attributed by the identity of the
   forward's compile context, so ids that torch reuses after a reset cannot mislead it.
4. Without those regions: start/end callbacks around a lazy backward compile (trigger
   LAZY_BACKWARD), carrying the forward's compile id; the time is added to that forward.
5. While passive recording is on (``compiletrace._core.passive``): every backend call
   Dynamo makes (``on_backend_call``), timed as a compiletrace backend times its own, for
   the frames no compiletrace backend compiles; those frames get an owner named from the
   compiled code when they start.
6. torch's ahead-of-time path (``aot_compile``), which fires no callback: its start, the
   end of Dynamo's capture, the end of the backend call and its end (``aot_*``), bounded by
   torch's own region for it.
7. The regions torch times on a compiled graph's call, outside any compile (autotuning at
   a kernel's first call, a CUDA-graph tree's recording): a
   :class:`~compiletrace._data.records.RuntimeEvent` each, in the registry of the graph.

Every region torch closes during a frame compile is kept with the frame, beside the
intervals compiletrace timed itself (imports, the CPU probe), and the frame's time is split
by them into the lines of the warm-start ledger (``frame_lines``, ``compiletrace._data.ledger``).

Besides the times, each record carries what the doctor (``compiletrace._doctor``)
needs to say why: the compiled code's file and line, torch's graph-break records made
during the frame, a structural hash of the graph, each cache lookup's key, whether the
frame compiled after a warm-up returned, and frames torch refused past its recompile limit.

Timing uses an injectable clock (integer nanoseconds), so tests drive the tracker with a
fake clock and fake events and assert exact figures.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, NamedTuple, Protocol

from compiletrace._core import torch_compat as tc
from compiletrace._core.compile_imports import ImportTimer
from compiletrace._core.components import CompiledTarget, target_of
from compiletrace._core.cpu_clock import compile_cpu_ns
from compiletrace._core.observers import (
    OBSERVER_FACTORY,
    TELEMETRY,
    CompileListener,
    CompileObserver,
    FrameObserver,
    Observers,
    Tokens,
    build_observer,
    process_observers,
    register_observer_factory,
)
from compiletrace._core.scalar_use import item_feeds_branch
from compiletrace._core.trace_cost import TraceCollector
from compiletrace._data.ledger import COMPILETRACE_REGION, frame_regions, split_frame
from compiletrace._data.phases import OTHER, TimedRegion, fit_to, one_time_ns, split_phases
from compiletrace._data.records import (
    AUTOTUNE,
    CUDAGRAPH,
    CacheLookup,
    CacheOutcome,
    CompileStatus,
    GraphBreak,
    GraphRecord,
    RepeatedBlock,
    RuntimeEvent,
    qualified_type_name,
)
from compiletrace._data.registry import Registry
from compiletrace._data.torch_text import (
    BACKWARD_COMPILER_REGION,
    BREAK_ITEM,
    HEADER_REGION,
    RUNTIME_AUTOTUNE_REGIONS,
)
from compiletrace._io.state import STATE, Slot, warn_once
from compiletrace._io.text import first_line

__all__ = [
    "Attribution",
    "Clock",
    "CompileListener",
    "CompileObserver",
    "FrameObserver",
    "PassiveOwners",
    "Tracker",
    "get_tracker",
    "register_observer_factory",
]

Clock = Callable[[], int]  # monotonic nanoseconds, like time.perf_counter_ns

# A frame shared by components warns once its entries reach this share of torch's limit.
SHARED_FRAME_WARN_SHARE = 0.75


class Attribution(Protocol):
    """What a compiletrace backend tells the tracker about the graphs it compiles."""

    @property
    def component(self) -> str: ...
    @property
    def registry(self) -> Registry: ...
    @property
    def backend_name(self) -> str: ...


class PassiveOwners(Protocol):
    """Names the frames no compiletrace backend compiles, while passive recording is on
    (``compiletrace._core.passive``), and says which recordings take a copy of those that one
    does compile."""

    def owner_for(self, frame: tc.CompilingFrame | None, compiler_fn: Any) -> Attribution: ...

    def copies_of_own(self, registry: Registry, component: str) -> tuple[tuple[Registry, str], ...]: ...


@dataclass(frozen=True)
class _OwnWithCopies:
    """A compiletrace backend's attribution, plus the passive registries that copy its records."""

    component: str
    registry: Registry
    backend_name: str
    trace_cost: bool
    copies: tuple[tuple[Registry, str], ...]


def _note_backend_region(frame: _OpenFrame, region_ns: int) -> None:
    """One of torch's backend_compile regions ended: what it held beyond the backend call
    timed inside it is torch's bookkeeping, the backend's as torch reads it (not Dynamo's,
    nor the traced function's)."""
    timed = frame.backend_ns - frame.backend_seen_ns
    frame.backend_seen_ns = frame.backend_ns
    extra = region_ns - timed
    if timed > 0 and extra > 0:
        frame.backend_bookkeeping_ns += extra
        if frame.trace is not None:
            frame.trace.exclude(extra)


def _backend_as_torch_times_it(frame: _OpenFrame, frame_ns: int) -> None:
    """The backend's time as torch reads it (backend_compile_time_s: the call and torch's
    bookkeeping around it), where its regions said; the bookkeeping is the backend's
    "other" phase, not Dynamo's."""
    extra = min(frame.backend_bookkeeping_ns, frame_ns - frame.discarded_ns - frame.backend_ns)
    if extra <= 0:
        return
    frame.backend_ns += extra
    if frame.phases:  # the phases add up to the backend's time
        frame.phases[OTHER] = frame.phases.get(OTHER, 0) + extra


def _merge_cache(old: CacheOutcome, hits: int, misses: int, bypasses: int) -> CacheOutcome:
    if misses or old is CacheOutcome.MISS:
        return CacheOutcome.MISS
    if hits or old is CacheOutcome.HIT:
        return CacheOutcome.HIT
    if bypasses or old is CacheOutcome.BYPASS:
        return CacheOutcome.BYPASS
    return CacheOutcome.NONE


_NO_MODULE = CompiledTarget()


def _module_of(frame: tc.CompilingFrame) -> CompiledTarget:
    """The module a frame compiles the forward of (or runs in), for the record."""
    try:
        return target_of(frame.target, frame.callers, code=frame.code)
    except Exception as exc:  # naming never breaks a compile
        warn_once(f"naming a compiled module failed and was skipped: {exc!r}")
        return _NO_MODULE


@dataclass
class _OpenFrame:
    """A frame compile between its start callback and its end (callback or region)."""

    compile_id: str
    start_ns: int
    code_name: str
    recompile_reason: str | None
    owner: Attribution | None  # None until known to be a compiletrace backend's frame
    tokens: Tokens = ()  # the observers' tokens from frame start (telemetry's: the OTel parent context)
    backend_ns: int = 0
    backend_start_ns: int | None = None
    node_count: int = 0
    fx: CacheOutcome = CacheOutcome.NONE
    aot: CacheOutcome = CacheOutcome.NONE
    status: CompileStatus = CompileStatus.OK
    error_type: str | None = None
    phases: dict[str, int] = field(default_factory=dict)
    context: Any = None  # torch's CompileContext object, for its lazy backward
    restart_reasons: list[str] = field(default_factory=list)  # Dynamo restarted its analysis
    discarded_ns: int = 0  # backend time of the attempts Dynamo threw away on a restart
    # torch's backend_compile regions (its backend_compile_time_s) hold the backend call and
    # torch's bookkeeping around it: that bookkeeping, region by region, and how much of the
    # backend's timed calls the regions so far held.
    backend_bookkeeping_ns: int = 0
    backend_seen_ns: int = 0
    callback_end_ns: int | None = None  # when the end callback fired (the region ends later)
    filename: str = ""  # the compiled code's file and first line
    first_line: int = 0
    breaks_mark: int | None = None  # torch's graph-break list at frame start (None: not read)
    failure: GraphBreak | None = None  # Dynamo gave up on the whole frame, and why
    structure: list[str] = field(default_factory=list)  # structural hash of each graph kept
    blocks: list[str | None] = field(default_factory=list)  # the block each graph is a call of
    lookups: list[CacheLookup] = field(default_factory=list)
    limit_hit: bool = False  # torch refused the frame past its recompile limit
    fullgraph: bool = False  # fullgraph=True: Dynamo giving up raises to the user
    settings: tuple[tuple[str, str], ...] = ()  # mode, dynamic, fullgraph (GraphRecord.settings)
    trace: TraceCollector | None = None  # Dynamo's time per user function (trace_cost=True)
    aot_call: _AotBackendCall | None = None  # an ahead-of-time compile's backend call (aot_compile)
    module: CompiledTarget = _NO_MODULE  # the module whose forward (or call) this is
    imports_mark: int = 0  # the thread's timed imports when the frame opened
    setup_ns: int = 0  # torch's once-per-process regions inside this frame's backend calls
    # Every region torch closed during the frame, and compiletrace's own timed intervals
    # (Unix ns), collected while the frame is open; and the collector it replaced.
    regions: list[TimedRegion] = field(default_factory=list)
    outer_sink: list[TimedRegion] | None = None
    cpu_start: int | None = None  # the CPU clock when the frame opened (None: CPU not known)
    cpu_end: int | None = None  # ... when its end callback fired (the region ends it later)
    imports_cpu_mark: int = 0  # the thread's timed imports' CPU when the frame opened
    repeated: list[RepeatedBlock] = field(default_factory=list)  # a block called N times in a graph


@dataclass
class _AotBackendCall:
    """The backend call of an ahead-of-time compile: torch makes it itself, between the
    end of Dynamo's capture and the guards, so it is timed from those two instants."""

    captured: bool = False  # Dynamo's capture has ended: the backend call is running
    done: bool = False
    start_ns: int = 0
    wall_start_ns: int = 0
    before: tc.CacheCounts | None = None
    node_count: int = 0
    structure: str | None = None
    block: str | None = None
    collectors: contextlib.ExitStack | None = None
    regions: list[TimedRegion] = field(default_factory=list)
    lookups: tc.CacheLookups = field(default_factory=tc.CacheLookups)
    region: tuple[int, int] | None = None  # torch's own bounds of the whole compile (Unix ns)


@dataclass
class _OpenBackward:
    start_ns: int
    tokens: Tokens
    context: Any = None
    cpu_start: int | None = None


@dataclass
class _ThreadState(threading.local):
    frames: list[_OpenFrame] = field(default_factory=list)
    ending: dict[str, _OpenFrame] = field(default_factory=dict)  # end callback seen, region not yet
    backwards: dict[str, _OpenBackward] = field(default_factory=dict)
    backward_cpu: dict[str, int] = field(default_factory=dict)  # a lazy backward's CPU clock at its start
    # a lazy backward's regions (collected from its start to torch's region around it), and
    # the collector they replaced
    backward_regions: dict[str, tuple[list[TimedRegion], list[TimedRegion] | None]] = field(
        default_factory=dict
    )
    in_passive_call: bool = False  # timing a backend passively: a compiletrace one inside it adds nothing


class _Made(NamedTuple):
    """Which graph a compile context (or compile id) made: its registry and handle there,
    and those of its copies in the other passive recordings that are on."""

    registry: Registry
    handle: int
    copies: tuple[tuple[Registry, int], ...] = ()


def _attempt(compile_id: str) -> int:
    # "frame/attempt" (attempt may carry a "_restart" suffix): attempt > 0 means torch had
    # compiled this frame before.
    _, _, attempt = compile_id.rpartition("/")
    try:
        return int(attempt.split("_")[0])
    except ValueError:
        return 0


def _frame_id(compile_id: str) -> str:
    return compile_id.partition("/")[0]


class Tracker:
    """Builds :class:`GraphRecord` s from compile events, adds each to its registry and
    tells its :attr:`observers` (the one channel to hear of a compile). One is installed into
    torch per process (:func:`get_tracker`, with the process's observers); tests build their
    own with a fake clock and call the ``on_*`` methods directly.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        epoch_offset_ns: int | None = None,
        observers: Observers | None = None,
        *,
        factory_observer: bool = False,
        cpu_clock: Clock | None = None,
    ) -> None:
        self._clock: Clock = clock or time.perf_counter_ns
        # CPU nanoseconds of compile work seen from the calling thread (cpu_clock's docstring)
        self._cpu_clock: Clock = cpu_clock or compile_cpu_ns
        # Timestamps in records are Unix epoch ns: clock reading + a fixed offset.
        if epoch_offset_ns is None:
            epoch_offset_ns = time.time_ns() - self._clock()
        self._epoch_offset_ns = epoch_offset_ns
        self._state = _ThreadState()
        self._lock = threading.Lock()
        # Since the last torch._dynamo.reset(): compile id -> graph, frame id -> the
        # components that compiled it, in order.
        self._made_by_id: dict[str, _Made] = {}
        self._frame_components: dict[str, list[str]] = {}
        # Across resets: the compile context of each recorded graph (weakly: torch drops them).
        self._made_by_context: weakref.WeakKeyDictionary[Any, _Made] = weakref.WeakKeyDictionary()
        # Who hears of each compile (the one channel); with ``factory_observer`` (the process
        # tracker), its own observer among them: telemetry's, built by the registered factory
        # (and built again when another is registered; _built_from is the one it came from).
        self.observers = observers if observers is not None else Observers()
        self._own_observer: CompileObserver | None = None
        self._factory_observer = factory_observer
        self._built_from: Any = None
        # Split backend time into torch's phases (benchmarks turn it off to measure its cost).
        self.phase_split_enabled = True
        # Take frame and lazy-backward bounds from torch's timed regions (see the module
        # docstring); set when the region hook is installed.
        self.bounds_from_regions = False
        # Read what the doctor needs (graph breaks, structure, cache keys); benchmarks turn
        # it off to measure its cost.
        self.diagnosis_capture_enabled = True
        # ... of which each cache key's parts (benchmarks/bench_cache_keys.py measures them).
        self.cache_key_parts_enabled = True
        # Registries whose warm-up has returned: their later compiles are latency spikes.
        self._warmed: weakref.WeakSet[Registry] = weakref.WeakSet()
        self._aot_compiles = 0  # ahead-of-time compiles seen: their compile ids
        # While set, frames of any backend are recorded too, under the owner it names.
        self.passive: PassiveOwners | None = None
        # Times what each compile imports (installed with the process tracker only): the
        # one-time set-up inside the first graphs.
        self.import_timer = ImportTimer(self._clock, active=self._compiling_here, cpu_clock=self._cpu_clock)
        # The process's first C++ compile is its precompiled header (one-time set-up): seen by
        # the ledger's split, and timed as set-up (in a frame or in a lazy backward).
        self._header_seen = False
        self._header_timed = False

    def _compiling_here(self) -> bool:
        return bool(self._state.frames)

    def time_one_time_setup(self) -> None:
        """Time the imports of every compile, and torch's one-time functions (now, where
        their module is loaded; else once it is)."""
        self.import_timer.on_interval = self._timed_interval
        self.import_timer.install()
        for module_name, _ in tc.ONE_TIME_FUNCTIONS:
            module = sys.modules.get(module_name)
            if module is not None:
                tc.time_one_time_functions(module, self.import_timer.timed_block)
            else:
                self.import_timer.watch(module_name, self._time_one_time_functions)

    def _timed_interval(self, start: int, end: int) -> None:
        # An import (or the CPU probe) timed inside the frame open on this thread.
        frames = self._state.frames
        if frames:
            frames[-1].regions.append((COMPILETRACE_REGION, self.to_unix_ns(start), self.to_unix_ns(end)))

    def _collect_regions(self, frame: _OpenFrame) -> None:
        if self.phase_split_enabled:
            frame.outer_sink = tc.frame_region_sink(frame.regions)

    def _stop_collecting(self, frame: _OpenFrame) -> None:
        if tc.current_frame_region_sink() is frame.regions:
            tc.frame_region_sink(frame.outer_sink)

    def _frame_lines(self, frame: _OpenFrame, start_ns: int, end_ns: int) -> tuple[tuple[str, str, int], ...]:
        """The frame's time by ledger line, from its regions (none without torch's regions)."""
        if not frame.regions or not self.bounds_from_regions:
            return ()
        with self._lock:
            regions, self._header_seen = frame_regions(frame.regions, self._header_seen)
        start, end = self.to_unix_ns(start_ns), self.to_unix_ns(end_ns)
        hits = {"aot_hit": frame.aot is CacheOutcome.HIT, "fx_hit": frame.fx is CacheOutcome.HIT}
        return split_frame(regions, start, end, **hits)

    def _time_one_time_functions(self, module: ModuleType) -> None:
        tc.time_one_time_functions(module, self.import_timer.timed_block)

    def now_ns(self) -> int:
        return self._clock()

    def to_unix_ns(self, clock_ns: int) -> int:
        return clock_ns + self._epoch_offset_ns

    def _from_unix_ns(self, unix_ns: int) -> int:
        return unix_ns - self._epoch_offset_ns

    # -- Dynamo callbacks ---------------------------------------------------------------

    def on_start(
        self,
        trigger: str,
        compile_id: str,
        *,
        frame: tc.CompilingFrame | None = None,
        recompile_reason: str | None = None,
        context: Any = None,
    ) -> None:
        now = self._clock()
        if trigger == tc.TRIGGER_LAZY_BACKWARD:
            cpu = self._cpu_clock()
            if self.bounds_from_regions:
                self._state.backward_cpu[compile_id] = cpu  # torch's region ends it, on this thread
                if self.phase_split_enabled:  # its regions: the one-time set-up it pays
                    regions: list[TimedRegion] = []
                    self._state.backward_regions[compile_id] = (regions, tc.frame_region_sink(regions))
            elif self._made_by(context, compile_id) is not None:
                self._state.backwards[compile_id] = _OpenBackward(now, self._frame_tokens(), context, cpu)
            return
        if trigger != tc.TRIGGER_DYNAMO:
            return
        if self._state.ending:
            self._finish_ending_frames()
        if self._state.frames:
            self._close_stale_frames(now)
        owner = None
        code_name = "?"
        if frame is not None:
            code_name = frame.code_name
            owner = self._owner_of(frame)
        opened = _OpenFrame(compile_id, now, code_name, recompile_reason, owner, self._frame_tokens())
        self._mark_imports(opened)
        opened.cpu_start = self._cpu_clock()
        self._collect_regions(opened)
        if frame is not None:
            opened.filename, opened.first_line = frame.filename, frame.first_line
            opened.fullgraph = frame.fullgraph
            opened.settings = tc.compile_settings(frame.compiler_fn, frame.fullgraph)
            opened.module = _module_of(frame)
        if self.diagnosis_capture_enabled:
            opened.breaks_mark = tc.graph_break_mark()
        if owner is not None and getattr(owner, "trace_cost", False):
            opened.trace = TraceCollector(self._clock)
            opened.trace.watch_gc()
            tc.set_trace_collector(opened.trace)
        elif tc.trace_collector() is not None:
            tc.set_trace_collector(None)  # a stale one, from a frame whose end went unseen
        self._state.frames.append(opened)

    def _mark_imports(self, frame: _OpenFrame) -> None:
        frame.imports_mark = self.import_timer.thread_total_ns()
        frame.imports_cpu_mark = self.import_timer.thread_total_cpu_ns()

    def on_recompile_limit(
        self, compile_id: str, frame: tc.CompilingFrame | None, reason: str | None, limit: int | None
    ) -> None:
        """Dynamo refused to compile a frame past its recompile limit: it runs eagerly from
        now on, and no compile callback fires for it. Recorded as a frame of its own (no
        graph, status ``eager_fallback``), bounded by torch's region when there is one."""
        owner = None if frame is None else self._owner_of(frame)
        if frame is None or owner is None:
            return
        now = self._clock()
        refused = _OpenFrame(compile_id, now, frame.code_name, reason, owner, self._frame_tokens())
        refused.filename, refused.first_line = frame.filename, frame.first_line
        refused.module = _module_of(frame)
        refused.status = CompileStatus.EAGER_FALLBACK
        refused.limit_hit = True
        refused.cpu_start = self._cpu_clock()
        if self.bounds_from_regions:
            self._state.frames.append(refused)  # torch's frame region ends it
        else:
            self._finish_frame(refused, now)

    def _owner_of(self, frame: tc.CompilingFrame) -> Attribution | None:
        owner = _attribution_of(frame.compiler_fn)
        passive = self.passive
        if passive is None:
            return owner
        try:
            if owner is None:
                return passive.owner_for(frame, frame.compiler_fn)
            copies = passive.copies_of_own(owner.registry, owner.component)
            if copies:
                return _OwnWithCopies(
                    owner.component,
                    owner.registry,
                    owner.backend_name,
                    getattr(owner, "trace_cost", False),
                    copies,
                )
        except Exception as exc:  # naming must never break a compile
            warn_once(f"naming a compile's component failed; it was not recorded: {exc!r}")
        return owner

    def _close_stale_frames(self, now: int) -> None:
        # Dynamo compiles one frame at a time and fires only the outermost callback pair, so a
        # frame still open when the next one starts lost its end: torch's pending counter is
        # process-wide, and a lazy backward on another thread overlapping this compile
        # swallows the end callback (without torch's regions nothing else closes it). Keep
        # what is known (the backend figures); Dynamo's share of that frame is unknown.
        stale = list(self._state.frames)
        self._state.frames.clear()
        for frame in stale:
            if frame.owner is not None:
                warn_once(
                    f"frame compile {frame.compile_id} ({frame.code_name}, {frame.owner.component}): "
                    "its end went unseen (a lazy backward compiled on another thread at the same "
                    "time); its record has backend time only"
                )
                # The last instant known to belong to the frame: its backend call's end.
                last = (
                    frame.start_ns
                    if frame.backend_start_ns is None
                    else frame.backend_start_ns + frame.backend_ns
                )
                self._finish_frame(frame, min(last, now), dynamo_known=False)

    def _finish_ending_frames(self) -> None:
        # Frames whose end callback fired but whose region never came (a torch that stopped
        # logging it): finish them at the callback.
        ending = list(self._state.ending.values())
        self._state.ending.clear()
        for frame in ending:
            assert frame.callback_end_ns is not None
            self._finish_frame(frame, frame.callback_end_ns, cpu_end=frame.cpu_end)

    def on_end(self, trigger: str, compile_id: str) -> None:
        now = self._clock()
        if trigger == tc.TRIGGER_LAZY_BACKWARD:
            bw = self._state.backwards.pop(compile_id, None)
            if bw is not None:
                self._finish_backward(compile_id, bw, now)
            return
        if trigger != tc.TRIGGER_DYNAMO:
            return
        frame = self._pop_open_frame(compile_id)
        if frame is not None:
            _stop_tracing_cost(frame)
            if frame.owner is None:
                self._stop_collecting(frame)
        if frame is None or frame.owner is None:
            return  # an unmatched end (callbacks registered mid-compile), or not our backend's
        if self.bounds_from_regions:
            frame.callback_end_ns = now
            frame.cpu_end = self._cpu_clock()
            self._state.ending[compile_id] = frame
        else:
            self._finish_frame(frame, now)

    def _pop_open_frame(self, compile_id: str) -> _OpenFrame | None:
        frames = self._state.frames
        for i in range(len(frames) - 1, -1, -1):
            if frames[i].compile_id == compile_id:
                return frames.pop(i)
        return None

    # -- Torch's timed regions ------------------------------------------------------------

    def on_region(
        self, name: str, compile_id: str | None, start_unix_ns: int, end_unix_ns: int, context: Any
    ) -> None:
        """The end of torch's region for a whole frame compile or a whole lazy backward
        compile, on the thread that compiled it (bounds in Unix epoch ns)."""
        if not self.bounds_from_regions:
            return
        if name == tc.AOT_REGION:
            # torch's bounds for the ahead-of-time compile open on this thread, if any
            frames = self._state.frames
            if frames and frames[-1].aot_call is not None:
                frames[-1].aot_call.region = (start_unix_ns, end_unix_ns)
            return
        if compile_id is None:
            return
        if name == tc.BACKEND_REGION:
            # torch's figure for the backend, its bookkeeping around the call included
            frames = self._state.frames
            if frames and frames[-1].compile_id == compile_id:
                _note_backend_region(frames[-1], end_unix_ns - start_unix_ns)
            return
        if name == tc.FRAME_REGION:
            frame = self._state.ending.pop(compile_id, None) or self._pop_open_frame(compile_id)
            if frame is None or frame.owner is None:
                return  # not our backend's frame (or a nested compile inside one)
            if self.diagnosis_capture_enabled and not frame.limit_hit:
                failure = tc.frame_failure()  # torch's metrics are filled in by now
                if failure is not None:
                    frame.failure = GraphBreak(*failure, frame_skipped=True)
            if frame.fullgraph and frame.status is CompileStatus.OK:
                # With fullgraph=True Dynamo giving up is the user's error (torch raises it).
                failed = tc.frame_failure_type()
                if failed is not None:
                    frame.status, frame.error_type = CompileStatus.ERROR, failed
            torch_restarts = tc.restart_reasons()  # graph-break restarts too, not only ours
            if torch_restarts is not None:
                frame.restart_reasons = torch_restarts
            start = min(frame.start_ns, self._from_unix_ns(start_unix_ns))
            end = max(self._from_unix_ns(end_unix_ns), frame.callback_end_ns or start)
            frame.start_ns = start
            self._finish_frame(frame, end)
        elif name == tc.BACKWARD_REGION:
            cpu_start = self._state.backward_cpu.pop(compile_id, None)
            cpu_ns = None if cpu_start is None else self._cpu_clock() - cpu_start
            setup_ns = self._backward_setup_ns(compile_id, start_unix_ns, end_unix_ns)
            made = self._made_by(context, compile_id)
            if made is not None:
                self._add_backward(made, start_unix_ns, end_unix_ns, self._frame_tokens(), cpu_ns, setup_ns)

    # -- Work on a compiled graph's calls ---------------------------------------------------

    def on_runtime_region(
        self,
        name: str,
        compile_id: str | None,
        start_unix_ns: int,
        end_unix_ns: int,
        metadata: Any,
        in_compile: bool,
    ) -> None:
        """A region torch timed on a compiled graph's call (runtime autotuning, a CUDA-graph
        recording): a runtime event in the registry of that graph (and of its copies); inside
        a compile it is that compile's, and its frame's split holds it."""
        if in_compile:
            return
        detail = metadata.get("kernel_name") if isinstance(metadata, dict) else None
        event = RuntimeEvent(
            AUTOTUNE if name in RUNTIME_AUTOTUNE_REGIONS else CUDAGRAPH,
            compile_id or "",
            isinstance(metadata, dict) and metadata.get("is_backward") is True,
            start_unix_ns,
            max(end_unix_ns - start_unix_ns, 0),
            str(detail or name)[:200],
        )
        for registry in self._registries_of(compile_id):
            registry.add_runtime_event(event)

    def _registries_of(self, compile_id: str | None) -> list[Registry]:
        """Where a graph's records went: the graph's registry and its copies' (by compile
        id), else every passive recording's."""
        with self._lock:
            made = self._made_by_id.get(compile_id) if compile_id is not None else None
        if made is not None:
            return [made.registry, *(registry for registry, _ in made.copies)]
        passive = self.passive
        if passive is None:
            return []
        try:
            owner = passive.owner_for(None, None)
        except Exception as exc:
            warn_once(f"naming a compiled graph's call failed; it was not recorded: {exc!r}")
            return []
        return [owner.registry, *(registry for registry, _ in getattr(owner, "copies", ()))]

    # -- Backend calls ------------------------------------------------------------------

    def on_backend_call(self, compiler_fn: Any, call: Callable[[], Any], gm: Any, example_inputs: Any) -> Any:
        """Every backend call Dynamo makes passes here (``tc.install_backend_call_hook``).
        A compiletrace backend times itself, and nothing is recorded while passive
        recording is off; otherwise the call is timed like a compiletrace backend's."""
        passive = self.passive
        if passive is None or _attribution_of(compiler_fn) is not None:
            return call()
        frames = self._state.frames
        if frames and frames[-1].aot_call is not None and not frames[-1].aot_call.captured:
            return call()  # an ahead-of-time capture's own backend: it only keeps the graph
        owner = frames[-1].owner if frames else None
        if owner is None:
            try:
                owner = passive.owner_for(None, compiler_fn)
            except Exception as exc:
                warn_once(f"naming a compile's component failed; it was not recorded: {exc!r}")
                return call()
        try:
            node_count = len(gm.graph.nodes)
        except Exception:
            node_count = 0
        state = self._state

        def timed(_gm: Any, _inputs: Any) -> Any:
            # A user's backend that wraps a compiletrace backend: the outer call is timed
            # here, so the inner one must not add its time again.
            outer, state.in_passive_call = state.in_passive_call, True
            try:
                return call()
            finally:
                state.in_passive_call = outer

        return self.compile_graph(owner, timed, gm, example_inputs, {}, node_count)

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
        if self._state.in_passive_call:
            return inner(gm, example_inputs, **kwargs)  # timed already, by the call around it
        frames = self._state.frames
        orphan = not frames
        frame = self._orphan_frame(owner) if orphan else frames[-1]
        if frame.owner is None:
            frame.owner = owner
        if frame.context is None:
            frame.context = tc.current_compile_context()
        before = tc.cache_counts()
        collector: contextlib.AbstractContextManager[list[TimedRegion]] = (
            tc.collect_timed_regions() if self.phase_split_enabled else contextlib.nullcontext([])
        )
        diagnosing = self.diagnosis_capture_enabled
        # Hashed before the call: backends may rewrite the graph in place. (Outside the
        # backend's timing, so the cost shows as the frame's own, not the backend's.)
        structure = tc.graph_structure_hash(gm) if diagnosing else None
        block = tc.graph_block(gm) if diagnosing else None
        repeated = tc.repeated_block(gm) if diagnosing else None
        lookup_collector: contextlib.AbstractContextManager[tc.CacheLookups] = (
            tc.collect_cache_lookups(self.cache_key_parts_enabled)
            if diagnosing
            else contextlib.nullcontext(tc.CacheLookups())
        )
        with collector as regions, lookup_collector as lookups:
            wall_start = time.time_ns()
            if frame.trace is not None:
                frame.trace.backend_started()  # its collections are the backend's, not Dynamo's
            start = self._clock()
            restarted = False
            try:
                compiled = inner(gm, example_inputs, **kwargs)
                if not callable(compiled):
                    # torch refuses it as it returns ("did not return callable"): an error.
                    frame.status = (
                        CompileStatus.EAGER_FALLBACK if tc.suppress_errors() else CompileStatus.ERROR
                    )
                    frame.error_type = tc.backend_failure_type()
                return compiled
            except BaseException as exc:
                if tc.is_restart(exc):
                    # Dynamo throws this attempt away and compiles the frame again: not an error.
                    restarted = True
                    frame.restart_reasons.append(first_line(exc) or type(exc).__name__)
                else:
                    frame.status = (
                        CompileStatus.EAGER_FALLBACK if tc.suppress_errors() else CompileStatus.ERROR
                    )
                    frame.error_type = qualified_type_name(tc.backend_error(exc))
                raise
            finally:
                end = self._clock()
                wall_end = time.time_ns()
                if frame.trace is not None:
                    frame.trace.exclude(end - start)  # the backend's time is not Dynamo's
                if restarted:
                    frame.discarded_ns += end - start
                else:
                    self._account_backend_call(frame, start, end, before, node_count)
                    if structure is not None:
                        frame.structure.append(structure)
                        frame.blocks.append(block)
                    if repeated is not None:
                        frame.repeated.append(repeated)
                    frame.lookups.extend(lookups.records())
                    # torch's regions are on the wall clock; fit them to this call's duration.
                    for phase, ns in fit_to(split_phases(regions, wall_start, wall_end), end - start).items():
                        frame.phases[phase] = frame.phases.get(phase, 0) + ns
                    frame.setup_ns += one_time_ns(regions, wall_start, wall_end)
                if orphan:
                    # No frame callbacks: the backend call is all that is known. Recording must
                    # not replace the backend's result (or its exception) with one of its own.
                    frame.start_ns = start
                    try:
                        self._finish_frame(frame, end, dynamo_known=False)
                    except Exception as exc:
                        warn_once(f"recording a graph failed and was skipped: {exc!r}")

    # -- torch's ahead-of-time path (aot_compile): no frame callbacks, a direct backend call

    def aot_started(self, frame: tc.CompilingFrame, backend: Any) -> _OpenFrame | None:
        """An ahead-of-time compile starts (Dynamo's capture first): open its frame when a
        compiletrace backend compiles it or passive recording is on."""
        owner = self._owner_of(frame)
        if owner is None:
            return None
        with self._lock:
            self._aot_compiles += 1
            compile_id = f"aot{self._aot_compiles - 1}/0"  # torch gives this path no compile id
        opened = _OpenFrame(compile_id, self._clock(), frame.code_name, None, owner, self._frame_tokens())
        opened.cpu_start = self._cpu_clock()
        opened.filename, opened.first_line = frame.filename, frame.first_line
        opened.aot_call = _AotBackendCall()
        if self.diagnosis_capture_enabled:
            opened.breaks_mark = tc.graph_break_mark()
        self._collect_regions(opened)
        self._state.frames.append(opened)
        return opened

    def aot_captured(self, token: Any, graph_module: Any) -> None:
        """Dynamo's capture has ended; torch calls the backend next."""
        frame: _OpenFrame = token
        call = frame.aot_call
        if call is None or call.captured:
            return
        call.captured = True
        try:
            call.node_count = len(graph_module.graph.nodes)
        except Exception:
            call.node_count = 0
        if self.diagnosis_capture_enabled and graph_module is not None:
            call.structure = tc.graph_structure_hash(graph_module)
            call.block = tc.graph_block(graph_module)
        call.collectors = contextlib.ExitStack()
        if self.phase_split_enabled:
            call.regions = call.collectors.enter_context(tc.collect_timed_regions())
        if self.diagnosis_capture_enabled:
            call.lookups = call.collectors.enter_context(
                tc.collect_cache_lookups(self.cache_key_parts_enabled)
            )
        call.before = tc.cache_counts()
        call.wall_start_ns = time.time_ns()
        call.start_ns = self._clock()

    def aot_backend_done(self, token: Any) -> None:
        """The backend call has returned (torch builds the guards next)."""
        frame: _OpenFrame = token
        call = frame.aot_call
        if call is None or not call.captured or call.done:
            return
        call.done = True
        end = self._clock()
        wall_end = time.time_ns()
        if call.collectors is not None:
            call.collectors.close()
        if frame.backend_start_ns is not None:
            return  # a compiletrace backend timed its own call, inside this one
        assert call.before is not None
        self._account_backend_call(frame, call.start_ns, end, call.before, call.node_count)
        if call.structure is not None:
            frame.structure.append(call.structure)
            frame.blocks.append(call.block)
        frame.lookups.extend(call.lookups.records())
        for phase, ns in fit_to(
            split_phases(call.regions, call.wall_start_ns, wall_end), end - call.start_ns
        ).items():
            frame.phases[phase] = frame.phases.get(phase, 0) + ns
        frame.setup_ns += one_time_ns(call.regions, call.wall_start_ns, wall_end)

    def aot_finished(self, token: Any, error: BaseException | None) -> None:
        """The ahead-of-time compile has returned (or raised ``error``): record it."""
        frame: _OpenFrame = token
        self.aot_backend_done(frame)  # a backend that raised never reached the guards
        now = self._clock()
        popped = self._pop_open_frame(frame.compile_id)
        if popped is None:
            return
        if error is not None and frame.status is CompileStatus.OK:
            frame.status = CompileStatus.ERROR
            frame.error_type = qualified_type_name(tc.backend_error(error))
        region = frame.aot_call.region if frame.aot_call is not None else None
        if region is not None:  # torch's own figure: its bounds, not this call's around them
            frame.start_ns = self._from_unix_ns(region[0])
            now = self._from_unix_ns(region[1])
        self._finish_frame(frame, now)

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
        orphan = _OpenFrame(cid, 0, "?", tc.recompile_reason(), owner, self._frame_tokens())
        self._mark_imports(orphan)
        return orphan

    # -- Finishing ----------------------------------------------------------------------

    def _finish_frame(
        self, frame: _OpenFrame, end_ns: int, dynamo_known: bool = True, cpu_end: int | None = None
    ) -> None:
        owner = frame.owner
        assert owner is not None
        _stop_tracing_cost(frame)
        self._stop_collecting(frame)
        frame_ns = end_ns - frame.start_ns
        frame.setup_ns += self._first_header_ns(frame.regions)
        imported_ns = self.import_timer.thread_total_ns() - frame.imports_mark
        setup_ns = max(min(imported_ns + frame.setup_ns, frame_ns), 0)
        _backend_as_torch_times_it(frame, frame_ns)
        cpu_ns = setup_cpu_ns = None
        if frame.cpu_start is not None and dynamo_known:
            cpu_ns = max((self._cpu_clock() if cpu_end is None else cpu_end) - frame.cpu_start, 0)
            # torch's one-time regions (cache keys) are this thread's work: their wall time
            # stands for their CPU time.
            imported_cpu_ns = self.import_timer.thread_total_cpu_ns() - frame.imports_cpu_mark
            setup_cpu_ns = max(min(imported_cpu_ns + frame.setup_ns, cpu_ns), 0)
        dynamo_ns = max(frame_ns - frame.backend_ns - frame.discarded_ns, 0) if dynamo_known else None
        rank, world_size = _rank_and_world_size()
        attempt = _attempt(frame.compile_id)
        breaks: list[GraphBreak] = []
        if frame.breaks_mark is not None:
            breaks = [GraphBreak(*found) for found in tc.graph_breaks_since(frame.breaks_mark)]
        if frame.failure is not None:
            breaks.append(frame.failure)
        breaks = [_with_scalar_use(b) for b in breaks]
        with self._lock:
            # A frame refused past the limit compiled nothing: its own finding, not a spike.
            after_warmup = owner.registry in self._warmed and not frame.limit_hit
            components = self._frame_components.setdefault(_frame_id(frame.compile_id), [])
            # Torch counts any second compile of a frame as a recompile; for a component it is
            # one only when this component compiled the frame before (or nobody we saw did).
            first = components[0] if components else None
            is_recompile = attempt > 0 and (first is None or owner.component in components)
            shared_with = first if first is not None and owner.component not in components else None
            if owner.component not in components:
                components.append(owner.component)
            sharing = list(components) if len(components) > 1 else []
        record = GraphRecord(
            compile_id=frame.compile_id,
            component=owner.component,
            backend=owner.backend_name,
            code_name=frame.code_name,
            graph_node_count=frame.node_count,
            start_unix_ns=self.to_unix_ns(frame.start_ns),
            end_unix_ns=self.to_unix_ns(end_ns),
            dynamo_ns=dynamo_ns,
            backend_ns=frame.backend_ns,
            backend_start_unix_ns=(
                None if frame.backend_start_ns is None else self.to_unix_ns(frame.backend_start_ns)
            ),
            is_recompile=is_recompile,
            recompile_reason=frame.recompile_reason,
            fx_graph_cache=frame.fx,
            aot_autograd_cache=frame.aot,
            status=frame.status,
            error_type=frame.error_type,
            rank=rank,
            world_size=world_size,
            phases=tuple(sorted(frame.phases.items())),
            frame_attempt=attempt,
            shared_with=shared_with,
            restart_reasons=tuple(dict.fromkeys(frame.restart_reasons)),
            discarded_ns=frame.discarded_ns,
            code_filename=frame.filename,
            code_firstlineno=frame.first_line,
            graph_breaks=tuple(dict.fromkeys(breaks)),  # a restarted analysis repeats them
            structure_hash=_combined(frame.structure),
            graph_block=_one_block(frame.blocks),
            cache_lookups=tuple(frame.lookups),
            after_warmup=after_warmup,
            recompile_limit=tc.recompile_limit(),
            recompile_limit_hit=frame.limit_hit,
            module_class=frame.module.class_name,
            module_path=frame.module.path,
            module_forward=frame.module.forward_location,
            module_method=frame.module.method,
            arg_names=frame.module.arg_names,
            backward_in_forward=any(name == BACKWARD_COMPILER_REGION for name, _, _ in frame.regions),
            setup_ns=setup_ns,
            trace_cost=() if frame.trace is None or dynamo_ns is None else frame.trace.tree(dynamo_ns),
            frame_lines=self._frame_lines(frame, frame.start_ns, end_ns),
            cpu_ns=cpu_ns,
            setup_cpu_ns=setup_cpu_ns or 0,
            repeated_block=max(frame.repeated, key=lambda b: b.nodes, default=None),
            dynamic_sources=(
                tc.automatic_dynamic_sources(frame.filename, frame.first_line, frame.code_name)
                if self.diagnosis_capture_enabled and frame.filename
                else ()
            ),
            settings=frame.settings,
        )
        # Passive recordings on at once (a job's, and the user's own observe()) each get the
        # record, under the component each names it.
        copied = [(reg, replace(record, component=name)) for reg, name in getattr(owner, "copies", ())]
        copies = tuple((registry, registry.add(copy)) for registry, copy in copied)
        made = _Made(owner.registry, owner.registry.add(record), copies)
        with self._lock:
            self._made_by_id[frame.compile_id] = made
            if frame.context is not None:
                self._made_by_context[frame.context] = made
        if sharing:
            _warn_if_shared_frame_fills(record, sharing)
        if after_warmup:
            _warn_compiled_after_warmup(record)
        self.observers.record_finished(record, frame.tokens, owner.registry, copied)

    def _made_by(self, context: Any, compile_id: str) -> _Made | None:
        """The graph whose lazy backward is compiling now: by its compile context when torch
        gives one (ids repeat after a reset, context objects do not), else by compile id
        among the graphs compiled since the last reset."""
        with self._lock:
            if context is not None:
                try:
                    return self._made_by_context.get(context)
                except TypeError:  # a context that cannot be weakly referenced
                    pass
            return self._made_by_id.get(compile_id)

    def _backward_setup_ns(self, compile_id: str, start_unix_ns: int, end_unix_ns: int) -> int:
        """The one-time set-up a lazy backward paid (torch's once-per-process regions, the
        process's first C++ compile), from the regions collected since its start."""
        collected = self._state.backward_regions.pop(compile_id, None)
        if collected is None:
            return 0
        regions, outer = collected
        if tc.current_frame_region_sink() is regions:
            tc.frame_region_sink(outer)
        return one_time_ns(regions, start_unix_ns, end_unix_ns) + self._first_header_ns(regions)

    def _first_header_ns(self, regions: list[TimedRegion]) -> int:
        """The process's first C++ compile among ``regions``, once per process (0 after)."""
        headers = sorted((start, end) for name, start, end in regions if name == HEADER_REGION)
        if not headers:
            return 0
        with self._lock:
            if self._header_timed:
                return 0
            self._header_timed = True
        start, end = headers[0]
        return max(end - start, 0)

    def _finish_backward(self, compile_id: str, bw: _OpenBackward, end_ns: int) -> None:
        made = self._made_by(bw.context, compile_id)
        if made is not None:
            cpu_ns = None if bw.cpu_start is None else self._cpu_clock() - bw.cpu_start
            self._add_backward(made, self.to_unix_ns(bw.start_ns), self.to_unix_ns(end_ns), bw.tokens, cpu_ns)

    def _add_backward(
        self,
        made: _Made,
        start_unix_ns: int,
        end_unix_ns: int,
        tokens: Tokens,
        cpu_ns: int | None = None,
        setup_ns: int = 0,
    ) -> None:
        duration = end_unix_ns - start_unix_ns
        record = made.registry.add_backward(made.handle, start_unix_ns, duration, cpu_ns, setup_ns)
        copied = []
        for registry, handle in made.copies:
            copy = registry.add_backward(handle, start_unix_ns, duration, cpu_ns, setup_ns)
            if copy is not None:
                copied.append((registry, copy))
        if record is not None:
            end = end_unix_ns
            self.observers.backward_finished(record, start_unix_ns, end, tokens, made.registry, copied)

    # -- Warm-up -----------------------------------------------------------------------------

    def set_warmed_up(self, registry: Registry, warmed: bool) -> None:
        """Mark ``registry``'s warm-up as returned (its later frame compiles get
        ``after_warmup``), or as running again (a second model warming up on it)."""
        with self._lock:
            if warmed:
                self._warmed.add(registry)
            else:
                self._warmed.discard(registry)

    # -- Observers: the one channel to hear of a compile -----------------------------------

    @property
    def observer(self) -> CompileObserver | None:
        """The tracker's own observer among :attr:`observers`: telemetry's, built by the
        registered factory (:func:`~compiletrace._core.observers.register_observer_factory`);
        set it to put another in its place (None: none)."""
        self._refresh_own_observer()
        return self._own_observer

    @observer.setter
    def observer(self, observer: CompileObserver | None) -> None:
        with self._lock:
            self._built_from = OBSERVER_FACTORY.value  # this one, not the factory's, until it changes
            self._put_own_observer(observer)

    def _refresh_own_observer(self) -> None:
        # The factory's observer, built again when another factory was registered since.
        if not self._factory_observer or OBSERVER_FACTORY.value is self._built_from:
            return
        with self._lock:
            factory = OBSERVER_FACTORY.value
            if factory is not self._built_from:
                self._built_from = factory
                self._put_own_observer(build_observer(factory))

    def _put_own_observer(self, observer: CompileObserver | None) -> None:
        if self._own_observer is not None:
            self.observers.remove(self._own_observer)
        self._own_observer = observer
        if observer is not None:
            self.observers.add(observer, name=TELEMETRY)

    def _frame_tokens(self) -> Tokens:
        self._refresh_own_observer()
        return self.observers.frame_started()

    def forget_compile_ids(self) -> None:
        """After ``torch._dynamo.reset()`` compile ids restart at "0/0": a later lazy backward
        with an old id must not land on a graph compiled after the reset, nor a new frame
        count as sharing an old one. (Graphs keep their compile contexts.)"""
        with self._lock:
            self._made_by_id.clear()
            self._frame_components.clear()

    def open_frames(self) -> int:
        """Frames open on this thread, their end not yet seen (0 between compiles)."""
        return len(self._state.frames) + len(self._state.ending)


def _stop_tracing_cost(frame: _OpenFrame) -> None:
    if frame.trace is not None:
        frame.trace.unwatch_gc()
        if tc.trace_collector() is frame.trace:
            tc.set_trace_collector(None)


def _rank_and_world_size() -> tuple[int, int]:
    """This process's torch.distributed rank and world size; (0, 1) outside a process group."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _warn_if_shared_frame_fills(record: GraphRecord, components: list[str]) -> None:
    limit = tc.recompile_limit()
    used = record.frame_attempt + 1
    if limit is None or used < SHARED_FRAME_WARN_SHARE * limit:
        return
    warn_once(
        f"frame {_frame_id(record.compile_id)} ({record.code_name}) is compiled by "
        f"{' and '.join(components)}: they share torch's {limit} entries per frame and have used "
        f"{used}; past the limit torch runs the frame eagerly for all of them. Compile below "
        "the shared wrapper, or raise torch._dynamo.config.recompile_limit.",
        key=f"shared-frame:{record.code_name}:{_frame_id(record.compile_id)}:{','.join(components)}",
    )


def _with_scalar_use(found: GraphBreak) -> GraphBreak:
    """A ``.item()`` break, marked when the user's code tests the value it reads."""
    if not found.filename or not BREAK_ITEM.search(found.reason):
        return found
    return found._replace(scalar_in_branch=item_feeds_branch(found.filename, found.lineno))


def _combined(hashes: list[str]) -> str | None:
    # One graph per frame compile is the rule; a frame of several keeps them all, in order.
    return None if not hashes else hashes[0] if len(hashes) == 1 else "+".join(hashes)


def _one_block(blocks: list[str | None]) -> str:
    # The block a frame's graphs are calls of, when they all are of one ("" otherwise).
    found = set(blocks)
    if len(found) != 1:
        return ""
    return next(iter(found)) or ""


def _warn_compiled_after_warmup(record: GraphRecord) -> None:
    where = record.code_location or f"frame {_frame_id(record.compile_id)}"
    why = f" ({record.first_reason_line})" if record.first_reason_line else ""
    warn_once(
        f"{record.component} compiled {record.code_name} ({where}) after its warm-up returned{why}: "
        "a latency spike while serving. Warm up with the shapes, dtypes and modes serving sees; "
        "compiletrace.diagnose() says what changed.",
        key=f"after-warmup:{record.component}:{record.code_name}:{where}",
    )


def _attribution_of(compiler_fn: Any) -> Attribution | None:
    backend = tc.innermost_backend(compiler_fn)
    return backend if getattr(backend, "_is_compiletrace_backend", False) else None


def _unsettled(tracker: Tracker | None) -> list[str]:
    found = []
    if tracker is not None and tracker.passive is not None:
        found.append("passive recording is on (compiletrace.observe() not stopped)")
    if tracker is not None and tracker.open_frames():
        found.append(f"{tracker.open_frames()} frame compiles are open")
    return found


# The process Tracker, installed into torch on first use.
TRACKER: Slot[Tracker | None] = STATE.slot("tracker", None, unsettled=_unsettled)


def get_tracker() -> Tracker:
    """The process tracker, installed into torch's compile callbacks on first use."""
    tracker = TRACKER.value
    if tracker is not None:
        return tracker
    # Outside the lock, before building: in a compiletrace run job this import may start the
    # job's recording, which builds the tracker itself (get_tracker re-entered, once).
    tc.load_dynamo()
    with STATE.lock:
        if TRACKER.value is None:
            new = Tracker(observers=process_observers(), factory_observer=True)

            # Made inside an import of torch's (a job's bootstrap), the probes of what torch's
            # modules give cannot import them yet: what is missing is said at the first compile.
            warn_at_first_compile = [tc.torch_importing()]

            def on_start(trigger: str, compile_id: str) -> None:
                if warn_at_first_compile[0]:
                    warn_at_first_compile[0] = False
                    tc.warn_missing_capabilities()
                dynamo = trigger == tc.TRIGGER_DYNAMO
                new.on_start(
                    trigger,
                    compile_id,
                    frame=tc.compiling_frame() if dynamo else None,
                    recompile_reason=tc.recompile_reason() if dynamo else None,
                    context=None if dynamo else tc.current_compile_context(),
                )

            if not warn_at_first_compile[0]:
                tc.warn_missing_capabilities()
            tc.install_callbacks(on_start, new.on_end)
            tc.on_dynamo_reset(new.forget_compile_ids)
            new.bounds_from_regions = tc.install_region_hook(new.on_region)
            tc.install_runtime_hook(new.on_runtime_region)
            tc.install_cache_lookup_hook()
            tc.install_cache_key_hooks()
            tc.install_recompile_limit_hook(new.on_recompile_limit)
            tc.install_aot_compile_hook(new)
            new.time_one_time_setup()
            new._refresh_own_observer()  # telemetry's, from the factory the front door registered
            TRACKER.value = new
        made = TRACKER.value
    assert made is not None
    return made
