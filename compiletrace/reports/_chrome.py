"""Chrome/Perfetto trace export: graph records -> Trace Event Format JSON.

One process per rank, one track (thread) per component, so the encoder and the language
model lie side by side; each graph is a complete ("X") event with its Dynamo-tracing and
backend-compile phases nested inside, the backend's own phases (AOTAutograd, Inductor,
kernel compile, cache, other) laid end to end inside that, and a lazy backward compile is
an event of its own. With a start-up timeline, its phases come first, as tracks of their
own ("start-up", one per thread), and the times count from the process's start.
Open the file at https://ui.perfetto.dev or chrome://tracing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from compiletrace._data.phases import lay_out
from compiletrace._data.records import NS_PER_S, TRACE_OTHER, CompilationTimes, GraphRecord, TraceNode
from compiletrace._data.registry import Registry, checked_registry, get_registry
from compiletrace._data.run import Run, RunOrRecords, WarmupResult, run_parts
from compiletrace._data.timeline import UNATTRIBUTED, Timeline, build_timeline
from compiletrace._io.errors import ArgumentTypeError
from compiletrace._io.files import write_json

__all__ = ["chrome_trace_dict", "export_chrome_trace"]

_NS_PER_US = 1000.0


def _us(ns: int) -> float:
    # Microseconds with ns precision; ts + dur then lands on the event's rounded end.
    return round(ns / _NS_PER_US, 3)


def _args(record: GraphRecord) -> dict[str, Any]:
    args: dict[str, Any] = {
        "component": record.component,
        "compile_id": record.compile_id,
        "backend": record.backend,
        "code_name": record.code_name,
        "graph_node_count": record.graph_node_count,
        "cache_outcome": record.cache_outcome.value,
        "status": record.status.value,
    }
    if record.recompile_reason is not None:
        args["recompile_reason"] = record.recompile_reason
    if record.error_type is not None:
        args["error_type"] = record.error_type
    return args


def _timeline_blocks(timeline: Timeline) -> list[tuple[int, int, int, str, list[_Event]]]:
    """The timeline's entries as blocks on "start-up" tracks, one per thread (the time no
    phase covers on the first one): a top-level entry and the entries nested in it."""
    rank = timeline.phases[0].rank if timeline.phases else 0
    main = next((e.thread for e in timeline.entries if e.thread), "MainThread")
    blocks: list[tuple[int, int, int, str, list[_Event]]] = []
    for e in timeline.entries:
        args: dict[str, Any] = {"kind": e.kind, "seconds": e.duration_ns / NS_PER_S}
        if e.depth == 0:
            args["counted_s"] = e.counted_ns / NS_PER_S
        if e.compile:
            args["compile_s"] = {name: ns / NS_PER_S for name, ns in e.compile}
        if e.status != "ok":
            args["status"] = e.status
        thread = main if e.kind == UNATTRIBUTED or not e.thread else e.thread
        track = _STARTUP if thread == main else f"{_STARTUP} ({thread})"
        event = (e.name, f"startup.{e.kind}", e.start_unix_ns, e.end_unix_ns, args)
        if e.depth == 0 or not blocks or blocks[-1][3] != track:
            blocks.append((e.start_unix_ns, e.end_unix_ns, rank, track, [event]))
        else:
            blocks[-1][4].append(event)  # nested: inside the block of the entry around it
    return blocks


_STARTUP = "start-up"  # the phases' track
_Event = tuple[str, str, int, int, dict[str, Any]]


# Functions traced in less than this are left out of the trace (the JSON keeps them).
MIN_TRACE_EVENT_NS = 10_000


def _trace_cost_events(r: GraphRecord, start: int, end: int) -> list[_Event]:
    """The frame's tracing-cost tree as nested events inside its "Dynamo tracing" block:
    calls laid end to end in the order of their cost (Dynamo's time is spread over the whole
    frame, guards after the backend included, so the layout is scaled to fit the block;
    ``args`` carry the exact seconds)."""
    roots = [n for n in r.trace_cost if n.name != TRACE_OTHER]
    traced = sum(n.total_ns for n in roots)
    if not traced or end <= start:
        return []
    scale = min(1.0, (end - start) / traced)
    out: list[_Event] = []

    def emit(node: TraceNode, at: int) -> None:
        width = int(node.total_ns * scale)
        args = {
            "compile_id": r.compile_id,
            "location": node.location,
            "total_s": node.total_ns / NS_PER_S,
            "self_s": node.self_ns / NS_PER_S,
            "calls": node.calls,
        }
        out.append((node.name, "dynamo_function", at, at + width, args))
        child_at = at
        for child in node.children:
            if child.total_ns >= MIN_TRACE_EVENT_NS:
                emit(child, child_at)
            child_at += int(child.total_ns * scale)

    at = start
    for root in roots:
        emit(root, at)
        at += int(root.total_ns * scale)
    return out


def chrome_trace_dict(run: RunOrRecords) -> dict[str, Any]:
    """Trace Event Format for a run (or records alone): a dict ready for ``json.dump``.

    Timestamps are microseconds since the first compile started; for a run with a start-up
    timeline, since the timeline's start (the program's), its entries first, on "start-up"
    tracks.

    >>> from compiletrace import GraphRecord
    >>> rec = GraphRecord("0/0", "encoder", "eager", "forward", 3, 0, 10_000, 4_000, 6_000, 2_000)
    >>> [e["name"] for e in chrome_trace_dict([rec])["traceEvents"] if e["ph"] == "X"]
    ['forward [0/0]', 'Dynamo tracing', 'Backend compile']
    """
    records, _, _, timeline = run_parts(run)
    recs = sorted(records, key=lambda r: (r.start_unix_ns, r.compile_id))
    # Top-level blocks: (start_ns, end_ns, rank, component, [events]) with phases inside.
    blocks: list[tuple[int, int, int, str, list[_Event]]] = []
    for r in recs:
        args = _args(r)
        frame: list[_Event] = [
            (f"{r.code_name} [{r.compile_id}]", "compile", r.start_unix_ns, r.end_unix_ns, args)
        ]
        small = {"compile_id": r.compile_id}
        backend_start = r.backend_start_unix_ns
        if r.dynamo_ns is not None:
            dyn_end = r.end_unix_ns if backend_start is None else backend_start
            frame.append(("Dynamo tracing", "dynamo", r.start_unix_ns, dyn_end, small))
            frame.extend(_trace_cost_events(r, r.start_unix_ns, dyn_end))
        if backend_start is not None:
            be_start = max(backend_start, r.start_unix_ns)
            be_end = min(backend_start + r.backend_ns, r.end_unix_ns)
            frame.append(("Backend compile", "backend", be_start, be_end, small))
            for phase, ph_start, ph_end in lay_out(be_start, r.phase_ns):
                # Phase totals, laid end to end inside the backend block.
                frame.append((phase, "backend_phase", ph_start, min(ph_end, be_end), small))
        blocks.append((r.start_unix_ns, r.end_unix_ns, r.rank, r.component, frame))
        if r.backward_ns and r.backward_start_unix_ns is not None:
            bw_start = r.backward_start_unix_ns
            bw_end = bw_start + r.backward_ns
            bw = [(f"Compile backward [{r.compile_id}]", "backward", bw_start, bw_end, small)]
            blocks.append((bw_start, bw_end, r.rank, r.component, bw))
    blocks.sort(key=lambda b: (b[0], -b[1]))
    origin = blocks[0][0] if blocks else 0
    if timeline is not None:
        # The start-up's tracks first (their tids come first), times from its start.
        blocks = _timeline_blocks(timeline) + blocks
        origin = timeline.start_unix_ns

    events: list[dict[str, Any]] = []
    tracks: dict[tuple[int, str], list[int]] = {}  # (rank, component) -> end time of each lane
    tids: dict[tuple[int, str, int], int] = {}  # (rank, component, lane) -> tid
    for start, end, rank, component, block in blocks:
        lanes = tracks.setdefault((rank, component), [])
        # Blocks on one track must not overlap (concurrent compiles of one component on
        # several threads): an overlapping block goes to the component's next lane.
        lane = next((i for i, lane_end in enumerate(lanes) if start >= lane_end), len(lanes))
        if lane == len(lanes):
            lanes.append(end)
        else:
            lanes[lane] = end
        key = (rank, component, lane)
        if key not in tids:
            tids[key] = len([k for k in tids if k[0] == rank]) + 1
            label = component if lane == 0 else f"{component} ({lane + 1})"
            events.append(
                {"ph": "M", "name": "thread_name", "pid": rank, "tid": tids[key], "args": {"name": label}}
            )
            events.append(
                {
                    "ph": "M",
                    "name": "thread_sort_index",
                    "pid": rank,
                    "tid": tids[key],
                    "args": {"sort_index": tids[key]},
                }
            )
        for name, cat, ev_start, ev_end, args in block:
            events.append(
                {
                    "name": name,
                    "cat": cat,
                    "ph": "X",
                    "pid": rank,
                    "tid": tids[key],
                    "ts": _us(ev_start - origin),
                    "dur": _us(max(ev_end, ev_start) - origin) - _us(ev_start - origin),
                    "args": args,
                }
            )
    ranks = sorted({b[2] for b in blocks})
    meta = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": rank,
            "tid": 0,
            "args": {"name": f"compiletrace rank {rank}"},
        }
        for rank in ranks
    ]
    other: dict[str, Any] = {"origin_unix_ns": origin}
    if timeline is not None:
        # Where the start-up's time 0 comes from ("exec": the time before it is not shown).
        other["startup_origin"] = timeline.origin
        if timeline.before_exec_ns is not None:
            other["before_exec_s"] = timeline.before_exec_ns / NS_PER_S
    return {"traceEvents": meta + events, "displayTimeUnit": "ms", "otherData": other}


# A registry has no warm-up; the trace shows none.
_NO_WARMUP = WarmupResult(False, 0.0, CompilationTimes())


def export_chrome_trace(path: str | os.PathLike[str], registry: Run | Registry | None = None) -> Path:
    """Write the compiles of a run or a registry (default: the process registry) as a
    Chrome/Perfetto trace (Trace Event Format JSON) to ``path``; returns the path. The
    start-up phases go on tracks of their own: a run's timeline (from the program's start,
    what no phase covers included), else the registry's phases, from the first one.

    >>> import tempfile, os, compiletrace
    >>> path = os.path.join(tempfile.mkdtemp(), "t.json")
    >>> out = compiletrace.export_chrome_trace(path, compiletrace.Registry())
    >>> out.name
    't.json'
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentTypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    out = Path(path)
    if isinstance(registry, Run):
        write_json(out, chrome_trace_dict(registry))
        return out
    checked_registry(registry)
    reg = registry if registry is not None else get_registry()
    records = reg.records()
    phases = reg.phase_records()
    timeline = None
    if phases:
        start = min([p.start_unix_ns for p in phases] + [r.start_unix_ns for r in records])
        end = max([p.end_unix_ns for p in phases] + [r.end_unix_ns for r in records])
        timeline = build_timeline(phases, records, start, end)
    write_json(out, chrome_trace_dict(Run(records, _NO_WARMUP, {}, timeline)))
    return out
