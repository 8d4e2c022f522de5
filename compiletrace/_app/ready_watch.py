"""The ready marks a program needs no edit for: ``--ready port:PORT`` and ``--ready step:N``.

- ``port:PORT``: a process is ready when one of its own sockets *listens* on PORT. Binding
  is not enough: a server may bind its port before it sets its engine up and listen only
  when it serves (vLLM's API server does), so the mark is the socket's LISTEN state in the
  kernel's tables (``/proc/net/tcp``, ``/proc/net/tcp6``: state ``0A``), matched to this
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

import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from compiletrace._core.ready import current_mark, mark_ready
from compiletrace._data.ready import PORT, STEP, ReadySpec
from compiletrace._io.state import warn_once

__all__ = ["POLL_S", "listening_inodes", "own_socket_inodes", "watch_port", "watch_steps"]

POLL_S = 0.05  # how often the port is looked at until the process listens on it
TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
LISTEN = "0A"  # the kernel's TCP_LISTEN, as its tables write it


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


def own_socket_inodes(fd_dir: str = "/proc/self/fd") -> set[int]:
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


def _listens(port: int, tables: Iterable[str]) -> bool:
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
    poll_s: float = POLL_S,
    sleep: Callable[[float], None] = time.sleep,
) -> threading.Thread | None:
    """Mark this process ready once it listens on ``spec``'s port (a daemon thread, which ends
    at the mark); None, with one warning, where the kernel's tables cannot be read."""
    assert spec.how == PORT
    tables = tuple(tables)
    if not any(os.path.exists(t) for t in tables):
        warn_once(
            f"--ready {spec.text} reads the kernel's TCP tables ({', '.join(tables)}), which this "
            "system does not have: this process is never marked ready; call compiletrace.ready() instead"
        )
        return None

    def poll() -> None:
        try:
            while current_mark() is None:
                if _listens(spec.number, tables):
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
