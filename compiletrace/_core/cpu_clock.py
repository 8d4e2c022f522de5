"""The CPU clock of compile work: what the compiling thread has used, plus what the
process's finished child processes have (inductor's C++ compiler, which its compile threads
run as subprocesses and wait for at once, and torch's CPU probe), plus what inductor's live
compile-worker processes have used (its subprocess pools: the sidecar, its workers, and the
compilers they run). A frame's CPU time is the difference of two readings on the thread that
compiles it.

Why CPU and not wall time: on a busy machine a compile's wall time moved 2 to 4 times with two
CPU-bound processes beside it, its CPU time a few percent. Why the thread's and not the
process's: a server's or a data loader's other threads are not the compile's; for the same
reason only the processes of torch's own compile pools are read, not every child.
Why the workers: a pool lives until the process exits, so its CPU never reaches the reaped
children's clock while the program runs; with the graph compile in a subprocess
(``TORCHINDUCTOR_FX_COMPILE_MODE=subprocess``) it is most of the compile.
A live process's CPU is read from ``/proc/<pid>/stat``: its own time plus its reaped
children's, so a worker that exits and is reaped moves its seconds from one term to another
and the sum stays. What it leaves out: inductor's compile threads' own Python (a fraction of
a percent of a compile here).
Child and worker CPU is process-wide: a lazy backward compiled on another thread while a
frame compiles may move its compilers' seconds to that frame; the process's total stays right.

>>> a = compile_cpu_ns(); _ = sum(range(100_000)); compile_cpu_ns() - a > 0
True
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from compiletrace._core import torch_compat as tc
from compiletrace._io.state import warn_once

__all__ = ["CompileCpuClock", "ProcReader", "ProcessReader", "compile_cpu_ns", "tree_cpu_ns"]

_NS = 1_000_000_000


class ProcessReader(Protocol):
    """How the clock sees a live process (injectable: tests give exact figures)."""

    def stat(self, pid: int) -> tuple[int, int] | None:
        """``(parent pid, CPU ns of the process and of its reaped children)``; None: gone."""

    def children(self, pid: int) -> list[int]:
        """The pids of the process's live children."""


class ProcReader:
    """Reads processes from Linux's ``/proc``; ``OSError`` where there is none."""

    def __init__(self, root: str = "/proc") -> None:
        self._root = root
        self._tick_ns = _NS // os.sysconf("SC_CLK_TCK")

    def stat(self, pid: int) -> tuple[int, int] | None:
        try:
            with open(f"{self._root}/{pid}/stat", encoding="ascii", errors="replace") as f:
                text = f.read()
        except (FileNotFoundError, ProcessLookupError):
            return None
        # The name (field 2) may hold spaces and parentheses: the fields after its last ')'.
        fields = text[text.rindex(")") + 2 :].split()
        # utime, stime, cutime, cstime: fields 14-17 of proc(5), 12-15 after the name.
        return int(fields[1]), sum(int(t) for t in fields[11:15]) * self._tick_ns

    def children(self, pid: int) -> list[int]:
        out: list[int] = []
        try:
            tasks = os.listdir(f"{self._root}/{pid}/task")
        except FileNotFoundError:
            return out
        for tid in tasks:
            try:
                with open(f"{self._root}/{pid}/task/{tid}/children", encoding="ascii") as f:
                    out.extend(int(c) for c in f.read().split())
            except FileNotFoundError:  # a thread that ended meanwhile
                continue
        return out


def tree_cpu_ns(roots: Iterable[int], reader: ProcessReader, parent: int | None = None) -> int:
    """CPU ns of the live processes ``roots`` and all their live descendants, each counted
    with its reaped children. With ``parent``, a root whose parent is another process is
    skipped (a pool's pid after its process ended and the number went to someone else)."""
    total = 0
    seen: set[int] = set()
    stack = list(roots)
    first = set(stack)
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        read = reader.stat(pid)
        if read is None:
            continue
        ppid, cpu_ns = read
        if parent is not None and pid in first and ppid != parent:
            continue
        total += cpu_ns
        stack.extend(reader.children(pid))
    return total


def _thread_and_reaped_ns() -> int:
    times = os.times()
    return time.thread_time_ns() + round((times.children_user + times.children_system) * _NS)


class CompileCpuClock:
    """The compile CPU clock: ``own()`` (the thread's and the reaped children's ns) plus the
    live compile workers' (``pool_pids()``, read through ``reader``). Where the workers
    cannot be read it warns once and counts the rest."""

    def __init__(
        self,
        own: Callable[[], int] = _thread_and_reaped_ns,
        pool_pids: Callable[[], list[int]] = tc.compile_pool_pids,
        reader: ProcessReader | None = None,
        pid: Callable[[], int] = os.getpid,
    ) -> None:
        self._own = own
        self._pool_pids = pool_pids
        self._reader = reader
        self._pid = pid
        self._blind = False  # the workers could not be read once: never tried again

    def workers_ns(self) -> int:
        """CPU ns the live compile workers have used (0 where there are none)."""
        if self._blind:
            return 0
        roots = self._pool_pids()
        if not roots:  # no pool: no /proc reading at all
            return 0
        try:
            if self._reader is None:
                self._reader = ProcReader()
            return tree_cpu_ns(roots, self._reader, parent=self._pid())
        except (OSError, ValueError, IndexError) as exc:
            self._blind = True
            warn_once(
                "compile CPU leaves out inductor's compile-worker processes: their CPU cannot "
                f"be read ({type(exc).__name__}: {exc}); compare compile CPU only between runs "
                "made alike",
                key="compile-workers-cpu",
            )
            return 0

    def __call__(self) -> int:
        return self._own() + self.workers_ns()


_DEFAULT = CompileCpuClock()


def compile_cpu_ns() -> int:
    """Nanoseconds of CPU: the calling thread's, every reaped child process's, and the live
    processes of inductor's compile-worker pools."""
    return _DEFAULT()
