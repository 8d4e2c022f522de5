"""The ready marks a program needs no edit for: ``--ready port:PORT`` and ``--ready step:N``.

- ``port:PORT``: a process is ready when one of its own sockets *listens* on PORT. Binding
  is not enough: a server may bind its port before it sets its engine up and listen only
  when it serves (vLLM's API server does), so the mark is the socket's listening state.
  Each look asks the process's own descriptors (``/proc/self/fd``), never the machine's
  tables: for each socket, the kernel's ``SO_ACCEPTCONN`` (listening), its protocol (TCP)
  and ``getsockname`` (the port), asked of the descriptor as it is (no copy of it is made,
  nothing of it is changed). A look costs what the process holds, however many sockets the
  machine's other processes hold, and a socket found is this process's by construction.
  Where a descriptor cannot be asked so, the watch says so once and reads the kernel's
  tables instead (``/proc/net/tcp``, ``/proc/net/tcp6``: state ``0A``), matched to this
  process by the socket's inode among its open descriptors. A daemon thread looks every
  :data:`POLL_S` until the mark, then stops: nothing is left polling a server that serves.
- ``step:N``: a process is ready when any of its optimizers ends its N-th step, seen by
  torch's global optimizer-step hook (every optimizer, no edit to the training loop).

Both call :func:`compiletrace._core.ready.mark_ready`, so the mark is kept, written into
torch's trace and judged (``--after-ready``) as every other mark is.

>>> listening_inodes(8000, ["  sl  local_address rem_address   st tx_queue rx_queue tr tm->when "
...     "retrnsmt   uid  timeout inode",
...     "   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000  0 4242 1"])
{4242}
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from compiletrace._core.ready import current_mark, mark_ready
from compiletrace._data.ready import PORT, STEP, ReadySpec
from compiletrace._io.state import warn_once

__all__ = [
    "FD_DIR",
    "POLL_S",
    "DescriptorsUnasked",
    "listening_inodes",
    "listening_port",
    "own_listening_ports",
    "own_socket_inodes",
    "watch_port",
    "watch_steps",
]

POLL_S = 0.05  # how often the port is looked at until the process listens on it
FD_DIR = "/proc/self/fd"  # this process's descriptors, one entry each
TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
LISTEN = "0A"  # the kernel's TCP_LISTEN, as its tables write it
_SOCKADDR_BYTES = 128  # sizeof(struct sockaddr_storage)
_INET = (socket.AF_INET, getattr(socket, "AF_INET6", socket.AF_INET))


class DescriptorsUnasked(Exception):
    """A descriptor cannot be asked whether it listens here (no ``SO_ACCEPTCONN``, no C
    library to ask it with): the watch reads the kernel's tables instead."""


def listening_inodes(port: int, lines: Iterable[str]) -> set[int]:
    """The inodes of the sockets a kernel TCP table (its lines) lists as listening on ``port``."""
    found = set()
    for line in lines:
        parts = line.split()
        if len(parts) < 10 or parts[3] != LISTEN:
            continue
        _, _, hex_port = parts[1].rpartition(":")
        try:
            if int(hex_port, 16) == port:
                found.add(int(parts[9]))
        except ValueError:  # the header line, or a table of another shape
            continue
    return found


def own_socket_inodes(fd_dir: str = FD_DIR) -> set[int]:
    """The inodes of the sockets this process holds open."""
    inodes = set()
    for name in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, name))
        except OSError:  # closed between the listing and the look
            continue
        if target.startswith("socket:[") and target.endswith("]"):
            inodes.add(int(target[8:-1]))
    return inodes


