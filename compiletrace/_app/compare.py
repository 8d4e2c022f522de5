"""Regression checks: compare two saved runs (profile JSON, a job's JSON or bench JSON) and
say what got slower.

A figure slowed down when it grew by more than ``threshold_pct`` percent of its base value
and by more than ``min_seconds``. A profile run is compared as a total (every graph's
compile time), then per component, per backend phase and per graph; graphs are matched
across runs by component, code name and occurrence (compile ids can shift), and a graph
only in the new run (a new graph break, a new recompile) slowed down too, while one only in
the base run is reported as gone. Runs recorded with ``trace_cost`` are compared per traced
function too (Dynamo's self time tracing it, per component; scope "function").

A job (``compiletrace run --json``, or torch's trace of several processes) is compared in
total (every process's compile seconds added up) and process by process, its processes
matched by role ("main", "rank 0", a multiprocessing name); a single run stands for a job's
one process, so a profile run, a job and a trace of one process compare with each other.

Every change is shown; only those in the gated scopes are regressions (by default the total
and each component: a run much faster overall does not fail because one phase moved).
Bench runs compare their averages, and every one is gated: the start-up phases' too
(``avg_cold_phase_time[load weights]``, ...), so a change can be gated on "loading got 20%
slower" with ``--threshold 20``. A phase only one run has is shown, never a regression.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence

from compiletrace._data import comparison as _data
from compiletrace._data.bench import BenchResult, phase_metric
from compiletrace._data.comparison import (
    ABOUT,
    BENCH,
    DEFAULT_GATES,
    GATES,
    METRIC,
    PROFILE,
    TOTAL,
    Change,
    RunFile,
)
from compiletrace._data.files import expand_inputs, read, read_jobs
from compiletrace._data.job import Job
from compiletrace._data.kinds import FileKind
from compiletrace._data.records import NS_PER_S, GraphRecord, component_totals, graph_keys, top_self_times
from compiletrace._data.run import RUN_SCHEMA_VERSION, Run
from compiletrace._data.torch_trace import TRACE_SOURCE
from compiletrace._io.errors import UsageError

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


def load_run_file(path: str | os.PathLike[str]) -> RunFile:
    """Read a profile JSON (``compiletrace profile --json``), a job's JSON (``compiletrace
    run --json``), torch's trace (``TORCH_TRACE``) or a bench JSON (``compiletrace bench
    startup --output-json``), checking every figure it uses.

    Raises :class:`~compiletrace.RunFileError` (naming the file and the field) for a
    missing file and for anything else that is not a valid compiletrace run.
    """
    name = os.fspath(path)
    named = expand_inputs([name])  # a directory of a job's nodes' files reads as one job
    data = (
        read_jobs(named, "compare")
        if len(named) > 1
        else read(named[0][0], accept={FileKind.RUN, FileKind.JOB, FileKind.BENCH}, command="compare")
    )
    if isinstance(data, Run):
        return RunFile(name, PROFILE, RUN_SCHEMA_VERSION, records=data.graph_records, about=_about(data))
    if isinstance(data, Job):
        processes = _process_names(data)
        # What every compiling process says alike (a job's processes may differ in backend).
        abouts = [_about(p.run) for p in data.compiling()]
        about = {k: v for k, v in abouts[0].items() if all(a.get(k) == v for a in abouts)} if abouts else {}
        return RunFile(
            name, PROFILE, RUN_SCHEMA_VERSION, records=data.records(), about=about, processes=processes
        )
    assert isinstance(data, BenchResult)
    return RunFile(name, BENCH, data.schema_version, metrics=data.metrics, about=dict(data.about))


def _about(run: Run) -> dict[str, str]:
    meta = run.meta
    shown = {"model": meta.model, "backend": meta.backend, "torch_version": meta.torch_version}
    # torch's trace names neither the model nor (for certain) the backend: only its torch.
    known = ("torch_version",) if meta.source == TRACE_SOURCE else ABOUT
    return {k: value for k in known if (value := shown[k]) is not None}


def _process_names(job: Job) -> tuple[tuple[str, tuple[GraphRecord, ...]], ...]:
    """The compiling processes, named alike in two runs of one command: by role, except a
    trace's "pid N" (a pid differs from run to run), named by its place; a role that comes
    twice gets its number ("worker #2")."""
    named: list[tuple[str, tuple[GraphRecord, ...]]] = []
    seen: dict[str, int] = {}
    for index, process in enumerate(job.compiling()):
        role = process.info.role
        name = f"process {index + 1}" if role.startswith("pid ") else role
        seen[name] = seen.get(name, 0) + 1
        named.append((name if seen[name] == 1 else f"{name} #{seen[name]}", process.run.graph_records))
    return tuple(named)


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


class Comparison(_data.Comparison):
    """The changes between two runs (:class:`compiletrace._data.comparison.Comparison`),
    with their views: the table ``compiletrace compare`` prints, its rule and its warning."""

    def warning(self) -> str | None:
        """One line when :attr:`differences` has any, else None."""
        from compiletrace.reports import comparison_warning

        return comparison_warning(self)

    def rule(self) -> str:
        """The gate and its thresholds in words (the first two lines of :meth:`table`)."""
        from compiletrace.reports import comparison_rule

        return comparison_rule(self)

    def table(self) -> str:
        """The rule, a row per figure (the total first), and the verdict."""
        from compiletrace.reports import comparison_text

        return comparison_text(self)


def _grew(base: float, new: float, threshold_pct: float, min_seconds: float) -> bool:
    delta = new - base
    return delta > min_seconds and delta > base * threshold_pct / 100.0


def _profile_figures(records: Sequence[GraphRecord]) -> dict[tuple[str, str], float]:
    figs: dict[tuple[str, str], float] = {(TOTAL, "compile time"): _total_s(records)}
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


def _total_s(records: Sequence[GraphRecord]) -> float:
    return sum(r.total_ns for r in records) / NS_PER_S


def _processes_of(run: RunFile) -> dict[str, tuple[GraphRecord, ...]]:
    """A job's compiling processes by name; a single run's records are its one process."""
    if run.processes:
        return dict(run.processes)
    return {"main": run.records} if run.records else {}


def _compare_records(
    base: Sequence[GraphRecord],
    new: Sequence[GraphRecord],
    add: Callable[..., None],
    min_seconds: float,
    prefix: str = "",
) -> None:
    """The rows of one process (or one run): its total, components, phases, traced
    functions and graphs, each name after ``prefix`` (the process's, in a job)."""
    bf, nf = _profile_figures(base), _profile_figures(new)
    for fkey in [*bf, *(k for k in nf if k not in bf)]:
        add(fkey[0], prefix + fkey[1], bf.get(fkey), nf.get(fkey))
    bfn, nfn = _function_figures(base), _function_figures(new)
    for fkey in [*bfn, *(k for k in nfn if k not in bfn)]:
        b_s, n_s = bfn.get(fkey), nfn.get(fkey)
        # A function in one run only was traced in one only (not news); ones too cheap to
        # matter stay out of the table.
        if b_s is not None and n_s is not None and max(b_s, n_s) >= min_seconds:
            add(fkey[0], prefix + fkey[1], b_s, n_s)
    bg = dict(graph_keys(base))
    ng = dict(graph_keys(new))
    for gkey in [*bg, *(k for k in ng if k not in bg)]:
        b_rec, n_rec = bg.get(gkey), ng.get(gkey)
        rec = n_rec or b_rec
        assert rec is not None
        # Component, code and occurrence match the graphs; the compile ids say which they
        # were (the reason is in each run's own report: a line of it would not fit here).
        ids = [r.compile_id for r in (b_rec, n_rec) if r is not None]
        name = f"{prefix}{gkey[0]}:{gkey[1]}#{gkey[2]} [{' -> '.join(dict.fromkeys(ids))}]"
        if rec.is_recompile:
            name += " (recompile)"
        add(
            "graph",
            name,
            None if b_rec is None else b_rec.total_s,
            None if n_rec is None else n_rec.total_s,
            new_is_bad=b_rec is None,  # a new graph break or recompile
        )


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
        base_processes, new_processes = _processes_of(base), _processes_of(new)
        if max(len(base_processes), len(new_processes)) <= 1:
            _compare_records(base.records, new.records, add, min_seconds)
        else:
            # In total (every process's seconds added up: CPU-seconds, not the job's wall
            # time), then process by process.
            add(TOTAL, "compile time", _total_s(base.records), _total_s(new.records))
            for name in dict.fromkeys([*base_processes, *new_processes]):
                b_records, n_records = base_processes.get(name), new_processes.get(name)
                if b_records is None or n_records is None:  # a process only one run had
                    b_s = None if b_records is None else _total_s(b_records)
                    n_s = None if n_records is None else _total_s(n_records)
                    add(TOTAL, f"{name}: compile time", b_s, n_s)
                else:
                    _compare_records(b_records, n_records, add, min_seconds, prefix=f"{name}: ")
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
