"""Passive recording: every frame compile in the process, whatever its backend, recorded
as a compiletrace backend records its own (Dynamo time, backend phases, cache outcome,
recompile reason, code location, graph breaks), with no edit to the code that compiles.

``compiletrace.observe()`` turns it on in a process (a notebook, a test, a library that
compiles internally); ``compiletrace run`` turns it on in every Python process of a
command. Compiles through ``compiletrace.compile`` (or any compiletrace backend) keep
their own component and registry and are never counted twice: the tracker gives a frame
to passive recording only when no compiletrace backend compiles it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

from compiletrace._core import torch_compat as tc
from compiletrace._core.components import (
    ComponentRule,
    name_component,
    parse_component_rules,
    target_of,
)
from compiletrace._core.tracker import get_tracker
from compiletrace._data.registry import Registry, checked_registry, get_registry
from compiletrace._io.errors import ArgumentTypeError
from compiletrace._io.state import STATE, Slot, warn_once

__all__ = ["PassiveOwner", "PassiveRecording", "PassiveRecordings", "observe"]


@dataclass(frozen=True)
class PassiveOwner:
    """The tracker's :class:`~compiletrace._core.tracker.Attribution` for a frame that no
    compiletrace backend compiles."""

    component: str
    registry: Registry
    backend_name: str
    trace_cost: bool = False
    # The other passive recordings on at the same time: each gets a copy of the record,
    # under its own component name (registry, component).
    copies: tuple[tuple[Registry, str], ...] = ()


def backend_label(compiler_fn: Any) -> str:
    """A backend's display name behind torch's wrappers: "inductor", "eager", a callable's
    name, or its class."""
    backend = tc.innermost_backend(compiler_fn)
    for attr in ("compiler_name", "__name__"):
        label = getattr(backend, attr, None)
        if isinstance(label, str) and label:
            return label
    return type(backend).__name__


class PassiveRecording:
    """Names each passively recorded frame and says where it is recorded."""

    def __init__(self, registry: Registry, rules: tuple[ComponentRule, ...], trace_cost: bool) -> None:
        self.registry = registry
        self.rules = rules
        self.trace_cost = trace_cost and tc.install_trace_cost_hook()
        # Also a copy of every compiletrace backend's record, whatever registry it keeps
        # them in, under its own component: a job's recording (compiletrace run) sees the
        # compiles of a program that uses compiletrace.compile with a registry of its own.
        self.own_backends = False
        self._owners: dict[tuple[str, str], PassiveOwner] = {}
        self._lock = threading.Lock()

    def owner_for(self, frame: tc.CompilingFrame | None, compiler_fn: Any) -> PassiveOwner:
        if frame is None:  # a backend call outside any frame compile torch announced
            component = name_component(target_of(None, ()), self.rules)
        else:
            component = name_component(
                target_of(
                    frame.target,
                    frame.callers,
                    filename=frame.filename,
                    qualname=frame.qualname or frame.code_name,
                    compile_name=tc.compile_name(compiler_fn),
                    code=frame.code,
                ),
                self.rules,
            )
        label = backend_label(compiler_fn)
        with self._lock:
            owner = self._owners.get((component, label))
            if owner is None:
                owner = PassiveOwner(component, self.registry, label, self.trace_cost)
                self._owners[(component, label)] = owner
            return owner


class PassiveRecordings:
    """Every passive recording that is on, newest first: the newest names and times the
    frame (its owner), and each of the others gets a copy of the record in its registry, so
    that a user's own ``observe()`` inside a ``compiletrace run`` job takes nothing from the
    job's recording, nor the job from it."""

    def __init__(self, recordings: Sequence[PassiveRecording]) -> None:
        self.recordings = tuple(recordings)

    def owner_for(self, frame: tc.CompilingFrame | None, compiler_fn: Any) -> PassiveOwner:
        first, *others = self.recordings
        owner = first.owner_for(frame, compiler_fn)
        copies: dict[int, tuple[Registry, str]] = {}  # one copy per registry, the newest's name
        for other in others:
            if other.registry is not owner.registry and id(other.registry) not in copies:
                copies[id(other.registry)] = (other.registry, other.owner_for(frame, compiler_fn).component)
        # The tracing-cost tree, if any recording that is on asked for it (each copy has it).
        trace_cost = owner.trace_cost or any(other.trace_cost for other in others)
        if not copies and trace_cost == owner.trace_cost:
            return owner
        return replace(owner, copies=tuple(copies.values()), trace_cost=trace_cost)

    def copies_of_own(self, registry: Registry, component: str) -> tuple[tuple[Registry, str], ...]:
        """Where a compiletrace backend's record (kept in ``registry``) is copied: the
        recordings that take them, each registry once."""
        copies: dict[int, tuple[Registry, str]] = {}
        for recording in self.recordings:
            if recording.own_backends and recording.registry is not registry:
                copies.setdefault(id(recording.registry), (recording.registry, component))
        return tuple(copies.values())


