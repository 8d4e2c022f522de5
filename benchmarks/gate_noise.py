"""How far identical warm starts move beside CPU-bound processes: the measurement behind
``compiletrace compare``'s bound for one run per side (``ONE_RUN_BOUNDS`` in
``compiletrace/_app/compare.py``).

A tiny program (``tests/programs/top_level_compile.py``: an ``nn.Linear`` compiled with
``aot_eager``) is started once to warm up, then ``--pairs`` times two in a row under
``compiletrace run --json``, beside ``--hogs`` processes running ``while 1: pass``. For
each ordered pair (a then b, and b then a) it prints how much the second's compile
seconds grew over the first's, on the CPU clock and on the wall clock, and the largest
growth: the bound a gate of one run per side must allow for identical starts to pass.

    python benchmarks/gate_noise.py [--pairs 10] [--hogs 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAM = Path(__file__).resolve().parent.parent / "tests" / "programs" / "top_level_compile.py"
NS = 1_000_000_000


def start(job: Path) -> tuple[float, float]:
    """One start under ``compiletrace run``: its compile CPU and wall seconds."""
    command = [sys.executable, "-m", "compiletrace", "run", "--json", str(job), "--"]
    command += [sys.executable, str(PROGRAM)]
    subprocess.run(command, check=True, capture_output=True, timeout=900, cwd=job.parent)
    data = json.loads(job.read_text())
    records = [r for p in data["processes"] for r in p["run"]["registry"]["records"]]
    cpu = sum(r["cpu_ns"] for r in records) / NS
    wall = sum(r["end_unix_ns"] - r["start_unix_ns"] + r["backward_ns"] for r in records) / NS
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--hogs", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        start(Path(tmp) / "warm.json")
        hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.hogs)]
        began = time.monotonic()
        growth: dict[str, list[tuple[float, float]]] = {"cpu": [], "wall": []}  # (abs s, relative)
        try:
            for i in range(args.pairs):
                a = start(Path(tmp) / f"a{i}.json")
                b = start(Path(tmp) / f"b{i}.json")
                for clock, k in (("cpu", 0), ("wall", 1)):
                    for base, new in ((a[k], b[k]), (b[k], a[k])):
                        growth[clock].append((new - base, new / base - 1))
                seconds = f"CPU {a[0]:.3f} / {b[0]:.3f} s, wall {a[1]:.3f} / {b[1]:.3f} s"
                print(f"pair {i + 1}: {seconds}", flush=True)
        finally:
            for hog in hogs:
                hog.kill()
            for hog in hogs:
                hog.wait()
        print(f"{args.pairs} pairs beside {args.hogs} busy processes in {time.monotonic() - began:.0f} s")
        for clock, rows in growth.items():
            worst = max(rows, key=lambda r: r[1])
            print(
                f"{clock}: largest growth of {len(rows)} ordered pairs {worst[1]:+.1%} ({worst[0]:+.3f} s); "
                f"largest absolute {max(r[0] for r in rows):+.3f} s"
            )


if __name__ == "__main__":
    main()
