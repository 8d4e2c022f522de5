"""Dynamo's tracing cost per user function (``GraphRecord.trace_cost``) as flame data:
the top functions per component, collapsed stacks and speedscope JSON.

Each component's tree is the merge of its frames' trees: one root per compiled function,
nodes merged by (name, file, line) under the same caller.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from compiletrace._data.records import (
    NS_PER_S,
    GraphRecord,
    TraceNode,
    component_totals,
    top_self_times,
    walk_trace,
)
from compiletrace._io.files import write_json, write_text
from compiletrace._io.text import printable

__all__ = [
    "SPEEDSCOPE_SCHEMA",
    "collapsed_stacks",
    "component_trees",
    "speedscope_dict",
    "top_functions_lines",
    "write_collapsed",
    "write_speedscope",
]

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"
TOP_FUNCTIONS = 5  # rows per component in the text report


def _merge(nodes: Iterable[TraceNode]) -> tuple[TraceNode, ...]:
    merged: dict[tuple[str, str, int], list[Any]] = {}
    for n in nodes:
        entry = merged.setdefault((n.name, n.filename, n.lineno), [0, 0, []])
        entry[0] += n.total_ns
        entry[1] += n.calls
        entry[2].extend(n.children)
    out = [
        TraceNode(name, f, line, total, calls, _merge(kids))
        for (name, f, line), (total, calls, kids) in merged.items()
    ]
    return tuple(sorted(out, key=lambda n: -n.total_ns))


def component_trees(records: Sequence[GraphRecord]) -> dict[str, tuple[TraceNode, ...]]:
    """Each component's merged tracing-cost tree (components without one left out).

    >>> component_trees([])
    {}
    """
    by: dict[str, list[TraceNode]] = {}
    for name in component_totals(records):
        roots = [n for r in records if r.component == name for n in r.trace_cost]
        if roots:
            by[name] = roots
    return {name: _merge(roots) for name, roots in by.items()}


def top_functions_lines(records: Sequence[GraphRecord], limit: int = TOP_FUNCTIONS) -> list[str]:
    """The text report's section: per component, the functions Dynamo spent most time
    tracing (self time, their callees' left out), with file:line. Empty without trace cost.
    Names and locations come from the model's code (or a run file): shown escaped.

    >>> top_functions_lines([])
    []
    """
    trees = component_trees(records)
    if not trees:
        return []
    lines = ["Dynamo tracing per function (self seconds, trace_cost)"]
    for component, roots in trees.items():
        traced = sum(n.total_ns for n in roots)
        lines.append(f"  {printable(component)}: {traced / NS_PER_S:.3f} s of Dynamo time")
        for name, location, ns, calls in top_self_times(roots, limit):
            pct = 100 * ns / traced if traced else 0.0
            where = printable(location)
            lines.append(f"    {ns / NS_PER_S:8.3f} s {pct:4.0f}%  {printable(name)} ({where}) x{calls}")
    return lines


def _label(node: TraceNode) -> str:
    return f"{node.name} ({node.location})" if node.location else node.name


def collapsed_stacks(records: Sequence[GraphRecord]) -> str:
    """Collapsed stacks (Brendan Gregg's format, read by flamegraph.pl, speedscope and
    others): ``component;func;func N`` per node with self time, N in microseconds. A frame's
    name is escaped (a newline in it would start a stack of its own) and its ``;`` made ``,``.

    >>> collapsed_stacks([])
    ''
    """
    lines = []
    for component, roots in component_trees(records).items():
        for path in walk_trace(roots):
            us = path[-1].self_ns // 1000
            if us > 0:
                stack = ";".join(printable(f).replace(";", ",") for f in [component, *map(_label, path)])
                lines.append(f"{stack} {us}")
    return "\n".join(lines) + ("\n" if lines else "")


def speedscope_dict(records: Sequence[GraphRecord], name: str = "compiletrace trace cost") -> dict[str, Any]:
    """A speedscope file (https://www.speedscope.app/file-format-schema.json): one evented
    profile per component, in nanoseconds, each node an open/close pair laid out by total
    time (the order of calls is not kept: siblings are merged).

    >>> speedscope_dict([])["profiles"]
    []
    """
    frames: list[dict[str, Any]] = []
    index: dict[tuple[str, str, int], int] = {}
    profiles = []
    for component, roots in component_trees(records).items():
        events: list[dict[str, Any]] = []

        at = 0
        for root in roots:
            _emit(root, at, events, frames, index)
            at += root.total_ns
        profiles.append(
            {
                "type": "evented",
                "name": component,
                "unit": "nanoseconds",
                "startValue": 0,
                "endValue": at,
                "events": events,
            }
        )
    return {
        "$schema": SPEEDSCOPE_SCHEMA,
        "name": name,
        "exporter": "compiletrace",
        "activeProfileIndex": 0,
        "shared": {"frames": frames},
        "profiles": profiles,
    }


def _emit(
    node: TraceNode,
    at: int,
    events: list[dict[str, Any]],
    frames: list[dict[str, Any]],
    index: dict[tuple[str, str, int], int],
) -> None:
    key = (node.name, node.filename, node.lineno)
    if key not in index:
        index[key] = len(frames)
        frame: dict[str, Any] = {"name": node.name}
        if node.filename:
            frame.update(file=node.filename, line=node.lineno)
        frames.append(frame)
    events.append({"type": "O", "frame": index[key], "at": at})
    child_at = at  # children laid out one after another from their parent's start
    for child in node.children:
        _emit(child, child_at, events, frames, index)
        child_at += child.total_ns
    events.append({"type": "C", "frame": index[key], "at": at + node.total_ns})


def write_speedscope(records: Sequence[GraphRecord], path: str | os.PathLike[str]) -> None:
    """Write :func:`speedscope_dict` to ``path`` (open it at https://www.speedscope.app)."""
    write_json(path, speedscope_dict(records))


def write_collapsed(records: Sequence[GraphRecord], path: str | os.PathLike[str]) -> None:
    """Write :func:`collapsed_stacks` to ``path``."""
    write_text(path, collapsed_stacks(records))