class observe:
    """Record every ``torch.compile`` in this process from now on, whatever its backend
    (``"inductor"``, ``"aot_eager"``, a library's own, a decorator, ``Module.compile()``),
    under components named as a person would (see ``compiletrace._core.components``):
    ``components`` are ``"PATTERN=NAME"`` rules tried first.

    A plain call turns it on until :meth:`stop`; as a context manager, until the block
    ends. Compiles through ``compiletrace.compile`` keep their own component.

    >>> import torch, compiletrace
    >>> reg = compiletrace.Registry()
    >>> with compiletrace.observe(registry=reg):
    ...     fn = torch.compile(lambda x: x + 1, backend="eager")
    ...     _ = fn(torch.ones(2))
    >>> [r.backend for r in reg.records()]
    ['eager']
    """

    def __init__(
        self,
        *,
        components: Iterable[str | ComponentRule] = (),
        registry: Registry | None = None,
        trace_cost: bool = False,
    ) -> None:
        if isinstance(components, str):
            components = (components,)
        rules = parse_component_rules(components)
        checked_registry(registry)
        if not isinstance(trace_cost, bool):
            raise ArgumentTypeError(f"trace_cost must be True or False, got {type(trace_cost).__name__}")
        tracker = get_tracker()
        if not tc.install_backend_call_hook(tracker.on_backend_call):
            warn_once(
                "this torch's backend call is not where it was: compiles no compiletrace backend "
                "makes are recorded with Dynamo time only (no backend time, phases or cache outcome)"
            )
        self.recording = PassiveRecording(
            registry if registry is not None else get_registry(), rules, trace_cost
        )
        self._stopped = False
        with STATE.lock:
            self._previous: observe | None = ACTIVE.value
            ACTIVE.value = self
            tracker.passive = _recordings_on(self)

    @property
    def registry(self) -> Registry:
        """Where the observed compiles are recorded."""
        return self.recording.registry

    def stop(self) -> None:
        """Stop recording compiles (what was recorded stays in the registry)."""
        if self._stopped:
            return
        self._stopped = True
        tracker = get_tracker()
        with STATE.lock:
            active = ACTIVE.value
            if active is self:
                active = self._previous
                while active is not None and active._stopped:  # stopped out of order
                    active = active._previous
                ACTIVE.value = active
            tracker.passive = _recordings_on(active)

    def __enter__(self) -> observe:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# The compiletrace.observe() recording now (the newest of those on), if any.
ACTIVE: Slot[observe | None] = STATE.slot("observe() recording", None)


def _recordings_on(newest: observe | None) -> PassiveRecordings | None:
    """The recordings of ``newest`` and the observers before it that are still on."""
    found = []
    while newest is not None:
        if not newest._stopped:
            found.append(newest.recording)
        newest = newest._previous
    return PassiveRecordings(found) if found else None
