"""Make the TORCH_TRACE logs "as a GPU run writes them" that the trace reader is tested on
(tests/apps/test_torch_trace_gpu.py): tests/programs/make_gpu_trace.py, run by each torch
given, writes its trace (torch's own emitters, called with the arguments torch's GPU code
passes them); its log is kept here gzipped, as torch wrote it, under ``gpu-MAJOR.MINOR/``.

    python tests/inputs/torch_trace/regenerate_gpu_logs.py [PYTHON ...]

With no PYTHON, the one running this. .ci/run's release venvs (``.venv-torch2.14.1/bin/python``,
``.venv-torch2.15.0/bin/python``, kept with COMPILETRACE_CI_KEEP_VENVS=1) make the other
releases' logs: their own line numbers, ``cuda_version`` and ``triton_version``. Replace a
log by a real GPU run's when one is at hand (the program, on a GPU, with inductor).
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PROGRAM = ROOT / "tests" / "programs" / "make_gpu_trace.py"
LOG_NAME = "dedicated_log_torch_trace.log.gz"


def make(python: str) -> Path:
    """Run the program with ``python`` and keep its log; the file written."""
    version = subprocess.run(
        [python, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    release = ".".join(version.split("+")[0].split(".")[:2])
    with tempfile.TemporaryDirectory(prefix="gpu-trace-") as trace:
        env = {**os.environ, "TORCH_TRACE": trace, "PYTHONPATH": str(ROOT)}
        subprocess.run([python, str(PROGRAM)], env=env, check=True, cwd=ROOT)
        (log,) = Path(trace).glob("*.log")
        out = HERE / f"gpu-{release}" / LOG_NAME
        out.parent.mkdir(exist_ok=True)
        # mtime 0: the same log gzips to the same bytes.
        with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed:
            packed.write(log.read_bytes())
    print(f"torch {version}: wrote {out.relative_to(ROOT)} ({out.stat().st_size // 1024} KB)")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pythons", nargs="*", default=[sys.executable], metavar="PYTHON")
    for python in parser.parse_args(argv).pythons:
        make(python)


if __name__ == "__main__":
    main()
