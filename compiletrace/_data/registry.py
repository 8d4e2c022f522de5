"""The registry: a thread-safe store of graph records, with running totals per component.

It holds data only: who hears of a compile is the tracker's business (its observers,
``compiletrace._core.observers``), not the store's."""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Iterable
from typing import Any

from compiletrace._data.records import (
    NEWEST_RUN_VERSION,
    NS_PER_S,
    CompilationTimes,
    GraphRecord,
    RuntimeEvent,
    ordered_components,
)
from compiletrace._data.timeline import PhaseRecord
from compiletrace._io.envelope import Fields
from compiletrace._io.errors import ArgumentTypeError, RunFileError
from compiletrace._io.state import STATE, Slot

__all__ = [
    "SCHEMA_VERSION",
    "Registry",
    "checked_registry",
    "compilation_times",
    "get_registry",
    "registry_dict",
]

SCHEMA_VERSION = 1  # of a registry's own JSON; the fields of its records follow the run file's version
# A saved profile run (compiletrace profile --json) wraps a registry's JSON: its kind and version.

# The process registry keeps this many records: a server that recompiles for days must not
# grow without bound. Totals per component stay exact past it.
DEFAULT_CAPACITY = 10_000


class Registry:
    """Thread-safe store of :class:`GraphRecord` s, one per compiled graph, and beside them
    the start-up's :class:`~compiletrace._data.timeline.PhaseRecord` s (``compiletrace.phase``,
    warm-ups, instrumented functions).

    Readers get snapshots (tuples of frozen records), never the live structure. Totals per
    component are kept as records arrive, so :meth:`compilation_times` is O(components).
    With a ``capacity``, the oldest records are dropped past it; the totals still count
    them, and :attr:`dropped` says how many went. Phases are kept up to the same capacity
    too, but the first ones: a start-up comes first, and a server that times each request
    must not push it out (:attr:`phases_dropped` counts the later ones not kept).

    >>> reg = Registry()
    >>> reg.compilation_times()
    CompilationTimes(language_model=0.0, encoder=0.0)
    >>> reg.to_dict()["schema_version"]
    1
    """

    def __init__(self, capacity: int | None = None) -> None:
        if capacity is not None and (
            isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1
        ):
            raise ArgumentTypeError(f"capacity must be None or a positive int, got {capacity!r}")
        self.capacity = capacity
        # Re-entrant: a signal handler on the thread that holds it (a process writing its run
        # on SIGTERM in the middle of an add) must not deadlock.
        self._lock = threading.RLock()
        self._records: collections.deque[GraphRecord] = collections.deque()
        self._first = 0  # the handle of the oldest record kept (handles count every record added)
        self._index: dict[str, int] = {}  # compile id -> handle of its latest record
        self._totals_ns: dict[str, int] = {}
        self.dropped = 0  # records dropped past the capacity (still in the totals)
        self._phases: list[PhaseRecord] = []
        self.phases_dropped = 0  # phases not kept past the capacity
        # Work on compiled graphs' first calls (autotuning, CUDA-graph recording): the first
        # ones kept, as phases are.
        self._runtime: list[RuntimeEvent] = []

    # -- writing ----------------------------------------------------------------------

    def add(self, record: GraphRecord) -> int:
        """Store a finished graph record; returns its handle for :meth:`add_backward` (compile
        ids repeat after ``torch._dynamo.reset()``, handles do not)."""
        if not isinstance(record, GraphRecord):
            raise ArgumentTypeError(f"record must be a GraphRecord, got {type(record).__name__}")
        with self._lock:
            handle = self._first + len(self._records)
            self._index[record.compile_id] = handle
            self._records.append(record)
            if self.capacity is not None and len(self._records) > self.capacity:
                gone = self._records.popleft()
                if self._index.get(gone.compile_id) == self._first:
                    del self._index[gone.compile_id]
                self._first += 1
                self.dropped += 1
            self._totals_ns[record.component] = self._totals_ns.get(record.component, 0) + record.total_ns
        return handle

    def add_backward(
        self,
        graph: str | int,
        start_unix_ns: int,
        duration_ns: int,
        cpu_ns: int | None = None,
        setup_ns: int = 0,
    ) -> GraphRecord | None:
        """Attribute a lazy backward compile to a forward graph: ``graph`` is the handle
        :meth:`add` returned, or a compile id (the latest record with that id). ``cpu_ns``:
        its CPU time, added to a record that measures CPU (its wall time stands in when
        unknown); ``setup_ns``: the process's one-time set-up it paid (the first C++
        compile, when it lands in the backward), added to the record's.

        Returns the updated record, or None when there is no such graph (one that a
        compiletrace backend did not compile)."""
        with self._lock:
            handle = self._index.get(graph) if isinstance(graph, str) else graph
            pos = None if handle is None else handle - self._first
            if pos is None or not 0 <= pos < len(self._records):
                return None  # unknown, or dropped past the capacity
            old = self._records[pos]
            setup_ns = max(min(setup_ns, duration_ns), 0)
            spent_cpu = duration_ns if cpu_ns is None else cpu_ns
            new = dataclasses.replace(
                old,
                backward_ns=old.backward_ns + duration_ns,
                backward_start_unix_ns=old.backward_start_unix_ns or start_unix_ns,
                cpu_ns=_plus(old.cpu_ns, spent_cpu),
                setup_ns=old.setup_ns + setup_ns,
                # its wall time stands for its CPU time (a compiler's run), as a frame's does
                setup_cpu_ns=old.setup_cpu_ns + (min(setup_ns, spent_cpu) if old.cpu_ns is not None else 0),
            )
            self._records[pos] = new
            self._totals_ns[new.component] = self._totals_ns.get(new.component, 0) + duration_ns
        return new

    def add_phase(self, record: PhaseRecord) -> None:
        """Store a finished phase (``compiletrace.phase`` and ``warm_up`` record theirs here)."""
        if not isinstance(record, PhaseRecord):
            raise ArgumentTypeError(f"record must be a PhaseRecord, got {type(record).__name__}")
        # No lock on the way in: a phase costs a few microseconds, and appending to a list
        # is atomic (the capacity may be passed by one record per thread racing at its edge).
        if self.capacity is None or len(self._phases) < self.capacity:
            self._phases.append(record)
        else:
            with self._lock:
                self.phases_dropped += 1

    def add_runtime_event(self, event: RuntimeEvent) -> None:
        """Store work torch did on a compiled graph's call (autotuning, a CUDA-graph recording)."""
        if not isinstance(event, RuntimeEvent):
            raise ArgumentTypeError(f"event must be a RuntimeEvent, got {type(event).__name__}")
        if self.capacity is None or len(self._runtime) < self.capacity:
            self._runtime.append(event)

    def clear(self) -> None:
        """Forget every record, phases included."""
        with self._lock:
            self._first += len(self._records)
            self._records.clear()
            self._index.clear()
            self._totals_ns.clear()
            self.dropped = 0
            self._phases.clear()
            self.phases_dropped = 0
            self._runtime.clear()

    # -- reading ----------------------------------------------------------------------

    def records(self) -> tuple[GraphRecord, ...]:
        """An immutable snapshot of every record, in the order compiles finished."""
        with self._lock:
            return tuple(self._records)

    def phase_records(self) -> tuple[PhaseRecord, ...]:
        """An immutable snapshot of every phase kept, in the order they ended."""
        with self._lock:
            return tuple(self._phases)

    def runtime_events(self) -> tuple[RuntimeEvent, ...]:
        """An immutable snapshot of the work torch did on compiled graphs' calls, in order."""
        with self._lock:
            return tuple(self._runtime)

    def compilation_times(self) -> CompilationTimes:
        """Seconds spent compiling the "language_model" and "encoder" components."""
        return CompilationTimes.from_components(self.by_component())

    def by_component(self) -> dict[str, float]:
        """Seconds per component name, for any component (language model and encoder first,
        then as first seen: :func:`~compiletrace._data.records.ordered_components`)."""
        with self._lock:
            totals = dict(self._totals_ns)
        return {name: totals[name] / NS_PER_S for name in ordered_components(totals)}

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def __repr__(self) -> str:
        parts = ", ".join(f"{k}={v:.3f}s" for k, v in self.by_component().items())
        dropped = f" ({self.dropped} dropped)" if self.dropped else ""
        return f"<Registry {len(self)} graphs{dropped}{': ' + parts if parts else ''}>"

    # -- serialising -------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a schema version; :meth:`from_dict` reads it back."""
        return registry_dict(self.records(), self.phase_records(), self.runtime_events())

    @classmethod
    def from_dict(
        cls, data: Any, source: str = "registry", where: str = "", version: int = NEWEST_RUN_VERSION
    ) -> Registry:
        """Rebuild a registry from :meth:`to_dict` output, checking every field; raises
        :class:`~compiletrace.RunFileError` naming the first bad one. ``version``: the run
        file's (its records' fields, and first-call work from version 3 on). A registry with
        no phases (or no first-call work) has no ``phase_records`` (``runtime_events``)."""
        if not isinstance(data, dict) or "records" not in data:
            at = f" (field {where!r})" if where else ""
            raise RunFileError(
                f"{source}{at} is not a compiletrace registry: expected a JSON object with 'records'"
            )
        f = Fields(data, source, where)
        f.check_version({SCHEMA_VERSION})
        registry = cls()
        for item in f.items("records"):
            registry.add(GraphRecord.from_dict(item.data, item.source, item.where, version))
        if "phase_records" in f.data:
            for item in f.items("phase_records"):
                registry.add_phase(PhaseRecord.from_dict(item.data, item.source, item.where))
        if version >= 3 and "runtime_events" in f.data:
            for item in f.items("runtime_events"):
                registry.add_runtime_event(RuntimeEvent.from_dict(item.data, item.source, item.where))
        return registry


