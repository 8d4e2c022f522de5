"""Seconds at stake: what a finding's fix can save, each compile's seconds claimed by at most
one finding, so that the findings of a run never put more at stake than the run compiled.

A rule says which records a finding's fix saves, and how much of each (:class:`Claim`: a
share of the record's compile time less the process's one-time set-up, which no fix saves);
by default, the records the finding names, as much of them as its own seconds cover. The
ledger (:func:`claim_once`) then hands out each record's time in the order the rules run
(:data:`~compiletrace._doctor.rules.RULES`: what did not compile, the recompile limit,
recompiles, blocks repeated inside a graph, across frames, graph breaks, then the rest): a
later claim gets at most what is left of the record. The unit is CPU seconds where the
records measured them (a busy machine barely moves them), else wall seconds.

>>> from compiletrace._data.records import GraphRecord
>>> r = GraphRecord("0/0", "lm", "eager", "f", 1, 0, 4_000_000_000, 1, 0, None, cpu_ns=2_000_000_000)
>>> a = Finding("recompiles", "lm", 4.0, "t", "f", evidence={"compile_ids": ["0/0"]})
>>> b = Finding("graph_break", "lm", 4.0, "t", "f", evidence={"frame_compile_ids": ["0/0"]})
>>> [f.seconds for f in claim_once([(a, [Claim(r, 0.75)]), (b, [Claim(r, 1.0)])])]
[1.5, 0.5]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from compiletrace._data.findings import Finding
from compiletrace._data.records import NS_PER_S, GraphRecord
from compiletrace._doctor.evidence import Evidence

__all__ = [
    "AT_STAKE",
    "Claim",
    "claim_once",
    "claimable_ns",
    "named_records",
    "whole_claims",
]

AT_STAKE = "at_stake"  # the evidence key: the seconds the fix can save, in which unit, and how
_ID_KEYS = ("compile_ids", "frame_compile_ids")  # where findings list the records they name


@dataclass(frozen=True)
class Claim:
    """A share of one record's compile time (less set-up) that a finding's fix can save."""

    record: GraphRecord
    share: float  # 0..1 of claimable_ns(record)


def claimable_ns(r: GraphRecord) -> int:
    """What a fix can save of a record: its compile time less the process's one-time set-up
    (CPU where measured, else wall)."""
    return max(r.cpu_or_wall_ns - r.setup_cpu_or_wall_ns, 0)


def named_records(finding: Finding, records: Evidence | Sequence[GraphRecord]) -> list[GraphRecord]:
    """The records a finding names by compile id (every record of an id that a reset reused),
    read from the evidence's index when given the evidence."""
    ids: list[str] = []
    for key in _ID_KEYS:
        value = finding.evidence.get(key)
        if isinstance(value, list):
            ids += [str(i) for i in value]
    single = finding.evidence.get("compile_id")
    if isinstance(single, str):
        ids.append(single)
    if isinstance(records, Evidence):
        return records.with_ids(ids)
    wanted = set(ids)
    return [r for r in records if r.compile_id in wanted]


def whole_claims(finding: Finding, records: Evidence | Sequence[GraphRecord]) -> list[Claim]:
    """The default: the records the finding names, as much of each as the finding's own
    seconds cover of their compile time (all of it for a finding that counts them whole;
    part for one that counts part, such as a function's own tracing time)."""
    named = named_records(finding, records)
    total = sum(r.total_ns for r in named) / NS_PER_S
    share = 1.0 if total <= 0 else min(1.0, finding.seconds / total)
    return [Claim(r, share) for r in named]


def claim_once(found: Iterable[tuple[Finding, Sequence[Claim] | None]]) -> list[Finding]:
    """Each finding with its seconds at stake: what its claims get of each record's claimable
    time, first come first served (``found`` in claiming order). A finding with no claims
    (None: one about no compile, such as a warm-up that compiled nothing) keeps its seconds."""
    left: dict[int, int] = {}  # id(record) -> claimable ns not yet claimed
    out = []
    for finding, claims in found:
        if claims is None:
            out.append(finding)
            continue
        got = 0
        cpu = bool(claims) and all(c.record.cpu_ns is not None for c in claims)
        cost_ns = 0  # what the problem cost in the unit at stake: each claim's share of its record
        for claim in claims:
            key = id(claim.record)
            share = max(claim.share, 0.0)
            available = left.setdefault(key, claimable_ns(claim.record))
            take = min(round(share * claimable_ns(claim.record)), available)
            left[key] = available - take
            got += take
            cost_ns += round(share * claim.record.cpu_or_wall_ns)
        # The rule counted wall seconds: in CPU seconds the same compiles cost their CPU
        # (more than wall where the compiler's processes ran beside it). A fix saves at
        # most what the problem cost, in one unit.
        cost_s = cost_ns / NS_PER_S if cpu else finding.seconds
        seconds = min(got / NS_PER_S, cost_s)
        stake: Mapping[str, Any] = {
            "seconds": round(seconds, 4),
            "cost_s": round(cost_s, 4),  # what the problem cost, in the unit
            "cost_wall_s": round(finding.seconds, 4),  # ... in wall seconds, as the rule counted it
            "unit": "cpu" if cpu else "wall",
            "of": len({id(c.record) for c in claims}),
        }
        out.append(replace(finding, seconds=seconds, evidence={**finding.evidence, AT_STAKE: dict(stake)}))
    return out
