"""Every kind of file compiletrace writes, in one place: the ``kind`` string its versioned
envelope carries, the schema versions there are (what each one added), which of them this
compiletrace reads and which it writes, and what writes the file (for messages that say what
a file is and where it came from). No other module spells a kind.

>>> FileKind.RUN.value, FileKind.RUN.schema_version, FileKind.RUN.readable_versions
('compiletrace.run', 5, frozenset({1, 2, 3, 4, 5}))
>>> FileKind.of({"kind": "compiletrace.gather"})
<FileKind.GATHER: 'compiletrace.gather'>
>>> FileKind.of({"avg_cold_startup_time": 1.0})  # bench averages without an envelope
<FileKind.BENCH: 'compiletrace.bench.startup'>
>>> FileKind.of({"kind": "something else"}) is None
True

Adding a field to a kind's files is a new version of that kind: add a line to its table in
:data:`VERSIONS` (``2: "what it added"``), write the field, and read it in the kind's reader
as ``f.number("new_field") if version >= 2 else DEFAULT``, where ``version`` is what
:meth:`FileKind.check` returned. Files of every version in the table still load; a file of a
version this compiletrace does not know is refused, naming the versions it reads.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from compiletrace._io.envelope import Fields, envelope

__all__ = ["VERSIONS", "FileKind"]

# Averages of a start-up benchmark with no envelope (a baseline written by hand, or by a
# benchmark before its files had one) are told apart by these keys.
_BARE_BENCH_KEYS = tuple(f"avg_{prefix}_startup_time" for prefix in ("cold", "warm", "portable"))


class FileKind(enum.Enum):
    """A kind of file, by the ``kind`` string of its envelope."""

    RUN = "compiletrace.run"  # one process's profile: records, warm-up, meta, timeline
    BENCH = "compiletrace.bench.startup"  # start-up benchmark averages (cold, warm, portable)
    GATHER = "compiletrace.gather"  # per-rank figures of a multi-process job
    DOCTOR = "compiletrace.doctor"  # the doctor's findings
    JOB = "compiletrace.job"  # every process of one command (compiletrace run)
    # A process's start marker in a job directory: the launcher's own, read by it alone.
    JOB_STARTED = "compiletrace.job.started"
    WHY = "compiletrace.why"  # why a compile cache did not apply: two runs compared

    @property
    def versions(self) -> Mapping[int, str]:
        """Every schema version of this kind, with what it added."""
        return VERSIONS[self]

    @property
    def schema_version(self) -> int:
        """The version this compiletrace writes: the newest."""
        return max(VERSIONS[self])

    @property
    def readable_versions(self) -> frozenset[int]:
        """The versions this compiletrace reads: every one there has been."""
        return frozenset(VERSIONS[self])

    @property
    def description(self) -> str:
        """What the file is, and the command that writes it."""
        return _DESCRIPTIONS[self]

    @property
    def loadable(self) -> bool:
        """Whether the one reader (``compiletrace.load``, ``report``, ``doctor``, ``compare``)
        reads this kind; a job's start markers are read by its launcher alone, and a why
        report is compiletrace's output only."""
        return self not in (FileKind.JOB_STARTED, FileKind.WHY)

    def envelope(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The file to save: this kind, the version this compiletrace writes, then ``body``."""
        return envelope(self.value, self.schema_version, body)

    def check(self, f: Fields, hint: str | None = None) -> int:
        """Check a parsed file's envelope: its kind must be this one and its version one this
        compiletrace reads (else :class:`~compiletrace.RunFileError`, saying what the file
        should have been: ``hint``, or the kind's description). Returns the version."""
        return f.check_kind(self.value, self.readable_versions, hint or self.description)

    @classmethod
    def of(cls, data: Any) -> FileKind | None:
        """The kind of a parsed JSON document, or None for one compiletrace did not write."""
        if not isinstance(data, dict):
            return None
        kind = data.get("kind")
        if kind is None and any(key in data for key in _BARE_BENCH_KEYS):
            return cls.BENCH
        try:
            return cls(kind)
        except ValueError:
            return None


# Each kind's versions, and what each added to the one before.
VERSIONS: Mapping[FileKind, Mapping[int, str]] = {
    FileKind.RUN: {
        1: "graph records and phases, warm-up, meta, the timeline's window",
        2: "each cache lookup's status, role, key parts and built code; meta.cache_keys",
        3: "each record's split into the warm-start ledger's lines (frame_lines), the work on "
        "compiled graphs' first calls (registry.runtime_events), the process's ready mark and a "
        "compile torch's stance refused after it (meta.ready, meta.refused_after_ready), the runtime "
        "rows of a trace (meta.trace.runtime_rows)",
        4: "each record's CPU time (cpu_ns, setup_cpu_ns), the block repeated inside its graph "
        "(repeated_block), torch's automatic-dynamic sources (dynamic_sources), whether a .item() "
        "break feeds a branch (graph_breaks[].scalar_in_branch)",
        5: "the process's node and host name (meta.node, meta.host), read to put a job of several "
        "nodes together",
    },
    FileKind.BENCH: {1: "avg_* figures per kind of start-up, their phases, the options"},
    FileKind.GATHER: {1: "each rank's figures and graphs' cache outcomes, the maximum, the slowest rank"},
    FileKind.DOCTOR: {1: "findings"},
    FileKind.JOB: {
        1: "the command, its exit status and directory, each process's run, the missing",
        2: "the ready mark asked for (ready), and the compiles after ready (after_ready: derived, "
        "for readers other than compiletrace; not read back)",
    },
    FileKind.JOB_STARTED: {1: "the process", 2: "the process's node and host name"},
    FileKind.WHY: {1: "the graphs matched, each missed tier and its changed key parts, grouped by reason"},
}

_DESCRIPTIONS = {
    FileKind.RUN: "a profile run ('compiletrace profile --json')",
    FileKind.BENCH: "a start-up benchmark ('compiletrace bench startup --output-json')",
    FileKind.GATHER: "a multi-rank job's figures ('compiletrace profile --nproc N --json')",
    FileKind.DOCTOR: "the doctor's findings ('compiletrace doctor --json')",
    FileKind.JOB: "a command's job, every process ('compiletrace run --json')",
    FileKind.JOB_STARTED: "a job process's start marker",
    FileKind.WHY: "why a cache did not apply ('compiletrace why --json'), which compiletrace writes only",
}
