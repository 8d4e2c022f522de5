"""The tracker with a fake clock and hand-fed events: exact figures, no torch.compile."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import pytest
import torch

from compiletrace import CacheOutcome, CompileStatus, CompiletraceBackend, Registry
from compiletrace._core import torch_compat as tc
from compiletrace._core.observers import Observers, OnCompile, process_observers
from compiletrace._core.tracker import Tracker
from tests.conftest import FakeClock, make_record

MS = 1_000_000
OFFSET = 5_000 * MS


class FakeGraph:
    def __init__(self, nodes: int) -> None:
        self.graph = type("G", (), {"nodes": list(range(nodes))})()


def compiled_graph(*inputs: Any) -> None:
    """What the fake backend returns: a callable, as torch requires of a backend."""


class FakeBackend:
    """Stands in for the "eager" backend that a CompiletraceBackend wraps: each call moves
    the fake clock on by what it was told, bumps torch's cache counters, and returns or
    raises."""

    def __init__(self, clock: FakeClock) -> None:
        self.__name__ = "eager"
        self.clock = clock
        self.ns = 0
        self.bump: dict[str, str] = {}
        self.error: BaseException | None = None

    def takes(self, ns: int, bump: dict[str, str] | None = None) -> None:
        self.ns, self.bump = ns, bump or {}

    def raises(self, error: BaseException, after_ns: int) -> None:
        self.ns, self.error = after_ns, error

    def __call__(self, gm: Any, inputs: Any, **kwargs: Any) -> str:
        self.clock.advance(self.ns)
        for group, key in self.bump.items():
            torch._dynamo.utils.counters[group][key] += 1
        if self.error is not None:
            raise self.error
        return compiled_graph


def make(
    clock: FakeClock, component: str = "encoder"
) -> tuple[Tracker, CompiletraceBackend, Registry, FakeBackend]:
    tracker = Tracker(clock=clock, epoch_offset_ns=OFFSET)
    registry = Registry()
    inner = FakeBackend(clock)
    be = CompiletraceBackend(component, backend=inner, registry=registry, tracker=tracker)
    return tracker, be, registry, inner


def start(tracker: Tracker, cid: str, be: Any, code: str = "forward", reason: str | None = None) -> None:
    tracker.on_start(tc.TRIGGER_DYNAMO, cid, frame=tc.CompilingFrame(code, be), recompile_reason=reason)


def test_frame_split_into_dynamo_and_backend_exactly(fake_clock: FakeClock) -> None:
    tracker, be, reg, inner = make(fake_clock)
    t0 = fake_clock.now
    start(tracker, "0/0", be)
    fake_clock.advance(10 * MS)
    inner.takes(30 * MS)
    assert be(FakeGraph(7), []) is compiled_graph
    fake_clock.advance(5 * MS)
    tracker.on_end(tc.TRIGGER_DYNAMO, "0/0")

    (rec,) = reg.records()
    assert rec.compile_id == "0/0"
    assert rec.component == "encoder"
    assert rec.backend == "eager"
    assert rec.code_name == "forward"
    assert rec.graph_node_count == 7
    assert rec.frame_ns == 45 * MS
    assert rec.backend_ns == 30 * MS
    assert rec.dynamo_ns == 15 * MS
    assert rec.start_unix_ns == t0 + OFFSET
    assert rec.backend_start_unix_ns == t0 + 10 * MS + OFFSET
    assert rec.end_unix_ns == t0 + 45 * MS + OFFSET
    assert rec.status is CompileStatus.OK
    assert not rec.is_recompile
    assert reg.compilation_times().encoder == pytest.approx(0.045, abs=0)
    assert tracker.open_frames() == 0


def test_lazy_backward_is_added_to_the_forward_record(fake_clock: FakeClock) -> None:
    tracker, be, reg, inner = make(fake_clock, "language_model")
    start(tracker, "3/0", be)
    inner.takes(20 * MS)
    be(FakeGraph(3), [])
    tracker.on_end(tc.TRIGGER_DYNAMO, "3/0")
    fake_clock.advance(100 * MS)  # the model runs; backward comes later
    bw_start = fake_clock.now
    tracker.on_start(tc.TRIGGER_LAZY_BACKWARD, "3/0")
    fake_clock.advance(7 * MS)
    tracker.on_end(tc.TRIGGER_LAZY_BACKWARD, "3/0")

    (rec,) = reg.records()
    assert rec.backward_ns == 7 * MS
    assert rec.backward_start_unix_ns == bw_start + OFFSET
    assert rec.total_ns == 27 * MS
    assert reg.compilation_times() == (0.027, 0.0)


def test_backward_of_a_graph_compiled_elsewhere_is_ignored(fake_clock: FakeClock) -> None:
    tracker, _be, reg, _ = make(fake_clock)
    tracker.on_start(tc.TRIGGER_LAZY_BACKWARD, "9/0")
    fake_clock.advance(MS)
    tracker.on_end(tc.TRIGGER_LAZY_BACKWARD, "9/0")
    assert reg.records() == ()


def test_frames_of_other_backends_are_not_recorded(fake_clock: FakeClock) -> None:
    tracker, _be, reg, _ = make(fake_clock)
    tracker.on_start(tc.TRIGGER_DYNAMO, "0/0", frame=tc.CompilingFrame("forward", lambda gm, x: gm))
    fake_clock.advance(MS)
    tracker.on_end(tc.TRIGGER_DYNAMO, "0/0")
    assert reg.records() == ()
    assert tracker.open_frames() == 0


def test_frame_without_a_graph_is_still_attributed(fake_clock: FakeClock) -> None:
    # Dynamo traced the frame but found nothing to compile: no backend call, yet it cost time.
    tracker, be, reg, _inner = make(fake_clock)
    start(tracker, "1/0", be, code="helper")
    fake_clock.advance(4 * MS)
    tracker.on_end(tc.TRIGGER_DYNAMO, "1/0")
    (rec,) = reg.records()
    assert (rec.dynamo_ns, rec.backend_ns, rec.graph_node_count) == (4 * MS, 0, 0)
    assert rec.backend_start_unix_ns is None


def test_recompile_carries_torchs_reason(fake_clock: FakeClock) -> None:
    tracker, be, reg, _inner = make(fake_clock)
    reason = "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 4"
    start(tracker, "0/1", be, reason=reason)
    tracker.on_end(tc.TRIGGER_DYNAMO, "0/1")
    (rec,) = reg.records()
    assert rec.is_recompile
    assert rec.recompile_reason == reason


def test_cache_outcome_comes_from_torchs_counters(fake_clock: FakeClock) -> None:
    tracker, be, reg, inner = make(fake_clock)
    start(tracker, "0/0", be)
    inner.takes(MS, {"inductor": "fxgraph_cache_hit", "aot_autograd": "autograd_cache_miss"})
    be(FakeGraph(1), [])
    tracker.on_end(tc.TRIGGER_DYNAMO, "0/0")
    (rec,) = reg.records()
    assert rec.fx_graph_cache is CacheOutcome.HIT
    assert rec.aot_autograd_cache is CacheOutcome.MISS
    assert rec.cache_outcome is CacheOutcome.MISS


def test_failing_backend_is_recorded_and_reraised_unchanged(fake_clock: FakeClock) -> None:
    tracker, be, reg, inner = make(fake_clock)
    boom = ValueError("bad graph")

    inner.raises(boom, after_ns=2 * MS)
    start(tracker, "0/0", be)
    with pytest.raises(ValueError) as info:
        be(FakeGraph(1), [])
    assert info.value is boom
    tracker.on_end(tc.TRIGGER_DYNAMO, "0/0")
    (rec,) = reg.records()
    assert rec.status is CompileStatus.ERROR
    assert rec.error_type == "ValueError"
    assert rec.backend_ns == 2 * MS


def test_unmatched_end_is_ignored(fake_clock: FakeClock) -> None:
    tracker, be, reg, _inner = make(fake_clock)
    start(tracker, "0/0", be)
    tracker.on_end(tc.TRIGGER_DYNAMO, "7/0")
    assert tracker.open_frames() == 1
    tracker.on_end(tc.TRIGGER_DYNAMO, "0/0")
    assert tracker.open_frames() == 0
    assert len(reg) == 1


def test_backend_call_outside_any_frame_is_timed_alone_with_a_warning(
    fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tc, "callbacks_available", lambda: False)
    tracker, be, reg, inner = make(fake_clock)
    inner.takes(9 * MS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        be(FakeGraph(2), [])
        be(FakeGraph(2), [])
    assert [str(w.message).count("compile-callback API") for w in caught] == [1]
    first, _second = reg.records()
    assert first.dynamo_ns is None
    assert first.backend_ns == first.frame_ns == 9 * MS
    assert tracker.open_frames() == 0


def test_observer_failure_never_reaches_the_compile(
    fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:

    class Broken:
        def frame_started(self) -> Any:
            raise RuntimeError("exporter down")

        def record_finished(self, record: Any, token: Any) -> None:
            raise RuntimeError("exporter down")

        def backward_finished(self, *args: Any) -> None:
            raise RuntimeError("exporter down")

    tracker, be, reg, _inner = make(fake_clock)
    tracker.observer = Broken()
    with pytest.warns(RuntimeWarning, match="telemetry failed"):
        start(tracker, "0/0", be)
        tracker.on_end(tc.TRIGGER_DYNAMO, "0/0")
    assert len(reg) == 1


def test_a_frame_whose_end_went_unseen_is_closed_by_the_next_start(
    fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch's callback counter is process-wide: a lazy backward on another thread during a
    # frame compile swallows that frame's end callback. The next frame start closes it.
    tracker, be, reg, inner = make(fake_clock)
    start(tracker, "0/0", be)
    fake_clock.advance(2 * MS)
    inner.takes(5 * MS)
    be(FakeGraph(3), [])
    fake_clock.advance(50 * MS)  # ... no end callback for 0/0
    with pytest.warns(RuntimeWarning, match="end went unseen"):
        start(tracker, "1/0", be)
    tracker.on_end(tc.TRIGGER_DYNAMO, "1/0")
    lost, fine = reg.records()
    assert (lost.compile_id, lost.frame_ns, lost.backend_ns, lost.dynamo_ns) == ("0/0", 7 * MS, 5 * MS, None)
    assert fine.compile_id == "1/0" and fine.dynamo_ns is not None
    assert tracker.open_frames() == 0


def test_reset_forgets_compile_ids_for_lazy_backward(fake_clock: FakeClock) -> None:
    tracker, be, reg, _inner = make(fake_clock)
    start(tracker, "0/0", be)
    tracker.on_end(tc.TRIGGER_DYNAMO, "0/0")
    tracker.forget_compile_ids()  # torch._dynamo.reset(): ids restart, "0/0" is someone else's now
    tracker.on_start(tc.TRIGGER_LAZY_BACKWARD, "0/0")
    fake_clock.advance(MS)
    tracker.on_end(tc.TRIGGER_LAZY_BACKWARD, "0/0")
    assert reg.records()[0].backward_ns == 0


def test_a_failing_observer_never_reaches_the_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    reg = Registry()

    def broken(record: object, backward: bool) -> None:
        raise RuntimeError("view down")

    fn = torch.compile(lambda x: x + 1, backend=CompiletraceBackend("encoder", backend="eager", registry=reg))
    with (
        process_observers().observing(OnCompile(broken), registry=reg, name="the broken view"),
        pytest.warns(RuntimeWarning, match="the broken view failed"),
    ):
        assert torch.equal(fn(torch.ones(2)), torch.full((2,), 2.0))
    assert len(reg) == 1


def test_observers_hear_each_registry_s_own_copy_and_their_own_tokens() -> None:
    observers, first, copied = Observers(), Registry(), Registry()
    heard: list[tuple[str, str, Any]] = []

    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

        def frame_started(self) -> Any:
            return f"token of {self.name}"

        def record_finished(self, record: Any, token: Any) -> None:
            heard.append((self.name, record.component, token))

        def backward_finished(self, record: Any, start: int, end: int, token: Any) -> None:
            heard.append((self.name, f"{record.component} backward", token))

    observers.add(Named("every"))
    observers.add(Named("copied"), registry=copied)
    tokens = observers.frame_started()
    observers.add(Named("late"))  # added while the frame compiled: no token of its own
    record = make_record("0/0", "encoder")
    copy = dataclasses.replace(record, component="vision")
    observers.record_finished(record, tokens, first, [(copied, copy)])
    observers.backward_finished(copy, 0, 1, tokens, copied)
    assert heard == [
        ("every", "encoder", "token of every"),
        ("copied", "vision", "token of copied"),
        ("late", "encoder", None),
        ("every", "vision backward", "token of every"),
        ("copied", "vision backward", "token of copied"),
        ("late", "vision backward", None),
    ]


def test_a_frame_and_its_lazy_backward_are_timed_in_cpu_too(fake_clock: FakeClock) -> None:
    """The CPU clock (the compiling thread's CPU and its reaped children's) is read where
    the frame opens and ends, and around its lazy backward: exact with a fake one; the
    one-time set-up's imports get their CPU share too."""
    cpu = FakeClock(0)
    tracker = Tracker(clock=fake_clock, epoch_offset_ns=OFFSET, cpu_clock=cpu)
    registry = Registry()
    inner = FakeBackend(fake_clock)
    be = CompiletraceBackend("lm", backend=inner, registry=registry, tracker=tracker)
    start(tracker, "0/0", be)
    fake_clock.advance(40 * MS)
    cpu.advance(7 * MS)  # a busy machine: the frame got 7 ms of CPU in 40 ms
    with tracker.import_timer.timed_block():
        fake_clock.advance(5 * MS)
        cpu.advance(2 * MS)
    inner.takes(10 * MS)
    be(FakeGraph(3), [])
    cpu.advance(3 * MS)
    tracker.on_end(tc.TRIGGER_DYNAMO, "0/0")
    (rec,) = registry.records()
    assert (rec.frame_ns, rec.cpu_ns, rec.setup_ns, rec.setup_cpu_ns) == (55 * MS, 12 * MS, 5 * MS, 2 * MS)
    assert (rec.cpu_or_wall_ns, rec.setup_cpu_or_wall_ns) == (12 * MS, 2 * MS)
    fake_clock.advance(100 * MS)
    cpu.advance(100 * MS)  # the model runs: none of it is the compile's
    tracker.on_start(tc.TRIGGER_LAZY_BACKWARD, "0/0")
    fake_clock.advance(9 * MS)
    cpu.advance(4 * MS)
    tracker.on_end(tc.TRIGGER_LAZY_BACKWARD, "0/0")
    (rec,) = registry.records()
    assert (rec.total_ns, rec.cpu_ns) == (64 * MS, 16 * MS)


def test_a_record_without_cpu_time_is_weighed_in_wall_time() -> None:
    old = make_record(frame_ns=30 * MS, setup_ns=4 * MS)  # a run from before CPU was measured
    assert old.cpu_ns is None and (old.cpu_or_wall_ns, old.setup_cpu_or_wall_ns) == (30 * MS, 4 * MS)
    registry = Registry()
    handle = registry.add(old)
    assert registry.add_backward(handle, 0, 5 * MS, cpu_ns=MS).cpu_ns is None  # still none measured
