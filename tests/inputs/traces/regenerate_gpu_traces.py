"""Makes the TORCH_TRACE logs "as a GPU run writes them" in ``gpu-MAJOR.MINOR/``:
``tests/programs/make_gpu_trace.py``, run by each torch given, calls torch's own emitters
with the arguments torch's GPU code passes them (Triton compiles and autotuning inside a
compile, runtime autotuning and CUDA-graph recordings on the first calls, torch's runtime
rows), on this CPU machine. Each log is trimmed as ``regenerate_traces.py`` trims its own
(what the reader never reads dropped, paths made neutral, digests recomputed as torch
computes them). ``tests/apps/test_torch_trace_gpu.py`` reads them.

    python tests/inputs/traces/regenerate_gpu_traces.py [PYTHON ...]

With no PYTHON, the one running this. .ci/run's release venvs (``.venv-torch2.14.1/bin/python``,
``.venv-torch2.15.0/bin/python``, kept with COMPILETRACE_CI_KEEP_VENVS=1) make the other
releases' logs, with their own line numbers, ``cuda_version`` and ``triton_version``. Replace
a log by a real GPU run's when one is at hand (the program's model, on a GPU, with inductor).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from regenerate_traces import HERE, ROOT, trim_log

PROGRAM = ROOT / "tests" / "programs" / "make_gpu_trace.py"


def make(python: str) -> Path:
    """Run the program with ``python`` and keep its log, trimmed; the directory written."""
    python = os.path.abspath(python)  # run from a directory of its own (not resolved: a venv's)
    version = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    case = HERE / f"gpu-{'.'.join(version.split('+')[0].split('.')[:2])}"
    with tempfile.TemporaryDirectory(prefix="compiletrace-gpu-trace-") as tmp:
        trace = Path(tmp) / "trace"
        env = {**os.environ, "TORCH_TRACE": str(trace), "PYTHONPATH": str(ROOT)}
        subprocess.run([python, str(PROGRAM)], env=env, check=True, cwd=tmp)
        (log,) = trace.glob("*.log")
        shutil.rmtree(case, ignore_errors=True)
        trim_log(log, case / log.name, {str(ROOT): "/repo", tmp: "/tmp/work"})
    print(f"torch {version}: wrote {case.relative_to(ROOT)}")
    return case


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pythons", nargs="*", default=[sys.executable], metavar="PYTHON")
    for python in parser.parse_args(argv).pythons:
        make(python)


if __name__ == "__main__":
    main()
