"""The averages a start-up benchmark saves (``compiletrace bench startup --output-json``),
as what can be read back and compared: the ``avg_*`` figures of each kind of start-up
(cold, warm, portable) and the average seconds of each start-up phase.

>>> from compiletrace._io.envelope import Fields
>>> doc = {"kind": "compiletrace.bench.startup", "schema_version": 1, "avg_cold_startup_time": 2.5,
...        "avg_cold_phase_time": {"load weights": 0.5}}
>>> BenchResult.from_dict(doc, "b.json").metrics
{'avg_cold_startup_time': 2.5, 'avg_cold_phase_time[load weights]': 0.5}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compiletrace._data.kinds import FileKind
from compiletrace._io.envelope import Fields

__all__ = [
    "BENCH_METRICS",
    "BENCH_PREFIXES",
    "PERCENTILES",
    "BenchResult",
    "phase_metric",
    "seconds_lists",
]

BENCH_PREFIXES = ("cold", "warm", "portable")
BENCH_METRICS = ("startup_time", "compilation_time", "encoder_compilation_time", "artifact_load_time")
PERCENTILES = (10, 25, 50, 75, 90, 99)  # each figure's ``*_percentiles``, keyed by the percentile as text


def phase_metric(prefix: str, phase: str) -> str:
    """The compared name of a start-up phase's average in a bench run.

    >>> phase_metric("cold", "load weights")
    'avg_cold_phase_time[load weights]'
    """
    return f"avg_{prefix}_phase_time[{phase}]"


@dataclass(frozen=True)
class BenchResult:
    """A saved start-up benchmark's averages, by compared name."""

    source: str  # the file it was read from
    schema_version: int
    metrics: dict[str, float] = field(default_factory=dict)  # avg_* figures, phases too
    # What was run, where the file says: model, backend, torch_version (compare warns on a change).
    about: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any, source: str = "bench") -> BenchResult:
        """Read a bench file, checking every figure it holds; averages with no envelope
        (only ``avg_*`` keys: a baseline written by hand) read as version 1."""
        f = Fields(data, source)
        version = FileKind.BENCH.check(f) if "kind" in f.data else 1
        metrics = {
            key: f.number(key, minimum=0.0)
            for key in (f"avg_{p}_{m}" for p in BENCH_PREFIXES for m in BENCH_METRICS)
            if key in f.data
        }
        for prefix in BENCH_PREFIXES:
            key = f"avg_{prefix}_phase_time"
            if key in f.data:  # a kind of start-up that was not run, or recorded no phase
                for phase, seconds in f.seconds_by_name(key).items():
                    metrics[phase_metric(prefix, phase)] = seconds
        options = f.data.get("options")
        about: dict[str, str] = {}
        if isinstance(options, Mapping):
            if "model" in options:  # None: the built-in model
                about["model"] = "the built-in model" if options["model"] is None else str(options["model"])
            about.update(
                {k: str(options[k]) for k in ("backend", "torch_version") if isinstance(options.get(k), str)}
            )
        return cls(source, version, metrics, about)


def seconds_lists(per_iteration: Sequence[Mapping[str, float]]) -> dict[str, list[float]]:
    """``[{name: s}, ...]`` -> ``{name: [s per iteration]}``, names in first-seen order, 0.0
    where an iteration lacks the name: the per-iteration lists a benchmark reports.

    >>> seconds_lists([{"load": 1.0, "unattributed": 0.5}, {"unattributed": 0.25}])
    {'load': [1.0, 0.0], 'unattributed': [0.5, 0.25]}
    """
    names = list(dict.fromkeys(name for it in per_iteration for name in it))
    return {name: [float(it.get(name, 0.0)) for it in per_iteration] for name in names}
