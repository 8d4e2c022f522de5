"""Starting a job on this machine with ``torch.distributed.run`` and reading back what
rank 0 gathered."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from compiletrace._io.errors import LaunchError, UsageError
from compiletrace._io.text import tail_lines
from compiletrace.distributed.rank import WORKER_MODULE
from compiletrace.distributed.results import GatherResult
from compiletrace.telemetry._propagation import inject_into_environ

__all__ = ["LaunchResult", "launch", "launch_command"]


@dataclass(frozen=True)
class LaunchResult:
    """What :func:`launch` returns."""

    result: GatherResult  # as rank 0 gathered it
    returncode: int
    output: str  # the job's stdout and stderr when captured, else ""


def launch_command(nproc: int, worker_argv: Sequence[str], python: str | None = None) -> list[str]:
    """The ``torch.distributed.run`` command line that starts ``nproc`` ranks of
    ``python -m compiletrace.distributed WORKER_ARGV`` on loopback. The rendezvous port is
    0: the launcher binds a free one itself, so no other process can take it in between."""
    return [
        python or sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=127.0.0.1:0",
        "--local-addr=127.0.0.1",
        "--max-restarts=0",
        "-m",
        WORKER_MODULE,
        *worker_argv,
    ]


def launch(
    nproc: int,
    worker_argv: Sequence[str] = (),
    *,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    capture_output: bool = False,
    python: str | None = None,
) -> LaunchResult:
    """Start ``nproc`` ranks on this machine with ``torch.distributed.run`` (gloo on
    127.0.0.1), each running ``python -m compiletrace.distributed WORKER_ARGV``, and return
    what rank 0 gathered.

    ``worker_argv`` is the rank's command line (``--model``, ``--backend``, ``--mode``,
    ``--device``, ``--timeout``, ``--quiet``; see ``python -m compiletrace.distributed
    --help``). The current trace context goes to the ranks in their environment, so their
    spans nest under the caller's current span. ``timeout`` bounds the whole job: past it
    the job is stopped and :class:`LaunchError` raised, as it is when the job fails.

    >>> launch(2, ["--backend", "eager"]).result.world_size  # doctest: +SKIP
    2
    """
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise UsageError(f"nproc must be a positive int, got {nproc!r}")
    if "--result-file" in worker_argv:
        raise UsageError("launch() sets --result-file itself; read LaunchResult.result instead")
    child_env = dict(os.environ if env is None else env)
    inject_into_environ(child_env)
    with tempfile.TemporaryDirectory(prefix="compiletrace-launch-") as tmp:
        result_file = Path(tmp) / "result.json"
        argv = [*worker_argv, "--result-file", str(result_file)]
        cmd = launch_command(nproc, argv, python)
        pipe = subprocess.PIPE if capture_output else None
        proc = subprocess.Popen(
            cmd,
            env=child_env,
            stdout=pipe,
            stderr=subprocess.STDOUT if capture_output else None,
            text=True,
            start_new_session=True,  # one process group: a timeout stops the launcher and its ranks
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            output = _stop(proc)
            raise LaunchError(
                f"the {nproc}-rank job did not finish within {timeout:g} s and was stopped" + _tail(output)
            ) from None
        except BaseException:
            # Ctrl-C and the like: the ranks run in their own session, so no signal from the
            # terminal reaches them; stop them before the exception goes on.
            _stop(proc)
            raise
        output = output or ""
        if proc.returncode != 0:
            raise LaunchError(
                f"the {nproc}-rank job failed with exit status {proc.returncode}" + _tail(output)
            )
        try:
            data = json.loads(result_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LaunchError(f"the {nproc}-rank job wrote no result ({exc})" + _tail(output)) from exc
    return LaunchResult(GatherResult.from_dict(data), proc.returncode, output)


def _stop(proc: subprocess.Popen[str]) -> str:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            output, _ = proc.communicate(timeout=10)
            return output or ""
        except subprocess.TimeoutExpired:
            continue
    return ""


def _tail(output: str) -> str:
    kept = tail_lines(output)
    return (":\n" + kept) if kept else ""
