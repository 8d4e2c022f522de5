"""Core overhead: compiletrace vs plain torch.compile, side by side in one run.

Measures
1. steady-state call latency of the same model compiled both ways (interleaved blocks);
2. compile time of the same model, cold (a fresh, empty inductor cache per compile) and
   warm (a cache filled beforehand), rotating which variant goes first; a third variant,
   compiletrace without the phase split, gives the phase split's own cost;
3. ``import compiletrace`` on top of ``import torch`` (fresh interpreters, interleaved);
4. the memory of 10,000 records and the cost of ``compilation_times()`` on them.

Every figure is a median over repeats, reported as a ratio where a ratio is the claim.

    python benchmarks/bench_core.py [--repeats 5] [--skip-compile]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import torch

import compiletrace
from compiletrace import GraphRecord, Registry
from compiletrace._core.tracker import get_tracker


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(64, 64)
        self.b = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.nn.functional.gelu(self.a(x))) + x


VARIANTS = ("plain", "compiletrace", "compiletrace-nosplit")


def _compile(variant: str, model: torch.nn.Module) -> Callable[..., Any]:
    if variant == "plain":
        return torch.compile(model)
    get_tracker().phase_split_enabled = variant != "compiletrace-nosplit"
    return compiletrace.compile(model, registry=Registry())


def bench_steady_state(repeats: int, calls: int = 2000) -> dict[str, float]:
    torch.manual_seed(0)
    model = Tiny().eval()
    x = torch.randn(8, 64)
    fns = {v: _compile(v, model) for v in ("plain", "compiletrace")}
    with torch.no_grad():
        for fn in fns.values():
            for _ in range(50):
                fn(x)
        ratios = []
        for _ in range(repeats * 4):
            t: dict[str, float] = {}
            for v, fn in fns.items():
                start = time.perf_counter()
                for _ in range(calls):
                    fn(x)
                t[v] = time.perf_counter() - start
            ratios.append(t["compiletrace"] / t["plain"])
    return {"steady_call_ratio_median": statistics.median(ratios)}


def _first_call_s(variant: str) -> float:
    """In a child process: the compile call plus the first call of Tiny with ``variant``.

    Both count: ``torch.compile`` itself imports Dynamo and inductor's configuration
    (seconds on a cold process), work compiletrace defers to the first call."""
    torch.manual_seed(0)
    model = Tiny().eval()
    x = torch.randn(8, 64)
    start = time.perf_counter()
    fn = _compile(variant, model)
    with torch.no_grad():
        fn(x)
    return time.perf_counter() - start


def _child_compile_s(variant: str, cache_dir: str) -> float:
    # A fresh process each time: inductor keeps compiled code in memory, so only a new
    # process shows a cold (or a truly warm, disk-only) compile.
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir}
    out = subprocess.run(
        [sys.executable, __file__, "--child", variant], env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def bench_compile_time(repeats: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for kind in ("cold", "warm"):
        ratios: dict[str, list[float]] = {"vs_plain": [], "split_vs_nosplit": []}
        warm_dir = tempfile.mkdtemp(prefix="ct-bench-warm-")
        if kind == "warm":
            _child_compile_s("plain", warm_dir)  # fill the cache
        for i in range(repeats):
            order = VARIANTS[i % 3 :] + VARIANTS[: i % 3]
            t = {}
            for v in order:
                cache = tempfile.mkdtemp(prefix="ct-bench-cold-") if kind == "cold" else warm_dir
                t[v] = _child_compile_s(v, cache)
            ratios["vs_plain"].append(t["compiletrace"] / t["plain"])
            ratios["split_vs_nosplit"].append(t["compiletrace"] / t["compiletrace-nosplit"])
            times = "  ".join(f"{v} {t[v]:.3f}s" for v in VARIANTS)
            print(f"  {kind} #{i}: {times}", flush=True)
        out[f"{kind}_compile_ratio_median"] = statistics.median(ratios["vs_plain"])
        out[f"{kind}_phase_split_ratio_median"] = statistics.median(ratios["split_vs_nosplit"])
    return out


def bench_import(repeats: int) -> dict[str, float]:
    # Timed inside one child, after torch is imported: what compiletrace adds on top.
    prog = "import torch, time; t = time.perf_counter(); import compiletrace; print(time.perf_counter() - t)"
    times = [
        float(subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, check=True).stdout)
        for _ in range(repeats)
    ]
    return {"import_overhead_ms_median": 1000 * statistics.median(times)}


def bench_registry(n: int = 10_000) -> dict[str, float]:
    tracemalloc.start()
    reg = Registry()
    for i in range(n):
        reg.add(
            GraphRecord(
                compile_id=f"{i}/0",
                component="encoder" if i % 3 == 0 else "language_model",
                backend="inductor",
                code_name="forward",
                graph_node_count=120,
                start_unix_ns=i,
                end_unix_ns=i + 1_000_000,
                dynamo_ns=400_000,
                backend_ns=600_000,
                backend_start_unix_ns=i + 400_000,
                recompile_reason=None if i % 5 else f"{i}/0: tensor 'x' size mismatch at index 0",
            )
        )
    current, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    timings = []
    for _ in range(200):
        start = time.perf_counter()
        reg.compilation_times()
        timings.append(time.perf_counter() - start)
    return {
        "registry_10k_mb": current / 1e6,
        "compilation_times_10k_us_median": 1e6 * statistics.median(timings),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-compile", action="store_true", help="skip the inductor compile-time ratios")
    ap.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(_first_call_s(args.child))
        return
    results: dict[str, float] = {}
    results.update(bench_registry())
    results.update(bench_import(args.repeats))
    results.update(bench_steady_state(args.repeats))
    if not args.skip_compile:
        results.update(bench_compile_time(args.repeats))
    for key, value in results.items():
        print(f"{key:36s} {value:.4f}")


if __name__ == "__main__":
    main()
