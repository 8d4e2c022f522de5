"""What recording each cache key's parts costs (``compiletrace why``'s input), the bar being
1% of a compile and nothing on the compiled model's call.

Measures, on a small model compiled with inductor in one process:
1. the work the key's parts add, timed in place inside real compiles (the parse of torch's
   lines into parts, the AOTAutograd parts computed on a sure miss, the hooks' bookkeeping),
   as a share of each compile's backend time: on a miss (each compile a new key, through
   torch.compiler.config.cache_key_tag) and on a hit (the same key, entries on disk);
2. compile CPU time with the parts recorded / without (``Tracker.cache_key_parts_enabled``:
   keys and outcomes are recorded either way), interleaved, the order alternating, median
   of the ratios;
3. the compiled model's call: how many times the hooks run during calls after the compile
   (they sit in torch's cache lookups, which a call never makes).

    python benchmarks/bench_cache_keys.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch
from bench_core import Tiny  # the model the core benchmark compiles (benchmarks/ is on the path)

import compiletrace

# The benchmark times the hooks where they are, in the modules that hold them.
from compiletrace._core.torch_compat import cache_keys as hooks
from compiletrace._core.torch_compat import event_logger
from compiletrace._core.tracker import get_tracker
from compiletrace._data.records import NS_PER_S


class _Timed:
    """Wall nanoseconds spent in the wrapped functions of compiletrace's hooks."""

    def __init__(self) -> None:
        self.ns = 0
        self.calls = 0

    def wrap(self, owner: Any, name: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                self.ns += time.perf_counter_ns() - start
                self.calls += 1

        setattr(owner, name, timed)


def _compile_once(tag: str, parts: bool) -> tuple[float, int, compiletrace.Registry]:
    """One compile of the model under ``tag`` (a new tag: a new key), its CPU seconds and
    backend ns, and its registry."""
    torch._dynamo.reset()
    torch.compiler.config.cache_key_tag = tag
    get_tracker().cache_key_parts_enabled = parts
    torch.manual_seed(0)
    reg = compiletrace.Registry()
    model = compiletrace.compile(Tiny().eval(), registry=reg)
    gc.collect()
    start = time.process_time()
    with torch.no_grad():
        model(torch.randn(8, 64))
    cpu_s = time.process_time() - start
    return cpu_s, sum(r.backend_ns for r in reg.records()), reg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ct-bench-keys-")
    timed = _Timed()
    for name in ("_aot_key_computed", "_fx_loaded", "_fx_saved"):
        timed.wrap(hooks, name)
    timed.wrap(event_logger, "note_cache_event")
    timed.wrap(hooks.CacheLookups, "records")
    _compile_once("warm-up", True)  # one-time set-up (torch's key of itself, imports) out of the way

    shares: dict[str, list[float]] = {"miss": [], "hit": []}
    ratios: dict[str, list[float]] = {"miss": [], "hit": []}
    for i in range(args.repeats):
        for kind in ("miss", "hit"):
            cpu = {}
            for parts in (True, False) if i % 2 == 0 else (False, True):
                tag = f"{kind}-{i}-{parts}" if kind == "miss" else "hit"
                if kind == "hit" and i == 0 and parts is True:
                    _compile_once("hit", True)  # fills the entry every later "hit" loads
                before = timed.ns
                cpu[parts], backend_ns, _ = _compile_once(tag, parts)
                if parts:
                    shares[kind].append((timed.ns - before) / max(backend_ns, 1))
            ratios[kind].append(cpu[True] / cpu[False])

    calls_before = timed.calls
    model = compiletrace.compile(Tiny().eval(), registry=compiletrace.Registry())
    x = torch.randn(8, 64)
    with torch.no_grad():
        model(x)
        compiled_calls = timed.calls
        start = time.perf_counter()
        for _ in range(2000):
            model(x)
        call_us = (time.perf_counter() - start) / 2000 * 1e6
    print(f"torch {torch.__version__}, {args.repeats} repeats, model Tiny (two Linear, a gelu)")
    for kind in ("miss", "hit"):
        s = sorted(shares[kind])
        r = ratios[kind]
        print(
            f"{kind}: parts' own work, share of the backend time: median {100 * statistics.median(s):.3f}%, "
            f"max {100 * s[-1]:.3f}%; CPU time with parts / without: median {statistics.median(r):.3f} "
            f"(min {min(r):.3f}, max {max(r):.3f})"
        )
    print(
        f"the model's call: {timed.calls - compiled_calls} hook calls in 2000 calls "
        f"(the compile before them: {compiled_calls - calls_before}); {call_us:.1f} us a call"
    )
    print(f"hooks' time in all: {timed.ns / NS_PER_S:.3f} s over {timed.calls} calls")


if __name__ == "__main__":
    main()
