"""Each trial its own port: ``doctor --verify --jobs N`` runs a server's trials side by side,
and two servers cannot listen on one port (one would die of ``Address already in use``, and
its fix be judged to have broken the program).

Where the job's ready mark is ``--ready port:PORT`` and its command holds that port
(:func:`substitute_port`: ``{port}``, a word that is the number, or the number after ``=``
or ``:``), each trial run side by side gets a free port of its own, in its command, its
ready mark and its traffic (:func:`placement`). Where the command does not hold it, the
trials of that job take turns on it, said once. A trial that could not listen (its output
said ``Address already in use``, or it ended before ready with its port held by another
program) is no verdict on its fix: it runs again, once, alone (no other trial runs
beside it), on a new port where it has its own; failing again, it is not judged, and why
is said (:func:`run_on_own_port`).

>>> substitute_port(["serve.py", "--port", "8431"], 8431, 50123)
(('serve.py', '--port', '50123'), 1)
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
import sys
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from compiletrace._app.job import PORT_FIELD
from compiletrace._app.progress import STDERR_LINES
from compiletrace._data.ready import PORT, parse_ready
from compiletrace._io.errors import CompiletraceError
from compiletrace._io.text import printable

__all__ = [
    "Placement",
    "free_port",
    "placement",
    "port_held",
    "port_of",
    "run_on_own_port",
    "substitute_port",
]

# What a program prints when its port is taken: Python's and C's strerror, Node's and Go's code.
IN_USE = (b"address already in use", b"eaddrinuse")
JOIN_S = 10.0  # after a trial: how long its output may take to drain (a process that escaped holds it)
FREE_PORT_TRIES = 100


@dataclass(frozen=True)
class Placement:
    """What one run of a trial gets: its command, ready mark and traffic, on its port."""

    command: tuple[str, ...]
    ready: str | None
    traffic: tuple[str, ...] = ()
    port: int | None = None  # the port it is to listen on (None: its ready mark names none)
    stdout: Any = 2  # its output: this process's stderr (stdout is the doctor's) ...
    stderr: Any = None  # ... or, where it has a port, a pipe read for "Address already in use"


def port_of(ready: str | None) -> int | None:
    """The port of a ``port:PORT`` ready mark (None for any other mark, or none).

    >>> port_of("port:8000"), port_of("step:5"), port_of(None)
    (8000, None, None)
    """
    spec = parse_ready(ready) if ready else None
    return spec.number if spec is not None and spec.how == PORT else None


def substitute_port(words: Sequence[str], old: int, new: int) -> tuple[tuple[str, ...], int]:
    """``words`` with the port ``old`` made ``new`` wherever they hold it, and how many words
    did: ``{port}`` anywhere in a word; a word that is the number; the number after ``=`` or
    ``:`` up to the word's end or a ``/`` (``--port=8431``, ``0.0.0.0:8431``,
    ``http://host:8431/v1``). Never part of a longer number (``84310``, ``18431``), nor a
    number elsewhere in a word (``8431x``, ``--size 8431/2``).

    >>> substitute_port(["--port=8431", "h:8431/v1", "84310", ":18431", "{port}", "8431/2"], 8431, 9)
    (('--port=9', 'h:9/v1', '84310', ':18431', '9', '8431/2'), 3)
    """
    number = re.compile(rf"\A{old}\Z|(?<=[=:]){old}(?=/|\Z)")
    out, held = [], 0
    for word in words:
        held += PORT_FIELD in word or number.search(word) is not None
        out.append(number.sub(str(new), word.replace(PORT_FIELD, str(new))))
    return tuple(out), held


def placement(
    command: Sequence[str], ready: str | None, traffic: Sequence[str], port: int
) -> Placement | None:
    """The trial's command, ready mark and traffic with ``port`` in place of the ready mark's
    port (its traffic's ``{port}`` and the number alike); None where the ready mark names no
    port or the command does not hold it (nor ``{port}``): it cannot be given another.

    >>> placement(["python", "serve.py", "{port}"], "port:8431", ["curl", "h:8431/"], 50123).command
    ('python', 'serve.py', '50123')
    >>> placement(["python", "serve.py"], "port:8431", [], 50123) is None
    True
    """
    old = port_of(ready)
    if old is None:
        return None
    argv, held = substitute_port(command, old, port)
    if not held:
        return None
    return Placement(argv, f"{PORT}:{port}", substitute_port(traffic, old, port)[0], port)


def free_port(taken: Collection[int] = ()) -> int:
    """A port that no socket of this machine holds now (the kernel's pick for a socket bound
    to every address, closed at once), and none of ``taken``.

    >>> 0 < free_port() < 65536
    True
    """
    for _ in range(FREE_PORT_TRIES):
        with socket.socket() as sock:
            sock.bind(("", 0))
            port = int(sock.getsockname()[1])
        if port not in taken:
            return port
    raise CompiletraceError(f"no free port for a trial in {FREE_PORT_TRIES} of the kernel's picks")


def port_held(port: int) -> bool:
    """Whether a socket on this machine listens on ``port`` now (a connection's leftover
    TIME_WAIT does not count: SO_REUSEADDR, as servers bind)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


class _OutputWatch:
    """A trial's stdout and stderr through a pipe: copied to this process's stderr as they
    come (as the trial's output goes there without it), and read for ``Address already in
    use``."""

    def __init__(self) -> None:
        self.read_fd, self.fd = os.pipe()
        self.in_use = False
        self._thread = threading.Thread(target=self._copy, name="compiletrace-trial-output", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        tail = b""
        pending = b""  # a line not ended yet: copied whole, so trials side by side never share one
        copying = True
        try:
            while chunk := os.read(self.read_fd, 65536):
                whole, _, pending = (pending + chunk).rpartition(b"\n")
                if copying and whole:
                    copying = _copy_lines(whole + b"\n")
                if len(pending) > 65536:  # no newline for this long: copied as it is
                    copying = copying and _copy_lines(pending)
                    pending = b""
                if not self.in_use:
                    window = tail + chunk.lower()
                    self.in_use = any(text in window for text in IN_USE)
                    tail = window[-32:]  # the text may span two reads
            if copying and pending:
                _copy_lines(pending + b"\n")
        finally:
            os.close(self.read_fd)

    def close(self) -> None:
        """After the trial: close this process's end, and let what is left drain."""
        os.close(self.fd)
        self._thread.join(JOIN_S)


def _copy_lines(data: bytes) -> bool:
    """Copy a trial's whole lines to this process's stderr, between other threads' lines;
    False when stderr is gone (the caller keeps draining, or the trial would block)."""
    try:
        with STDERR_LINES:
            view = memoryview(data)
            while view:
                view = view[os.write(2, view) :]
    except OSError:
        return False
    return True


class _Turns:
    """Which trials of this process run now, and on which ports, behind one lock. Ports are
    the machine's, so the book is the process's: a trial on a port of its own gets one no
    running trial holds; trials on a port they cannot change take turns on it; a trial run
    again after it could not listen runs alone (no other starts until it ends)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._ports: set[int] = set()  # held by running trials
        self._running = 0
        self._alone = False  # a trial runs alone now
        self._waiting_alone = 0  # ... or waits to: no other trial starts before it
        self._said: set[tuple[tuple[str, ...], str]] = set()

    @contextlib.contextmanager
    def turn(
        self, fixed: int | None, *, own: bool, alone: bool, avoid: int | None = None
    ) -> Iterator[int | None]:
        """A trial's turn: its port (``fixed``, or with ``own`` a free one, never ``fixed``
        nor ``avoid``), held until the block ends."""
        with self._cond:
            if alone:
                self._waiting_alone += 1
                try:
                    self._cond.wait_for(lambda: not self._alone and self._running == 0)
                finally:
                    self._waiting_alone -= 1
                self._alone = True
            else:
                self._cond.wait_for(
                    lambda: (
                        not self._alone
                        and not self._waiting_alone
                        and (own or fixed is None or fixed not in self._ports)
                    )
                )
            taken = {p for p in (*self._ports, fixed, avoid) if p is not None}
            port = free_port(taken) if own else fixed
            if port is not None:
                self._ports.add(port)
            self._running += 1
        try:
            yield port
        finally:
            with self._cond:
                self._running -= 1
                if port is not None:
                    self._ports.discard(port)
                if alone:
                    self._alone = False
                self._cond.notify_all()

    def say_once(self, key: tuple[tuple[str, ...], str], line: str) -> None:
        with self._cond:
            if key in self._said:
                return
            self._said.add(key)
        print(line, file=sys.stderr)

    def idle(self) -> bool:
        """No trial runs, holds a port or waits to run alone (for tests)."""
        with self._cond:
            return not (self._running or self._ports or self._alone or self._waiting_alone)


TURNS = _Turns()


class Ended(Protocol):
    """How a trial's run ended, as :class:`~compiletrace._app.job.RunOutcome` says it."""

    @property
    def stopped(self) -> str | None: ...

    @property
    def ready_after_s(self) -> float | None: ...


E = TypeVar("E", bound=Ended)


def run_on_own_port(
    command: Sequence[str],
    ready: str | None,
    traffic: Sequence[str],
    side_by_side: bool,
    attempt: Callable[[Placement], E],
) -> tuple[E, str]:
    """Run one trial (``attempt``, given its :class:`Placement`) on a port of its own where
    trials run ``side_by_side`` and its command holds the port of its ready mark; else on
    the job's port, its turn on it. What it gives, and why it is no verdict on its fix
    (``""`` when it is one): a run that could not listen runs again, once, alone, and one
    that could not then either is not judged."""
    fixed = port_of(ready)
    if fixed is None:  # no port to share
        with TURNS.turn(None, own=False, alone=False):
            return attempt(Placement(tuple(command), ready, tuple(traffic))), ""
    own = side_by_side and placement(command, ready, traffic, fixed) is not None
    if side_by_side and not own:
        TURNS.say_once(
            (tuple(command), str(ready)),
            f"compiletrace: the trials of this job run one at a time, not side by side: its ready mark "
            f"{printable(str(ready))} names a port that its command's words do not hold, so no trial "
            f"can be given a port of its own (write the port, or {PORT_FIELD}, in the command)",
        )
    why, port = "", None
    for alone in (False, True):
        with TURNS.turn(fixed, own=own, alone=alone, avoid=port) as port:
            assert port is not None
            placed = placement(command, ready, traffic, port) if own else None
            placed = placed or Placement(tuple(command), ready, tuple(traffic), fixed)
            watch = _OutputWatch()
            try:
                result = attempt(replace(placed, stdout=watch.fd, stderr=watch.fd))
            finally:
                watch.close()
            why = _could_not_listen(result, watch.in_use, port)
        if not why:
            return result, ""
        if not alone:
            print(f"compiletrace: a trial {why}: running it again, alone", file=sys.stderr)
    return result, f"it could not listen on its port, twice, the second time alone ({why})"


def _could_not_listen(result: Ended, said_in_use: bool, port: int) -> str:
    """Why a trial's run failed to listen on ``port`` (``""``: it did not fail so). Only a
    run that ended by itself: one stopped after ready (or never ready) was not refused."""
    if result.stopped is not None:
        return ""
    if said_in_use:
        return f"ended, its output saying its address was already in use (port {port})"
    if result.ready_after_s is None and port_held(port):
        return f"ended before ready, with port {port} held by another program"
    return ""
