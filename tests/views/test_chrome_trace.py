"""Chrome/Perfetto export: Trace Event Format, one track per component, nested phases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

import compiletrace
from compiletrace.reports import chrome_trace_dict
from tests.conftest import MS, make_record

EPS_US = 1e-6  # float rounding of microsecond timestamps
T0 = 1_700_000_000_000_000_000  # a Unix time in ns


def at(ms: int) -> int:
    """A Unix time ``ms`` milliseconds after T0, in ns."""
    return T0 + ms * MS


def x_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def assert_properly_nested(trace: dict[str, Any]) -> None:
    by_track: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for e in x_events(trace):
        by_track.setdefault((e["pid"], e["tid"]), []).append(e)
    for events in by_track.values():
        stack: list[float] = []  # end times of open events
        for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
            while stack and e["ts"] >= stack[-1] - EPS_US:
                stack.pop()
            end = e["ts"] + e["dur"]
            assert not stack or end <= stack[-1] + EPS_US, f"{e['name']} overlaps its neighbour"
            stack.append(end)


def test_phases_nest_inside_each_graph_with_exact_times() -> None:
    # encoder: 0..10 ms, backend 4..8 ms; language model: 12..30 ms, backend 15..27 ms.
    records = [
        make_record(
            "0/0",
            "encoder",
            start_unix_ns=at(0),
            frame_ns=10 * MS,
            backend_ns=4 * MS,
            backend_start_unix_ns=at(4),
        ),
        make_record(
            "1/0",
            "language_model",
            start_unix_ns=at(12),
            frame_ns=18 * MS,
            backend_ns=12 * MS,
            backend_start_unix_ns=at(15),
        ),
    ]
    trace = chrome_trace_dict(records)
    events = [(e["name"], e["cat"], e["tid"], e["ts"], e["dur"]) for e in x_events(trace)]
    assert events == [
        ("forward [0/0]", "compile", 1, 0.0, 10_000.0),
        ("Dynamo tracing", "dynamo", 1, 0.0, 4_000.0),
        ("Backend compile", "backend", 1, 4_000.0, 4_000.0),
        ("forward [1/0]", "compile", 2, 12_000.0, 18_000.0),
        ("Dynamo tracing", "dynamo", 2, 12_000.0, 3_000.0),
        ("Backend compile", "backend", 2, 15_000.0, 12_000.0),
    ]
    assert_properly_nested(trace)
    meta = [(e["name"], e["tid"], e["args"]) for e in trace["traceEvents"] if e["ph"] == "M"]
    assert ("process_name", 0, {"name": "compiletrace rank 0"}) in meta
    assert ("thread_name", 1, {"name": "encoder"}) in meta
    assert ("thread_name", 2, {"name": "language_model"}) in meta
    assert trace["otherData"]["origin_unix_ns"] == T0
    first = x_events(trace)[0]["args"]
    assert first == {
        "component": "encoder",
        "compile_id": "0/0",
        "backend": "eager",
        "code_name": "forward",
        "graph_node_count": 4,
        "cache_outcome": "none",
        "status": "ok",
    }


def test_backward_is_its_own_event_on_the_component_track() -> None:
    r = make_record(
        "0/0",
        "language_model",
        start_unix_ns=at(0),
        frame_ns=5 * MS,
        backend_ns=2 * MS,
        backend_start_unix_ns=at(1),
        backward_ns=3 * MS,
        backward_start_unix_ns=at(9),
    )
    trace = chrome_trace_dict([r])
    (bw,) = [e for e in x_events(trace) if e["cat"] == "backward"]
    assert (bw["name"], bw["tid"], bw["ts"], bw["dur"]) == ("Compile backward [0/0]", 1, 9_000.0, 3_000.0)
    assert_properly_nested(trace)


def test_overlapping_compiles_of_one_component_get_a_second_lane() -> None:
    records = [
        make_record("0/0", "encoder", start_unix_ns=at(0), frame_ns=10 * MS),
        make_record("1/0", "encoder", start_unix_ns=at(5), frame_ns=10 * MS),  # another thread, overlapping
        make_record("2/0", "encoder", start_unix_ns=at(20), frame_ns=1 * MS),
    ]
    trace = chrome_trace_dict(records)
    tids = {e["name"]: e["tid"] for e in x_events(trace) if e["cat"] == "compile"}
    assert tids == {"forward [0/0]": 1, "forward [1/0]": 2, "forward [2/0]": 1}
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names == {1: "encoder", 2: "encoder (2)"}
    assert_properly_nested(trace)


def test_ranks_are_processes() -> None:
    trace = chrome_trace_dict([make_record("0/0", "encoder", start_unix_ns=at(0), rank=1, world_size=2)])
    assert {e["pid"] for e in trace["traceEvents"]} == {1}


def test_empty_registry_gives_an_empty_trace() -> None:
    assert chrome_trace_dict([])["traceEvents"] == []


def test_export_real_compiles_to_a_file(tmp_path: Path) -> None:
    reg = compiletrace.Registry()
    enc = compiletrace.compile(torch.nn.Linear(4, 4), is_encoder=True, backend="eager", registry=reg)
    lm = compiletrace.compile(torch.nn.Tanh(), backend="eager", registry=reg)
    lm(enc(torch.ones(1, 4)))
    out = compiletrace.export_chrome_trace(tmp_path / "trace.json", registry=reg)
    trace = json.loads(out.read_text())
    graphs = [e for e in x_events(trace) if e["cat"] == "compile"]
    assert len(graphs) == 2
    assert {e["args"]["component"]: e["tid"] for e in graphs} == {"encoder": 1, "language_model": 2}
    assert all(e["dur"] > 0 for e in graphs)
    assert_properly_nested(trace)


def test_export_rejects_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="path must be"):
        compiletrace.export_chrome_trace(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="registry must be"):
        compiletrace.export_chrome_trace(tmp_path / "t.json", registry=[])  # type: ignore[arg-type]
