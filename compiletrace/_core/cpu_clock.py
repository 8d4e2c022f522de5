"""The CPU clock of compile work: what the compiling thread has used, plus what the
process's finished child processes have (inductor's C++ compiler, which its compile threads
run as subprocesses and wait for at once, and torch's CPU probe). A frame's CPU time is the
difference of two readings on the thread that compiles it.

Why CPU and not wall time: on a busy machine a compile's wall time moved 2 to 4 times with two
CPU-bound processes beside it, its CPU time a few percent. Why the thread's and not the
process's: a server's or a data loader's other threads are not the compile's. What it leaves
out: inductor's compile threads' own Python (a fraction of a percent of a compile here), and
worker processes still alive (Triton builds' compile pool, reaped only at exit).
Child CPU is process-wide: a lazy backward compiled on another thread while a frame compiles
may move its C++ compiler's seconds to that frame; the process's total stays right.

>>> a = compile_cpu_ns(); _ = sum(range(100_000)); compile_cpu_ns() - a > 0
True
"""

from __future__ import annotations

import os
import time

__all__ = ["compile_cpu_ns"]

_NS = 1_000_000_000


def compile_cpu_ns() -> int:
    """Nanoseconds of CPU: the calling thread's, plus every reaped child process's."""
    times = os.times()
    return time.thread_time_ns() + round((times.children_user + times.children_system) * _NS)
