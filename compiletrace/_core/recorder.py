"""The phase recorder: times phases on one clock, knows which phase each one is nested in,
and stores every finished phase in a registry.

Nesting follows a context variable, so it is per thread and per asyncio task: a phase
opened inside another on the same thread (or in the same task) is its child; one opened on
another thread starts at the top level. A phase goes to the registry it is given, else to
the registry of the phase around it, else to the process registry. Torch-free, and never
raises into the code it times: the front door's ``phase``, ``warm_up`` and ``instrument``
all record through it.

>>> from compiletrace._core.registry import Registry
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
from collections.abc import Iterator
from typing import Any

from compiletrace._core.records import qualified_type_name
from compiletrace._core.registry import Registry, get_registry
from compiletrace._core.timeline import PHASE, SPAN, PhaseRecord, UnixClock, next_phase_id, unix_now_ns
from compiletrace._io.state import warn_once

__all__ = ["OpenPhase", "begin", "current_phase", "end", "rank", "recording"]


class OpenPhase:
    """A phase that has begun and not yet ended (what :func:`begin` returns)."""

    __slots__ = (
        "clock",
        "kind",
        "name",
        "owner",
        "parent_id",
        "phase_id",
        "registry",
        "span",
        "start_unix_ns",
        "thread",
        "thread_id",
        "token",
    )

    def __init__(
        self,
        name: str,
        kind: str,
        registry: Registry,
        clock: UnixClock,
        parent_id: int | None,
        owner: object,
    ) -> None:
        self.name = name
        self.kind = kind
        self.registry = registry
        self.clock = clock
        self.parent_id = parent_id
        self.owner = owner  # the object that opened it (a Phase), to close the right one
        self.phase_id = next_phase_id()
        thread = threading.current_thread()
        self.thread = thread.name
        self.thread_id = thread.ident or 0
        self.span: Any = None  # telemetry's handle on the phase's span, when one was started
        self.token: contextvars.Token[OpenPhase | None] | None = None
        self.start_unix_ns = clock()


_CURRENT: contextvars.ContextVar[OpenPhase | None] = contextvars.ContextVar(
    "compiletrace_current_phase", default=None
)


def current_phase() -> OpenPhase | None:
    """The innermost phase open in this thread or task, if any."""
    return _CURRENT.get()


def rank() -> int:
    """This process's rank: the launcher's RANK (torchrun sets it), 0 without one; read as
    text, not from torch.distributed (the recorder is torch-free)."""
    try:
        return max(0, int(os.environ.get("RANK", "0")))
    except ValueError:
        return 0


def begin(
    name: str,
    kind: str = PHASE,
    registry: Registry | None = None,
    clock: UnixClock | None = None,
    owner: object = None,
) -> OpenPhase:
    """Open a phase now and make it the current one (the parent of phases opened inside it)."""
    parent = _CURRENT.get()
    if registry is None:
        registry = parent.registry if parent is not None else get_registry()
    opened = OpenPhase(
        name,
        kind,
        registry,
        clock if clock is not None else unix_now_ns,
        None if parent is None else parent.phase_id,
        owner,
    )
    opened.token = _CURRENT.set(opened)
    return opened


def end(opened: OpenPhase, error: BaseException | None = None) -> PhaseRecord | None:
    """Close ``opened`` now, store its record in its registry and return it (None if that
    failed: a warning is given once, and the timed code is never disturbed)."""
    end_ns = opened.clock()
    if opened.token is not None:
        try:
            _CURRENT.reset(opened.token)
        except (ValueError, RuntimeError):
            # Closed in another context than it opened in (out of order, or from another
            # task): drop it from this context only if it is the current one.
            if _CURRENT.get() is opened:
                _CURRENT.set(None)
        opened.token = None
    try:
        record = PhaseRecord(
            opened.name,
            opened.start_unix_ns,
            max(end_ns, opened.start_unix_ns),
            opened.kind,
            opened.thread,
            opened.thread_id,
            rank(),
            opened.phase_id,
            opened.parent_id,
            "ok" if error is None else "error",
            None if error is None else qualified_type_name(error),
        )
        opened.registry.add_phase(record)
    except Exception as exc:  # recording is a nicety: never break the user's code
        warn_once(f"a phase could not be recorded and was skipped: {exc!r}")
        return None
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
