"""``node_cache_miss``: in a job of several nodes, a node whose graphs missed the compile
cache where another node's same graphs hit it, named with the part of the cache key that
differs between the two nodes (``compiletrace why``'s comparison, node against node: another
torch or Triton build, ``OMP_NUM_THREADS``, an inductor setting, another cache directory).

Each node is read through its slowest rank that missed, against the rank that hit the most
graphs on the node whose graphs hit most often; nodes that missed for one reason are one
finding, whose seconds are what the slowest of them added to the job: that rank's compile
CPU-seconds less the hitting rank's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.job import JobProcess
from compiletrace._data.nodes import cold, node_name, number_ranges, warm
from compiletrace._data.records import NS_PER_S, CacheOutcome
from compiletrace._data.why import GraphMiss, Reason, Side, explain
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.shared import MAX_EXAMPLES

KIND = FindingKind.NODE_CACHE_MISS


def _compile_s(process: JobProcess) -> float:
    # CPU time where measured: nodes that compile side by side on a busy machine stretch wall time.
    return sum(r.cpu_or_wall_ns for r in process.run.graph_records) / NS_PER_S


def _hits(process: JobProcess) -> int:
    return sum(1 for r in process.run.graph_records if warm(r))


def _side(node: str, process: JobProcess) -> Side:
    name = f"{node_name(node)} ({process.info.label})"
    return Side.of_runs(name, [(process.run.graph_records, process.run.meta)])


def _missed_where_hit(
    node: str, missed: JobProcess, hit: tuple[str, JobProcess]
) -> tuple[Reason, list[GraphMiss]]:
    """The graphs ``missed`` missed that ``hit``'s process hit, in the costliest group of one reason."""
    report = explain(_side(*hit), _side(node, missed))
    best: tuple[Reason, list[GraphMiss]] | None = None
    for group in report.groups:
        graphs = [g for g in group.graphs if any(base == CacheOutcome.HIT.value for _, base, _ in g.tiers)]
        if graphs and (best is None or sum(g.seconds for g in graphs) > sum(g.seconds for g in best[1])):
            best = (group.reason, graphs)
    return best if best is not None else (Reason("unknown", "", ""), [])


def _witnesses(
    nodes: Sequence[tuple[str, Sequence[JobProcess]]], share: dict[str, float]
) -> list[tuple[str, JobProcess]]:
    """The rank that hit best (the warmest node's, then the most hits, then the fewest
    seconds; the first in the job's order on a tie), then the best on any other node: every
    node's witness is one of these two. One pass over the ranks, not one per node."""
    best: list[tuple[tuple[float, int, float], str, JobProcess]] = []  # at most 2, by node
    for node, processes in nodes:
        for process in processes:
            hits = _hits(process)
            if not hits:
                continue
            key = (share[node], hits, -_compile_s(process))
            if not best or key > best[0][0]:
                # The runner-up: the old best, or where that was this node's, the old runner-up.
                best = [(key, node, process), *[b for b in best if b[1] != node][:1]]
            elif node != best[0][1] and (len(best) == 1 or key > best[1][0]):
                best = [best[0], (key, node, process)]
    return [(node, process) for _, node, process in best]


def check(evidence: Evidence) -> Iterator[Finding]:
    nodes = evidence.nodes
    if len(nodes) < 2:
        return
    # The warmest node's share of graphs that hit: a rank that hit what a rank of its own
    # (cold) node had just written is no witness of a warm cache.
    share = {
        node: sum(map(_hits, processes)) / max(1, sum(len(p.run.graph_records) for p in processes))
        for node, processes in nodes
    }
    witnesses = _witnesses(nodes, share)
    found: dict[str, list[tuple[str, str, Reason, list[GraphMiss], float]]] = {}
    for node, processes in nodes:
        missing = [p for p in processes if any(cold(r) for r in p.run.graph_records)]
        # The best witness on another node: the best of all, unless it is this node's own.
        other = next((w for w in witnesses if w[0] != node), None)
        if not missing or other is None:
            continue
        process = max(missing, key=_compile_s)
        reason, graphs = _missed_where_hit(node, process, other)
        if not graphs:
            continue
        added = max(0.0, _compile_s(process) - _compile_s(other[1]))
        found.setdefault(reason.summary, []).append((node, other[0], reason, graphs, added))
    for summary, alike in found.items():
        yield _finding(summary, alike)


def _finding(summary: str, alike: Sequence[tuple[str, str, Reason, list[GraphMiss], float]]) -> Finding:
    worst = max(alike, key=lambda item: item[4])
    node, other, reason, graphs, added = worst
    names = [n for n, *_ in alike]
    numbered = all(n.isdecimal() for n in names)
    # A few names at most: the evidence lists them all.
    who = (
        f"node{'s' if len(names) > 1 else ''} {number_ranges([int(n) for n in names], most=4)}"
        if numbered
        else ", ".join(node_name(n) for n in names[:4])
        + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    )
    component = Counter(g.component for g in graphs).most_common(1)[0][0]
    causes = [c for c in reason.changes if not c.consequence]
    what = summary or "the same key (another cache directory, or an entry not there)"
    return Finding(
        KIND,
        component,
        added,
        f"{who} missed the compile cache on {len(graphs)} graph{'s' if len(graphs) != 1 else ''} "
        f"that {node_name(other)} hit: {what}",
        reason.fix or "give every node the same compile settings and one filled cache",
        graphs[0].location,
        {
            "nodes": names,
            "hit_on": other,
            "slowest_node": node,
            "graphs": [g.current for g in graphs[:MAX_EXAMPLES]],
            "graphs_missed": len(graphs),
            "changes": [c.to_json() for c in causes],
            "reason": reason.kind,
        },
    )


RULE = Rule(KIND, check)
