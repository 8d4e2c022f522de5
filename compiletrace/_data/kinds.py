"""Every kind of file compiletrace writes, in one place: the ``kind`` string its versioned
envelope carries, the schema version this compiletrace writes and reads, and what writes
it (for messages that say what a file is and where it came from).

>>> FileKind.RUN.value, FileKind.RUN.schema_version
('compiletrace.run', 1)
>>> FileKind.of({"kind": "compiletrace.gather"})
<FileKind.GATHER: 'compiletrace.gather'>
>>> FileKind.of({"avg_cold_startup_time": 1.0})  # bench files written before kinds existed
<FileKind.BENCH: 'compiletrace.bench.startup'>
>>> FileKind.of({"kind": "something else"}) is None
True
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["FileKind"]

# Bench files saved before the envelope had a kind are told apart by these keys.
_LEGACY_BENCH_KEYS = tuple(f"avg_{prefix}_startup_time" for prefix in ("cold", "warm", "portable"))


class FileKind(enum.Enum):
    """A kind of file, by the ``kind`` string of its envelope."""

    RUN = "compiletrace.run"  # one process's profile: records, warm-up, meta, timeline
    BENCH = "compiletrace.bench.startup"  # start-up benchmark averages (cold, warm, portable)
    GATHER = "compiletrace.gather"  # per-rank figures of a multi-process job
    DOCTOR = "compiletrace.doctor"  # the doctor's findings
    JOB = "compiletrace.job"  # every process of one command (compiletrace run)

    @property
    def schema_version(self) -> int:
        """The version this compiletrace writes (and the only one it reads, so far)."""
        return 1

    @property
    def description(self) -> str:
        """What the file is, and the command that writes it."""
        return _DESCRIPTIONS[self]

    @classmethod
    def of(cls, data: Any) -> FileKind | None:
        """The kind of a parsed JSON document, or None for one compiletrace did not write."""
        if not isinstance(data, dict):
            return None
        kind = data.get("kind")
        if kind is None and any(key in data for key in _LEGACY_BENCH_KEYS):
            return cls.BENCH
        try:
            return cls(kind)
        except ValueError:
            return None


_DESCRIPTIONS = {
    FileKind.RUN: "a profile run ('compiletrace profile --json')",
    FileKind.BENCH: "a start-up benchmark ('compiletrace bench startup --output-json')",
    FileKind.GATHER: "a multi-rank job's figures ('compiletrace profile --nproc N --json')",
    FileKind.DOCTOR: "the doctor's findings ('compiletrace doctor --json')",
    FileKind.JOB: "a command's job, every process ('compiletrace run --json')",
}
