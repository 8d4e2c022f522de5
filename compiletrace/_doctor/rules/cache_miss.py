"""``cache_miss``: graphs compiled afresh because the compile cache missed or was bypassed,
per component, with their keys, and why where it can be told: against a baseline run
(``doctor --baseline BASE``: each miss explained by the part of its key that changed, as
``compiletrace why`` explains it), or, on one run, against the entries of the same graph
its cache directory holds under another key (their writers' parts are stored in them). The
advice fits what the run did (a cold cache, artifacts loaded that hold other keys, a part
of the key that changed, keys that changed while others hit). A graph a setting of torch's
makes the caches bypass on every start (inductor's freezing) is a finding of its own,
naming the setting and its environment variable: no cache, cold or warm, would help it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from compiletrace._data.cache_hits import compile_ns
from compiletrace._data.cache_keys import split_key_lines
from compiletrace._data.cache_store import StoredEntry, Unreadable, read_store
from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.records import NS_PER_S, CacheOutcome, GraphRecord
from compiletrace._data.torch_text import bypass_setting
from compiletrace._data.why import PartChange, Reason, Side, explain, group_line, key_changes, parts_reason
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.shared import MAX_EXAMPLES

KIND = FindingKind.CACHE_MISS
_MISSED = (CacheOutcome.MISS, CacheOutcome.BYPASS)
ASK_FOR_BASELINE = (
    "to learn which part of the key changed, compare with a run that hit: 'compiletrace doctor RUN "
    "--baseline BASE' (or 'compiletrace why BASE RUN')"
)


def check(evidence: Evidence) -> Iterator[Finding]:
    if evidence.baseline is not None:
        yield from _against_baseline(evidence, evidence.baseline)
        return
    consulted = [r for r in evidence.records if r.cache_outcome is not CacheOutcome.NONE]
    stored = _StoredEntries(evidence)
    for component, group in shared.group(consulted, lambda r: r.component).items():
        by_setting = {id(r): setting for r in group if (setting := _setting_bypass(r)) is not None}
        yield from _bypassed_by_settings(component, [r for r in group if id(r) in by_setting], by_setting)
        group = [r for r in group if id(r) not in by_setting]
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
        explained = [(r, entry) for r in missed if (entry := stored.explain(r)) is not None]
        cold = len(missed) == len(group) and not explained
        title = f"{len(missed)} of {len(group)} graphs compiled afresh: the compile cache " + ", ".join(
            f"{tier} missed {n}" for tier, n in tiers.items()
        )
        if explained:
            reason = explained[0][1][1]
            title += f"; the cache held the same graph under another key: {reason.summary}"
            fix = reason.fix
        elif evidence.context.loaded_artifacts:
            fix = (
                "cache artifacts were loaded, yet these graphs missed: the artifacts hold other keys (a "
                "key changes with the graph, its input shapes and dtypes, and torch's and inductor's "
                "versions and config); save them again from a run of this model, torch and config, and "
                "compare the keys below with the saved run's"
            )
        elif cold:
            title += " (a cold cache)"
            fix = (
                "the cache was cold: fill it once and start from it, keeping TORCHINDUCTOR_CACHE_DIR on "
                "persistent storage, or 'compiletrace cache save' here and --cache-artifacts where it starts"
            )
        else:
            fix = (
                "these graphs' keys changed while the others hit: a key changes with the graph, its input "
                "shapes and dtypes, and torch's and inductor's versions and config; " + ASK_FOR_BASELINE
            )
        if bypassed:
            fix += f"; inductor bypassed its cache ({bypassed[0].detail or 'no reason given'})"
        if stored.unreadable:
            bad = stored.unreadable[0]
            fix += (
                f"; {len(stored.unreadable)} unreadable entr{'y' if len(stored.unreadable) == 1 else 'ies'} "
                f"in the cache directory, passed over ({bad.why}): remove what you did not put there"
            )
        found: dict[str, Any] = {
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
            "compile_ids": shared.ids(missed),  # the records whose seconds it puts at stake
        }
        if cold and not evidence.context.loaded_artifacts:  # the "cold cache" advice above
            found[shared.FIX_KIND] = shared.DEPLOYMENT
        if explained:
            found["stored"] = [
                {
                    "compile_id": r.compile_id,
                    "entry": entry.key,
                    "entry_seconds": entry.time_taken_ns / NS_PER_S,
                    "changes": [c.line() for c in reason.changes[:MAX_EXAMPLES]],
                }
                for r, (entry, reason) in explained[:MAX_EXAMPLES]
            ]
        elif stored.looked_in and not cold:
            found["looked_in"] = stored.looked_in
        if stored.unreadable:
            found["unreadable"] = [{"path": u.path, "why": u.why} for u in stored.unreadable[:MAX_EXAMPLES]]
        yield Finding(
            KIND,
            component,
            sum(compile_ns(r) for r in missed) / NS_PER_S,
            title,
            fix,
            shared.model_location(missed[0]),
            found,
        )


def _setting_bypass(r: GraphRecord) -> tuple[str, str, str] | None:
    """The setting that made torch's caches bypass this graph, if one did."""
    return next(
        (
            found
            for c in r.cache_lookups
            if c.outcome == CacheOutcome.BYPASS.value and (found := bypass_setting(c.detail))
        ),
        None,
    )


