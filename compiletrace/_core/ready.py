"""This process's ready mark: the moment the program said it was ready to serve.

The first mark wins (later ones are not kept), and a mark is its process's own: a
forked child starts unmarked (a job judges it by the earliest mark of its processes). Who
marks: ``compiletrace.ready()``; ``compiletrace run``'s bootstrap when the ``--ready
MODULE:FUNCTION`` function first returns; the job's recording when the ``--ready
phase:NAME`` phase ends, or, with no ``--ready``, the first top-level warm-up phase. Who
listens (:func:`on_ready`): the job's recording, which keeps the mark in the process's run,
makes the fixes that take effect at ready (``run --apply fail-after-ready``) and writes the
mark into torch's trace when one is being written.

Torch-free and cheap: :func:`ready` costs a lock and a ``getpid`` when nothing listens.

>>> _reset_for_tests()
>>> ready().how
'call'
>>> ready() is None  # a second mark is not kept
True
>>> _reset_for_tests()
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from compiletrace._data.ready import CALL, ReadyMark
from compiletrace._io.state import warn_once

__all__ = ["current_mark", "mark_ready", "on_ready", "ready"]

ReadyListener = Callable[[ReadyMark], None]

_lock = threading.Lock()
# The process's one mark, for its life (a forked child's is told apart by its pid): a fact
# about the process, as its start time is, never reset by a recording; not process state.
_mark: ReadyMark | None = None
_listeners: list[ReadyListener] = []


def current_mark() -> ReadyMark | None:
    """This process's ready mark, if it has one (a forked child does not keep its parent's)."""
    mark = _mark
    return mark if mark is not None and mark.pid == os.getpid() else None


def mark_ready(how: str, what: str, unix_ns: int | None = None) -> ReadyMark | None:
    """Mark this process ready now (or at ``unix_ns``); the mark, or None when the process
    was marked already. Every listener is told, each failure one warning."""
    global _mark
    pid = os.getpid()
    with _lock:
        if _mark is not None and _mark.pid == pid:
            return None
        _mark = ReadyMark(time.time_ns() if unix_ns is None else unix_ns, pid, how, what)
        mark = _mark
        listeners = tuple(_listeners)
    for listener in listeners:
        _tell(listener, mark)
    return mark


def on_ready(listener: ReadyListener) -> None:
    """Call ``listener(mark)`` when this process becomes ready (now, if it is)."""
    with _lock:
        _listeners.append(listener)
    mark = current_mark()
    if mark is not None:
        _tell(listener, mark)


def _tell(listener: ReadyListener, mark: ReadyMark) -> None:
    try:
        listener(mark)
    except Exception as exc:  # the program's call of ready() must never fail over it
        warn_once(f"a listener of the ready mark failed and was skipped: {exc!r}")


def ready() -> ReadyMark | None:
    """Say that this process is ready to serve: every compile after this (a new shape, a
    lazy backward, a CUDA-graph recording, an autotune) is a latency spike a request paid.
    ``compiletrace run --after-ready error`` fails the job on one, and the doctor names
    each with its trigger and seconds. The first call in a process counts; it returns the
    mark it made (None for a later call). Costs nothing measurable; outside ``compiletrace
    run`` nothing listens.

    >>> import compiletrace
    >>> mark = compiletrace.ready()  # after the warm-up, before serving
    """
    return mark_ready(CALL, "compiletrace.ready()")


def _reset_for_tests() -> None:
    global _mark
    with _lock:
        _mark = None
        _listeners.clear()
