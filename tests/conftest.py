"""Fixtures and builders shared by the tests (the clean Dynamo and private cache for every
test, doctests included, are in the root conftest.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from compiletrace import GraphRecord, ProfileRun, Registry, WarmupResult

# tests/programs/ holds programs the tests run as a user would (a separate process, with
# their own arguments), not modules to import: collecting them would run them. tests/inputs/
# holds committed inputs and the scripts that make them.
collect_ignore = ["programs", "inputs"]

if TYPE_CHECKING:
    from compiletrace import telemetry

MS = 1_000_000  # nanoseconds
S = 1_000_000_000


class FakeClock:
    """An injectable clock: integer nanoseconds that move only when told to."""

    def __init__(self, start_ns: int = 1_000_000_000) -> None:
        self.now = start_ns

    def __call__(self) -> int:
        return self.now

    def advance(self, ns: int) -> None:
        self.now += ns


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def tel() -> Iterator[telemetry.Telemetry]:
    """compiletrace's spans and metrics kept in memory (``tel.spans()``, ``tel.metrics()``)
    for the test, on providers that are not made global; shut down cleanly afterwards."""
    from compiletrace import telemetry  # OpenTelemetry loads only for the tests that ask

    handle = telemetry.configure(exporter="memory", set_global=False)
    yield handle
    assert handle.shutdown()


def make_record(
    compile_id: str = "0/0",
    component: str = "encoder",
    *,
    start_unix_ns: int = 0,
    frame_ns: int = 10 * MS,
    backend_ns: int | None = None,
    phases: Mapping[str, int] | None = None,
    **fields: Any,
) -> GraphRecord:
    """A graph record with exact, consistent figures, for tests of the views and run files.

    The frame runs ``frame_ns`` from ``start_unix_ns``; the backend takes ``backend_ns``
    (by default the sum of ``phases``, else 0) and Dynamo the rest; the backend starts when
    Dynamo's share ends (None when there is no backend time). Any other field of
    :class:`GraphRecord`, ``dynamo_ns`` and ``backend_start_unix_ns`` included, can be given
    by name and wins over these defaults (backend "eager", code "forward", 4 nodes).
    """
    if backend_ns is None:
        backend_ns = sum(phases.values()) if phases else 0
    dynamo_ns = frame_ns - backend_ns
    values: dict[str, Any] = {
        "backend": "eager",
        "code_name": "forward",
        "graph_node_count": 4,
        "start_unix_ns": start_unix_ns,
        "end_unix_ns": start_unix_ns + frame_ns,
        "dynamo_ns": dynamo_ns,
        "backend_ns": backend_ns,
        "backend_start_unix_ns": start_unix_ns + dynamo_ns if backend_ns else None,
        "phases": tuple(sorted((phases or {}).items())),
    }
    values.update(fields)
    return GraphRecord(compile_id=compile_id, component=component, **values)


_TEST_START = [0.0]


@pytest.fixture(autouse=True)
def _note_test_start() -> Iterator[None]:
    # torch's own metrics outlive torch._dynamo.reset(): torch_rows() reads this test's only.
    _TEST_START[0] = time.time()
    yield


def torch_rows(forward: bool = True) -> dict[str, Any]:
    """This test's rows of torch's own per-compile metrics (the oracle), by compile id."""
    from compiletrace._core import torch_compat as tc

    return {
        str(m.compile_id): m
        for m in tc.compilation_metrics()
        if bool(m.is_forward) is forward and (m.start_time or 0) >= _TEST_START[0]
    }


def save_run(
    path: str | os.PathLike[str], records: Iterable[GraphRecord], meta: Mapping[str, Any] | None = None
) -> Path:
    """Save ``records`` as a run file, as ``profile --json`` writes one (a one-second warm-up
    that recorded them); returns the path."""
    registry = Registry()
    for record in records:
        registry.add(record)
    warmup = WarmupResult(False, 1.0, registry.compilation_times(), registry.by_component())
    meta = {"model": "tests", "backend": "eager"} if meta is None else dict(meta)
    ProfileRun(registry.records(), warmup, meta).save(path)
    return Path(path)


def run_of(
    records: Iterable[GraphRecord],
    meta: Mapping[str, Any] | None = None,
    *,
    warmup_s: float | None = None,
) -> ProfileRun:
    """A run of ``records`` for the views (``meta`` as given, and a warm-up of ``warmup_s``
    seconds that recorded them when given, else one second)."""
    registry = Registry()
    for record in records:
        registry.add(record)
    seconds = 1.0 if warmup_s is None else warmup_s
    warmup = WarmupResult(False, seconds, registry.compilation_times(), registry.by_component())
    return ProfileRun(registry.records(), warmup, dict(meta or {}))
