"""The registry: snapshots, totals, JSON round trip, thread safety."""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest

from compiletrace import CacheOutcome, CompilationTimes, CompileStatus, Registry
from compiletrace._data.registry import SCHEMA_VERSION
from tests.conftest import MS, make_record


def test_totals_per_component_and_compilation_times() -> None:
    reg = Registry()
    reg.add(make_record("0/0", "encoder", frame_ns=40 * MS))
    reg.add(make_record("1/0", "language_model", frame_ns=100 * MS))
    reg.add(make_record("2/0", "audio", frame_ns=5 * MS))
    reg.add(make_record("1/1", "language_model", frame_ns=20 * MS))
    # Two ways: the encoder, and everything else (audio too) as the language model.
    assert reg.compilation_times() == CompilationTimes(language_model=0.12 + 0.005, encoder=0.04)
    assert reg.by_component() == {"encoder": 0.04, "language_model": 0.12, "audio": 0.005}
    assert reg.compilation_times().total == pytest.approx(sum(reg.by_component().values()))
    assert reg.add_backward("1/0", 2_000 * MS, 30 * MS) is not None
    assert reg.compilation_times().language_model == pytest.approx(0.155)
    assert reg.add_backward("9/9", 0, MS) is None


def test_records_are_an_immutable_snapshot() -> None:
    reg = Registry()
    reg.add(make_record("0/0", "encoder"))
    snap = reg.records()
    reg.add(make_record("1/0", "encoder"))
    assert len(snap) == 1 and len(reg.records()) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap[0].component = "x"  # type: ignore[misc]
    reg.clear()
    assert reg.records() == () and reg.compilation_times() == (0.0, 0.0)


def test_json_round_trip_keeps_every_field() -> None:
    reg = Registry()
    reg.add(
        make_record(
            "0/0",
            "encoder",
            start_unix_ns=1_000 * MS,
            backend="inductor",
            phases={"inductor": 5 * MS, "cache": 2 * MS},
            fx_graph_cache=CacheOutcome.HIT,
            status=CompileStatus.EAGER_FALLBACK,
            error_type="ValueError",
            is_recompile=True,
            recompile_reason="why",
            rank=1,
            world_size=2,
        )
    )
    reg.add(
        make_record("1/0", "language_model", backend_ns=7 * MS, dynamo_ns=None, backend_start_unix_ns=None)
    )
    reg.add_backward("1/0", 5 * MS, 2 * MS)
    text = json.dumps(reg.to_dict())
    back = Registry.from_dict(json.loads(text))
    assert back.records() == reg.records()
    assert back.by_component() == reg.by_component()
    assert json.loads(text)["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"schema_version": 99, "records": []}, "schema version 99 is not supported"),
        ({"nothing": 1}, "not a compiletrace registry"),
        ({"schema_version": SCHEMA_VERSION, "records": [{"compile_id": "0/0"}]}, "graph record lacks"),
    ],
)
def test_from_dict_rejects_what_it_cannot_read(data: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Registry.from_dict(data)


def test_add_rejects_non_records() -> None:
    with pytest.raises(TypeError, match="record must be a GraphRecord"):
        Registry().add({"compile_id": "0/0"})  # type: ignore[arg-type]


def test_concurrent_writers_lose_nothing() -> None:
    reg = Registry()

    def writer(t: int) -> None:
        for i in range(500):
            reg.add(make_record(f"{t}/{i}", "encoder" if t % 2 else "language_model", frame_ns=MS))

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(reg) == 4000 == len({r.compile_id for r in reg.records()})
    assert reg.compilation_times() == pytest.approx((2.0, 2.0))
