"""``compiletrace.phase``: mark the phases of a start-up; and the timeline of this
process's start-up, from its own start (:func:`startup_timeline`).

A phase is recorded in a registry (as a :class:`~compiletrace._data.timeline.PhaseRecord`)
and, when telemetry records, is an OpenTelemetry span under the start-up's root span (see
``compiletrace.telemetry._startup``). Its cost with no SDK set up is the recorder's alone:
OpenTelemetry is not even loaded for it (without it loaded, no SDK can have been set up).

The timeline in three places, one concept: its data is ``_data.timeline`` (phases and the
timeline laid out from them: what the registry, a run file and the views hold); recording
is the core's (``_core.startup``: the clock, the import marks, the process's start;
``_core.recorder``: phases on that clock); this module is the user's API, joining them to
telemetry and to the process's start time (read from ``/proc`` by ``_app.progress``).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, cast

from compiletrace._app.progress import process_start_unix_s
from compiletrace._core import recorder
from compiletrace._core.recorder import CURRENT as _CURRENT
from compiletrace._core.startup import UnixClock, exec_probe, import_marks, process_records, unix_now_ns
from compiletrace._data.records import NS_PER_S
from compiletrace._data.registry import Registry, checked_registry, get_registry
from compiletrace._data.timeline import (
    ORIGIN_EXEC,
    ORIGIN_FORK,
    ORIGIN_IMPORT,
    ORIGIN_PROCESS,
    PHASE,
    PhaseRecord,
    Timeline,
    build_timeline,
)
from compiletrace._io.errors import ArgumentTypeError
from compiletrace._io.exec_time import exec_start
from compiletrace._io.state import warn_once

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue

__all__ = ["OwnPhase", "open_startup_trace", "phase", "process_start_unix_ns", "startup_timeline"]

P = ParamSpec("P")
R = TypeVar("R")


class SpanLike(Protocol):
    def set_attribute(self, key: str, value: Any) -> Any: ...


class _NoSpan:
    """What :attr:`phase.span` gives when the phase has no span (nothing records)."""

    def set_attribute(self, key: str, value: Any) -> None:
        pass


_NO_SPAN = _NoSpan()
# A memo, not state, of a module reference (what sys.modules holds), read on every phase
# (the hot path), once OpenTelemetry is loaded.
_startup_module: ModuleType | None = None
_OTEL_TRACE = "opentelemetry.trace"


def _telemetry() -> Any:
    """``compiletrace.telemetry._startup`` once OpenTelemetry is loaded, else None: until it
    is, no SDK can have been set up, so a phase has no span to make and never loads it."""
    global _startup_module
    if _startup_module is None:
        if _OTEL_TRACE not in sys.modules:
            return None
        from compiletrace.telemetry import _startup

        _startup_module = _startup
    return _startup_module


# A memo, not state, of what the OS says, keyed by pid (a forked child reads its own): (pid,
# its start in Unix ns).
_process_start: tuple[int, int | None] | None = None


def process_start_unix_ns() -> int | None:
    """When this process started (Unix ns), read from the OS once per process (a forked
    child has its own); None where it cannot be read.

    >>> started = process_start_unix_ns()
    >>> started is None or started < unix_now_ns()
    True
    """
    global _process_start
    pid = os.getpid()
    cached = _process_start
    if cached is None or cached[0] != pid:
        seconds = process_start_unix_s()
        cached = (pid, None if seconds is None else round(seconds * NS_PER_S))
        _process_start = cached
    return cached[1]


def _first_entries() -> tuple[int, str, int | None, tuple[PhaseRecord, ...]]:
    """(the start-up's start, where it comes from, the ns the process ran another program
    before exec'ing this one, the process's own first entries). The start is this program's
    exec, where the process ran something else first (a shell's ``cmd; exec python``);
    else the process's start; where that cannot be read, when ``import compiletrace`` began."""
    thread, rank = threading.main_thread().name, recorder.rank()
    forked = process_start_unix_ns()
    if forked is None:
        return import_marks()[0], ORIGIN_IMPORT, None, process_records(None, thread=thread, rank=rank)
    began, before_exec = exec_start(exec_probe(), forked)
    origin = ORIGIN_FORK if before_exec is None else ORIGIN_EXEC if before_exec else ORIGIN_PROCESS
    return began, origin, before_exec, process_records(began, thread=thread, rank=rank)


def _origin() -> tuple[int, Sequence[PhaseRecord]]:
    # For the start-up root span: it starts when the start-up did.
    start, _, _, first = _first_entries()
    return start, first


def startup_timeline(
    registry: Registry | None = None,
    *,
    end_unix_ns: int | None = None,
    extra_phases: Iterable[PhaseRecord] = (),
) -> Timeline:
    """The timeline of this process's start-up, from the process's own start (read from the
    OS; where it cannot be, from ``import compiletrace``) to ``end_unix_ns`` (default: now).
    Where the process ran another program before exec'ing this one (``bash -c 'pip install
    ...; exec python app.py'``), it starts at the exec, and ``before_exec_ns`` holds the time
    before (see ``compiletrace._io.exec_time``).

    Its first entries are the process's own (interpreter start, then compiletrace's import
    and torch's, each timed where it happened, and compiletrace's torch-facing core, loaded
    at its first use), then the phases of ``registry`` (default: the process
    registry) and ``extra_phases`` (phases another registry holds), with the compiles of
    ``registry`` inside each; whatever no phase covers is "unattributed".

    >>> tl = startup_timeline(Registry())
    >>> tl.total_ns == sum(e.counted_ns for e in tl.top_level())
    True
    >>> "import compiletrace" in [e.name for e in tl.entries if e.kind == "process"]
    True
    """
    reg = registry if registry is not None else get_registry()
    start, origin, before_exec, first = _first_entries()
    end = unix_now_ns() if end_unix_ns is None else end_unix_ns
    phases = (*first, *reg.phase_records(), *extra_phases)
    return build_timeline(phases, reg.records(), start, end, origin=origin, before_exec_ns=before_exec)


def open_startup_trace() -> bool:
    """Open the start-up's root span now, when telemetry records (``compiletrace profile``
    does, so that all its phases nest under one); True if one is open."""
    tel = _telemetry()
    return tel is not None and bool(tel.open_startup_span(_origin))


class phase:  # lower case: called like a function, as contextlib.closing is
    """Mark a phase of the start-up: loading weights, building the model, capturing CUDA
    graphs, allocating caches, the first request. Use it as ``with``, ``async with`` or a
    decorator (sync or async functions).

    Each run is recorded (name, start, end, thread, rank, the phase it is nested in) in
    ``registry``, else in the registry of the phase around it, else in the process
    registry; the start-up timeline shows it, with the compile time inside it per
    component. When OpenTelemetry records, it is also a span (with ``attributes``) under
    the start-up's root span "Start-up" (which the first phase opens, from the process's
    own start; see ``compiletrace.telemetry.end_startup``). Phases nest: one opened inside
    another (same thread or task) is its child; runs on several threads or tasks at once
    are each their own. ``clock`` (Unix nanoseconds) is for tests. An exception leaving the
    phase is recorded (status "error") and re-raised unchanged.

    A class rather than a function returning one: ``with phase(...)`` pays for the call on
    every use, and a phase must cost a few microseconds.

    >>> import compiletrace, time
    >>> reg = compiletrace.Registry()
    >>> with compiletrace.phase("load weights", registry=reg):
    ...     time.sleep(0.01)
    >>> @compiletrace.phase("first request", registry=reg)
    ... def serve() -> str:
    ...     return "ok"
    >>> serve()
    'ok'
    >>> [p.name for p in reg.phase_records()]
    ['load weights', 'first request']
    >>> reg.phase_records()[0].duration_s >= 0.01  # at least its sleep
    True
    """

    __slots__ = ("attributes", "clock", "name", "registry")
    kind = PHASE
    # Whether this phase may open the start-up's root span: a user's phases do;
    # compiletrace's own (OwnPhase: the warm-up, profile's steps) join one and open none.
    opens_root = True

    def __init__(
        self,
        name: str,
        *,
        attributes: Mapping[str, AttributeValue] | None = None,
        registry: Registry | None = None,
        clock: UnixClock | None = None,
    ) -> None:
        if not isinstance(name, str) or not name or name.isspace():
            raise ArgumentTypeError(f"phase needs a non-empty name, got {name!r}")
        if attributes is not None and not isinstance(attributes, Mapping):
            raise ArgumentTypeError(
                f"attributes must be a mapping of str to values, got {type(attributes).__name__}"
            )
        checked_registry(registry)
        if clock is not None and not callable(clock):
            raise ArgumentTypeError(f"clock must be a callable returning Unix nanoseconds, got {clock!r}")
        self.name = name
        self.attributes = dict(attributes) if attributes else None
        self.registry = registry
        self.clock = clock

    def _start_span(self, start_unix_ns: int) -> Any:
        return _telemetry().start_phase_span(
            self.name, self.attributes, start_unix_ns, self.opens_root, _origin
        )

    def __enter__(self) -> phase:
        # Without OpenTelemetry loaded there is no span to make (no SDK can have been set
        # up): not even a call to ask. Loaded, one question: does anything record?
        tel = _startup_module
        if tel is None and _OTEL_TRACE in sys.modules:
            tel = _telemetry()
        spans = self._start_span if tel is not None and tel.tracing_possible() else None
        recorder.begin(self.name, self.kind, self.registry, self.clock, self, spans)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        opened = _CURRENT.get()
        if opened is None or opened.owner is not self:
            warn_once(
                f"phase {self.name!r} ended in another thread or task than it began in; not recorded",
                key="phase-out-of-context",
            )
            return
        record = recorder.end(opened, exc)
        if opened.span is not None:
            end_ns = record.end_unix_ns if record is not None else opened.clock()
            _telemetry().end_phase_span(opened.span, end_ns, exc)

    async def __aenter__(self) -> phase:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        if not callable(func):
            raise ArgumentTypeError(f"phase decorates a function, got {type(func).__name__}")
        if inspect.iscoroutinefunction(func):
            async_func = cast(Callable[P, Awaitable[Any]], func)

            @functools.wraps(func)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
                with self:  # the phase spans the awaited call, not the coroutine's creation
                    return await async_func(*args, **kwargs)

            return cast(Callable[P, R], async_wrapper)

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with self:
                return func(*args, **kwargs)

        return wrapper

    @property
    def span(self) -> SpanLike:
        """The span of this phase's run open in the current thread or task (set attributes
        on it); a stand-in that does nothing when there is none.

        >>> with phase("allocate caches", registry=Registry()) as p:
        ...     p.span.set_attribute("cache.blocks", 1024)  # a no-op here: nothing records
        """
        opened = _CURRENT.get()
        if opened is not None and opened.owner is self and opened.span is not None:
            return cast(SpanLike, opened.span.span)
        return _NO_SPAN

    def __repr__(self) -> str:
        return f"<phase {self.name!r}>"


class OwnPhase(phase):
    """A phase compiletrace marks itself (the warm-up, ``profile``'s steps): it joins an
    open start-up root span but opens none, so a program that declares no phase keeps the
    span tree it had."""

    __slots__ = ()
    opens_root = False
