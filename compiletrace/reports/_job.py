"""Views of a job (``compiletrace run``): the summary it prints on stderr when the command
ends, and one Chrome/Perfetto trace with a track group per process."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from compiletrace._data.findings import Finding
from compiletrace._data.job import Job, JobProcess
from compiletrace._data.nodes import (
    RankFigures,
    critical_path,
    node_figures,
    node_name,
    number_ranges,
    rank_figures,
)
from compiletrace._data.records import ENCODER, NS_PER_S, GraphRecord, component_totals, ordered_components
from compiletrace._io.text import printable, shell_line
from compiletrace.reports._chrome import chrome_trace_dict
from compiletrace.reports._table import wrap_prose

__all__ = ["job_chrome_trace_dict", "job_findings_line", "job_summary_lines", "nodes_summary_lines"]

_MAX_ARGV_CHARS = 60


def _argv(process: JobProcess) -> str:
    text = " ".join(process.info.argv) or "?"
    return printable(text if len(text) <= _MAX_ARGV_CHARS else text[: _MAX_ARGV_CHARS - 3] + "...")


# Where the frames of components that compiled no graph are counted together: a frame
# Dynamo gave up on is named after the code it stopped in (DDP's forward, a context
# manager of torch's), which is no part of the user's model.
NO_GRAPH = "no graph"


def _graphless(records: Sequence[GraphRecord]) -> set[str]:
    """The components none of whose frames compiled a graph."""
    with_graph = {r.component for r in records if r.graph_node_count > 0}
    return {r.component for r in records} - with_graph


def _totals(records: Sequence[GraphRecord]) -> dict[str, int]:
    """Nanoseconds per component, the components that compiled no graph as one entry."""
    graphless = _graphless(records)
    totals: dict[str, int] = {}
    for name, ns in component_totals(records).items():
        key = NO_GRAPH if name in graphless else name
        totals[key] = totals.get(key, 0) + ns
    return totals


def _counted(records: Sequence[GraphRecord]) -> str:
    """``5 graphs``, or ``5 frames (1 graph)`` where some frames compiled no graph.

    >>> _counted([])
    '0 graphs'
    """
    graphs = sum(1 for r in records if r.graph_node_count > 0)
    if graphs == len(records):
        return f"{graphs} graph{'s' if graphs != 1 else ''}"
    return (
        f"{len(records)} frame{'s' if len(records) != 1 else ''} ({graphs} graph{'s' if graphs != 1 else ''})"
    )


def _split(process: JobProcess) -> str:
    totals = _totals(process.run.graph_records)
    return ", ".join(f"{printable(name)} {ns / NS_PER_S:.2f} s" for name, ns in sorted(totals.items()))


def _rank_processes(job: Job) -> dict[int, JobProcess]:
    return {rank: p for rank, p in job.ranks().items() if p.compiled}


def _not_ranks(job: Job) -> list[JobProcess]:
    """The processes that compiled and are no rank, in the job's order: one pass over the
    rank table (a process's equality compares its whole run)."""
    ranks = {id(p) for p in job.ranks().values()}
    return [p for p in job.compiling() if id(p) not in ranks]


def _seconds_by_component(job: Job) -> dict[str, float]:
    """The job's compile seconds per component, as long as it waited for them: ranks
    compile side by side, so each component counts its slowest rank's seconds (the other
    processes' are added up). A job of no more than one rank adds up every process.

    >>> _seconds_by_component(Job(("python", "x.py"), 0, ()))
    {}
    """
    ranks = _rank_processes(job)
    ns: dict[str, int] = {}
    if len(ranks) <= 1:
        for name, value in _totals(job.records()).items():
            ns[name] = ns.get(name, 0) + value
        return {name: ns[name] / NS_PER_S for name in ordered_components(ns)}
    for process in _not_ranks(job):
        for name, value in _totals(process.run.graph_records).items():
            ns[name] = ns.get(name, 0) + value
    slowest: dict[str, int] = {}
    for process in ranks.values():
        for name, value in _totals(process.run.graph_records).items():
            slowest[name] = max(slowest.get(name, 0), value)
    for name, value in slowest.items():
        ns[name] = ns.get(name, 0) + value
    return {name: ns[name] / NS_PER_S for name in ordered_components(ns)}


def _component_hint(job: Job) -> str | None:
    """A hint at ``--component`` where a process compiled several components and none is
    the encoder (a tower named otherwise counts as the language model in the encoder split)."""
    # A component that compiled no graph is no tower (a wrapper Dynamo gave up on).
    names = []
    for p in job.compiling():
        graphless = _graphless(p.run.graph_records)
        names.append({k: v for k, v in component_totals(p.run.graph_records).items() if k not in graphless})
    if any(ENCODER in totals for totals in names) or not any(len(totals) > 1 for totals in names):
        return None
    example = next(name for totals in names if len(totals) > 1 for name in totals)
    return (
        f"  no component is named {ENCODER}: to count a tower as the encoder, name it with "
        f"--component '{printable(example)}={ENCODER}' (a module path, class or file pattern)"
    )


def job_summary_lines(job: Job) -> list[str]:
    """What ``compiletrace run`` prints when the command ends: the job's compile seconds
    per component (ranks compile side by side: each component counts its slowest rank),
    one line per process that compiled, one line for the rest, and the processes that left
    no run.

    >>> job_summary_lines(Job(("python", "x.py"), 0, ()))[0]
    'compiletrace: no process of this command compiled anything (exit status 0)'
    """
    if len({f.node for f in rank_figures(job)}) > 1:
        return nodes_summary_lines(job)
    compiling = job.compiling()
    if not compiling:
        lines = [
            f"compiletrace: no process of this command compiled anything (exit status {job.exit_status})"
        ]
    else:
        seconds = _seconds_by_component(job)
        split = ", ".join(f"{printable(name)}: {s:.2f} s" for name, s in seconds.items())
        counted = _counted(job.records())
        ranks = _rank_processes(job)
        side_by_side = ""
        if len(ranks) > 1:
            cpu_s = sum(r.total_ns for r in job.records()) / NS_PER_S
            side_by_side = (
                f"the slowest of {len(ranks)} ranks per component, as they compile side by side: "
                f"{cpu_s:.2f} CPU-seconds in all; "
            )
        lines = [
            f"compiletrace: compilation: {sum(seconds.values()):.2f} s — {split} ({side_by_side}"
            f"{counted} in {len(compiling)} "
            f"process{'es' if len(compiling) != 1 else ''}; exit status {job.exit_status})"
        ]
        for process in compiling:
            records = process.run.graph_records
            total = sum(r.total_ns for r in records) / NS_PER_S
            lines.append(
                f"  {process.info.label}: {_counted(records)}, "
                f"{total:.2f} s ({_split(process)})  {_argv(process)}"
            )
    hint = _component_hint(job)
    if hint is not None:
        lines.append(hint)
    ranks = _rank_processes(job)
    if len(ranks) > 1:
        # Ranks compile side by side: the job waits for the slowest one.
        totals = {rank: sum(r.total_ns for r in p.run.graph_records) / NS_PER_S for rank, p in ranks.items()}
        slowest = max(totals, key=lambda rank: totals[rank])
        fastest = min(totals, key=lambda rank: totals[rank])
        lines.append(
            f"  {len(ranks)} ranks compile side by side: the slowest, rank {slowest}, "
            f"{totals[slowest]:.2f} s; the fastest, rank {fastest}, {totals[fastest]:.2f} s"
        )
    idle = [p for p in job.processes if not p.compiled]
    if idle:
        pids = ", ".join(str(p.info.pid) for p in idle[:8]) + (", ..." if len(idle) > 8 else "")
        lines.append(
            f"  {len(idle)} more process{'es' if len(idle) != 1 else ''} compiled nothing (pid {pids})"
        )
    for info in job.missing:
        argv = printable(" ".join(info.argv))
        lines.append(f"  {info.label} left no run (killed before it could write one?)  {argv}")
    lines += checkpointed_lines(job)
    return wrap_prose(lines, indent="    ")


def checkpointed_lines(job: Job) -> list[str]:
    """A line for each process stopped before it could write its run at its end, whose run is
    the one it wrote while it ran (its last checkpoint).

    >>> checkpointed_lines(Job(("python",), 0, ()))
    []
    """
    lines = []
    for process in job.processes:
        at = process.run.meta.checkpoint_unix_s
        if at is None:
            continue
        when = time.strftime("%H:%M:%S", time.localtime(at))
        lines.append(
            f"  {process.info.label} ended before writing its run (killed?): what it recorded up to "
            f"{when} is kept, as it wrote it while it ran; a compile that ended after that is lost"
        )
    return lines


def _outcomes(graphs: int, hits: int, misses: int) -> str:
    return f"{graphs} graph{'s' if graphs != 1 else ''} ({hits} hit, {misses} missed)"


def nodes_summary_lines(job: Job) -> list[str]:
    """A job of several nodes: the critical path first (the job is ready when its slowest
    rank is), the CPU-seconds of every rank together, a line per node, then the ranks,
    those alike (as many graphs, hits and misses) folded into one row.

    >>> nodes_summary_lines(Job(("torchrun",), 0, ()))[0]
    'compiletrace: no rank of this job compiled anything (exit status 0)'
    """
    ranks = rank_figures(job)
    if not ranks:
        return [f"compiletrace: no rank of this job compiled anything (exit status {job.exit_status})"]
    nodes = node_figures(job)
    slowest = critical_path(ranks)
    cpu_s = sum(r.cpu_s for r in ranks)
    lines = [
        f"compiletrace: a job of {len(nodes)} nodes, {len(ranks)} ranks (exit status {job.exit_status})",
        f"  critical path: {node_name(slowest.node)} rank {slowest.rank}, start-up "
        f"{slowest.startup_s:.2f} s, compiling {slowest.compile_s:.2f} s",
        f"  every rank: {cpu_s:.2f} CPU-seconds of compiling, "
        + _outcomes(sum(r.graphs for r in ranks), sum(r.hits for r in ranks), sum(r.misses for r in ranks)),
    ]
    for node in nodes:
        worst = node.slowest
        lines.append(
            f"  {node_name(node.node)}: {len(node.ranks)} rank{'s' if len(node.ranks) != 1 else ''}, "
            f"{_outcomes(node.graphs, node.hits, node.misses)}; slowest rank {worst.rank} "
            f"{worst.compile_s:.2f} s"
        )
    alike: dict[tuple[int, int, int], list[RankFigures]] = {}
    for rank in ranks:
        alike.setdefault((rank.graphs, rank.hits, rank.misses), []).append(rank)
    for (graphs, hits, misses), group in alike.items():
        where = {r.node for r in group}
        on = node_name(next(iter(where))) if len(where) == 1 else f"{len(where)} nodes"
        low, high = min(r.compile_s for r in group), max(r.compile_s for r in group)
        seconds = f"{low:.2f} s" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f} s"
        # A few ranges at most: a row per kind of rank, whatever the job's size.
        ranges = number_ranges([r.rank for r in group], most=4)
        who = f"rank{'s' if len(group) != 1 else ''} {ranges}"
        if ranges.endswith("..."):
            who = f"{len(group)} ranks, {ranges}"
        each = " each" if len(group) != 1 else ""
        lines.append(f"  {who} ({on}): {_outcomes(graphs, hits, misses)}{each}, {seconds}")
    others = _not_ranks(job)
    if others:
        lines.append(f"  {len(others)} more process{'es' if len(others) != 1 else ''} compiled, not as ranks")
    for info in job.missing:
        lines.append(f"  {info.label} left no run (killed before it could write one?)")
    lines += checkpointed_lines(job)
    return wrap_prose(lines, indent="    ")