def _bypassed_by_settings(
    component: str, records: Sequence[GraphRecord], settings: dict[int, tuple[str, str, str]]
) -> Iterator[Finding]:
    """One finding per setting that bypassed the caches: its graphs compile afresh on every
    start, whatever the cache holds."""
    for (what, variable, in_code), group in shared.group(records, lambda r: settings[id(r)]).items():
        seconds = sum(compile_ns(r) for r in group) / NS_PER_S
        yield Finding(
            KIND,
            component,
            seconds,
            f"{len(group)} graph{'s' if len(group) != 1 else ''} bypass the compile cache on every start: "
            f"{variable}=1 ({in_code}) is set, {what}",
            f"every start compiles these graphs afresh ({seconds:.2f} s each start), a warm cache or not: "
            f"unset {variable} (or set {in_code} = False) to let the cache keep them, where the frozen "
            "graph's speed is worth less than that",
            shared.model_location(group[0]),
            {
                "setting": variable,
                "in_code": in_code,
                "bypassed": [
                    {"compile_id": r.compile_id, "reasons": [c.detail for c in r.cache_lookups if c.detail]}
                    for r in group[:MAX_EXAMPLES]
                ],
                "compile_ids": shared.ids(group),
            },
        )


class _StoredEntries:
    """The entries of the run's cache directories (read once, when a miss asks), and the
    comparison of a missed graph's FX-graph key with those of the same graph."""

    def __init__(self, evidence: Evidence) -> None:
        keys = evidence.cache_keys
        self.keys = keys
        facts = keys.facts if keys is not None else None
        self.dirs: tuple[str, ...] = (
            facts.cache_dirs or ((facts.cache_dir,) if facts.cache_dir else ()) if facts else ()
        )
        self.looked_in: list[str] = []
        self.unreadable: list[Unreadable] = []  # entry files that could not be read, and why
        self._entries: list[StoredEntry] | None = None

    def entries(self) -> list[StoredEntry]:
        if self._entries is None:
            self._entries = []
            for directory in self.dirs:
                self.looked_in.append(directory)
                reading = read_store(directory)
                self._entries += reading.entries
                self.unreadable += reading.unreadable
        return self._entries

    def explain(self, r: GraphRecord) -> tuple[StoredEntry, Reason] | None:
        """The closest entry of the same graph under another key, and how its key differs."""
        lookups = [c for c in r.cache_lookups if c.tier == "fx_graph" and c.source == "lookup" and c.parts]
        if not lookups or self.keys is None or not self.dirs:
            return None
        lookup = lookups[-1]
        graph = next((p.hash for p in lookup.parts if p.name == "gm"), None)
        side = Side("this run", (), self.keys)
        current = side.parts_of(lookup)
        best: tuple[int, StoredEntry, Sequence[PartChange]] | None = None
        for entry in self.entries():
            if entry.key == lookup.key:
                continue
            graph_parts, process_parts, _ = split_key_lines(entry.lines)
            if next((p.hash for p in graph_parts if p.name == "gm"), None) != graph:
                continue
            stored = {p.name: p for p in (*process_parts, *graph_parts)}
            changes = key_changes((stored, True), current)
            if changes and (best is None or len(changes) < best[0]):
                best = (len(changes), entry, changes)
        if best is None:
            return None
        return best[1], parts_reason(best[2])


def _against_baseline(evidence: Evidence, baseline: Evidence) -> Iterator[Finding]:
    """Each reason this run's graphs missed for, against the baseline's (``why``'s groups)."""
    report = explain(
        Side("the baseline", baseline.records, baseline.cache_keys),
        Side("this run", evidence.records, evidence.cache_keys),
    )
    for group in report.groups:
        first = group.graphs[0]
        reason = group.reason
        yield Finding(
            KIND,
            first.component,
            group.seconds,
            f"against the baseline, {group_line(group, report.missed)}",
            reason.fix,
            first.location,
            {
                "reason": reason.kind,
                # (none where the keys were equal: the reason is elsewhere, and the title says it)
                # (a group whose graphs changed each their own way: what they share)
                **({"changes": [c.line() for c in group.changes[:MAX_EXAMPLES]]} if group.changes else {}),
                "graphs": [
                    f"{g.current}: " + ", ".join(f"{t} {b} -> {c}" for t, b, c in g.tiers)
                    for g in group.graphs[:MAX_EXAMPLES]
                ],
                "missed": len(group.graphs),
            },
        )
    new = [r for r in evidence.records if r.cache_outcome in _MISSED and _new(r, report.new_graphs)]
    if new:
        yield Finding(
            KIND,
            new[0].component,
            sum(compile_ns(r) for r in new) / NS_PER_S,
            f"{len(new)} graphs missed that the baseline did not compile: no key of its to compare with",
            "these graphs are new since the baseline (another model path, new shapes, a graph break): fill "
            "the cache with a run that compiles them",
            shared.model_location(new[0]),
            {"graphs": [r.compile_id for r in new[:MAX_EXAMPLES]], "missed": len(new)},
        )


def _new(r: GraphRecord, labels: Sequence[str]) -> bool:
    return any(label.startswith(f"{r.compile_id} {r.code_name}") for label in labels)


RULE = Rule(KIND, check)
