"""Regression checks: compare two saved runs (profile JSON or bench JSON) and say what got slower.

A figure regressed when it grew by more than ``threshold_pct`` percent of its base value
and by more than ``min_seconds``. Graphs are matched across runs by component, code name
and occurrence (compile ids can shift); a graph only in the new run (a new graph break, a
new recompile) is a regression, one only in the base run is reported as gone.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from compiletrace._app.analysis import graph_keys
from compiletrace._core.records import NS_PER_S, GraphRecord, component_totals
from compiletrace._core.registry import RUN_KIND, RUN_SCHEMA_VERSION, Registry
from compiletrace._io.envelope import Fields, read_json_file
from compiletrace._io.errors import RunFileError, UsageError
from compiletrace.bench.startup import BENCH_KIND, BENCH_SCHEMA_VERSION
from compiletrace.reports import render_table

__all__ = ["Change", "Comparison", "RunFile", "compare_files", "compare_runs", "load_run_file"]

PROFILE = "profile"
BENCH = "bench"
_BENCH_PREFIXES = ("cold", "warm", "portable")
_BENCH_METRICS = ("startup_time", "compilation_time", "encoder_compilation_time", "artifact_load_time")


@dataclass(frozen=True)
class RunFile:
    """A saved run, reduced to what can be compared."""

    path: str
    kind: str  # "profile" or "bench"
    schema_version: int
    records: tuple[GraphRecord, ...] = ()  # profile runs
    metrics: dict[str, float] = field(default_factory=dict)  # bench runs: avg_* figures


def load_run_file(path: str | os.PathLike[str]) -> RunFile:
    """Read a profile JSON (``compiletrace profile --json``) or a bench JSON
    (``compiletrace bench startup --output-json``), checking every figure it uses.

    Raises :class:`~compiletrace.RunFileError` (naming the file and the field) for a
    missing file and for anything else that is not a valid compiletrace run.
    """
    name = os.fspath(path)
    data = read_json_file(name)
    if not isinstance(data, dict):
        raise RunFileError(f"{name} is not a compiletrace run (expected a JSON object)")
    f = Fields(data, name)
    kind = f.data.get("kind")
    if kind == RUN_KIND:
        version = f.check_kind(RUN_KIND, {RUN_SCHEMA_VERSION}, "a compiletrace run")
        records = Registry.from_dict(f.obj("registry").data, name, "registry").records()
        return RunFile(name, PROFILE, version, records=records)
    if kind == BENCH_KIND or (
        kind is None and any(f"avg_{p}_startup_time" in f.data for p in _BENCH_PREFIXES)
    ):
        version = f.check_kind(BENCH_KIND, {BENCH_SCHEMA_VERSION}, "a start-up benchmark") if kind else 1
        metrics = {
            key: f.number(key, minimum=0.0)
            for key in (f"avg_{p}_{m}" for p in _BENCH_PREFIXES for m in _BENCH_METRICS)
            if key in f.data
        }
        return RunFile(name, BENCH, version, metrics=metrics)
    raise RunFileError(
        f"{name} is not a compiletrace run: expected the JSON of 'compiletrace profile --json' "
        "or 'compiletrace bench startup --output-json'"
    )


@dataclass(frozen=True)
class Change:
    """One compared figure, in seconds (None where the figure exists in one run only)."""

    scope: str  # "component", "phase", "graph" or "metric"
    name: str
    base: float | None
    new: float | None
    regressed: bool

    @property
    def delta(self) -> float:
        return (self.new or 0.0) - (self.base or 0.0)

    @property
    def status(self) -> str:
        if self.base is None:
            return "NEW GRAPH" if self.scope == "graph" else "new"
        if self.new is None:
            return "gone"
        return "REGRESSED" if self.regressed else "ok"


@dataclass(frozen=True)
class Comparison:
    base: RunFile
    new: RunFile
    changes: tuple[Change, ...]
    threshold_pct: float
    min_seconds: float

    @property
    def regressions(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.regressed)

    def table(self) -> str:
        def fmt(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}"

        rows = []
        for c in self.changes:
            pct = "" if not c.base else f"{100 * c.delta / c.base:+.1f}%"
            rows.append([c.scope, c.name, fmt(c.base), fmt(c.new), f"{c.delta:+.3f}", pct, c.status])
        head = ("scope", "name", "base s", "new s", "delta s", "delta %", "status")
        verdict = (
            f"{len(self.regressions)} regression(s) beyond {self.threshold_pct:g}% and {self.min_seconds:g} s"
            if self.regressions
            else f"no regression beyond {self.threshold_pct:g}% and {self.min_seconds:g} s"
        )
        return "\n".join([*render_table(head, rows), "", verdict])


def _grew(base: float, new: float, threshold_pct: float, min_seconds: float) -> bool:
    delta = new - base
    return delta > min_seconds and delta > base * threshold_pct / 100.0


def _profile_figures(records: Sequence[GraphRecord]) -> dict[tuple[str, str], float]:
    figs: dict[tuple[str, str], float] = {}
    for comp, ns in component_totals(records).items():
        figs[("component", comp)] = ns / NS_PER_S
    phase_ns: dict[str, int] = {"dynamo": 0, "backward": 0}
    for r in records:
        phase_ns["dynamo"] += r.dynamo_ns or 0
        phase_ns["backward"] += r.backward_ns
        for phase, ns in r.phases or (("other", r.backend_ns),):
            phase_ns[f"backend.{phase}"] = phase_ns.get(f"backend.{phase}", 0) + ns
    for phase, ns in phase_ns.items():
        figs[("phase", phase)] = ns / NS_PER_S
    return figs


def compare_runs(
    base: RunFile, new: RunFile, *, threshold_pct: float = 10.0, min_seconds: float = 0.05
) -> Comparison:
    """Compare two runs of the same kind and schema version."""
    for option, value in (("threshold", threshold_pct), ("min-seconds", min_seconds)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise UsageError(f"{option} must be a finite number >= 0, got {value!r}")
    if base.kind != new.kind:
        raise UsageError(f"cannot compare a {base.kind} run ({base.path}) with a {new.kind} run ({new.path})")
    if base.schema_version != new.schema_version:
        raise UsageError(
            f"cannot compare schema version {base.schema_version} ({base.path}) with "
            f"{new.schema_version} ({new.path})"
        )
    changes: list[Change] = []

    def add(scope: str, name: str, b: float | None, n: float | None, new_is_bad: bool = False) -> None:
        regressed = new_is_bad if b is None or n is None else _grew(b, n, threshold_pct, min_seconds)
        changes.append(Change(scope, name, b, n, regressed))

    if base.kind == BENCH:
        for key in sorted(set(base.metrics) | set(new.metrics)):
            add("metric", key, base.metrics.get(key), new.metrics.get(key))
    else:
        bf, nf = _profile_figures(base.records), _profile_figures(new.records)
        for fkey in [*bf, *(k for k in nf if k not in bf)]:
            add(fkey[0], fkey[1], bf.get(fkey), nf.get(fkey))
        bg = dict(graph_keys(base.records))
        ng = dict(graph_keys(new.records))
        for gkey in [*bg, *(k for k in ng if k not in bg)]:
            b_rec, n_rec = bg.get(gkey), ng.get(gkey)
            rec = n_rec or b_rec
            assert rec is not None
            name = f"{gkey[0]}:{gkey[1]}#{gkey[2]}"
            if rec.is_recompile and rec.recompile_reason:
                name += f" (recompile: {rec.recompile_reason})"
            add(
                "graph",
                name,
                None if b_rec is None else b_rec.total_s,
                None if n_rec is None else n_rec.total_s,
                new_is_bad=b_rec is None,  # a new graph break or recompile
            )
    return Comparison(base, new, tuple(changes), threshold_pct, min_seconds)


def compare_files(
    base_path: str | os.PathLike[str],
    new_path: str | os.PathLike[str],
    *,
    threshold_pct: float = 10.0,
    min_seconds: float = 0.05,
) -> Comparison:
    """Load two saved runs and compare them (see :func:`compare_runs`)."""
    return compare_runs(
        load_run_file(base_path),
        load_run_file(new_path),
        threshold_pct=threshold_pct,
        min_seconds=min_seconds,
    )
