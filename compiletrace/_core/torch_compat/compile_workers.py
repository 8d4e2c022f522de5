"""inductor's compile-worker pools: the processes that compile for this one outside it.

Their CPU belongs to the compile that uses them, yet neither the compiling thread's clock
nor the process's reaped children count it while they live (a pool lives until the process
exits). Two kinds exist on torch 2.13:

- ``AsyncCompile``'s pool (``compile_threads`` > 1), in ``torch._inductor.async_compile._pool_set``:
  with ``worker_start_method == "subprocess"`` (the default) a ``SubprocPool``, a sidecar
  process (``.process``, a ``Popen``) whose ``ProcessPoolExecutor`` holds the workers; with
  ``"fork"``/``"spawn"`` a ``ProcessPoolExecutor`` of this process (``._processes``).
  torch uses it for Triton (and CuteDSL) kernels only: on a CPU build without Triton the C++
  kernels compile on threads of this process, their compilers its reaped children.
- ``_SubprocessFxCompile.process_pool`` (``TORCHINDUCTOR_FX_COMPILE_MODE=subprocess``): a
  ``SubprocPool`` that runs inductor's whole graph compile, C++ compiles included.

Internals used: the two above. Neither module is imported here (importing inductor costs a
second): a pool exists only once its module has been loaded by torch itself.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from typing import Any

__all__ = ["compile_pool_pids", "compile_workers_available"]

_ASYNC = "torch._inductor.async_compile"
_FX_SUBPROC = "torch._inductor.compile_fx_subproc"


def compile_workers_available() -> bool:
    """inductor's pools can be found: its pool set where the module is loaded (before that,
    that the module exists); the subprocess graph compile's pool is optional (newer modes)."""
    module = sys.modules.get(_ASYNC)
    if module is None:
        return importlib.util.find_spec(_ASYNC) is not None
    return hasattr(module, "_pool_set")


def _pool_pids(pool: Any) -> list[int]:
    process = getattr(pool, "process", None)  # a SubprocPool's sidecar (a Popen)
    if process is not None:
        pid = getattr(process, "pid", None)
        return [pid] if isinstance(pid, int) else []
    processes = getattr(pool, "_processes", None)  # a ProcessPoolExecutor's workers
    return [pid for pid in processes or () if isinstance(pid, int)]


def compile_pool_pids() -> list[int]:
    """The pids of the processes at the root of each compile-worker pool torch has started
    in this process (sidecars and direct workers; their own workers are their descendants).
    Empty where none was started or this torch's pools cannot be found (the capability table
    says so)."""
    pools: list[Any] = []
    module = sys.modules.get(_ASYNC)
    if module is not None:
        # A set changed shape, or changed while read: this reading has none of it.
        with contextlib.suppress(Exception):
            pools.extend(list(getattr(module, "_pool_set", ())))
    subproc = sys.modules.get(_FX_SUBPROC)
    if subproc is not None:
        try:
            cached = subproc._SubprocessFxCompile.process_pool
            if cached.cache_info().currsize:  # calling it before torch did would start a pool
                pools.append(cached())
        except Exception:
            pass
    pids: list[int] = []
    for pool in pools:
        pids.extend(pid for pid in _pool_pids(pool) if pid not in pids)
    return pids
