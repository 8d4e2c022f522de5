"""The start-up trace: one root span per start-up, "Start-up", from the process's own
start, with the start-up's phases under it.

The root opens at the first ``compiletrace.phase`` that runs outside any span while
telemetry records (``compiletrace profile`` opens it as it begins), with the process's
start as its start time; the process's first entries (interpreter start, imports) are
added under it then, with their measured times. From then on every phase outside another
span, ``warm_up``'s included, is its child; a phase inside a span (a user's, or another
phase's) nests there as any span does.

It ends at :func:`end_startup` (call it when the start-up is over: a server is ready),
when the :class:`~compiletrace.telemetry.Telemetry` handle it was recorded with shuts
down, or at exit; those last two end it where the last phase under it ended. A program
that declares no phase keeps the tree it had: its warm-up span is a root.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from compiletrace._core.startup import unix_now_ns
from compiletrace._data.records import NS_PER_S
from compiletrace._data.timeline import PhaseRecord
from compiletrace._io.state import STATE, Slot, warn_once
from compiletrace.telemetry import _providers
from compiletrace.telemetry._instrument import record_error
from compiletrace.telemetry._propagation import context_from_environ

__all__ = [
    "STARTUP_SPAN",
    "PhaseSpan",
    "end_phase_span",
    "end_startup",
    "end_startup_of",
    "open_startup_span",
    "start_phase_span",
    "tracing_possible",
]

STARTUP_SPAN = "Start-up"
tracing_possible = _providers.tracing_possible  # what a phase asks before starting its span

# What a root needs when it opens: (the process's start, Unix ns; its first entries).
Origin = Callable[[], tuple[int, Sequence[PhaseRecord]]]


class _Root:
    __slots__ = ("context", "last_end_ns", "provider", "span")

    def __init__(self, span: Span, context: Context, provider: trace.TracerProvider, last_end_ns: int):
        self.span = span
        self.context = context  # the parent of the top-level phases
        self.provider = provider  # a root belongs to the providers it was started with
        self.last_end_ns = last_end_ns  # where the last phase under it ended


def _open_root_left(root: _Root | None) -> list[str]:
    return [] if root is None else ["the start-up root span is open"]


# The open "Start-up" root span, and whether its exit hook (which ends it before the
# providers flush) is registered.
_STARTUP_ROOT: Slot[_Root | None] = STATE.slot("start-up root span", None, unsettled=_open_root_left)
_EXIT_HOOK: Slot[bool] = STATE.slot("start-up root exit hook", False)


class PhaseSpan(NamedTuple):
    """A phase's span while the phase runs."""

    span: Span
    token: object  # the context token, detached when the phase ends
    root: _Root | None  # the start-up root it is a child of, if any
    name: str = ""  # the phase's name: the phase metric's attribute
    start_unix_ns: int = 0


def _failed(exc: Exception) -> None:
    warn_once(f"telemetry failed and was skipped: {exc!r}")


def _open_root(tracer: trace.Tracer, provider: trace.TracerProvider, origin: Origin) -> _Root:
    start_ns, first = origin()
    parent = context_from_environ()  # a launcher's span, passed in TRACEPARENT, parents it
    span = tracer.start_span(
        STARTUP_SPAN, context=parent, start_time=start_ns, attributes={"process.pid": os.getpid()}
    )
    context = trace.set_span_in_context(span, parent)
    last = start_ns
    for rec in first:  # measured before telemetry could record them: added with their times
        tracer.start_span(
            rec.name,
            context=context,
            start_time=rec.start_unix_ns,
            attributes={"compiletrace.phase.kind": rec.kind},
        ).end(end_time=rec.end_unix_ns)
        _providers.instruments().phase_duration.record(
            max(0, rec.end_unix_ns - rec.start_unix_ns) / NS_PER_S, {"compiletrace.phase": rec.name}
        )
        last = max(last, rec.end_unix_ns)
    return _Root(span, context, provider, last)


