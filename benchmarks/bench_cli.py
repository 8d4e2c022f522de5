"""How long the ``compiletrace`` command takes before it does anything: each command a user
runs on a saved run, and ``compiletrace run -- true`` against ``true`` itself.

Every command runs in a fresh process, as a user runs it (the installed ``compiletrace``
script), the commands interleaved and their order rotated each round, ``--repeats`` rounds;
for each, the median wall time and its spread (the interquartile range), the median CPU
time (user + system, of the process and its children: what a busy machine does not
inflate the way it inflates wall time), and for ``run -- true`` the median of its paired
differences with ``true`` (the launcher's own cost). The
saved runs are the committed ``tests/inputs/runs/cli_small*.run.json`` (the built-in model,
eager; ``make_cli_small.py`` beside them makes them).

    python benchmarks/bench_cli.py [--repeats 11]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "tests" / "inputs" / "runs"
RUN, RUN_B = str(RUNS / "cli_small.run.json"), str(RUNS / "cli_small_b.run.json")
TARGET_S = 0.5  # each command that reads a file, and --help
RUN_OVER_TRUE_S = 0.2  # compiletrace run -- true, over true


def _compiletrace() -> list[str]:
    """The installed script beside this Python, else ``python -m compiletrace``."""
    script = Path(sys.executable).with_name("compiletrace")
    return [str(script)] if script.exists() else [sys.executable, "-m", "compiletrace"]


def commands() -> dict[str, list[str]]:
    ct = _compiletrace()
    true = shutil.which("true") or "/bin/true"
    return {
        "compiletrace --help": [*ct, "--help"],
        "compiletrace report RUN.json": [*ct, "report", RUN],
        "compiletrace doctor RUN.json": [*ct, "doctor", RUN],
        "compiletrace compare A.json B.json": [*ct, "compare", RUN, RUN_B],
        "compiletrace run -- true": [*ct, "run", "--", true],
        "true": [true],
    }


def _timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``cmd``, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(repeats: int) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) seconds of each command, ``repeats`` rounds, interleaved, the order rotated."""
    cmds = commands()
    names = list(cmds)
    for name in names:  # once each, untimed: the files and the interpreter in the page cache
        _timed(cmds[name])
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for i in range(repeats):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(_timed(cmds[name]))
    return times


def _spread(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4)
    return q3 - q1


def table(times: dict[str, list[tuple[float, float]]]) -> list[str]:
    rows = [
        "| command | median wall s | spread (IQR) s | median CPU s | target |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, pairs in times.items():
        wall, cpu = [w for w, _ in pairs], [c for _, c in pairs]
        target = f"< {TARGET_S} s" if name != "true" and "run --" not in name else ""
        rows.append(
            f"| `{name}` | {statistics.median(wall):.3f} | {_spread(wall):.3f} "
            f"| {statistics.median(cpu):.3f} | {target} |"
        )
    over = [r[0] - t[0] for r, t in zip(times["compiletrace run -- true"], times["true"], strict=True)]
    over_cpu = [r[1] - t[1] for r, t in zip(times["compiletrace run -- true"], times["true"], strict=True)]
    rows.append(
        f"| `run -- true` over `true` (paired) | {statistics.median(over):.3f} | {_spread(over):.3f} "
        f"| {statistics.median(over_cpu):.3f} | < {RUN_OVER_TRUE_S} s |"
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--repeats", type=int, default=11, help="rounds of every command (default: 11)")
    args = parser.parse_args(argv)
    times = measure(args.repeats)
    print(f"{args.repeats} rounds, interleaved; {' '.join(_compiletrace())}")
    print("\n".join(table(times)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
