"""The one channel to hear of a compile: the tracker's observers.

An observer is told when a frame compile starts, when its record is finished, and when a
lazy backward compile is added to a record (:class:`CompileObserver`). Telemetry's span
observer is one (built by the factory the front door registers: the core never imports
telemetry), the progress lines ``compiletrace profile`` prints are another, and
``expect_no_compiles`` a third; a function of ``(record, is_backward)`` is one through
:class:`OnCompile`. An observer may listen to one registry's compiles only. Its failures
never reach the user's compile: each warns once and is skipped for that event.

Torch-free: the front door registers telemetry's factory without loading torch.

>>> from compiletrace._data.records import GraphRecord
>>> from compiletrace._data.registry import Registry
>>> seen, mine = [], Registry()
>>> observers = Observers()
>>> observers.add(OnCompile(lambda record, backward: seen.append(record.compile_id)), registry=mine)
>>> record = GraphRecord("0/0", "encoder", "eager", "forward", 4, 0, 10, 5, 5, 10)
>>> observers.record_finished(record, observers.frame_started(), Registry())  # another registry's
>>> observers.record_finished(record, observers.frame_started(), mine)
>>> seen
['0/0']
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from compiletrace._data.records import GraphRecord
from compiletrace._data.registry import Registry
from compiletrace._io.state import STATE, Slot, warn_once

__all__ = [
    "OBSERVER_FACTORY",
    "TELEMETRY",
    "CompileListener",
    "CompileObserver",
    "FrameObserver",
    "Observers",
    "OnCompile",
    "Tokens",
    "build_observer",
    "process_observers",
    "register_observer_factory",
]


class CompileObserver(Protocol):
    """Told of every compile the tracker records (telemetry's span observer is one)."""

    def frame_started(self) -> Any: ...  # an opaque token given back at the end (the OTel context)

    def record_finished(self, record: GraphRecord, token: Any) -> None: ...

    def backward_finished(
        self, record: GraphRecord, start_unix_ns: int, end_unix_ns: int, token: Any
    ) -> None: ...


FrameObserver = CompileObserver  # its former name

# (the finished record, whether it is a lazy backward added to it)
CompileListener = Callable[[GraphRecord, bool], None]


@dataclass(frozen=True, eq=False)
class OnCompile:
    """An observer made of one function: ``call(record, is_backward)`` after each frame
    compile (False) and each lazy backward compile added to a record (True, with the
    record as updated)."""

    call: CompileListener

    def frame_started(self) -> None:
        return None

    def record_finished(self, record: GraphRecord, token: Any) -> None:
        self.call(record, False)

    def backward_finished(
        self, record: GraphRecord, start_unix_ns: int, end_unix_ns: int, token: Any
    ) -> None:
        self.call(record, True)


@dataclass(frozen=True, eq=False)
class _Entry:
    observer: CompileObserver
    registry: Registry | None  # None: every registry's compiles
    name: str  # what a warning calls it when it fails


# The tokens of one frame: each observer's, by its entry (an observer added later has none).
Tokens = tuple[tuple[_Entry, Any], ...]
# A record's copies in other registries (passive recordings): (registry, its copy).
Copies = Sequence[tuple[Registry, GraphRecord]]


class Observers:
    """The observers of one tracker, in the order added. Thread-safe: an observer added or
    removed while a compile runs is told of that compile's end, or not, never half of it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: tuple[_Entry, ...] = ()

    def add(self, observer: CompileObserver, *, registry: Registry | None = None, name: str = "") -> None:
        """Tell ``observer`` of every compile recorded from now on, or, with ``registry``,
        of those recorded into it (a passive recording's copy included, as that registry
        holds it). ``name`` is what a warning calls it when it fails (its class's name by
        default)."""
        entry = _Entry(observer, registry, name or type(observer).__name__)
        with self._lock:
            self._entries = (*self._entries, entry)

    def remove(self, observer: CompileObserver) -> None:
        """Stop telling ``observer`` (every time it was added)."""
        with self._lock:
            self._entries = tuple(e for e in self._entries if e.observer is not observer)

    @contextlib.contextmanager
    def observing(
        self, observer: CompileObserver, *, registry: Registry | None = None, name: str = ""
    ) -> Iterator[CompileObserver]:
        """``observer`` added for the block, removed after it."""
        self.add(observer, registry=registry, name=name)
        try:
            yield observer
        finally:
            self.remove(observer)

    def __iter__(self) -> Iterator[CompileObserver]:
        return (e.observer for e in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        """What each observer is called, in the order added."""
        return [e.name for e in self._entries]

    def frame_started(self) -> Tokens:
        """Each observer's token for a frame compile starting now."""
        return tuple((e, _safely(e, e.observer.frame_started)) for e in self._entries)

    def record_finished(
        self, record: GraphRecord, tokens: Tokens, registry: Registry, copies: Copies = ()
    ) -> None:
        """Tell each observer of ``record``, recorded into ``registry`` (and copied into
        the ``copies``' registries); an observer of one registry hears the record that
        registry holds."""
        for entry, token in self._told(tokens):
            held = _held(entry, record, registry, copies)
            if held is not None:
                _safely(entry, entry.observer.record_finished, held, token)

    def backward_finished(
        self,
        record: GraphRecord,
        start_unix_ns: int,
        end_unix_ns: int,
        tokens: Tokens,
        registry: Registry,
        copies: Copies = (),
    ) -> None:
        """Tell each observer that a lazy backward compile was added to ``record``."""
        for entry, token in self._told(tokens):
            held = _held(entry, record, registry, copies)
            if held is not None:
                _safely(entry, entry.observer.backward_finished, held, start_unix_ns, end_unix_ns, token)

    def _told(self, tokens: Tokens) -> Iterator[tuple[_Entry, Any]]:
        """The observers now, each with its token from the frame's start (None if added since)."""
        given = dict(tokens)
        return ((e, given.get(e)) for e in self._entries)


def _held(entry: _Entry, record: GraphRecord, registry: Registry, copies: Copies) -> GraphRecord | None:
    """The record ``entry`` hears of: the record itself for an observer of every registry
    or of ``registry``, the copy an observed registry holds, else None."""
    if entry.registry is None or entry.registry is registry:
        return record
    return next((copy for reg, copy in copies if reg is entry.registry), None)


def _safely(entry: _Entry, method: Callable[..., Any], *args: Any) -> Any:
    try:
        return method(*args)
    except Exception as exc:  # an observer's failure never reaches the user's compile
        warn_once(f"{entry.name} failed and was disabled for this event: {exc!r}")
        return None


TELEMETRY = "telemetry"  # the name of the process tracker's own observer, the factory's


def _left_added(observers: Observers) -> list[str]:
    left = [name for name in observers.names() if name != TELEMETRY]
    return [f"observers of compiles are left added: {', '.join(left)}"] if left else []


# The process tracker's observers: held here, not by the tracker, so that one is added
# before the tracker is made (at the first compile) and without loading torch.
_PROCESS_OBSERVERS: Slot[Observers] = STATE.slot(
    "process tracker's observers", Observers(), unsettled=_left_added
)


def process_observers() -> Observers:
    """The observers of the process tracker (``compiletrace._core.tracker.get_tracker()``):
    every compile any compiletrace backend records, or ``observe()`` recording on, is told
    to them."""
    return _PROCESS_OBSERVERS.value


# Builds the tracker's own observer (telemetry's) when the tracker next starts a frame (or
# is made): the front door registers telemetry's span observer here without importing the
# core's torch-facing modules, nor the core telemetry.
OBSERVER_FACTORY: Slot[Callable[[], CompileObserver] | None] = STATE.slot("observer factory", None)


def register_observer_factory(factory: Callable[[], CompileObserver] | None) -> None:
    """Build the process tracker's own observer (telemetry's) with ``factory()``, in place
    of the one it has, from its next compile on (or when its ``observer`` is read); None
    removes it. Registering loads no torch."""
    with STATE.lock:
        OBSERVER_FACTORY.value = factory


def build_observer(factory: Callable[[], CompileObserver] | None) -> CompileObserver | None:
    """What ``factory`` builds: None without one, or when it fails (say OpenTelemetry is
    missing or broken: measure without spans, and warn once)."""
    if factory is None:
        return None
    try:
        return factory()
    except Exception as exc:
        warn_once(f"telemetry is off: its observer could not be built: {exc!r}")
        return None
