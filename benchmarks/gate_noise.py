"""How far identical warm starts move beside CPU-bound processes: the measurement behind
``compiletrace compare``'s bound for one run per side (``ONE_RUN_BOUNDS`` in
``compiletrace/_app/compare.py``).

A tiny program (``tests/programs/top_level_compile.py``: an ``nn.Linear`` compiled with
``aot_eager``) is started once to warm up, then ``--pairs`` times two in a row under
``compiletrace run --json``, beside ``--hogs`` processes running ``while 1: pass``. For
each ordered pair (a then b, and b then a) it prints how much the second's compile
seconds grew over the first's, on the CPU clock and on the wall clock, and the largest
growth: the bound a gate of one run per side must allow for identical starts to pass; and
``compiletrace compare``'s own verdict on each ordered pair (all must pass).

With ``--regressions``, first, beside the same busy processes, the changes a gate must catch,
each started on the cache an unchanged start left warm (inductor, a private cache directory,
filled before the busy processes start) and judged by ``compiletrace compare`` against that
start: a changed dtype, a second batch size (a recompile), four more layers (a bigger graph).

    python benchmarks/gate_noise.py [--pairs 10] [--hogs 4] [--regressions]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAM = Path(__file__).resolve().parent.parent / "tests" / "programs" / "top_level_compile.py"
NS = 1_000_000_000


def start(job: Path, *args: str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """One start under ``compiletrace run`` (``args``: the program's, see its docstring):
    its compile CPU and wall seconds."""
    command = [sys.executable, "-m", "compiletrace", "run", "--json", str(job), "--"]
    command += [sys.executable, str(PROGRAM), *args]
    subprocess.run(command, check=True, capture_output=True, timeout=1800, cwd=job.parent, env=env)
    data = json.loads(job.read_text())
    records = [r for p in data["processes"] for r in p["run"]["registry"]["records"]]
    cpu = sum(r["cpu_ns"] for r in records) / NS
    wall = sum(r["end_unix_ns"] - r["start_unix_ns"] + r["backward_ns"] for r in records) / NS
    return cpu, wall


def gate(base: Path, new: Path) -> tuple[int, str]:
    """``compiletrace compare BASE NEW`` with its defaults: the exit status and its last line."""
    done = subprocess.run(
        [sys.executable, "-m", "compiletrace", "compare", str(base), str(new)],
        capture_output=True, text=True, timeout=900, cwd=base.parent, env={**os.environ, "COLUMNS": "1000"},
    )  # fmt: skip
    if done.returncode not in (0, 1):
        raise SystemExit(f"compare failed ({done.returncode}): {done.stderr}")
    return done.returncode, done.stdout.strip().splitlines()[-1]


# The regressions --regressions starts (the program's arguments: batch, dtype, layers, backend).
UNCHANGED = ("4", "float32", "1", "inductor")
REGRESSIONS = {
    "a changed dtype": ("4", "float64", "1", "inductor"),
    "a second batch size (a recompile)": ("5", "float32", "1", "inductor"),
    "four more layers (a bigger graph)": ("4", "float32", "5", "inductor"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--hogs", type=int, default=4)
    parser.add_argument("--regressions", action="store_true", help="first, judge three real regressions")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        start(Path(tmp) / "warm.json")
        inductor = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(Path(tmp) / "inductor-cache")}
        if args.regressions:  # the cache CI keeps between builds, filled before the load
            start(Path(tmp) / "fill.json", *UNCHANGED, env=inductor)
        hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.hogs)]
        began = time.monotonic()
        growth: dict[str, list[tuple[float, float]]] = {"cpu": [], "wall": []}  # (abs s, relative)
        verdicts: list[int] = []
        try:
            if args.regressions:
                unchanged = Path(tmp) / "unchanged.json"
                start(unchanged, *UNCHANGED, env=inductor)
                for name, changed in REGRESSIONS.items():
                    job = Path(tmp) / f"{changed[0]}-{changed[1]}-{changed[2]}.json"
                    start(job, *changed, env=inductor)
                    status, line = gate(unchanged, job)
                    print(f"{name}: exit {status}: {line}", flush=True)
            for i in range(args.pairs):
                a_job, b_job = Path(tmp) / f"a{i}.json", Path(tmp) / f"b{i}.json"
                a, b = start(a_job), start(b_job)
                for clock, k in (("cpu", 0), ("wall", 1)):
                    for base, new in ((a[k], b[k]), (b[k], a[k])):
                        growth[clock].append((new - base, new / base - 1))
                judged = [gate(a_job, b_job), gate(b_job, a_job)]
                verdicts += [status for status, _ in judged]
                seconds = f"CPU {a[0]:.3f} / {b[0]:.3f} s, wall {a[1]:.3f} / {b[1]:.3f} s"
                print(f"pair {i + 1}: {seconds}; gate {' / '.join(line for _, line in judged)}", flush=True)
        finally:
            for hog in hogs:
                hog.kill()
            for hog in hogs:
                hog.wait()
        print(f"{args.pairs} pairs beside {args.hogs} busy processes in {time.monotonic() - began:.0f} s")
        print(f"the default gate passed {verdicts.count(0)} of {len(verdicts)} ordered pairs")
        for clock, rows in growth.items():
            if not rows:
                continue
            worst = max(rows, key=lambda r: r[1])
            print(
                f"{clock}: largest growth of {len(rows)} ordered pairs {worst[1]:+.1%} ({worst[0]:+.3f} s); "
                f"largest absolute {max(r[0] for r in rows):+.3f} s"
            )


if __name__ == "__main__":
    main()