def job_findings_line(findings: Sequence[Finding], saved_to: str | None) -> str:
    """The last line ``compiletrace run`` prints: how many findings the doctor has and how
    to read them.

    >>> job_findings_line([], "job.json")
    'compiletrace: the doctor found nothing to change'
    """
    if not findings:
        return "compiletrace: the doctor found nothing to change"
    n = len(findings)
    at_stake = sum(f.seconds for f in findings)
    how = (
        shell_line(["compiletrace", "doctor", saved_to])
        if saved_to
        else "run again with --json FILE, then compiletrace doctor FILE"
    )
    count = f"{n} finding{'s' if n != 1 else ''} ({at_stake:.2f} s at stake)"
    line = f"compiletrace: the doctor has {count}; for why and what to change: {how}"
    return "\n".join(wrap_prose([line], indent="    "))


def job_chrome_trace_dict(job: Job) -> dict[str, Any]:
    """One Trace Event Format document for the job: each process's own trace (its start-up
    and compiles), with the process's pid as the trace's process (its position in the job,
    from 1, where two nodes' processes share a pid), on one time axis from the job's first
    start."""
    traces = [(p, chrome_trace_dict(p.run)) for p in job.processes]
    origins = [t["otherData"]["origin_unix_ns"] for _, t in traces]
    origin = min(origins, default=0)
    # Nodes of one job may reuse each other's pids: then each process is a track by position.
    pids = [p.info.pid for p in job.processes]
    tracks = pids if len(set(pids)) == len(pids) else list(range(1, len(pids) + 1))
    events: list[dict[str, Any]] = []
    for (process, trace), own_origin, track in zip(traces, origins, tracks, strict=True):
        shift_us = (own_origin - origin) / 1000
        for event in trace["traceEvents"]:
            moved = dict(event, pid=track)
            if moved.get("name") == "process_name":
                moved["args"] = {"name": f"{printable(process.info.role)} (pid {process.info.pid})"}
            if "ts" in moved:
                moved["ts"] = moved["ts"] + shift_us
            events.append(moved)
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"origin_unix_ns": origin}}
