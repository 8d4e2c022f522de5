"""Telemetry cost per compiled graph, and the warm-up guard's effect on eager start-up.

Run: .venv/bin/python benchmarks/bench_telemetry.py

1. Per graph: the observer's own calls for one graph record (no provider; the SDK with an
   in-memory exporter), next to one bare SDK span as this machine's yardstick; then the
   tracker's whole event path for one graph (frame start, backend call, frame end, record
   stored, observer notified) with the observer removed, with no provider, and with the SDK.
   The median of several runs is printed; the telemetry cost is the difference to "off".
2. Warm-up guard: start-up of the built-in model in eager mode (build, warm up, first
   request) with ``warm_up(compilation_mode=NONE)`` (skipped) vs an unguarded warm-up (run anyway).
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass

import torch

import compiletrace
from compiletrace import telemetry
from compiletrace._core.tracker import Tracker
from compiletrace._data.records import GraphRecord
from compiletrace.models import DemoConfig, build_demo

GRAPHS = 2000
RUNS = 7


@dataclass
class _Owner:
    component: str
    registry: compiletrace.Registry
    backend_name: str = "eager"


def _graph_path_us(tracker: Tracker, owner: _Owner) -> float:
    """Mean microseconds of the tracker's event path per graph, over GRAPHS graphs."""

    def inner(gm: object, inputs: object) -> object:
        return gm

    start = time.perf_counter_ns()
    for i in range(GRAPHS):
        cid = f"{i}/0"
        tracker.on_start("DYNAMO", cid)
        tracker.compile_graph(owner, inner, None, [], {}, 12)
        tracker.on_end("DYNAMO", cid)
    return (time.perf_counter_ns() - start) / GRAPHS / 1000


def _record(i: int) -> GraphRecord:
    t0 = 1_700_000_000_000_000_000 + i * 10_000_000
    return GraphRecord(f"{i}/0", "language_model", "eager", "forward", 12, t0, t0 + 9_000_000,
                       5_000_000, 4_000_000, t0 + 5_000_000)  # fmt: skip


def observer_calls_us(observer: telemetry.CompileSpanObserver) -> float:
    """Mean microseconds of the observer's own calls for one graph (start + finish)."""
    records = [_record(i) for i in range(GRAPHS)]
    start = time.perf_counter_ns()
    for rec in records:
        observer.record_finished(rec, observer.frame_started())
    return (time.perf_counter_ns() - start) / GRAPHS / 1000


def bare_sdk_span_us() -> float:
    """One empty SDK span with an in-memory exporter: this machine's yardstick."""
    handle = telemetry.configure(exporter="memory", set_global=False)
    tracer = handle.tracer_provider.get_tracer("yardstick")
    start = time.perf_counter_ns()
    for _ in range(GRAPHS):
        tracer.start_span("x").end()
    us = (time.perf_counter_ns() - start) / GRAPHS / 1000
    handle.shutdown()
    return us


def bench_observer() -> dict[str, float]:
    results: dict[str, list[float]] = {"no provider": [], "sdk + memory": [], "bare SDK span": []}
    for _ in range(RUNS):
        telemetry.set_providers()
        results["no provider"].append(observer_calls_us(telemetry.CompileSpanObserver()))
        handle = telemetry.configure(exporter="memory", set_global=False)
        results["sdk + memory"].append(observer_calls_us(telemetry.CompileSpanObserver()))
        assert len(handle.spans()) == 3 * GRAPHS
        handle.shutdown()
        results["bare SDK span"].append(bare_sdk_span_us())
    return {label: statistics.median(v) for label, v in results.items()}


def bench_per_graph() -> dict[str, float]:
    results: dict[str, list[float]] = {"off": [], "no provider": [], "sdk + memory": []}
    for _ in range(RUNS):
        for label in results:
            tracker = Tracker()
            owner = _Owner("language_model", compiletrace.Registry())
            handle = None
            if label == "off":
                tracker.observer = None
            else:
                tracker.observer = telemetry.CompileSpanObserver()
                if label == "sdk + memory":
                    handle = telemetry.configure(exporter="memory", set_global=False)
                else:
                    telemetry.set_providers()
            results[label].append(_graph_path_us(tracker, owner))
            if handle is not None:
                assert len(handle.spans()) == 3 * GRAPHS  # the spans really were recorded
                handle.shutdown()
    return {label: statistics.median(v) for label, v in results.items()}


def _startup_s(guarded: bool, warmup_batch: int) -> float:
    start = time.perf_counter()
    demo = build_demo()
    big = build_demo(config=DemoConfig(batch_size=warmup_batch))  # warm-up runs the largest batch

    def warm() -> None:
        with torch.no_grad():
            demo.model(*big.example_inputs)

    if guarded:
        compiletrace.warm_up(warm, compilation_mode=compiletrace.CompilationMode.NONE)
    else:
        warm()  # an unguarded warm-up: it runs although nothing compiles
    demo.run()  # the first real request
    return time.perf_counter() - start


def bench_guard(warmup_batch: int = 64) -> tuple[float, float]:
    _startup_s(True, warmup_batch)  # load kernels and caches once
    guarded = statistics.median(_startup_s(True, warmup_batch) for _ in range(RUNS))
    unguarded = statistics.median(_startup_s(False, warmup_batch) for _ in range(RUNS))
    return guarded, unguarded


def main() -> None:
    torch.set_num_threads(max(1, torch.get_num_threads()))
    # torch's import leaves a large heap; full garbage collections over it, triggered by the
    # spans' small allocations, would be charged to whichever span happens to trigger them.
    # Freeze the start-up heap so the figures show telemetry's own cost.
    gc.collect()
    gc.freeze()
    per_graph = bench_per_graph()
    off = per_graph["off"]
    print(f"tracker event path per graph, median of {RUNS} runs x {GRAPHS} graphs:")
    for label, us in per_graph.items():
        extra = "" if label == "off" else f"  (telemetry cost {us - off:+.1f} us)"
        print(f"  {label:<14} {us:8.1f} us{extra}")
    observer = bench_observer()
    print(f"observer calls alone per graph (3 spans, 3 metric points), median of {RUNS} runs:")
    for label, us in observer.items():
        print(f"  {label:<14} {us:8.1f} us")
    guarded, unguarded = bench_guard()
    print(f"eager start-up of the built-in model (warm-up at batch 64), median of {RUNS}:")
    print(f"  guarded (warm-up skipped)  {guarded * 1000:8.1f} ms")
    print(f"  unguarded warm-up          {unguarded * 1000:8.1f} ms")
    print(f"  ratio guarded/unguarded    {guarded / unguarded:8.2f}")


if __name__ == "__main__":
    main()
