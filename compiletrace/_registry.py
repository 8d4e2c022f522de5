"""The registry: a thread-safe store of graph records, with running totals per component."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from compiletrace._records import NS_PER_S, CompilationTimes, GraphRecord

__all__ = ["SCHEMA_VERSION", "Registry", "compilation_times", "get_registry"]

SCHEMA_VERSION = 1

ENCODER = "encoder"
LANGUAGE_MODEL = "language_model"

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
            raise TypeError(f"record must be a GraphRecord, got {type(record).__name__}")
        with self._lock:
            self._index[record.compile_id] = len(self._records)
            self._records.append(record)
            self._totals_ns[record.component] = self._totals_ns.get(record.component, 0) + record.total_ns
            listeners = tuple(self._listeners)
        for listener in listeners:
            try:
                listener(record)
            except Exception as exc:  # a view's failure never reaches the user's compile
                from compiletrace._torch_compat import warn_once

                warn_once("listener", f"a registry listener failed and was skipped: {exc!r}")

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
        with self._lock:
            lm = self._totals_ns.get(LANGUAGE_MODEL, 0)
            enc = self._totals_ns.get(ENCODER, 0)
        return CompilationTimes(language_model=lm / NS_PER_S, encoder=enc / NS_PER_S)

    def by_component(self) -> dict[str, float]:
        """Seconds per component name, for any component, in first-seen order."""
        with self._lock:
            return {name: ns / NS_PER_S for name, ns in self._totals_ns.items()}

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def __repr__(self) -> str:
        parts = ", ".join(f"{k}={v:.3f}s" for k, v in self.by_component().items())
        return f"<Registry {len(self)} graphs{': ' + parts if parts else ''}>"

    def _repr_html_(self) -> str:
        from compiletrace.reports import registry_html_table

        return str(registry_html_table(self.records()))

    # -- serialising -------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a schema version; :meth:`from_dict` reads it back."""
        return {
            "schema_version": SCHEMA_VERSION,
            "records": [r.to_dict() for r in self.records()],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Registry:
        """Rebuild a registry from :meth:`to_dict` output."""
        if not isinstance(data, dict) or "records" not in data:
            raise ValueError("not a compiletrace registry: expected a dict with 'records'")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"registry schema version {version!r} is not supported; this compiletrace "
                f"reads version {SCHEMA_VERSION}"
            )
        registry = cls()
        for item in data["records"]:
            registry.add(GraphRecord.from_dict(item))
        return registry


_default_registry = Registry()


def get_registry() -> Registry:
    """The process-wide default registry that ``compiletrace.compile`` records into.

    >>> import compiletrace
    >>> isinstance(compiletrace.get_registry(), compiletrace.Registry)
    True
    """
    return _default_registry


def compilation_times(registry: Registry | None = None) -> CompilationTimes:
    """Shortcut for ``get_registry().compilation_times()``.

    >>> import compiletrace
    >>> compiletrace.compilation_times().total >= 0.0
    True
    """
    return (registry if registry is not None else _default_registry).compilation_times()
