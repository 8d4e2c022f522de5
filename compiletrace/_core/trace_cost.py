"""Builds one frame's tracing-cost tree (``GraphRecord.trace_cost``) from timed calls.

torch_compat times Dynamo's tracing of the frame's own function and of every user function
Dynamo inlines, and tells the collector open on the compiling thread (``enter``/``leave``).
The tracker subtracts the backend's time (``exclude``): it runs inside the frame's tracing,
but ``dynamo_ns`` leaves it out. Python's garbage collections are taken out of the functions
they interrupted too (``watch_gc``): a collection pauses whichever function happens to
allocate, and on a process holding a few models one pause is tenths of a second, which made
a healthy model's embedding look costly. They are a root of their own. Plain data, free of
torch.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import Any

from compiletrace._data.records import TRACE_GC, TRACE_OTHER, TraceNode

__all__ = ["TraceCollector"]


class _Node:
    __slots__ = ("calls", "children", "filename", "lineno", "name", "total_ns")

    def __init__(self, name: str, filename: str, lineno: int) -> None:
        self.name, self.filename, self.lineno = name, filename, lineno
        self.total_ns = 0
        self.calls = 0
        self.children: dict[tuple[str, str, int], _Node] = {}

    def frozen(self) -> TraceNode:
        kids = sorted((c.frozen() for c in self.children.values()), key=lambda n: -n.total_ns)
        return TraceNode(self.name, self.filename, self.lineno, self.total_ns, self.calls, tuple(kids))


class TraceCollector:
    """The calls Dynamo traced during one frame compile, merged per caller.

    >>> ticks = iter([0, 10, 70, 100])
    >>> c = TraceCollector(clock=lambda: next(ticks))
    >>> c.enter("forward", "m.py", 1); c.enter("helper", "m.py", 9); c.leave(); c.leave()
    >>> [(n.name, n.total_ns) for n in c.tree(dynamo_ns=110)]
    [('forward', 100), ('(other: guards, bytecode, bookkeeping)', 10)]
    """

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self._clock = clock
        self._top = _Node("", "", 0)  # holds the roots
        # Open calls: (node, start, excluded time at start).
        self._stack: list[tuple[_Node, int, int]] = []
        self._excluded_ns = 0
        self._gc_ns = 0  # collections on the tracing thread while a call was open
        self._gc_started: int | None = None
        self._thread = threading.get_ident()
        self._watching = False
        self._in_backend = False

    def watch_gc(self) -> None:
        """Take Python's garbage collections on this thread out of the traced functions'
        time (until :meth:`unwatch_gc`), into a root of their own."""
        if not self._watching:
            self._watching = True
            gc.callbacks.append(self._on_gc)

    def unwatch_gc(self) -> None:
        if self._watching:
            self._watching = False
            if self._on_gc in gc.callbacks:
                gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if threading.get_ident() != self._thread or not self._stack or self._in_backend:
            return  # another thread's, none of this frame's calls open, or the backend's
        if phase == "start":
            self._gc_started = self._clock()
        elif self._gc_started is not None:
            paused = self._clock() - self._gc_started
            self._gc_started = None
            self._gc_ns += paused
            self._excluded_ns += paused

    def enter(self, name: str, filename: str, lineno: int) -> None:
        parent = self._stack[-1][0] if self._stack else self._top
        key = (name, filename, lineno)
        node = parent.children.get(key)
        if node is None:
            node = parent.children[key] = _Node(name, filename, lineno)
        node.calls += 1
        self._stack.append((node, self._clock(), self._excluded_ns))

    def leave(self) -> None:
        if not self._stack:
            return
        node, start, excluded = self._stack.pop()
        node.total_ns += max(self._clock() - start - (self._excluded_ns - excluded), 0)

    def backend_started(self) -> None:
        """A backend call begins: its collections are inside the time :meth:`exclude` takes
        out when it ends, so they are not counted as collections while Dynamo traced."""
        self._in_backend = True
        self._gc_started = None

    def exclude(self, ns: int) -> None:
        """Time spent inside the open calls that is not Dynamo's (a backend call)."""
        self._in_backend = False
        self._excluded_ns += ns

    def tree(self, dynamo_ns: int | None) -> tuple[TraceNode, ...]:
        """The roots (the frame's function, restarts merged), and an OTHER node for the rest of
        ``dynamo_ns`` (guards, bytecode transformation, bookkeeping)."""
        roots = [c.frozen() for c in self._top.children.values()]
        if self._gc_ns:
            roots.append(TraceNode(TRACE_GC, "", 0, self._gc_ns, 1))
        traced = sum(r.total_ns for r in roots)
        if dynamo_ns is not None and dynamo_ns > traced:
            roots.append(TraceNode(TRACE_OTHER, "", 0, dynamo_ns - traced, 1))
        return tuple(roots)
