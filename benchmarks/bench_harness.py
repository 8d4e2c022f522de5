"""The start-up benchmark harness's own overhead: spawning, importing, reporting.

Runs ``bench startup`` on the built-in model with the eager backend (compiles in well under
a second), so what is left of each iteration's wall time is the harness:

- process: the child's whole wall time seen by the parent (spawn to exit);
- spawn to ready: interpreter start and imports (torch, compiletrace) in the child;
- start-up: what the benchmark reports (build, compile, warm-up), timed in the child;
- exit: from the child's result written to the process reaped (interpreter teardown);
- harness = process - start-up: all of the above but start-up;
- reporting: the parent's statistics and tables for the whole run.

Usage: python benchmarks/bench_harness.py [--iters N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from compiletrace.bench.startup import BenchOptions, format_results, run_startup_bench


def _mean_wall(cmd: list[str], n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.mean(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=3)
    args = parser.parse_args()

    bare = _mean_wall([sys.executable, "-c", "pass"], args.iters)
    torch_import = _mean_wall([sys.executable, "-c", "import torch"], args.iters)
    result = run_startup_bench(
        BenchOptions(backend="eager", num_iters_cold=args.iters, num_iters_warmup=0, num_iters_warm=0)
    )
    start = time.perf_counter()
    format_results(result.to_dict())
    reporting = time.perf_counter() - start

    its = result.cold
    process = statistics.mean(i.process_time for i in its)
    startup = statistics.mean(i.startup_time for i in its)
    imports = statistics.mean(i.import_time for i in its)
    exits = statistics.mean(i.exit_time for i in its)
    compile_s = statistics.mean(i.compilation_time + i.encoder_compilation_time for i in its)
    print(f"iterations: {args.iters} (eager backend, built-in model)")
    print(f"bare python process:        {bare:7.3f} s")
    print(f"python -c 'import torch':   {torch_import:7.3f} s")
    print(f"child process (wall):       {process:7.3f} s")
    print(f"  spawn to ready (imports): {imports:7.3f} s")
    print(f"  start-up (reported):      {startup:7.3f} s  (of which compile: {compile_s:.3f} s)")
    print(f"  exit (teardown):          {exits:7.3f} s")
    print(f"  harness (process - start-up): {process - startup:7.3f} s")
    print(f"reporting (stats + tables): {reporting * 1000:7.3f} ms")


if __name__ == "__main__":
    main()
