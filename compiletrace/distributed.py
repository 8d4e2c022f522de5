"""Distributed jobs: every rank's compile figures, gathered over torch.distributed.

Each rank of a job compiles its own graphs at the same time as the others, so the job's
compile time is the slowest rank's, per component. :func:`gather` moves every rank's
figures to every rank with torch.distributed's own collectives and returns a
:class:`GatherResult`: the per-rank figures in rank order, the per-component maximum and
the slowest rank. :func:`launch` starts a job on this machine with ``torch.distributed.run``
and :func:`main` is each rank's entry (``python -m compiletrace.distributed``).

>>> import compiletrace
>>> from compiletrace import distributed
>>> result = distributed.gather(compiletrace.Registry())  # no process group: one rank
>>> result.world_size, result.slowest_rank
(1, 0)
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from compiletrace._propagation import context_from_environ, inject_into_environ
from compiletrace._records import CompilationTimes
from compiletrace._registry import ENCODER, LANGUAGE_MODEL, Registry, get_registry

__all__ = [
    "GatherError",
    "GatherResult",
    "LaunchError",
    "LaunchResult",
    "RankTimes",
    "context_from_environ",
    "gather",
    "inject_into_environ",
    "launch",
    "main",
    "model_work",
    "run_rank",
]

GATHER_KIND = "compiletrace.gather"
GATHER_SCHEMA_VERSION = 1
WORKER_MODULE = "compiletrace.distributed"
DEFAULT_GATHER_TIMEOUT_S = 300.0


class GatherError(RuntimeError):
    """A rank could not gather: another rank died, or did not call :func:`gather` in time."""


class LaunchError(RuntimeError):
    """A job started by :func:`launch` failed, timed out, or wrote no result."""


# -- the data ----------------------------------------------------------------------------


def _ordered(names: Iterable[str]) -> list[str]:
    """Component names, language model and encoder first, the rest in first-seen order."""
    seen = list(dict.fromkeys(names))
    head = [n for n in (LANGUAGE_MODEL, ENCODER) if n in seen]
    return head + [n for n in seen if n not in head]


def _times(by_component: Mapping[str, float]) -> CompilationTimes:
    return CompilationTimes(
        language_model=by_component.get(LANGUAGE_MODEL, 0.0), encoder=by_component.get(ENCODER, 0.0)
    )


@dataclass(frozen=True)
class RankTimes:
    """One rank's compile figures."""

    rank: int  # rank in the gathering group
    by_component: dict[str, float]  # compile seconds per component, as its registry has them
    graphs: int = 0  # graph records in the rank's registry
    host: str = ""  # the machine the rank ran on
    pid: int = 0

    @property
    def compilation_times(self) -> CompilationTimes:
        return _times(self.by_component)

    @property
    def total_s(self) -> float:
        return sum(self.by_component.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "host": self.host,
            "pid": self.pid,
            "graphs": self.graphs,
            "compilation_times": self.compilation_times._asdict(),
            "by_component": dict(self.by_component),
            "total_s": self.total_s,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RankTimes:
        return cls(
            rank=int(data["rank"]),
            by_component={str(k): float(v) for k, v in data["by_component"].items()},
            graphs=int(data.get("graphs", 0)),
            host=str(data.get("host", "")),
            pid=int(data.get("pid", 0)),
        )

    @classmethod
    def of(cls, registry: Registry, rank: int) -> RankTimes:
        return cls(rank, registry.by_component(), len(registry), socket.gethostname(), os.getpid())


@dataclass(frozen=True)
class GatherResult:
    """Every rank's compile figures, the same on every rank.

    ``maximum`` is the job's compile time per component: ranks compile in parallel, so each
    component is ready when its slowest rank is. The slowest rank is the one with the
    largest total (the lowest such rank on a tie).

    >>> r = GatherResult.of([RankTimes(0, {"language_model": 2.0}), RankTimes(1, {"language_model": 3.0})])
    >>> r.maximum, r.slowest_rank
    (CompilationTimes(language_model=3.0, encoder=0.0), 1)
    """

    ranks: tuple[RankTimes, ...]  # in rank order
    rank: int = 0  # the rank of the process holding this result
    max_by_component: dict[str, float] = field(default_factory=dict)  # per-component maximum
    slowest_rank: int = 0

    @classmethod
    def of(cls, ranks: Iterable[RankTimes], rank: int = 0) -> GatherResult:
        ordered = tuple(sorted(ranks, key=lambda r: r.rank))
        if not ordered:
            raise ValueError("a gather result needs at least one rank")
        names = _ordered(n for r in ordered for n in r.by_component)
        maximum = {n: max(r.by_component.get(n, 0.0) for r in ordered) for n in names}
        slowest = max(ordered, key=lambda r: (r.total_s, -r.rank))
        return cls(ordered, rank, maximum, slowest.rank)

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def compilation_times(self) -> tuple[CompilationTimes, ...]:
        """Each rank's :class:`CompilationTimes`, in rank order."""
        return tuple(r.compilation_times for r in self.ranks)

    @property
    def by_component(self) -> tuple[dict[str, float], ...]:
        """Each rank's seconds per component, in rank order."""
        return tuple(dict(r.by_component) for r in self.ranks)

    @property
    def maximum(self) -> CompilationTimes:
        """The per-component maximum over ranks: the job's compile time."""
        return _times(self.max_by_component)

    @property
    def slowest(self) -> RankTimes:
        return self.ranks[self.slowest_rank_index]

    @property
    def slowest_rank_index(self) -> int:
        return next(i for i, r in enumerate(self.ranks) if r.rank == self.slowest_rank)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        return {
            "kind": GATHER_KIND,
            "schema_version": GATHER_SCHEMA_VERSION,
            "world_size": self.world_size,
            "ranks": [r.to_dict() for r in self.ranks],
            "maximum": {
                "compilation_times": self.maximum._asdict(),
                "by_component": dict(self.max_by_component),
            },
            "slowest_rank": self.slowest_rank,
            "slowest_total_s": self.slowest.total_s,
        }

    @classmethod
    def from_dict(cls, data: Any, rank: int = 0) -> GatherResult:
        if not isinstance(data, dict) or data.get("kind") != GATHER_KIND:
            raise ValueError("not a compiletrace gather result: expected the JSON of GatherResult.to_dict()")
        if data.get("schema_version") != GATHER_SCHEMA_VERSION:
            raise ValueError(
                f"gather schema version {data.get('schema_version')!r} is not supported; this "
                f"compiletrace reads version {GATHER_SCHEMA_VERSION}"
            )
        return cls.of([RankTimes.from_dict(r) for r in data["ranks"]], rank)

    def table(self) -> str:
        """The per-rank table, the maximum and the slowest rank, as text.

        >>> lm = "language_model"
        >>> r = GatherResult.of([RankTimes(0, {lm: 2.0}), RankTimes(1, {lm: 3.0})])
        >>> print(r.table())
        rank  host  language_model s  total s  graphs
        ----  ----  ----------------  -------  ------
        0           2.000             2.000    0
        1           3.000             3.000    0
        max         3.000
        slowest rank: 1 (3.000 s of compiling, 1.000 s more than the fastest)
        """
        from compiletrace.reports._text import render_table

        names = _ordered(self.max_by_component) or [LANGUAGE_MODEL]
        headers = ["rank", "host", *(f"{n} s" for n in names), "total s", "graphs"]
        rows = [
            [str(r.rank), r.host, *(f"{r.by_component.get(n, 0.0):.3f}" for n in names), *_totals(r)]
            for r in self.ranks
        ]
        rows.append(["max", "", *(f"{self.max_by_component.get(n, 0.0):.3f}" for n in names), "", ""])
        fastest = min(r.total_s for r in self.ranks)
        slowest = self.slowest
        lines = render_table(headers, rows)
        lines.append(
            f"slowest rank: {slowest.rank} ({slowest.total_s:.3f} s of compiling, "
            f"{slowest.total_s - fastest:.3f} s more than the fastest)"
        )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _totals(r: RankTimes) -> list[str]:
    return [f"{r.total_s:.3f}", str(r.graphs)]


# -- gathering ---------------------------------------------------------------------------


def _timeout_s(timeout: float | datetime.timedelta | None) -> float | None:
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ValueError(f"timeout must be None or a positive number of seconds, got {timeout!r}")
    return float(seconds)


def _gather_objects(payload: dict[str, Any], group: Any, world: int, timeout_s: float | None) -> list[Any]:
    """Gloo: a monitored barrier bounds the wait and names the ranks that did not arrive;
    then ``all_gather_object`` moves the figures (pickled CPU tensors, as gloo takes them)."""
    import torch.distributed as dist

    kwargs = {} if timeout_s is None else {"timeout": datetime.timedelta(seconds=timeout_s)}
    dist.monitored_barrier(group=group, wait_all_ranks=True, **kwargs)
    out: list[Any] = [None] * world
    dist.all_gather_object(out, payload, group=group)
    return out


def _gather_tensors(
    payload: dict[str, Any], group: Any, world: int, timeout_s: float | None, device: Any
) -> list[Any]:
    """Any backend, NCCL included: the figures travel as JSON bytes in a uint8 tensor on the
    backend's device. Sizes go first, then the bytes padded to the largest size; each
    collective is asynchronous and its wait is bounded by the timeout."""
    import torch
    import torch.distributed as dist

    def wait(work: Any) -> None:
        if timeout_s is None:
            work.wait()
        else:
            work.wait(timeout=datetime.timedelta(seconds=timeout_s))

    data = json.dumps(payload).encode()
    size = torch.tensor([len(data)], dtype=torch.int64, device=device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    wait(dist.all_gather(sizes, size, group=group, async_op=True))
    lengths = [int(s.item()) for s in sizes]
    padded = torch.zeros(max(lengths), dtype=torch.uint8)
    padded[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    padded = padded.to(device)
    outs = [torch.empty_like(padded) for _ in range(world)]
    wait(dist.all_gather(outs, padded, group=group, async_op=True))
    return [json.loads(o[:n].cpu().numpy().tobytes()) for o, n in zip(outs, lengths, strict=True)]


def _device_for(backend: str) -> Any:
    import torch

    if backend == "nccl":  # NCCL moves CUDA tensors only: use this rank's current device
        return torch.device("cuda", torch.cuda.current_device())
    if backend == "xccl":
        return torch.device("xpu", torch.xpu.current_device())
    return torch.device("cpu")  # gloo, mpi, and mixed "cpu:gloo,cuda:nccl" (CPU goes to gloo)


def gather(
    registry: Registry | None = None,
    group: Any = None,
    timeout: float | datetime.timedelta | None = None,
) -> GatherResult:
    """Gather every rank's compile figures from ``registry`` (the default registry if None)
    over ``group`` (the default process group if None). Every rank of the group must call
    it; every rank gets the same :class:`GatherResult`.

    ``timeout`` (seconds, or a timedelta) bounds the wait for the other ranks: a rank that
    died, or never calls ``gather``, makes the others raise :class:`GatherError` within it
    instead of hanging (None: the process group's own timeout). Without an initialised
    process group the result holds this process alone.

    >>> import compiletrace
    >>> gather(compiletrace.Registry()).compilation_times
    (CompilationTimes(language_model=0.0, encoder=0.0),)
    """
    if registry is not None and not isinstance(registry, Registry):
        raise TypeError(f"registry must be a compiletrace.Registry, got {type(registry).__name__}")
    reg = registry if registry is not None else get_registry()
    timeout_s = _timeout_s(timeout)

    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return GatherResult.of([RankTimes.of(reg, 0)])
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError("this process is not a member of the group passed to gather()")
    world = dist.get_world_size(group)
    backend = str(dist.get_backend(group))
    payload = RankTimes.of(reg, rank).to_dict()
    try:
        if backend == "gloo":
            payloads = _gather_objects(payload, group, world, timeout_s)
        else:
            payloads = _gather_tensors(payload, group, world, timeout_s, _device_for(backend))
    except RuntimeError as exc:  # torch's DistBackendError and gloo's errors are RuntimeErrors
        within = f"within {timeout_s:g} s" if timeout_s is not None else "within the group's timeout"
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GatherError(
            f"compiletrace gather failed on rank {rank} of {world}: a rank died or did not call "
            f"gather() {within}; check the other ranks' logs (torch: {detail})"
        ) from exc
    return GatherResult.of([RankTimes.from_dict(p) for p in payloads], rank)


# -- one rank of a job -------------------------------------------------------------------

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
        from compiletrace._profile import profile

        dev = device
        if dev == "cuda" and "LOCAL_RANK" in os.environ:
            import torch

            dev = f"cuda:{int(os.environ['LOCAL_RANK'])}"
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
                from compiletrace._profile import write_json_atomic

                write_json_atomic(result_file, result.to_dict())
        if owns_group:
            # Every rank past its last collective before any rank tears its group down.
            dist.barrier()
        return result
    finally:
        if owns_group:
            dist.destroy_process_group()


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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry of ``python -m compiletrace.distributed`` (one rank). Returns the exit status."""
    args = _parser().parse_args(argv)
    work = model_work(args.model, backend=args.backend, mode=args.mode, device=args.device)
    with open(os.devnull, "w") if args.quiet else contextlib.nullcontext(sys.stdout) as out:
        try:
            run_rank(work, timeout=args.timeout, result_file=args.result_file, out=out)
        except ValueError as exc:  # a bad MODEL spec, component or path
            print(f"compiletrace: {exc}", file=sys.stderr)
            return 2
        except GatherError as exc:
            print(f"compiletrace: {exc}", file=sys.stderr)
            return 1
    return 0


# -- launching a job on this machine -----------------------------------------------------


@dataclass(frozen=True)
class LaunchResult:
    """What :func:`launch` returns."""

    result: GatherResult  # as rank 0 gathered it
    returncode: int
    output: str  # the job's stdout and stderr when captured, else ""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def launch_command(nproc: int, worker_argv: Sequence[str], port: int, python: str | None = None) -> list[str]:
    """The ``torch.distributed.run`` command line that starts ``nproc`` ranks of
    ``python -m compiletrace.distributed WORKER_ARGV`` on loopback."""
    return [
        python or sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}",
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
        raise ValueError(f"nproc must be a positive int, got {nproc!r}")
    if "--result-file" in worker_argv:
        raise ValueError("launch() sets --result-file itself; read LaunchResult.result instead")
    child_env = dict(os.environ if env is None else env)
    inject_into_environ(child_env)
    with tempfile.TemporaryDirectory(prefix="compiletrace-launch-") as tmp:
        result_file = Path(tmp) / "result.json"
        argv = [*worker_argv, "--result-file", str(result_file)]
        cmd = launch_command(nproc, argv, free_port(), python)
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


def _tail(output: str, lines: int = 20) -> str:
    kept = output.strip().splitlines()[-lines:]
    return (":\n" + "\n".join(kept)) if kept else ""


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The figures are out: leave without the interpreter's teardown. Destroying gloo's C++
    # state while a peer rank is still closing its connections can abort the process
    # ("terminate called without an active exception"), turning a finished job into a
    # failed one.
    os._exit(status)
