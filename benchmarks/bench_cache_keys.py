"""What recording each cache key's parts costs (``compiletrace why``'s input), the bar being
1% of a compile and nothing on the compiled model's call.

Each compile runs in a fresh process, as a start-up does: a miss on an empty cache
directory of its own, or a hit on a directory filled once beforehand. Measures:
1. the work the key's parts add, timed in place inside the compile (the parse of torch's
   lines into parts, the AOTAutograd parts computed on a sure miss, the hooks'
   bookkeeping), as a share of the compile's backend time;
2. the compile's CPU time with the parts recorded / without (``Tracker.cache_key_parts_enabled``:
   keys and outcomes are recorded either way), in pairs, the order alternating; the median
   of the ratios;
3. the compiled model's call: how many times the hooks run in 2 000 calls after the compile
   (they sit in torch's cache lookups, which a call never makes).

    python benchmarks/bench_cache_keys.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

PARTS_ENV = "COMPILETRACE_BENCH_KEY_PARTS"


def _child() -> None:
    """One compile in this fresh process; prints what it measured as JSON."""
    import torch
    from bench_core import Tiny  # the model the core benchmark compiles (benchmarks/ is on the path)

    import compiletrace
    from compiletrace._core.torch_compat import cache_keys as hooks  # timed where they are
    from compiletrace._core.torch_compat import event_logger
    from compiletrace._core.tracker import get_tracker

    spent = {"ns": 0, "calls": 0}

    def wrap(owner: Any, name: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                spent["ns"] += time.perf_counter_ns() - start
                spent["calls"] += 1

        setattr(owner, name, timed)

    for name in ("_aot_key_computed", "_fx_loaded", "_fx_saved"):
        wrap(hooks, name)
    wrap(event_logger, "note_cache_event")
    wrap(hooks.CacheLookups, "records")
    get_tracker().cache_key_parts_enabled = os.environ[PARTS_ENV] == "1"
    torch.manual_seed(0)
    reg = compiletrace.Registry()
    model = compiletrace.compile(Tiny().eval(), registry=reg)
    x = torch.randn(8, 64)
    start = time.process_time()
    with torch.no_grad():
        model(x)
        cpu_s = time.process_time() - start
        compiled = spent["calls"]
        for _ in range(2000):
            model(x)
    (record,) = reg.records()
    print(
        json.dumps(
            {
                "cpu_s": cpu_s,
                "backend_ns": record.backend_ns,
                "parts_ns": spent["ns"],
                "hook_calls_in_calls": spent["calls"] - compiled,
                "outcome": record.cache_outcome.value,
            }
        )
    )


def _run(cache: str, parts: bool) -> dict[str, Any]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, PARTS_ENV: "1" if parts else "0"}
    done = subprocess.run(
        [sys.executable, __file__, "--child"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=1200,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child()
        return
    scratch = tempfile.mkdtemp(prefix="ct-bench-keys-")
    try:
        filled = os.path.join(scratch, "filled")
        assert _run(filled, True)["outcome"] == "miss"  # fills the cache the hits load
        shares: dict[str, list[float]] = {"miss": [], "hit": []}
        ratios: dict[str, list[float]] = {"miss": [], "hit": []}
        in_calls = 0
        for i in range(args.repeats):
            for kind in ("miss", "hit"):
                cpu = {}
                for parts in (True, False) if i % 2 == 0 else (False, True):
                    cache = filled if kind == "hit" else os.path.join(scratch, f"{i}-{parts}")
                    got = _run(cache, parts)
                    assert got["outcome"] == kind, got
                    cpu[parts] = got["cpu_s"]
                    in_calls += got["hook_calls_in_calls"]
                    if parts:
                        shares[kind].append(got["parts_ns"] / got["backend_ns"])
                ratios[kind].append(cpu[True] / cpu[False])
                share, ratio = 100 * shares[kind][-1], ratios[kind][-1]
                print(f"{kind} {i + 1}/{args.repeats}: share {share:.3f}%, ratio {ratio:.3f}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    import torch

    print(f"torch {torch.__version__}, {args.repeats} repeats, a fresh process per compile")
    for kind in ("miss", "hit"):
        s, r = sorted(shares[kind]), ratios[kind]
        print(
            f"{kind}: the parts' own work, share of the compile's backend time: "
            f"median {100 * statistics.median(s):.3f}%, "
            f"max {100 * s[-1]:.3f}%; CPU time with parts / without: median {statistics.median(r):.3f} "
            f"(min {min(r):.3f}, max {max(r):.3f})"
        )
    print(f"the model's call: {in_calls} hook calls in {4 * args.repeats * 2000} calls after the compiles")


if __name__ == "__main__":
    main()
