"""When a ``compiletrace run`` process writes its run while it still runs (a checkpoint), so
a process stopped before it can write at its end keeps what it compiled.

A job's processes are not always allowed to end: vLLM's engine core and workers are torn
down by their parent (SIGTERM, then SIGKILL a few seconds later), a trial to ready ends the
whole process group with SIGKILL when SIGINT and SIGTERM did not do, a supervisor kills
what it started. A run written only at exit is lost then, with every compile in it. So each
process also writes its run soon after its records change: once they have been still for
:data:`QUIET_S` (a burst of compiles is written once, at its end), and at least every
:data:`STALE_S` while they keep changing. Its final write at exit replaces the last
checkpoint; a run that is still a checkpoint says so (``meta.checkpoint_unix_s``), and what
it lacks is at most the compiles of the last :data:`QUIET_S` before the process was killed.

:class:`Debounce` is the decision alone, on an injected clock (its tests are exact);
:class:`Checkpoints` runs it on a daemon thread that polls what changed.

>>> debounce = Debounce(clock=iter([0.0, 0.5, 1.0, 1.5]).__next__)
>>> due = []
>>> for state in (1, 2, 2, 2):  # a compile at 0.0, another at 0.5, then quiet
...     due.append(debounce.due(state))
...     if due[-1]:
...         debounce.written(state)
>>> due
[False, False, True, False]
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Hashable

__all__ = ["POLL_S", "QUIET_S", "STALE_S", "Checkpoints", "Debounce"]

POLL_S = 0.5  # how often the records are looked at: a few microseconds each time
QUIET_S = 0.5  # written once nothing has changed for this long
STALE_S = 5.0  # ... and at least this often while something keeps changing


class Debounce:
    """Says, each time it is shown the state of the records, whether to write them now."""

    def __init__(
        self, quiet_s: float = QUIET_S, stale_s: float = STALE_S, clock: Callable[[], float] = time.monotonic
    ):
        self.quiet_s = quiet_s
        self.stale_s = stale_s
        self.clock = clock
        self._written: Hashable = None  # the state last written (None: nothing to write yet)
        self._seen: Hashable = None  # the state last shown
        self._changed_at = 0.0  # when it last changed
        self._pending_since: float | None = None  # first change not yet written

    def due(self, state: Hashable) -> bool:
        """True when ``state`` (any value that changes when the records do; None for "nothing
        recorded") should be written now; the caller writes it, then calls :meth:`written`.

        >>> clock = iter([0.0, 0.1, 0.2]).__next__
        >>> d = Debounce(clock=clock)
        >>> d.due(None), d.due(None), d.due(None)
        (False, False, False)
        """
        now = self.clock()
        if state != self._seen:
            self._seen = state
            self._changed_at = now
            if state != self._written and self._pending_since is None:
                self._pending_since = now
        if state is None or state == self._written or self._pending_since is None:
            return False
        return now - self._changed_at >= self.quiet_s or now - self._pending_since >= self.stale_s

    def written(self, state: Hashable) -> None:
        """``state`` is now on disk."""
        self._written = state
        self._pending_since = None


class Checkpoints:
    """A daemon thread that shows ``state()`` to a :class:`Debounce` every :data:`POLL_S`
    and calls ``write()`` when it says so. ``write`` is the process's own checkpoint write: it
    takes the recording's lock and never raises. Stops with the process (a daemon), or with
    :meth:`stop`."""

    def __init__(
        self,
        state: Callable[[], Hashable],
        write: Callable[[], bool],
        poll_s: float = POLL_S,
        debounce: Debounce | None = None,
    ) -> None:
        self.state = state
        self.write = write
        self.poll_s = poll_s
        self.debounce = debounce or Debounce()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="compiletrace-checkpoints", daemon=True)

    def start(self) -> Checkpoints:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def step(self) -> bool:
        """One look at the records, and a write if one is due; True when it wrote."""
        state = self.state()
        if not self.debounce.due(state):
            return False
        if self.write():
            self.debounce.written(state)
            return True
        return False

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            with contextlib.suppress(Exception):  # never the program's problem; the exit still writes
                self.step()
