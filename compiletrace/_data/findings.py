"""What the doctor found: one :class:`Finding` per thing to change, each of a
:class:`FindingKind`, and the file ``compiletrace doctor --json`` writes.

>>> f = Finding("recompiles", "encoder", 1.5, "forward recompiled 3 times", "compile with dynamic=True")
>>> f.kind is FindingKind.RECOMPILES, f.kind == "recompiles"
(True, True)
>>> findings_from_dict(doctor_dict([f])) == [f]
True
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compiletrace._data.kinds import FileKind
from compiletrace._io.envelope import Fields

__all__ = [
    "DOCTOR_KIND",
    "DOCTOR_SCHEMA_VERSION",
    "Finding",
    "FindingKind",
    "doctor_dict",
    "findings_from_dict",
]

DOCTOR_KIND = FileKind.DOCTOR.value
DOCTOR_SCHEMA_VERSION = FileKind.DOCTOR.schema_version


class FindingKind(str, enum.Enum):
    """What the doctor found."""

    NOTHING_COMPILED = "nothing_compiled"  # frames compiled no graph: the code ran uncompiled
    RECOMPILES = "recompiles"  # a frame compiled again because a guard failed
    RECOMPILE_LIMIT = "recompile_limit"  # torch stopped recompiling a frame: it runs eagerly
    GRAPH_BREAK = "graph_break"  # Dynamo split a frame (or gave up on it)
    REPEATED_GRAPH = "repeated_graph"  # one structure compiled in several frames
    REPEATED_BLOCK = "repeated_block"  # one block class traced N times inside one graph
    CACHE_MISS = "cache_miss"  # graphs compiled afresh: the cache missed or was bypassed
    EXPENSIVE_HIT = "expensive_hit"  # a cache hit that still compiled
    COMPILE_AFTER_WARMUP = "compile_after_warmup"  # a latency spike while serving
    COMPILE_AFTER_READY = "compile_after_ready"  # a compile after the program said it was ready
    SHARED_FRAME = "shared_frame"  # components sharing one frame and its recompile limit
    RANK_DIVERGENCE = "rank_divergence"  # ranks whose graphs or cache outcomes differ
    NODE_CACHE_MISS = "node_cache_miss"  # a node missed the cache where another node hit it
    COSTLY_TRACE = "costly_trace"  # one user function holds much of a component's Dynamo time
    USELESS_WARMUP = "useless_warmup"  # a warm-up that ran and compiled nothing

    def __str__(self) -> str:  # "recompiles", in messages and f-strings alike
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


@dataclass(frozen=True)
class Finding:
    """One thing to change, with the seconds at stake, the evidence and the fix.

    ``kind`` is a :class:`FindingKind` (a string given is turned into one, so
    ``Finding("recompiles", ...)`` works and ``f.kind == "recompiles"`` holds).

    >>> Finding("recompiles", "encoder", 1.5, "t", "f").to_dict()["kind"]
    'recompiles'
    """

    kind: FindingKind
    component: str  # the component it concerns ("" for a whole job)
    seconds: float  # compile seconds at stake: what the fix would save, or what the problem cost
    title: str  # one line
    fix: str  # what to change, concretely
    location: str = ""  # file:line of the compiled code or of the break ("" if unknown)
    evidence: Mapping[str, Any] = field(default_factory=dict)  # JSON-ready: records, guards, keys

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", FindingKind(self.kind))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "component": self.component,
            "seconds": self.seconds,
            "title": self.title,
            "location": self.location,
            "evidence": dict(self.evidence),
            "fix": self.fix,
        }

    @classmethod
    def from_fields(cls, f: Fields) -> Finding:
        """Read :meth:`to_dict` output, every field checked."""
        return cls(
            f.choice("kind", FindingKind),
            f.string("component"),
            f.number("seconds", minimum=0.0),
            f.string("title"),
            f.string("fix"),
            f.string("location"),
            dict(f.obj("evidence").data),
        )


def doctor_dict(findings: Iterable[Finding]) -> dict[str, Any]:
    """The JSON ``compiletrace doctor --json`` writes.

    >>> doctor_dict([])
    {'kind': 'compiletrace.doctor', 'schema_version': 1, 'findings': []}
    """
    return FileKind.DOCTOR.envelope({"findings": [f.to_dict() for f in findings]})


def findings_from_dict(data: Any, source: str = "findings") -> list[Finding]:
    """Read :func:`doctor_dict` output; raises :class:`~compiletrace.RunFileError` naming
    the first bad field."""
    f = Fields(data, source)
    FileKind.DOCTOR.check(f)
    return [Finding.from_fields(item) for item in f.items("findings")]
