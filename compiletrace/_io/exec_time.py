"""When this process's current program began: Linux records the fork, not the exec.

``/proc/self/stat`` gives a process's start (field 22) as the moment its pid was forked, and
an exec keeps the pid and that start. Under ``bash -c 'pip install ...; exec python app.py'``
(or ``sh -c``, or a Dockerfile ``RUN``; bash execs the last command of ``-c`` by itself) the
process began when the shell did, so "interpreter start" would hold everything the shell ran
first. The kernel keeps no time of the exec itself.

It does keep how long the process has been runnable since its fork: on a CPU or waiting for
one (``/proc/self/schedstat``, its first two fields, in ns). A shell running commands waits
for each of them blocked, not runnable; an interpreter starting up is runnable. So when
``import compiletrace`` begins, the program began ``runnable`` ns before: :func:`probe`
reads that at the import, and :func:`exec_start` turns it into (when the program began, how
long the process ran another program before it).

An estimate, with two biases:

- the shell's own CPU time before the exec counts as the program's (a shell hands its work
  to child processes; a busy loop in the shell itself stays in "interpreter start");
- time the program spent blocked before ``import compiletrace`` (a cold disk, a sleep)
  would count as before the exec: so the split is made only when the process had waited for
  a child before the import (the children's counters in ``/proc/self/stat``: a shell that
  ran a command has; a program started directly has not, unless it ran a subprocess before
  importing compiletrace), and only when it is at least :data:`FLOOR_NS`.

Elsewhere than Linux, or without ``/proc/self/schedstat``, there is no probe: the start-up
stays from the fork, and says so.
"""

from __future__ import annotations

import os
from typing import NamedTuple

__all__ = ["FLOOR_NS", "ExecProbe", "exec_start", "probe"]

# Two clock ticks: the resolution of the fork time (and of /proc/uptime, which dates it).
FLOOR_NS = 20_000_000


class ExecProbe(NamedTuple):
    """What the kernel says when ``import compiletrace`` begins, for :func:`exec_start`."""

    pid: int  # the process it was read in (a child forked later has no exec of its own)
    at_unix_ns: int  # when it was read
    runnable_ns: int  # since the fork: on a CPU or waiting for one
    reaped_child: bool  # whether the process had waited for a child process by then


def probe(at_unix_ns: int) -> ExecProbe | None:
    """Read the process's runnable time and children's counters now (``at_unix_ns``); None
    where ``/proc`` has neither.

    >>> p = probe(0)
    >>> p is None or p.runnable_ns > 0
    True
    """
    try:
        with open("/proc/self/schedstat", encoding="ascii") as f:
            on_cpu, waiting = (int(x) for x in f.read().split()[:2])
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rpartition(")")[2].split()
        # After the command name, fields start at 3: cminflt (11), cmajflt (13), cutime (16)
        # and cstime (17) count the children waited for, so any of them above 0 means one was.
        reaped = any(int(fields[n - 3]) for n in (11, 13, 16, 17))
    except (OSError, ValueError, IndexError):
        return None
    return ExecProbe(os.getpid(), at_unix_ns, on_cpu + waiting, reaped)


def exec_start(found: ExecProbe | None, fork_unix_ns: int) -> tuple[int, int | None]:
    """(when this process's current program began, ns the process ran another program
    before it): ``(fork_unix_ns, 0)`` when nothing ran before it (or less than
    :data:`FLOOR_NS`), ``(fork_unix_ns, None)`` when it cannot be told (no probe).

    >>> S = 1_000_000_000
    >>> p = ExecProbe(os.getpid(), 10 * S, 2 * S, True)  # runnable 2 s of the 10 since the fork
    >>> exec_start(p, 0)
    (8000000000, 8000000000)
    >>> exec_start(p._replace(reaped_child=False), 0), exec_start(None, 0)
    ((0, 0), (0, None))
    """
    if found is None:
        return fork_unix_ns, None
    if found.pid != os.getpid() or not found.reaped_child:
        # A child forked after the import has not exec'd; a program started directly ran
        # nothing before its exec.
        return fork_unix_ns, 0
    began = min(found.at_unix_ns, max(fork_unix_ns, found.at_unix_ns - found.runnable_ns))
    before = began - fork_unix_ns
    return (began, before) if before >= FLOOR_NS else (fork_unix_ns, 0)
