"""What the warm-start ledger (``report --ledger``) costs beside the plain report, as the
compiles of a run overlap: the ledger gives each instant to the innermost interval that
covers it, and a run whose compiles all overlap (threads compiling at once, a file made to
be slow) is its worst case.

1. A run file of N compiles that all overlap (each starts 1 us after the one before and
   ends after the last has started), each with its frame split into ledger lines, as a
   recording writes it.
2. ``compiletrace report RUN`` and ``compiletrace report RUN --ledger``, each in a fresh
   process, ``--repeats`` times, the two interleaved: the child's CPU seconds (user +
   system, from ``wait4``) and its wall seconds. Medians, with the range.
3. The ledger alone, in this process (``run_ledger`` on the loaded run): CPU seconds,
   median of ``--repeats`` (not with ``--src``: this process runs these sources).

``--src DIR`` runs the children on the sources in DIR (another checkout's root, put first
on ``PYTHONPATH``): the same command on the code before a change.

    python benchmarks/bench_ledger.py [--sizes 8000,32000] [--repeats 3] [--src DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compiletrace import CompilationTimes, ProfileRun, WarmupResult
from compiletrace._data.ledger import AOT_CACHE, GUARDS, TRACING, run_ledger
from compiletrace._data.records import GraphRecord

US = 1_000
S = 1_000_000_000
T0 = 1_700_000_000 * S


def overlapping_run(n: int) -> ProfileRun:
    """``n`` compiles that all overlap, each split into three ledger lines."""
    records = []
    for i in range(n):
        start = T0 + i * US
        end = T0 + n * US + S  # after every compile has started
        frame = end - start
        lines = ((TRACING, TRACING, frame // 2), (GUARDS, GUARDS, frame // 4))
        lines += ((AOT_CACHE, AOT_CACHE, frame - frame // 2 - frame // 4),)
        records.append(
            GraphRecord(
                f"{i}/0",
                "lm",
                "eager",
                "forward",
                3,
                start,
                end,
                frame // 2,
                frame // 2,
                start,
                frame_lines=lines,
            )
        )
    return ProfileRun(tuple(records), WarmupResult(False, 1.0, CompilationTimes()), {"model": "m"})


def child_seconds(command: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of ``command``, in ``cwd``: ``python -m`` puts
    its directory first on the path, so it must hold no sources of its own."""
    start = time.perf_counter()
    child = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        assert child.stderr is not None
        raise SystemExit(f"{command} failed: {child.stderr.read().decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8000,32000", help="compiles per run, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--src", help="the root of the sources the children run (default: these)")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (args.src, env.get("PYTHONPATH"))))
    print("| compiles | report CPU s | report --ledger CPU s | ratio | wall s, report / --ledger |", end="")
    print(" ledger alone CPU s |")
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as where:
        for n in (int(size) for size in args.sizes.split(",") if size):
            run = overlapping_run(n)
            path = Path(where) / f"run-{n}.json"
            run.save(path)
            alone = []
            for _ in range(0 if args.src else args.repeats):  # this process runs these sources alone
                before = time.process_time()
                run_ledger(run)
                alone.append(time.process_time() - before)
            base = [sys.executable, "-m", "compiletrace", "report", str(path)]
            plain: list[tuple[float, float]] = []
            ledger: list[tuple[float, float]] = []
            for _ in range(args.repeats):  # interleaved: a change in the machine's load hits both
                plain.append(child_seconds(base, env, where))
                ledger.append(child_seconds([*base, "--ledger"], env, where))
            ratio = statistics.median(c for c, _ in ledger) / statistics.median(c for c, _ in plain)
            cpu = (spread([c for c, _ in plain]), spread([c for c, _ in ledger]))
            wall = (statistics.median(w for _, w in plain), statistics.median(w for _, w in ledger))
            print(
                f"| {n:,} | {cpu[0]} | {cpu[1]} | {ratio:.2f} | {wall[0]:.2f} / {wall[1]:.2f} "
                f"| {spread(alone)} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