def checked_registry(registry: object) -> Registry | None:
    """``registry`` itself when it is None or a :class:`Registry`; else the one clear error
    every entry point that takes ``registry=`` gives."""
    if registry is not None and not isinstance(registry, Registry):
        raise ArgumentTypeError(f"registry must be a compiletrace.Registry, got {type(registry).__name__}")
    return registry


def registry_dict(
    records: Iterable[GraphRecord], phases: Iterable[PhaseRecord] = (), runtime: Iterable[RuntimeEvent] = ()
) -> dict[str, Any]:
    """The JSON-ready form of a registry holding ``records``, ``phases`` and ``runtime``
    events (:meth:`Registry.to_dict`); ``phase_records`` and ``runtime_events`` only when
    there are some, so a registry without any writes what it always wrote (new keys: older
    readers skip them)."""
    data: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "records": [r.to_dict() for r in records]}
    phase_list = [p.to_dict() for p in phases]
    if phase_list:
        data["phase_records"] = phase_list
    runtime_list = [e.to_dict() for e in runtime]
    if runtime_list:
        data["runtime_events"] = runtime_list
    return data


# The Registry compiletrace.compile records into, made on first use.
_DEFAULT: Slot[Registry | None] = STATE.slot("default registry", None)


def get_registry() -> Registry:
    """The process-wide default registry that ``compiletrace.compile`` records into.

    >>> import compiletrace
    >>> isinstance(compiletrace.get_registry(), compiletrace.Registry)
    True
    """
    registry = _DEFAULT.value
    if registry is None:
        with STATE.lock:
            registry = _DEFAULT.value
            if registry is None:
                _DEFAULT.value = registry = Registry(capacity=DEFAULT_CAPACITY)
    return registry


def compilation_times(registry: Registry | None = None) -> CompilationTimes:
    """Shortcut for ``get_registry().compilation_times()``.

    >>> import compiletrace
    >>> compiletrace.compilation_times().total >= 0.0
    True
    """
    return (registry if registry is not None else get_registry()).compilation_times()


def _plus(total: int | None, ns: int) -> int | None:
    """A record's CPU time with a lazy backward's added (None: the record measures none)."""
    return None if total is None else total + ns
