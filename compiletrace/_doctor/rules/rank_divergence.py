"""``rank_divergence``: in a distributed job, ranks whose graphs or cache outcomes differ
from the others', per component."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.gather import RankTimes
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.shared import MAX_EXAMPLES

KIND = FindingKind.RANK_DIVERGENCE

# When ranks disagree evenly, the slower outcome is the odd one out.
_OUTCOME_COST = {"miss": 3, "bypass": 2, "none": 1, "hit": 0, "absent": 4}


def check(evidence: Evidence) -> Iterator[Finding]:
    ranks = evidence.ranks
    if len(ranks) < 2:
        return
    if not all(r.graph_cache for r in ranks):
        yield from _graph_count_divergence(ranks)
        return
    keys = list(dict.fromkeys(k for r in ranks for k in r.graph_cache))
    by_component: dict[str, list[tuple[str, dict[int, str]]]] = {}
    for key in keys:
        outcomes = {r.rank: r.graph_cache.get(key, "absent") for r in ranks}
        if len(set(outcomes.values())) > 1:
            by_component.setdefault(key.partition("/")[0], []).append((key, outcomes))
    for component, diverging in by_component.items():
        odd: set[int] = set()
        for _, outcomes in diverging:
            counts = Counter(outcomes.values())
            usual = max(counts, key=lambda o: (counts[o], -_OUTCOME_COST.get(o, 0)))
            odd |= {rank for rank, o in outcomes.items() if o != usual}
        seconds = [r.by_component.get(component, 0.0) for r in ranks]
        absent = [key for key, outcomes in diverging if "absent" in outcomes.values()]
        names = ", ".join(str(r) for r in sorted(odd))
        fixes = []
        if len(absent) < len(diverging):
            fixes.append(
                "give every rank the same warm cache: 'compiletrace cache save' once, then load it on every "
                "rank (--cache-artifacts), or point every rank's TORCHINDUCTOR_CACHE_DIR at one filled cache"
            )
        if absent:
            fixes.append(
                "make every rank compile the same graphs: rank-dependent shapes, inputs or branches compile "
                "graphs the others do not (pad to one shape, or mark the dimension dynamic)"
            )
        yield Finding(
            KIND,
            component,
            max(seconds) - min(seconds),
            f"rank{'s' if len(odd) > 1 else ''} {names} diverge{'' if len(odd) > 1 else 's'} from the "
            f"others on {len(diverging)} graph{'s' if len(diverging) > 1 else ''} of {component}",
            "; and ".join(fixes),
            "",
            {
                "ranks": sorted(odd),
                "graphs": {key: {str(k): v for k, v in o.items()} for key, o in diverging[:MAX_EXAMPLES]},
                "graphs_diverging": len(diverging),
                "seconds_by_rank": {str(r.rank): r.by_component.get(component, 0.0) for r in ranks},
            },
        )


def _graph_count_divergence(ranks: Sequence[RankTimes]) -> Iterator[Finding]:
    # Figures from a compiletrace that did not save each graph's outcome: counts only.
    counts = Counter(r.graphs for r in ranks)
    usual = counts.most_common(1)[0][0]
    odd = sorted(r.rank for r in ranks if r.graphs != usual)
    if not odd:
        return
    totals = [sum(r.by_component.values()) for r in ranks]
    yield Finding(
        KIND,
        "",
        max(totals) - min(totals),
        f"ranks {', '.join(map(str, odd))} compiled a different number of graphs than the others ({usual})",
        "make every rank compile the same graphs: rank-dependent shapes, inputs or branches compile "
        "graphs the others do not",
        "",
        {"graphs_by_rank": {str(r.rank): r.graphs for r in ranks}, "ranks": odd},
    )


RULE = Rule(KIND, check)
