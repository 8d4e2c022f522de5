"""Starting a job on this machine with ``torch.distributed.run`` and reading back what
rank 0 gathered."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from compiletrace._io.errors import LaunchError, UsageError
from compiletrace._io.signals import owned_temporary_directory, parent_death_preexec
from compiletrace._io.text import ascii_int, first_line, tail_lines
from compiletrace.distributed.rank import JOB_ID_ENV, WORKER_MODULE, is_job_process
from compiletrace.distributed.results import GatherResult
from compiletrace.telemetry._propagation import inject_into_environ

__all__ = ["JOB_ID_ENV", "LaunchResult", "launch", "launch_command", "rank_error"]

STOP_GRACE_S = 10.0  # how long a stopped job gets to end on SIGTERM before SIGKILL

# The line a failing rank prints last (see rank.main): "compiletrace: rank 1: UsageError: ...".
_RANK_ERROR = re.compile(r"^compiletrace: (rank \d+: .+)$")


@dataclass(frozen=True)
class LaunchResult:
    """What :func:`launch` returns."""

    result: GatherResult  # as rank 0 gathered it
    returncode: int
    output: str  # the job's stdout and stderr when captured, else ""


def launch_command(
    nproc: int, worker_argv: Sequence[str], python: str | None = None, *, log_dir: str | None = None
) -> list[str]:
    """The ``torch.distributed.run`` command line that starts ``nproc`` ranks of
    ``python -m compiletrace.distributed WORKER_ARGV`` on loopback. The rendezvous port is
    0: the launcher binds a free one itself, so no other process can take it in between.
    ``log_dir``: the launcher's own files (without it, a ``torchelastic_*`` directory in the
    temporary directory that nothing removes)."""
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
        *([f"--log-dir={log_dir}"] if log_dir is not None else []),
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
    the job is stopped and :class:`LaunchError` raised, as it is when the job fails. When a
    rank failed, the error's message names it and its error on one line (the rank's last
    line, ``rank 1: UsageError: ...``); its ``output`` holds the job's whole output when
    captured. An exception while waiting (Ctrl-C, :class:`~compiletrace._io.signals.Terminated`)
    stops the launcher and every rank before it goes on; the launcher's files live in a
    temporary directory removed with the job. On Linux the launcher dies with this process
    and each rank with the launcher, SIGKILL included (``PR_SET_PDEATHSIG``); a directory
    that a killed caller left is removed by the next job.

    >>> launch(2, ["--backend", "eager"]).result.world_size  # doctest: +SKIP
    2
    """
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise UsageError(f"nproc must be a positive int, got {nproc!r}")
    if "--result-file" in worker_argv:
        raise UsageError("launch() sets --result-file itself; read LaunchResult.result instead")
    child_env = dict(os.environ if env is None else env)
    inject_into_environ(child_env)
    job_id = uuid.uuid4().hex
    child_env[JOB_ID_ENV] = job_id
    if nproc > 1:
        # torchrun sets it to 1 itself when unset, and then prints a five-line banner.
        child_env.setdefault("OMP_NUM_THREADS", "1")
    with owned_temporary_directory("compiletrace-launch-") as tmp:
        result_file = Path(tmp) / "result.json"
        argv = [*worker_argv, "--result-file", str(result_file)]
        cmd = launch_command(nproc, argv, python, log_dir=str(Path(tmp) / "launcher"))
        pipe = subprocess.PIPE if capture_output else None
        proc = subprocess.Popen(
            cmd,
            env=child_env,
            stdout=pipe,
            stderr=subprocess.STDOUT if capture_output else None,
            text=True,
            start_new_session=True,  # one process group: a timeout stops the launcher and its ranks
            # Its own session is out of reach of a kill of ours, so it gets SIGTERM when this
            # process dies, however it dies: torchrun then stops its ranks at once (even one
            # still importing torch). Each rank also dies with the launcher (rank.main).
            preexec_fn=parent_death_preexec(signal.SIGTERM),
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            output = _stop(proc, job_id)
            raise LaunchError(
                f"the {nproc}-rank job did not finish within {timeout:g} s and was stopped" + _tail(output),
                output=output,
            ) from None
        except BaseException:
            # Ctrl-C, SIGTERM and the like: the ranks run in sessions of their own, so no
            # signal from the terminal reaches them; stop them before the exception goes on.
            _stop(proc, job_id)
            raise
        output = output or ""
        if proc.returncode != 0:
            failed = rank_error(output)
            detail = f": {failed}" if failed is not None else _tail(output)
            raise LaunchError(
                f"the {nproc}-rank job failed with exit status {proc.returncode}{detail}", output=output
            )
        try:
            data = json.loads(result_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise LaunchError(
                f"the {nproc}-rank job wrote no result ({exc})" + _tail(output), output=output
            ) from exc
    return LaunchResult(GatherResult.from_dict(data), proc.returncode, output)


def rank_error(output: str) -> str | None:
    """The failing rank and its error, on one line, from a job's output: the line a rank
    prints last when it fails (the first rank whose error is not a failed gather, which
    only echoes another rank's failure), else the rank and exit status of torchrun's
    "Root Cause" summary; None when the output names neither.

    >>> rank_error("Traceback ...\\ncompiletrace: rank 1: UsageError: bad MODEL\\n")
    'rank 1: UsageError: bad MODEL'
    """
    found = [m.group(1) for m in map(_RANK_ERROR.match, output.splitlines()) if m]
    if found:
        return next((f for f in found if ": GatherError: " not in f), found[0])
    _, root, cause = output.partition("Root Cause")
    if not root:
        return None
    fields: dict[str, str] = {}
    for line in cause.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("rank", "exitcode", "traceback") and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    if "rank" not in fields or "exitcode" not in fields:
        return None
    rank = fields["rank"].split()[0]
    status = fields["exitcode"].split()[0]
    trace = fields.get("traceback", "")
    why = f" ({first_line(trace)})" if trace and not trace.startswith("To enable traceback") else ""
    return f"rank {rank}: exited with status {status}{why}"


def _job_pids(job_id: str) -> list[int]:
    """Every live process (not this one) whose environment carries this job's id: the
    launcher, the ranks and whatever they started. Linux only (``/proc``); elsewhere none."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    return [
        pid for pid in map(ascii_int, entries) if pid and pid != os.getpid() and is_job_process(pid, job_id)
    ]


def _signal_job(proc: subprocess.Popen[str], job_id: str, sig: signal.Signals) -> None:
    # The launcher's process group, then the group of each rank (each leads its own).
    targets = {proc.pid, *_job_pids(job_id)}
    for pid in sorted(targets):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)  # not a group leader: the process alone


def _stop(proc: subprocess.Popen[str], job_id: str) -> str:
    """Stop the launcher and every process of the job: SIGTERM, then SIGKILL to whatever
    is left after the grace period. Returns the launcher's output, when captured."""
    output = ""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        _signal_job(proc, job_id, sig)
        try:
            output, _ = proc.communicate(timeout=STOP_GRACE_S)
            break
        except subprocess.TimeoutExpired:
            continue
    # The launcher is gone; ranks it left behind (killed before it could stop them) are not.
    deadline = time.monotonic() + STOP_GRACE_S
    while _job_pids(job_id) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in _job_pids(job_id):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return output or ""


def _tail(output: str) -> str:
    kept = tail_lines(output)
    return (":\n" + kept) if kept else ""