def _root_for(tracer: trace.Tracer, opens: bool, origin: Origin) -> _Root | None:
    """The open root of the current providers; with ``opens``, opened if there is none.
    The root is process state: it lives in a slot of ``STATE``, under its lock."""
    provider = _providers.current_providers()[0]
    with STATE.lock:
        root = _STARTUP_ROOT.value
        if root is not None and root.provider is provider:
            return root
        if not opens:
            return None
        if root is not None:  # the providers changed: the old root ends with its last phase
            root.span.end(end_time=root.last_end_ns)
        _STARTUP_ROOT.value = root = _open_root(tracer, provider, origin)
        if not _EXIT_HOOK.value:
            # Registered after the SDK's own exit hook, so it runs first: the root is ended
            # before the providers flush at exit.
            atexit.register(_end_root)
            _EXIT_HOOK.value = True
        return root


def start_phase_span(
    name: str,
    attributes: Mapping[str, AttributeValue] | None,
    start_unix_ns: int,
    opens_root: bool,
    origin: Origin,
) -> PhaseSpan | None:
    """Start a phase's span at ``start_unix_ns`` and make it current. The caller has asked
    :func:`tracing_possible` first: without an SDK provider a phase makes no span at all."""
    try:
        tracer = _providers.tracer()
        current = otel_context.get_current()
        root = None
        if trace.get_current_span(current).get_span_context().is_valid:
            parent = current
        else:
            root = _root_for(tracer, opens_root, origin)
            parent = root.context if root is not None else context_from_environ()
        span = tracer.start_span(name, context=parent, start_time=start_unix_ns, attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span))
        return PhaseSpan(span, token, root, name, start_unix_ns)
    except Exception as exc:
        _failed(exc)
        return None


def end_phase_span(handle: PhaseSpan, end_unix_ns: int, error: BaseException | None = None) -> None:
    """End a phase's span at ``end_unix_ns`` (marked failed by ``error``, if any)."""
    try:
        if error is not None:
            record_error(handle.span, error)
        otel_context.detach(handle.token)  # type: ignore[arg-type]
        handle.span.end(end_time=end_unix_ns)
        # One histogram for every phase, by name: a dashboard sums it per phase and job.
        _providers.instruments().phase_duration.record(
            max(0, end_unix_ns - handle.start_unix_ns) / NS_PER_S,
            {"compiletrace.phase": handle.name, "error.type": type(error).__qualname__}
            if error is not None
            else {"compiletrace.phase": handle.name},
        )
        if handle.root is not None and end_unix_ns > handle.root.last_end_ns:
            handle.root.last_end_ns = end_unix_ns
    except Exception as exc:
        _failed(exc)


def open_startup_span(origin: Origin) -> bool:
    """Open the start-up root now, if telemetry records and none is open; True if one is."""
    try:
        if not _providers.tracing_possible():
            return False
        return _root_for(_providers.tracer(), True, origin) is not None
    except Exception as exc:
        _failed(exc)
        return False


def _end_root(end_unix_ns: int | None = None, provider: trace.TracerProvider | None = None) -> bool:
    with STATE.lock:
        root = _STARTUP_ROOT.value
        if root is None or (provider is not None and root.provider is not provider):
            return False
        _STARTUP_ROOT.value = None
    try:
        end = root.last_end_ns if end_unix_ns is None else max(end_unix_ns, root.last_end_ns)
        root.span.end(end_time=end)
    except Exception as exc:
        _failed(exc)
    return True


def end_startup(end_unix_ns: int | None = None) -> bool:
    """End the start-up's root span ("Start-up") now, or at ``end_unix_ns`` (Unix ns): call
    it when the start-up is over (a server ready to serve), so the trace is exported then
    rather than at exit. Returns True if a root span was open. Phases after it are roots of
    their own until the next ``compiletrace.phase`` outside any span opens a new one.

    >>> from compiletrace import telemetry
    >>> telemetry.end_startup()  # no start-up trace open here
    False
    """
    return _end_root(unix_now_ns() if end_unix_ns is None else end_unix_ns)


def end_startup_of(provider: trace.TracerProvider) -> bool:
    """End the open root if it was recorded with ``provider`` (its handle is shutting down),
    where its last phase ended."""
    return _end_root(None, provider)
