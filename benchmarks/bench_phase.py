"""What one ``compiletrace.phase`` costs: the bar is 5 us with no SDK configured.

Run: .venv/bin/python benchmarks/bench_phase.py [--iters N] [--runs R]

Each figure is the median, over R runs, of the mean time of N phases (entering and leaving
``with compiletrace.phase("load weights", registry=reg):`` around nothing, the phase object
made each time, as an application writes it; and a function decorated once and called N
times). The loop's own cost (the same loop around ``contextlib.nullcontext()``) is printed
too and not subtracted: the figures are what a phase adds, and a little more. This shared
machine's speed varies from minute to minute, so a yardstick is measured in the same runs:
building one frozen dataclass of eleven fields (what a phase record would cost as one). The
variants are interleaved in every run, and each is also given as a median ratio to it.

1. no SDK, OpenTelemetry not even loaded (what ``import compiletrace`` gives): the
   recorder alone, the start-up's usual case;
2. no SDK, the OpenTelemetry API loaded (a compile or ``instrument`` loads it): the
   recorder and the check that nothing records;
3. for scale, the SDK with an in-memory exporter: a span per phase (no bar).

The start-up heap is frozen first (``gc.freeze``), so that collections over torch's heap
are not charged to whichever phase triggers them; the registry is emptied between runs.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import compiletrace


@dataclass(frozen=True)
class _Yardstick:
    a: int
    b: int
    c: int
    d: int
    e: int
    f: int
    g: int
    h: int
    i: int
    j: int
    k: int


def measure(iters: int, runs: int) -> dict[str, tuple[float, float]]:
    """Per variant: (median microseconds per iteration, median ratio to the yardstick), the
    variants interleaved in every run so that they share the machine's speed of the moment."""
    reg = compiletrace.Registry()

    def with_block(n: int) -> None:
        for _ in range(n):
            with compiletrace.phase("load weights", registry=reg):
                pass

    decorated = compiletrace.phase("first request", registry=reg)(lambda: None)

    def call(n: int) -> None:
        for _ in range(n):
            decorated()

    def bare(n: int) -> None:
        for _ in range(n):
            with contextlib.nullcontext():
                pass

    def yardstick(n: int) -> None:
        for _ in range(n):
            _Yardstick(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)

    variants: dict[str, Callable[[int], None]] = {
        "loop alone (nullcontext)": bare,
        "yardstick (frozen dataclass)": yardstick,
        "with phase(...)": with_block,
        "@phase(...) call": call,
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, loop in variants.items():
            reg.clear()
            start = time.perf_counter_ns()
            loop(iters)
            times[name].append((time.perf_counter_ns() - start) / iters / 1000)
    assert len(reg.phase_records()) == iters  # every phase recorded
    sticks = times["yardstick (frozen dataclass)"]
    return {
        name: (statistics.median(us), statistics.median(t / y for t, y in zip(us, sticks, strict=True)))
        for name, us in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    gc.collect()
    gc.freeze()

    assert "opentelemetry.trace" not in sys.modules, "something loaded OpenTelemetry first"
    rows = [("no SDK, OpenTelemetry not loaded", measure(args.iters, args.runs))]

    import opentelemetry.trace  # noqa: F401  (the API alone: no provider is set)

    rows.append(("no SDK, OpenTelemetry API loaded", measure(args.iters, args.runs)))

    from compiletrace import telemetry

    with telemetry.configure(exporter="memory", set_global=False, metrics_enabled=False) as tel:
        sdk = measure(args.iters // 10, args.runs)
        tel.clear()
    rows.append(("SDK + in-memory exporter (for scale)", sdk))

    print(f"per phase, median of {args.runs} runs of {args.iters} phases: us, and x the yardstick")
    for label, figures in rows:
        print(label)
        for what, (us, ratio) in figures.items():
            print(f"  {what:28s} {us:7.2f} us  {ratio:5.2f} x")


if __name__ == "__main__":
    main()
