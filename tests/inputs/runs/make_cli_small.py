"""Writes the small saved runs beside this file: the built-in demo model (two components,
one graph each) profiled with the eager backend, twice, each on a fresh Dynamo.

    python tests/inputs/runs/make_cli_small.py

Paths into the repository (the compiled code's file) are written relative to it, so the
files do not depend on where the repository was when they were made.

The CLI's tests read them (tests/apps/test_cli_startup.py): ``report``, ``doctor`` and
``compare`` on a run file, which must not import torch, and benchmarks/bench_cli.py times
those commands on them.
"""

from __future__ import annotations

from pathlib import Path

import torch

import compiletrace

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parents[2]
RUNS = ("cli_small.run.json", "cli_small_b.run.json")


def main() -> None:
    for name in RUNS:
        torch._dynamo.reset()  # each run compiles afresh, as in its own process
        path = HERE / name
        compiletrace.profile(backend="eager").save(path)
        text = path.read_text(encoding="utf-8").replace(f'"{REPOSITORY}/', '"')
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