@functools.cache
def _socket_calls() -> tuple[Callable[..., int], Callable[..., int]] | None:
    """libc's ``getsockopt`` and ``getsockname``, looked up once; None where they cannot
    be (not Linux, no C library loaded by name). Called through ctypes on the descriptor
    itself: ``socket.socket(fileno=...)`` or ``socket.fromfd`` would make the program's
    socket non-blocking under a ``socket.setdefaulttimeout``, and a copy of a listening
    descriptor made while the program forks would live on in the child."""
    if not sys.platform.startswith("linux") or not hasattr(socket, "SO_ACCEPTCONN"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # already in every Python: its symbols are ours
        return libc.getsockopt, libc.getsockname
    except (OSError, AttributeError):
        return None


class _Asker(threading.local):
    """What asks a descriptor, its buffers made once per thread: a look asks every
    descriptor of the process, and each is one system call or a few."""

    def __init__(self) -> None:
        self.value, self.size = ctypes.c_int(0), ctypes.c_uint32(0)
        self.value_ref, self.size_ref = ctypes.byref(self.value), ctypes.byref(self.size)
        self.address = ctypes.create_string_buffer(_SOCKADDR_BYTES)

    def option(self, getsockopt: Callable[..., int], fd: int, name: int) -> int | None:
        self.size.value = ctypes.sizeof(ctypes.c_int)
        if getsockopt(fd, socket.SOL_SOCKET, name, self.value_ref, self.size_ref) == 0:
            return self.value.value
        if ctypes.get_errno() == errno.ENOPROTOOPT:
            raise DescriptorsUnasked(f"the kernel has no socket option {name}")
        return None  # not a socket (ENOTSOCK), or closed since it was listed (EBADF)


_ASKER = _Asker()


def listening_port(fd: int) -> int | None:
    """The TCP port this process's descriptor ``fd`` listens on; None for any other
    descriptor (a file, a pipe, a socket that is bound or connected only, a Unix or UDP
    socket, a descriptor closed meanwhile). Raises :class:`DescriptorsUnasked` where no
    descriptor can be asked. Nothing of the descriptor is changed.

    >>> with socket.create_server(("127.0.0.1", 0)) as server:
    ...     listening_port(server.fileno()) == server.getsockname()[1]
    True
    """
    calls = _socket_calls()
    if calls is None:
        raise DescriptorsUnasked("no getsockopt(SO_ACCEPTCONN) on this system")
    getsockopt, getsockname = calls
    asker = _ASKER
    if not asker.option(getsockopt, fd, socket.SO_ACCEPTCONN):  # one call for most descriptors
        return None
    protocol = getattr(socket, "SO_PROTOCOL", None)
    if protocol is not None and asker.option(getsockopt, fd, protocol) != socket.IPPROTO_TCP:
        return None  # SCTP listens too; the port is TCP's
    asker.size.value = _SOCKADDR_BYTES
    if getsockname(fd, asker.address, asker.size_ref) != 0 or asker.size.value < 4:
        return None
    raw = asker.address.raw[:4]
    # sockaddr_in and sockaddr_in6 alike: the family (host order), then the port (network order)
    if int.from_bytes(raw[:2], sys.byteorder) not in _INET:
        return None
    return int.from_bytes(raw[2:4], "big")


def own_listening_ports(
    fd_dir: str = FD_DIR, probe: Callable[[int], int | None] = listening_port
) -> set[int]:
    """The TCP ports this process's own sockets listen on: ``probe`` asks each descriptor
    listed in ``fd_dir``, and nothing else is read (another process's sockets cost nothing).

    >>> with socket.create_server(("127.0.0.1", 0)) as server:
    ...     server.getsockname()[1] in own_listening_ports()
    True
    """
    ports = set()
    for name in os.listdir(fd_dir):
        if name.isascii() and name.isdecimal():
            port = probe(int(name))
            if port is not None:
                ports.add(port)
    return ports


def _listens(port: int, tables: Iterable[str]) -> bool:
    """The fallback: the kernel's tables, the whole machine's sockets, matched by inode."""
    listening: set[int] = set()
    for table in tables:
        try:
            with open(table, encoding="ascii", errors="replace") as f:
                listening |= listening_inodes(port, f)
        except FileNotFoundError:  # no IPv6 on this machine
            continue
    return bool(listening) and bool(listening & own_socket_inodes())


def watch_port(
    spec: ReadySpec,
    *,
    tables: Iterable[str] = TCP_TABLES,
    fd_dir: str = FD_DIR,
    probe: Callable[[int], int | None] = listening_port,
    poll_s: float = POLL_S,
    sleep: Callable[[float], None] = time.sleep,
) -> threading.Thread | None:
    """Mark this process ready once one of its own sockets listens on ``spec``'s port (a
    daemon thread, which ends at the mark): each look asks this process's descriptors
    (``fd_dir``, each through ``probe``), or, where they cannot be asked, reads the kernel's
    ``tables``, said once. None, with one warning, where neither can be read."""
    assert spec.how == PORT
    tables = tuple(tables)
    if not os.path.isdir(fd_dir) and not any(os.path.exists(t) for t in tables):
        warn_once(
            f"--ready {spec.text} reads this process's descriptors ({fd_dir}) or else reads the kernel's "
            f"TCP tables ({', '.join(tables)}), which this system does not have: this process is never "
            "marked ready; call compiletrace.ready() instead"
        )
        return None

    def listens() -> bool:
        return spec.number in own_listening_ports(fd_dir, probe)

    def listens_by_tables() -> bool:
        return _listens(spec.number, tables)

    def poll() -> None:
        look = listens
        try:
            while current_mark() is None:
                try:
                    found = look()
                except (DescriptorsUnasked, OSError) as exc:
                    if look is listens_by_tables:
                        raise
                    warn_once(
                        f"--ready {spec.text}: this process's sockets cannot be asked whether they listen "
                        f"({exc}); reading the kernel's TCP tables instead, whose cost grows with every "
                        "socket on the machine"
                    )
                    look = listens_by_tables
                    continue
                if found:
                    mark_ready(PORT, spec.text)
                    return
                sleep(poll_s)
        except Exception as exc:  # never the program's failure
            warn_once(
                f"--ready {spec.text}: watching the port failed ({exc!r}); this process is not marked ready"
            )

    thread = threading.Thread(target=poll, name="compiletrace-ready-port", daemon=True)
    thread.start()
    return thread


def watch_steps(spec: ReadySpec, register: Callable[[Callable[..., None]], Any] | None = None) -> Any:
    """Mark this process ready when one of its optimizers ends its N-th step (``spec``'s N);
    the hook's handle. ``register`` is torch's global optimizer-step post hook unless given.
    The hook stays (torch iterates its hooks while calling them: one may not remove itself),
    and after the mark costs one test per step."""
    assert spec.how == STEP
    if register is None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        register = register_optimizer_step_post_hook
    steps: dict[int, int] = {}  # id(optimizer) -> steps it ended
    lock = threading.Lock()
    done = False

    def stepped(optimizer: object, args: object, kwargs: object) -> None:
        nonlocal done
        if done:
            return
        with lock:
            count = steps[id(optimizer)] = steps.get(id(optimizer), 0) + 1
        if count >= spec.number:
            done = True
            if current_mark() is None:
                mark_ready(STEP, spec.text)

    return register(stepped)
