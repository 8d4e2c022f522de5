"""One rank of a job: compile and warm up, gather, and (rank 0) print and save the figures.
``python -m compiletrace.distributed`` runs :func:`main`."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TextIO

from compiletrace._data.registry import Registry
from compiletrace._io.errors import GatherError, UsageError
from compiletrace._io.files import write_json
from compiletrace._io.signals import die_with_parent
from compiletrace._io.text import ascii_int, first_line, printable, shorten
from compiletrace.distributed.results import GatherResult
from compiletrace.distributed.transport import gather

__all__ = [
    "DEFAULT_GATHER_TIMEOUT_S",
    "JOB_ID_ENV",
    "WORKER_MODULE",
    "is_job_process",
    "main",
    "model_work",
    "run_rank",
]

WORKER_MODULE = "compiletrace.distributed"
DEFAULT_GATHER_TIMEOUT_S = 300.0
# Every process of a job that distributed.launch starts inherits this variable (unique per
# job): torchrun starts each rank in a session of its own, out of reach of a signal to the
# launcher's process group, so stopping a job finds its ranks (and theirs) by it, and a rank
# knows its launcher by it.
JOB_ID_ENV = "COMPILETRACE_JOB_ID"

Work = Callable[[Registry], object]


def model_work(
    model: str | None = None,
    *,
    backend: str = "inductor",
    mode: str | None = None,
    device: str = "cpu",
) -> Work:
    """The usual rank work: build the model a MODEL spec names (``package.module:factory``,
    the built-in demo if None), compile its components and warm it up, recording into the
    registry it is given. ``device="cuda"`` means this rank's local GPU.

    >>> work = model_work("compiletrace.models:build_demo", backend="eager")
    """

    def work(registry: Registry) -> object:
        from compiletrace._app.profile import profile  # torch and the model load in the rank only

        dev = device
        if dev == "cuda" and "LOCAL_RANK" in os.environ:
            import torch

            local = ascii_int(os.environ["LOCAL_RANK"], 6)
            if local is None:
                raise UsageError(
                    f"LOCAL_RANK={printable(shorten(os.environ['LOCAL_RANK'], 40))!r} is not a GPU index in "
                    "ASCII digits 0-9: start the ranks with torch.distributed.run, which sets it"
                )
            dev = f"cuda:{local}"
            torch.cuda.set_device(dev)
        return profile(model, backend=backend, mode=mode, device=dev, registry=registry)

    return work


def run_rank(
    work: Work,
    *,
    registry: Registry | None = None,
    timeout: float | None = DEFAULT_GATHER_TIMEOUT_S,
    result_file: str | os.PathLike[str] | None = None,
    out: TextIO | None = None,
) -> GatherResult:
    """One rank of a job: join the process group (gloo, from the environment that
    ``torch.distributed.run`` sets) unless one is initialised already, run ``work(registry)``
    (compile and warm up), gather every rank's figures, and on rank 0 print the per-rank
    table to ``out`` (stdout by default) and write
    ``result_file`` (JSON). Returns the gathered result on every rank.
    """
    import torch.distributed as dist

    reg = registry if registry is not None else Registry()
    owns_group = dist.is_available() and not dist.is_initialized() and "WORLD_SIZE" in os.environ
    if owns_group:
        kwargs = {} if timeout is None else {"timeout": datetime.timedelta(seconds=timeout)}
        dist.init_process_group(backend="gloo", **kwargs)
    try:
        work(reg)
        result = gather(reg, timeout=timeout)
        if result.rank == 0:
            print(result.table(), file=out if out is not None else sys.stdout, flush=True)
            if result_file is not None:
                write_json(result_file, result.to_dict())
        if owns_group:
            # Every rank past its last collective before any rank tears its group down.
            dist.barrier()
        return result
    finally:
        if owns_group:
            dist.destroy_process_group()


def is_job_process(pid: int, job_id: str) -> bool:
    """True when process ``pid`` carries this job's id in its environment (Linux ``/proc``;
    False elsewhere, or when it is gone or not this user's).

    >>> is_job_process(os.getpid(), "no-such-job")
    False
    """
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return False
    return f"{JOB_ID_ENV}={job_id}".encode() in environ.split(b"\0")


def _die_with_launcher() -> None:
    # A rank of distributed.launch dies with its launcher (torchrun), SIGKILL included. Its
    # parent must be a process of the job: one that is not (init, a subreaper) means the
    # launcher died before the request, and the rank ends at once.
    job_id = os.environ.get(JOB_ID_ENV)
    if job_id:
        die_with_parent(lambda ppid: is_job_process(ppid, job_id))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"python -m {WORKER_MODULE}",
        description="One rank of a compiletrace job: compile and warm up a model, gather every "
        "rank's compile figures; rank 0 prints them. Start it with torch.distributed.run.",
    )
    p.add_argument("--model", default=None, help="MODEL spec package.module:factory (the built-in demo)")
    p.add_argument("--backend", default="inductor", help="torch.compile backend (default: inductor)")
    p.add_argument("--mode", default=None, help="torch.compile mode (inductor only)")
    p.add_argument("--device", default="cpu", help="cpu, or cuda for each rank's local GPU")
    p.add_argument(
        "--timeout", type=float, default=DEFAULT_GATHER_TIMEOUT_S, help="seconds to wait for the other ranks"
    )
    p.add_argument("--result-file", default=None, help="rank 0 writes the gathered result here (JSON)")
    p.add_argument("--quiet", action="store_true", help="do not print the table on rank 0")
    return p


def _report(exc: BaseException) -> None:
    # One line, last: the launcher finds it in the job's output (launch.rank_error) and
    # shows it instead of the whole traceback.
    rank = os.environ.get("RANK")
    where = f"rank {rank}: " if rank is not None else ""
    what = first_line(exc)
    print(
        f"compiletrace: {where}{type(exc).__name__}" + (f": {what}" if what else ""),
        file=sys.stderr,
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry of ``python -m compiletrace.distributed`` (one rank). Returns the exit status:
    0, 2 for bad input, 1 for any other failure. A failure ends with one line on stderr,
    ``compiletrace: rank R: ErrorType: message`` (a traceback above it unless the error
    is compiletrace's own). Started by :func:`~compiletrace.distributed.launch`, it dies
    with its launcher (Linux)."""
    _die_with_launcher()
    args = _parser().parse_args(argv)
    work = model_work(args.model, backend=args.backend, mode=args.mode, device=args.device)
    with open(os.devnull, "w") if args.quiet else contextlib.nullcontext(sys.stdout) as out:
        try:
            run_rank(work, timeout=args.timeout, result_file=args.result_file, out=out)
        except UsageError as exc:  # a bad MODEL spec, component or path
            _report(exc)
            return 2
        except GatherError as exc:
            _report(exc)
            return 1
        except Exception as exc:  # a failed compile: the traceback for --debug, then the line
            traceback.print_exc()
            _report(exc)
            return 1
    return 0
