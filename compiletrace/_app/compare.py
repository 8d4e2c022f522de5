"""Regression checks: compare two saved runs (profile JSON or bench JSON) and say what got slower.

A figure slowed down when it grew by more than ``threshold_pct`` percent of its base value
and by more than ``min_seconds``. A profile run is compared as a total (every graph's
compile time), then per component, per backend phase and per graph; graphs are matched
across runs by component, code name and occurrence (compile ids can shift), and a graph
only in the new run (a new graph break, a new recompile) slowed down too, while one only in
the base run is reported as gone. Runs recorded with ``trace_cost`` are compared per traced
function too (Dynamo's self time tracing it, per component; scope "function").

Every change is shown; only those in the gated scopes are regressions (by default the total
and each component: a run much faster overall does not fail because one phase moved).
Bench runs compare their averages, and every one is gated: the start-up phases' too
(``avg_cold_phase_time[load weights]``, ...), so a change can be gated on "loading got 20%
slower" with ``--threshold 20``. A phase only one run has is shown, never a regression.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from compiletrace._data.bench import BenchResult, phase_metric
from compiletrace._data.files import read
from compiletrace._data.kinds import FileKind
from compiletrace._data.records import NS_PER_S, GraphRecord, component_totals, graph_keys, top_self_times
from compiletrace._data.run import RUN_SCHEMA_VERSION, Run
from compiletrace._data.run_meta import RunMeta
from compiletrace._data.torch_trace import TRACE_SOURCE
from compiletrace._io.errors import UsageError
from compiletrace._io.text import printable
from compiletrace.reports import render_table

__all__ = [
    "DEFAULT_GATES",
    "GATES",
    "Change",
    "Comparison",
    "RunFile",
    "compare_files",
    "compare_runs",
    "load_run_file",
    "parse_gates",
    "phase_metric",
]

PROFILE = "profile"
BENCH = "bench"
TOTAL = "total"
METRIC = "metric"  # a bench run's figures: always gated
GATES = (
    TOTAL,
    "component",
    "phase",
    "graph",
    "function",
)  # the scopes of a profile comparison, in table order
DEFAULT_GATES = (TOTAL, "component")


@dataclass(frozen=True)
class RunFile:
    """A saved run, reduced to what can be compared."""

    path: str
    kind: str  # "profile" or "bench"
    schema_version: int
    records: tuple[GraphRecord, ...] = ()  # profile runs
    metrics: dict[str, float] = field(default_factory=dict)  # bench runs: avg_* figures, phases too
    about: dict[str, str] = field(default_factory=dict)  # model, backend, torch_version, where known
    meta: RunMeta = field(default_factory=RunMeta, compare=False)  # a profile run's (its cache keys)


def load_run_file(path: str | os.PathLike[str]) -> RunFile:
    """Read a profile JSON (``compiletrace profile --json``) or a bench JSON
    (``compiletrace bench startup --output-json``), checking every figure it uses.

    Raises :class:`~compiletrace.RunFileError` (naming the file and the field) for a
    missing file and for anything else that is not a valid compiletrace run.
    """
    name = os.fspath(path)
    data = read(name, accept={FileKind.RUN, FileKind.BENCH}, command="compare")
    if isinstance(data, Run):
        meta = data.meta
        shown = {"model": meta.model, "backend": meta.backend, "torch_version": meta.torch_version}
        # torch's trace names neither the model nor (for certain) the backend: only its torch.
        known = ("torch_version",) if meta.source == TRACE_SOURCE else ABOUT
        about = {k: value for k in known if (value := shown[k]) is not None}
        return RunFile(name, PROFILE, RUN_SCHEMA_VERSION, records=data.graph_records, about=about, meta=meta)
    assert isinstance(data, BenchResult)
    return RunFile(name, BENCH, data.schema_version, metrics=data.metrics, about=dict(data.about))


ABOUT = ("model", "backend", "torch_version")  # what two compared runs should share


def parse_gates(values: str | Iterable[str] | None) -> tuple[str, ...]:
    """The gated scopes from ``--gate`` values (each one scope or a comma-separated list),
    in table order; :data:`DEFAULT_GATES` for None. Raises :class:`UsageError` for an
    unknown scope or an empty list.

    >>> parse_gates(["graph,total", "phase"])
    ('total', 'phase', 'graph')
    >>> parse_gates(None)
    ('total', 'component')
    """
    if values is None:
        return DEFAULT_GATES
    items = [values] if isinstance(values, str) else list(values)
    wanted = {part.strip().lower() for item in items for part in str(item).split(",") if part.strip()}
    unknown = sorted(wanted - set(GATES))
    if unknown:
        raise UsageError(f"unknown gate {', '.join(unknown)}; choose from {', '.join(GATES)}")
    if not wanted:
        raise UsageError(f"no gate given; choose from {', '.join(GATES)}")
    return tuple(g for g in GATES if g in wanted)


@dataclass(frozen=True)
class Change:
    """One compared figure, in seconds (None where the figure exists in one run only).

    ``slower``: it grew beyond both thresholds (or is a graph only the new run has);
    ``gated``: its scope is gated, so slower means regressed.

    >>> Change("phase", "backend.cache", 0.14, 1.27, slower=True, gated=False).status
    'slower (not gated)'
    """

    scope: str  # "total", "component", "phase", "graph" or "metric"
    name: str
    base: float | None
    new: float | None
    slower: bool
    gated: bool = True

    @property
    def regressed(self) -> bool:
        return self.slower and self.gated

    @property
    def delta(self) -> float:
        return (self.new or 0.0) - (self.base or 0.0)

    @property
    def status(self) -> str:
        if self.base is None and self.scope == "graph":
            return "NEW GRAPH" if self.regressed else "new graph" + ("" if self.gated else " (not gated)")
        if self.base is None:
            return "new"
        if self.new is None:
            return "gone"
        if self.slower:
            return "REGRESSED" if self.gated else "slower (not gated)"
        return "ok"


@dataclass(frozen=True)
class Comparison:
    """The changes between two runs and the rule that judged them; ``regressions`` are
    the slower changes in gated scopes (what makes ``compiletrace compare`` exit 1)."""

    base: RunFile
    new: RunFile
    changes: tuple[Change, ...]
    threshold_pct: float
    min_seconds: float
    gates: tuple[str, ...] = DEFAULT_GATES

    @property
    def regressions(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.regressed)

    @property
    def differences(self) -> tuple[str, ...]:
        """What the two runs ran that is not the same (``"model: a vs b"``): their figures
        may not measure one thing. Only what both files say is compared.

        >>> a = RunFile("a.json", "profile", 1, about={"model": "m:a", "backend": "eager"})
        >>> b = RunFile("b.json", "profile", 1, about={"model": "m:b", "backend": "eager"})
        >>> compare_runs(a, b).differences
        ('model: m:a vs m:b',)
        """
        return tuple(
            f"{key.replace('_version', '')}: {self.base.about[key]} vs {self.new.about[key]}"
            for key in ABOUT
            if key in self.base.about
            and key in self.new.about
            and self.base.about[key] != self.new.about[key]
        )

    def warning(self) -> str | None:
        """One line when :attr:`differences` has any, else None."""
        if not self.differences:
            return None
        differ = "; ".join(self.differences)
        return printable(f"warning: the runs differ ({differ}): a change may be that, not a regression")

    @property
    def ungated_slower(self) -> tuple[Change, ...]:
        """Changes that slowed down in a scope no gate covers: shown, never failing."""
        return tuple(c for c in self.changes if c.slower and not c.gated)

    def rule(self) -> str:
        """The gate and its thresholds in words (the first two lines of :meth:`table`)."""
        limits = f"a gated figure regresses when it grows by more than {self.threshold_pct:g}% and "
        limits += f"{self.min_seconds:g} s"
        if self.base.kind == BENCH:
            return f"gate: every metric\n{limits}"
        # "function" rows exist only for runs recorded with trace_cost: named when there are some.
        present = {c.scope for c in self.changes}
        shown = [g for g in GATES if g not in self.gates and (g != "function" or g in present)]
        gate = f"gate: {', '.join(self.gates)}" + (f"; shown, not gated: {', '.join(shown)}" if shown else "")
        return f"{gate}\n{limits}" + (" (a new graph regresses too)" if "graph" in self.gates else "")

    def table(self) -> str:
        """The rule, a row per figure (the total first), and the verdict."""

        def fmt(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}"

        rows = []
        for c in self.changes:
            pct = "" if not c.base else f"{100 * c.delta / c.base:+.1f}%"
            rows.append([c.scope, c.name, fmt(c.base), fmt(c.new), f"{c.delta:+.3f}", pct, c.status])
        head = ("scope", "name", "base s", "new s", "delta s", "delta %", "status")
        limits = f"beyond {self.threshold_pct:g}% and {self.min_seconds:g} s"
        n = len(self.regressions)
        verdict = f"{n} regression(s) {limits}" if n else f"no regression {limits}"
        others = self.ungated_slower
        if others:
            scopes = ", ".join(g for g in GATES if any(c.scope == g for c in others))
            verdict += f"; {len(others)} slower figure(s) not gated ({scopes})"
        warning = self.warning()
        return "\n".join(
            [*([warning] if warning else []), self.rule(), "", *render_table(head, rows), "", verdict]
        )


def _grew(base: float, new: float, threshold_pct: float, min_seconds: float) -> bool:
    delta = new - base
    return delta > min_seconds and delta > base * threshold_pct / 100.0


def _profile_figures(records: Sequence[GraphRecord]) -> dict[tuple[str, str], float]:
    figs: dict[tuple[str, str], float] = {
        (TOTAL, "compile time"): sum(r.total_ns for r in records) / NS_PER_S
    }
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


def _function_figures(records: Sequence[GraphRecord]) -> dict[tuple[str, str], float]:
    """Dynamo's self seconds tracing each user function, per component (trace_cost runs)."""
    figs: dict[tuple[str, str], float] = {}
    for comp in component_totals(records):
        roots = [n for r in records if r.component == comp for n in r.trace_cost]
        for name, location, ns, _ in top_self_times(roots, limit=None):
            figs[("function", f"{comp}:{name} ({location})")] = ns / NS_PER_S
    return figs


