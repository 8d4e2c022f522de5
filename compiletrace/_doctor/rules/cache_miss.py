"""``cache_miss``: graphs compiled afresh because the compile cache missed or was bypassed,
per component, with their keys; the advice fits what the run did (a cold cache, artifacts
loaded that hold other keys, keys that changed while others hit)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from compiletrace._data.cache_hits import compile_ns
from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.records import NS_PER_S, CacheOutcome
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.shared import MAX_EXAMPLES

KIND = FindingKind.CACHE_MISS
_MISSED = (CacheOutcome.MISS, CacheOutcome.BYPASS)


def check(evidence: Evidence) -> Iterator[Finding]:
    consulted = [r for r in evidence.records if r.cache_outcome is not CacheOutcome.NONE]
    for component, group in shared.group(consulted, lambda r: r.component).items():
        missed = [r for r in group if r.cache_outcome in _MISSED]
        if not missed:
            continue
        tiers = Counter(
            tier
            for r in missed
            for tier, outcome in (("FX graph", r.fx_graph_cache), ("AOTAutograd", r.aot_autograd_cache))
            if outcome in _MISSED
        )
        bypassed = [c for r in missed for c in r.cache_lookups if c.outcome == CacheOutcome.BYPASS.value]
        cold = len(missed) == len(group)
        if evidence.context.loaded_artifacts:
            fix = (
                "cache artifacts were loaded, yet these graphs missed: the artifacts hold other keys (a "
                "key changes with the graph, its input shapes and dtypes, and torch's and inductor's "
                "versions and config); save them again from a run of this model, torch and config, and "
                "compare the keys below with the saved run's"
            )
        elif cold:
            fix = (
                "the cache was cold: fill it once and start from it, keeping TORCHINDUCTOR_CACHE_DIR on "
                "persistent storage, or 'compiletrace cache save' here and --cache-artifacts where it starts"
            )
        else:
            fix = (
                "these graphs' keys changed while the others hit: a key changes with the graph, its input "
                "shapes and dtypes, and torch's and inductor's versions and config; compare the keys below "
                "with a warm run's and keep what feeds them fixed"
            )
        if bypassed:
            fix += f"; inductor bypassed its cache ({bypassed[0].detail or 'no reason given'})"
        yield Finding(
            KIND,
            component,
            sum(compile_ns(r) for r in missed) / NS_PER_S,
            f"{len(missed)} of {len(group)} graphs compiled afresh: the compile cache "
            + ", ".join(f"{tier} missed {n}" for tier, n in tiers.items())
            + (" (a cold cache)" if cold else ""),
            fix,
            shared.model_location(missed[0]),
            {
                "graphs": [
                    {
                        "compile_id": r.compile_id,
                        "code_name": r.code_name,
                        "module": r.module_label,
                        "fx_graph": r.fx_graph_cache.value,
                        "aot_autograd": r.aot_autograd_cache.value,
                        "keys": shared.cache_keys(r),
                    }
                    for r in missed[:MAX_EXAMPLES]
                ],
                "missed": len(missed),
                "consulted": len(group),
            },
        )


RULE = Rule(KIND, check)
