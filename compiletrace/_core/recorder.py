"""The phase recorder: times phases on one clock, knows which phase each one is nested in,
and stores every finished phase in a registry.

Nesting follows a context variable, so it is per thread and per asyncio task: a phase
opened inside another on the same thread (or in the same task) is its child; one opened on
another thread starts at the top level. A phase goes to the registry it is given, else to
the registry of the phase around it, else to the process registry. Torch-free, and never
raises into the code it times: the front door's ``phase``, ``warm_up`` and ``instrument``
all record through it.

>>> from compiletrace._data.registry import Registry
>>> reg = Registry()
>>> outer = begin("build the model", registry=reg)
>>> inner = begin("load weights")  # nested: same thread, same registry
>>> _ = end(inner); _ = end(outer)
>>> [(p.name, p.parent_id == outer.phase_id) for p in reg.phase_records()]
[('load weights', True), ('build the model', False)]
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from compiletrace._core.startup import PHASE_IDS, UnixClock, unix_now_ns
from compiletrace._data.records import qualified_type_name
from compiletrace._data.registry import Registry, get_registry
from compiletrace._data.timeline import PHASE, SPAN, PhaseRecord
from compiletrace._io.state import warn_once
from compiletrace._io.text import ascii_int

__all__ = ["CURRENT", "OpenPhase", "begin", "current_phase", "end", "rank", "recording", "set_end_listener"]


class OpenPhase(NamedTuple):
    """A phase that has begun and not yet ended (what :func:`begin` returns). A named tuple,
    made without argument parsing, and no context-variable token: a phase must cost a few
    microseconds, and an object with a dozen attributes set one by one costs one alone."""

    owner: object  # what opened it (a Phase), so that it closes its own run
    phase_id: int
    name: str
    kind: str
    start_unix_ns: int
    parent: OpenPhase | None  # the phase open around it when it began (restored at its end)
    registry: Registry
    clock: UnixClock
    thread: threading.Thread
    span: Any  # telemetry's handle on its span, or None


_new = tuple.__new__  # skips a named tuple's argument parsing: half its cost, the same tuple
_current_thread = threading.current_thread
# The innermost phase open in each thread or task: a context variable is per context by
# nature, so it lives at module level, never in the process state.
_CURRENT: contextvars.ContextVar[OpenPhase | None] = contextvars.ContextVar(
    "compiletrace_current_phase", default=None
)


CURRENT = _CURRENT  # for callers that read it on every phase: ``CURRENT.get()``, no call between

# Told of every phase that ends, in any registry (a job's recording watches for the phase
# its ready mark is: compiletrace run --ready phase:NAME, or a warm-up).
_end_listener: Callable[[PhaseRecord], None] | None = None


def set_end_listener(listener: Callable[[PhaseRecord], None] | None) -> None:
    """Call ``listener(record)`` after each phase ends (None: no one); one listener per process."""
    global _end_listener
    _end_listener = listener


def current_phase() -> OpenPhase | None:
    """The innermost phase open in this thread or task, if any."""
    return _CURRENT.get()


# A memo, not state: the launcher sets RANK before the process starts, and a lookup in the
# environment costs as much as a whole phase.
_rank: int | None = None


def rank() -> int:
    """This process's rank: the launcher's RANK (torchrun sets it before the process
    starts), 0 without one. Read as text, not from torch.distributed (the recorder is
    torch-free), and once: a lookup in the environment costs as much as a phase."""
    global _rank
    if _rank is None:
        _rank = ascii_int(os.environ.get("RANK", "0")) or 0  # a rank is ASCII digits, as role names it
    return _rank


def begin(
    name: str,
    kind: str = PHASE,
    registry: Registry | None = None,
    clock: UnixClock | None = None,
    owner: object = None,
    span: Callable[[int], Any] | None = None,
) -> OpenPhase:
    """Open a phase now and make it the current one (the parent of phases opened inside
    it); ``span(start_unix_ns)``, if given, starts its span and returns the handle."""
    parent = _CURRENT.get()
    if registry is None:
        registry = parent.registry if parent is not None else get_registry()
    if clock is None:
        clock = unix_now_ns
    start = clock()
    opened: OpenPhase = _new(
        OpenPhase,
        (
            owner,
            next(PHASE_IDS),
            name,
            kind,
            start,
            parent,
            registry,
            clock,
            _current_thread(),
            None if span is None else span(start),
        ),
    )
    _CURRENT.set(opened)
    return opened


def end(opened: OpenPhase, error: BaseException | None = None) -> PhaseRecord | None:
    """Close ``opened`` now (the phase around it becomes the current one again), store its
    record in its registry and return it; None if that failed: a warning is given once, and
    the timed code is never disturbed."""
    end_ns = opened.clock()
    parent = opened.parent
    _CURRENT.set(parent)
    try:
        thread = opened.thread
        start = opened.start_unix_ns
        record: PhaseRecord = _new(
            PhaseRecord,
            (
                opened.name,
                start,
                end_ns if end_ns > start else start,
                opened.kind,
                thread.name,
                thread.ident or 0,
                _rank if _rank is not None else rank(),
                opened.phase_id,
                None if parent is None else parent.phase_id,
                "ok" if error is None else "error",
                None if error is None else qualified_type_name(error),
            ),
        )
        opened.registry.add_phase(record)
    except Exception as exc:  # recording is a nicety: never break the user's code
        warn_once(f"a phase could not be recorded and was skipped: {exc!r}")
        return None
    listener = _end_listener
    if listener is not None:
        try:
            listener(record)
        except Exception as exc:
            warn_once(f"a listener of phases failed and was skipped: {exc!r}")
    return record


@contextlib.contextmanager
def recording(name: str, kind: str = SPAN, registry: Registry | None = None) -> Iterator[OpenPhase]:
    """A block recorded as a phase of ``kind`` (``instrument`` records its functions so).

    >>> reg = Registry()
    >>> with recording("Load model", registry=reg):
    ...     pass
    >>> [(p.name, p.kind) for p in reg.phase_records()]
    [('Load model', 'span')]
    """
    opened = begin(name, kind, registry)
    try:
        yield opened
    except BaseException as exc:
        end(opened, exc)
        raise
    end(opened)
