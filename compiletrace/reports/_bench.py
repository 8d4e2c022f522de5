"""What ``compiletrace bench startup`` prints: a table per kind of start-up (cold, warm,
portable) from the benchmark's JSON (the keys :mod:`compiletrace.bench.startup` writes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiletrace._data.bench import PERCENTILES
from compiletrace.reports._table import render_table

__all__ = ["bench_text"]

# The rows of each table: the JSON key's metric and its label. ``compilation`` is every
# component but the encoder (the language model, for the built-in model); the key keeps the
# standard name, the label says what it holds.
_METRICS = (
    ("startup", "startup time"),
    ("compilation", "non-encoder compilation time"),
    ("encoder_compilation", "encoder compilation time"),
    ("portable_artifact_load", "artifact load time"),
)


def _row(label: str, avg: float, pct: Any, n: int) -> list[str]:
    # One iteration: its average and every percentile are the same number, shown once.
    if n == 1 or not isinstance(pct, dict):
        return [label, f"{avg:.3f}"]
    return [label, f"{avg:.3f}", *[f"{pct[str(p)]:.3f}" for p in PERCENTILES]]


def bench_text(data: Mapping[str, Any]) -> str:
    """The COLD, WARM and PORTABLE tables: per metric, the average and the percentiles
    (seconds); with one iteration, its single value. Then, when the children reported
    them, the same per start-up phase (from each child process's own start).

    >>> data = {"avg_cold_startup_time": 2.0, "cold_startup_times": [2.0],
    ...         "cold_startup_percentiles": {str(p): 2.0 for p in PERCENTILES},
    ...         "cold_cache_hits": [0], "cold_cache_misses": [2]}
    >>> print(bench_text(data))
    COLD (1 iteration)
    metric (s)    value
    ------------  -----
    startup time  2.000
    cache hits per iteration: [0]; misses: [2]
    """
    lines: list[str] = []
    for prefix in ("cold", "warm", "portable"):
        if f"avg_{prefix}_startup_time" not in data:
            continue
        n = len(data[f"{prefix}_startup_times"])
        # One iteration: its average and every percentile are the same number, shown once.
        headers = (
            ["metric (s)", "value"] if n == 1 else ["metric (s)", "avg", *[f"p{p}" for p in PERCENTILES]]
        )
        rows = []
        for key, label in _METRICS:
            name = key if key.startswith(prefix) else f"{prefix}_{key}"
            avg = data.get(f"avg_{name}_time")
            if avg is None:
                continue
            rows.append(_row(label, avg, data.get(f"{name}_percentiles"), n))
        lines.append(f"{prefix.upper()} ({n} iteration{'' if n == 1 else 's'})")
        lines.extend(render_table(headers, rows))
        phases = data.get(f"avg_{prefix}_phase_time")
        if isinstance(phases, dict) and phases:
            pcts = data.get(f"{prefix}_phase_percentiles") or {}
            phase_rows = [_row(name, avg, pcts.get(name), n) for name, avg in phases.items()]
            lines.append("")
            lines.extend(render_table(["start-up phase (s)", *headers[1:]], phase_rows))
        hits, misses = data[f"{prefix}_cache_hits"], data[f"{prefix}_cache_misses"]
        lines.append(f"cache hits per iteration: {hits}; misses: {misses}")
        lines.append("")
    return "\n".join(lines).rstrip()
