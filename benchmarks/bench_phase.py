"""What one ``compiletrace.phase`` costs: the bar is 5 us with no SDK configured.

Run: .venv/bin/python benchmarks/bench_phase.py [--iters N] [--runs R]

Each figure is the median, over R runs, of the mean time of N phases (entering and leaving
``with compiletrace.phase("load weights", registry=reg):`` around nothing, the phase object
made each time, as an application writes it; and a function decorated once and called N
times). The loop's own cost (the same loop around ``contextlib.nullcontext()``) is printed
too and not subtracted: the figures are what a phase adds, and a little more.

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

import compiletrace


def _mean_us(loop: Callable[[int], None], iters: int, runs: int, reset: Callable[[], None]) -> float:
    means = []
    for _ in range(runs):
        reset()
        start = time.perf_counter_ns()
        loop(iters)
        means.append((time.perf_counter_ns() - start) / iters / 1000)
    return statistics.median(means)


def measure(iters: int, runs: int) -> dict[str, float]:
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

    out = {"loop alone (nullcontext)": _mean_us(bare, iters, runs, reg.clear)}
    out["with phase(...)"] = _mean_us(with_block, iters, runs, reg.clear)
    out["@phase(...) call"] = _mean_us(call, iters, runs, reg.clear)
    assert len(reg.phase_records()) == iters  # every phase recorded
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=7)
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

    print(f"per phase, median of {args.runs} runs of {args.iters} phases (us)")
    for label, figures in rows:
        print(label)
        for what, us in figures.items():
            print(f"  {what:28s} {us:7.2f}")


if __name__ == "__main__":
    main()
