"""Moving every rank's figures to every rank with torch.distributed's own collectives."""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

from compiletrace._data.registry import Registry, checked_registry, get_registry
from compiletrace._io.errors import GatherError, UsageError
from compiletrace._io.text import first_line
from compiletrace.distributed.results import GatherResult, RankTimes

__all__ = ["gather", "gather_tensors"]


def _timeout_s(timeout: float | datetime.timedelta | None) -> float | None:
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not math.isfinite(seconds)
        or seconds <= 0
    ):
        raise UsageError(f"timeout must be None or a positive number of seconds (finite), got {timeout!r}")
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


def gather_tensors(
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
    instead of hanging (None: the timeout the process group was created with, e.g.
    ``init_process_group(timeout=...)``; torch's 30 minutes, with a warning, when it
    cannot be read). Without an initialised process group the result holds this process
    alone.

    >>> import compiletrace
    >>> gather(compiletrace.Registry()).compilation_times
    (CompilationTimes(language_model=0.0, encoder=0.0),)
    """
    checked_registry(registry)
    reg = registry if registry is not None else get_registry()
    timeout_s = _timeout_s(timeout)

    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return GatherResult.of([RankTimes.of(reg, 0)])
    rank = dist.get_rank(group)
    if rank < 0:
        raise UsageError("this process is not a member of the group passed to gather()")
    world = dist.get_world_size(group)
    backend = str(dist.get_backend(group))
    payload = RankTimes.of(reg, rank).to_dict()
    device = torch.device("cpu") if backend == "gloo" else _device_for(backend)
    if timeout_s is None:
        # torch's monitored_barrier(timeout=None) waits its 30-minute default, not the
        # group's timeout: pass the group's own.
        from compiletrace._core.torch_compat import process_group_timeout

        timeout_s = process_group_timeout(group, device)
    try:
        if backend == "gloo":
            payloads = _gather_objects(payload, group, world, timeout_s)
        else:
            payloads = gather_tensors(payload, group, world, timeout_s, device)
    except RuntimeError as exc:  # torch's DistBackendError and gloo's errors are RuntimeErrors
        within = f"within {timeout_s:g} s"
        detail = first_line(exc) or type(exc).__name__
        raise GatherError(
            f"compiletrace gather failed on rank {rank} of {world}: a rank died or did not call "
            f"gather() {within}; check the other ranks' logs (torch: {detail})"
        ) from exc
    return GatherResult.of([RankTimes.from_dict(p) for p in payloads], rank)
