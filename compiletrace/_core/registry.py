"""The registry: a thread-safe store of graph records, with running totals per component."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable
from typing import Any

from compiletrace._core.records import NS_PER_S, CompilationTimes, GraphRecord, ordered_components
from compiletrace._io.envelope import Fields
from compiletrace._io.errors import ArgumentTypeError, RunFileError
from compiletrace._io.state import STATE, warn_once

__all__ = [
    "RUN_KIND",
    "RUN_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "Registry",
    "compilation_times",
    "get_registry",
    "registry_dict",
]

SCHEMA_VERSION = 1  # of a registry's own JSON
# A saved profile run (compiletrace profile --json) wraps a registry's JSON: its kind and version.
RUN_KIND = "compiletrace.run"
RUN_SCHEMA_VERSION = 1

RecordListener = Callable[[GraphRecord], None]


class Registry:
    """Thread-safe store of :class:`GraphRecord` s, one per compiled graph.

    Readers get snapshots (tuples of frozen records), never the live structure. Totals per
    component are kept as records arrive, so :meth:`compilation_times` is O(components).

    >>> reg = Registry()
    >>> reg.compilation_times()
    CompilationTimes(language_model=0.0, encoder=0.0)
    >>> reg.to_dict()["schema_version"]
    1
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[GraphRecord] = []
        self._index: dict[str, int] = {}  # compile id -> position of its latest record
        self._totals_ns: dict[str, int] = {}
        self._listeners: list[RecordListener] = []

    # -- writing ----------------------------------------------------------------------

    def add(self, record: GraphRecord) -> None:
        """Store a finished graph record."""
        if not isinstance(record, GraphRecord):
            raise ArgumentTypeError(f"record must be a GraphRecord, got {type(record).__name__}")
        with self._lock:
            self._index[record.compile_id] = len(self._records)
            self._records.append(record)
            self._totals_ns[record.component] = self._totals_ns.get(record.component, 0) + record.total_ns
            listeners = tuple(self._listeners)
        for listener in listeners:
            try:
                listener(record)
            except Exception as exc:  # a view's failure never reaches the user's compile
                warn_once(f"a registry listener failed and was skipped: {exc!r}")

    def add_backward(self, compile_id: str, start_unix_ns: int, duration_ns: int) -> GraphRecord | None:
        """Attribute a lazy backward compile to the forward graph with ``compile_id``.

        Returns the updated record, or None when no record has that id (a graph that a
        compiletrace backend did not compile)."""
        with self._lock:
            pos = self._index.get(compile_id)
            if pos is None:
                return None
            old = self._records[pos]
            new = dataclasses.replace(
                old,
                backward_ns=old.backward_ns + duration_ns,
                backward_start_unix_ns=old.backward_start_unix_ns or start_unix_ns,
            )
            self._records[pos] = new
            self._totals_ns[new.component] = self._totals_ns.get(new.component, 0) + duration_ns
        return new

    def clear(self) -> None:
        """Forget every record."""
        with self._lock:
            self._records.clear()
            self._index.clear()
            self._totals_ns.clear()

    def add_listener(self, listener: RecordListener) -> None:
        """Call ``listener(record)`` after each new record (not on backward updates)."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: RecordListener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    # -- reading ----------------------------------------------------------------------

    def records(self) -> tuple[GraphRecord, ...]:
        """An immutable snapshot of every record, in the order compiles finished."""
        with self._lock:
            return tuple(self._records)

    def compilation_times(self) -> CompilationTimes:
        """Seconds spent compiling the "language_model" and "encoder" components."""
        return CompilationTimes.from_components(self.by_component())

    def by_component(self) -> dict[str, float]:
        """Seconds per component name, for any component (language model and encoder first,
        then as first seen: :func:`~compiletrace._core.records.ordered_components`)."""
        with self._lock:
            totals = dict(self._totals_ns)
        return {name: totals[name] / NS_PER_S for name in ordered_components(totals)}

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def __repr__(self) -> str:
        parts = ", ".join(f"{k}={v:.3f}s" for k, v in self.by_component().items())
        return f"<Registry {len(self)} graphs{': ' + parts if parts else ''}>"

    # -- serialising -------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a schema version; :meth:`from_dict` reads it back."""
        return registry_dict(self.records())

    @classmethod
    def from_dict(cls, data: Any, source: str = "registry", where: str = "") -> Registry:
        """Rebuild a registry from :meth:`to_dict` output, checking every field; raises
        :class:`~compiletrace.RunFileError` naming the first bad one."""
        if not isinstance(data, dict) or "records" not in data:
            at = f" (field {where!r})" if where else ""
            raise RunFileError(
                f"{source}{at} is not a compiletrace registry: expected a JSON object with 'records'"
            )
        f = Fields(data, source, where)
        f.check_version({SCHEMA_VERSION})
        registry = cls()
        for item in f.items("records"):
            registry.add(GraphRecord.from_dict(item.data, item.source, item.where))
        return registry


def registry_dict(records: Iterable[GraphRecord]) -> dict[str, Any]:
    """The JSON-ready form of a registry holding ``records`` (:meth:`Registry.to_dict`)."""
    return {"schema_version": SCHEMA_VERSION, "records": [r.to_dict() for r in records]}


def get_registry() -> Registry:
    """The process-wide default registry that ``compiletrace.compile`` records into.

    >>> import compiletrace
    >>> isinstance(compiletrace.get_registry(), compiletrace.Registry)
    True
    """
    registry = STATE.default_registry
    if registry is None:
        with STATE.lock:
            if STATE.default_registry is None:
                STATE.default_registry = Registry()
            registry = STATE.default_registry
    return registry  # type: ignore[no-any-return]


def compilation_times(registry: Registry | None = None) -> CompilationTimes:
    """Shortcut for ``get_registry().compilation_times()``.

    >>> import compiletrace
    >>> compiletrace.compilation_times().total >= 0.0
    True
    """
    return (registry if registry is not None else get_registry()).compilation_times()