def compare_runs(
    base: RunFile,
    new: RunFile,
    *,
    threshold_pct: float = 10.0,
    min_seconds: float = 0.05,
    gates: str | Iterable[str] | None = DEFAULT_GATES,
) -> Comparison:
    """Compare two runs of the same kind and schema version; a slower figure in one of the
    ``gates`` scopes (see :func:`parse_gates`) is a regression, any other is only shown.

    >>> empty = RunFile("a.json", "profile", 1)
    >>> result = compare_runs(empty, empty, gates="phase")
    >>> [(c.scope, c.status) for c in result.changes][:1], result.regressions
    ([('total', 'ok')], ())
    """
    gated = parse_gates(gates)
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
        slower = new_is_bad if b is None or n is None else _grew(b, n, threshold_pct, min_seconds)
        changes.append(Change(scope, name, b, n, slower, gated=scope == METRIC or scope in gated))

    if base.kind == BENCH:
        for key in sorted(set(base.metrics) | set(new.metrics)):
            add(METRIC, key, base.metrics.get(key), new.metrics.get(key))
    else:
        bf, nf = _profile_figures(base.records), _profile_figures(new.records)
        for fkey in [*bf, *(k for k in nf if k not in bf)]:
            add(fkey[0], fkey[1], bf.get(fkey), nf.get(fkey))
        bfn, nfn = _function_figures(base.records), _function_figures(new.records)
        for fkey in [*bfn, *(k for k in nfn if k not in bfn)]:
            b_s, n_s = bfn.get(fkey), nfn.get(fkey)
            # A function in one run only was traced in one only (not news); ones too cheap to
            # matter stay out of the table.
            if b_s is not None and n_s is not None and max(b_s, n_s) >= min_seconds:
                add(fkey[0], fkey[1], b_s, n_s)
        bg = dict(graph_keys(base.records))
        ng = dict(graph_keys(new.records))
        for gkey in [*bg, *(k for k in ng if k not in bg)]:
            b_rec, n_rec = bg.get(gkey), ng.get(gkey)
            rec = n_rec or b_rec
            assert rec is not None
            # Component, code and occurrence match the graphs; the compile ids say which they
            # were (the reason is in each run's own report: a line of it would not fit here).
            ids = [r.compile_id for r in (b_rec, n_rec) if r is not None]
            name = f"{gkey[0]}:{gkey[1]}#{gkey[2]} [{' -> '.join(dict.fromkeys(ids))}]"
            if rec.is_recompile:
                name += " (recompile)"
            add(
                "graph",
                name,
                None if b_rec is None else b_rec.total_s,
                None if n_rec is None else n_rec.total_s,
                new_is_bad=b_rec is None,  # a new graph break or recompile
            )
    return Comparison(base, new, tuple(changes), threshold_pct, min_seconds, gated)


def compare_files(
    base_path: str | os.PathLike[str],
    new_path: str | os.PathLike[str],
    *,
    threshold_pct: float = 10.0,
    min_seconds: float = 0.05,
    gates: str | Iterable[str] | None = DEFAULT_GATES,
) -> Comparison:
    """Load two saved runs and compare them (see :func:`compare_runs`).

    >>> compare_files("/no/such/base.json", "/no/such/new.json")
    Traceback (most recent call last):
    ...
    compiletrace._io.errors.RunFileError: /no/such/base.json does not exist
    """
    return compare_runs(
        load_run_file(base_path),
        load_run_file(new_path),
        threshold_pct=threshold_pct,
        min_seconds=min_seconds,
        gates=gates,
    )
