"""``useless_warmup``: a warm-up that ran and compiled nothing (the run's own, and any phase
of its start-up named as one): its seconds bought nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.records import NS_PER_S, GraphRecord
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.rule import Rule

KIND = FindingKind.USELESS_WARMUP

# Phases of a start-up that are warm-ups by their names: compiletrace's own ("Warmup (CPU)"),
# and what engines call theirs (vLLM's profiling and dummy runs, "warm up", "warmup").
_WARMUP_NAME = re.compile(r"warm[ _-]?up|profile[ _]run|dummy[ _]run", re.IGNORECASE)
_FIX = (
    "skip the warm-up when nothing will compile: guard it on the compilation mode, as "
    "compiletrace.warm_up does (CompilationMode.NONE: no compile, no warm-up); a warm-up "
    "that compiled nothing only costs its run"
)


def check(evidence: Evidence) -> Iterator[Finding]:
    records: Sequence[GraphRecord] = evidence.records
    warmup = evidence.warmup
    spans = [(p.name, p.start_unix_ns, p.end_unix_ns) for p in evidence.phases if _WARMUP_NAME.search(p.name)]
    # No phase to place it in: the warm-up's own figures say whether it compiled.
    untimed = not spans and warmup is not None and not warmup.skipped and warmup.duration_s > 0
    if untimed and warmup is not None and not records and sum(warmup.by_component.values()) == 0:
        spans = [("warm-up", 0, int(warmup.duration_s * NS_PER_S))]
        records = ()
    for name, start, end in spans:
        if any(r.start_unix_ns < end and r.end_unix_ns > start for r in records):
            continue  # it compiled: a warm-up doing its work
        seconds = (end - start) / NS_PER_S
        yield Finding(
            KIND,
            "",
            seconds,
            f"the start-up phase {name!r} ran for {seconds:.2f} s and compiled nothing",
            _FIX,
            evidence={"phase": name, "seconds": seconds},
        )


RULE = Rule(KIND, check)
