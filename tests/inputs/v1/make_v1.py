"""Write one file of each kind beside this file, as version 1 of its kind: a command's job,
the doctor's findings, a start-up benchmark and a multi-rank job's figures (more runs are in
``tests/inputs/runs``), and profile runs whose meta holds what a plain run's lacks (the
steady state, the eager baseline, cache artifacts loaded first). They were made by
compiletrace before run metadata was typed, and are kept as they were written:
``tests/data/test_file_versions.py`` checks that every file of version 1 still loads.
Rerunning this writes today's files, which is not the point: add a directory for a new
version instead of regenerating these.

    python tests/inputs/v1/make_v1.py

Each command runs from the repository's root; paths under it are written relative to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CLI = (sys.executable, "-m", "compiletrace")

COMMANDS = {
    "job.json": ("run", "--json", "{out}", "--", "python", "tests/programs/fixable.py"),
    "doctor.json": ("doctor", "tests/inputs/runs/recompiles.run.json", "--json", "{out}"),
    "bench.json": (
        *("bench", "startup", "--backend", "eager", "--num-iters-cold", "1"),
        *("--num-iters-warmup", "1", "--num-iters-warm", "1", "--output-json", "{out}"),
    ),
    "gather.json": ("profile", "--nproc", "2", "--backend", "eager", "--json", "{out}"),
    "steady.run.json": ("profile", "--backend", "eager", "--steady-calls", "3", "--json", "{out}"),
    "eager.run.json": ("profile", "--compilation-mode", "none", "--json", "{out}"),
    "artifacts.run.json": ("profile", "--cache-artifacts", "{cache}", "--json", "{out}"),
}


def _relative(data: Any) -> Any:
    """``data`` with every path under the repository made relative to it."""
    if isinstance(data, str):
        return "." if data == str(ROOT) else data.replace(f"{ROOT}{os.sep}", "")
    if isinstance(data, list):
        return [_relative(item) for item in data]
    if isinstance(data, dict):
        return {key: _relative(value) for key, value in data.items()}
    return data


def main() -> None:
    # "python" in a command is this interpreter: the one with torch and compiletrace.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with tempfile.TemporaryDirectory() as scratch:
        cache = os.path.join(scratch, "demo.cache")  # inductor's artifacts of the demo model
        save = [*CLI, "cache", "save", cache]
        subprocess.run(save, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        for name, args in COMMANDS.items():
            _write(name, [*CLI, *(a.format(out=HERE / name, cache=cache) for a in args)], env)


def _write(name: str, command: list[str], env: dict[str, str]) -> None:
    path = HERE / name
    subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    data = _relative(json.loads(path.read_text(encoding="utf-8")))
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
