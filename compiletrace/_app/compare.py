"""Regression checks: compare two saved runs (profile JSON, a job's JSON or bench JSON), or
several of each side, and say what got slower.

What the runs count (graphs compiled, frames, recompiles, cache misses per tier, compiles
after ready: :data:`COUNTS`) is judged first and exactly: a busy machine moves none of it, and
any count that rises fails. Seconds are judged beyond a noise bound: for one run per side
:data:`ONE_RUN_BOUNDS` (measured), for several runs per side each side's median beyond the
larger side's spread (as ``doctor --verify`` reads its rounds; :func:`compare_many`).

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

Seconds are judged on one clock (``clock``): by default the compile work's CPU seconds where
both runs recorded them for every graph (two identical warm starts on a busy machine differ
by half in wall seconds, by a few percent in CPU seconds), else wall seconds; ``clock="wall"``
asks for wall seconds. The totals, components and graphs are on that clock; the backend
phases and traced functions are wall seconds (no CPU split of them is recorded).
Bench runs compare their averages, and every one is gated: the start-up phases' too
(``avg_cold_phase_time[load weights]``, ...), so a change can be gated on "loading got 20%
slower" with ``--threshold 20``. A phase only one run has is shown, never a regression.
"""

from __future__ import annotations

import math
import os
import re
import statistics
from collections.abc import Callable, Iterable, Sequence

from compiletrace._data import comparison as _data
from compiletrace._data.bench import BenchResult, phase_metric
from compiletrace._data.comparison import (
    ABOUT,
    BENCH,
    CLOCKS,
    COUNTS,
    CPU,
    DEFAULT_GATES,
    GATES,
    METRIC,
    PROFILE,
    TOTAL,
    WALL,
    Change,
    CountChange,
    RunFile,
)
from compiletrace._data.files import expand_inputs, read, read_jobs
from compiletrace._data.job import Job
from compiletrace._data.kinds import FileKind
from compiletrace._data.ready import ProcessParts, job_after_ready
from compiletrace._data.records import (
    NS_PER_S,
    CacheOutcome,
    GraphRecord,
    component_totals,
    graph_keys,
    ordered_components,
    top_self_times,
)
from compiletrace._data.run import RUN_SCHEMA_VERSION, Run
from compiletrace._data.torch_trace import TRACE_SOURCE
from compiletrace._doctor.verdicts import FLOOR_S, FLOOR_SHARE, baseline_move
from compiletrace._io.errors import UsageError

__all__ = [
    "CLOCKS",
    "COUNTS",
    "DEFAULT_GATES",
    "GATES",
    "ONE_RUN_BOUNDS",
    "Change",
    "Comparison",
    "CountChange",
    "RunFile",
    "compare_files",
    "compare_many",
    "compare_runs",
    "load_run_file",
    "parse_gates",
    "phase_metric",
    "pick_clock",
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
        late = job_after_ready("", [_ready_parts(data)]).count
        counts = _counts([data.graph_records], late)
        return RunFile(
            name, PROFILE, RUN_SCHEMA_VERSION, records=data.graph_records, about=_about(data), counts=counts
        )
    if isinstance(data, Job):
        processes = _process_names(data)
        # What every compiling process says alike (a job's processes may differ in backend).
        abouts = [_about(p.run) for p in data.compiling()]
        about = {k: v for k, v in abouts[0].items() if all(a.get(k) == v for a in abouts)} if abouts else {}
        counts = _counts([p.run.graph_records for p in data.processes], data.after_ready().count)
        return RunFile(
            name,
            PROFILE,
            RUN_SCHEMA_VERSION,
            records=data.records(),
            about=about,
            processes=processes,
            counts=counts,
        )
    assert isinstance(data, BenchResult)
    return RunFile(name, BENCH, data.schema_version, metrics=data.metrics, about=dict(data.about))


def _ready_parts(run: Run) -> ProcessParts:
    """What :func:`job_after_ready` reads of one process (named "main")."""
    phases = run.timeline.phases if run.timeline is not None else ()
    return ("main", run.graph_records, run.runtime_events, phases, run.meta.ready)


def _counts(processes: Sequence[Sequence[GraphRecord]], after_ready: int) -> dict[str, int]:
    """What a run counts (:data:`COUNTS`), from each process's records: load moves none of it."""
    misses = {"fx_graph": 0, "aot_autograd": 0}
    frames: set[tuple[int, str]] = set()
    for index, records in enumerate(processes):
        for r in records:
            frames.add((index, r.compile_id.rsplit("/", 1)[0]))  # "1/2": frame 1, attempt 2
            if r.cache_lookups:  # each lookup (a forward's and a backward's) by its tier
                for lookup in r.cache_lookups:
                    if lookup.outcome == CacheOutcome.MISS.value and lookup.tier in misses:
                        misses[lookup.tier] += 1
            else:  # a run that kept only each graph's outcome per tier
                misses["fx_graph"] += r.fx_graph_cache is CacheOutcome.MISS
                misses["aot_autograd"] += r.aot_autograd_cache is CacheOutcome.MISS
    every = [r for records in processes for r in records]
    return dict(
        zip(
            COUNTS,
            (
                len(every),
                len(frames),
                sum(r.is_recompile for r in every),
                misses["fx_graph"],
                misses["aot_autograd"],
                after_ready,
            ),
            strict=True,
        )
    )


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


# A graph's seconds on the clock judged: its CPU or its wall nanoseconds.
Cost = Callable[[GraphRecord], int]


def _wall_ns(r: GraphRecord) -> int:
    return r.total_ns


def _cpu_ns(r: GraphRecord) -> int:
    return r.cpu_or_wall_ns  # only ever asked of records that all have CPU (pick_clock)


def pick_clock(base: RunFile, new: RunFile, clock: str | None = None) -> tuple[str, str]:
    """The clock two profile runs are judged by, and why, in words: ``clock`` when given
    (:data:`CLOCKS`; ``"cpu"`` where a run lacks CPU seconds is a :class:`UsageError`), else
    CPU seconds where both runs have them for every graph, else wall seconds.

    >>> a = RunFile("a.json", "profile", 4)
    >>> pick_clock(a, a, "wall")
    ('wall', 'asked for')
    """
    return _pick_clock((base, new), clock)


def _pick_clock(runs: Sequence[RunFile], clock: str | None) -> tuple[str, str]:
    """:func:`pick_clock` of every run of both sides."""
    if clock is not None and clock not in CLOCKS:
        raise UsageError(f"clock must be one of {', '.join(CLOCKS)}, got {clock!r}")
    if clock == WALL:
        return WALL, "asked for"
    lacking = list(dict.fromkeys(run.path for run in runs if any(r.cpu_ns is None for r in run.records)))
    if not lacking:
        every = "both runs have" if len(runs) == 2 else "every run has"
        return CPU, f"{every} them" if clock is None else "asked for"
    named = f"{' and '.join(lacking)} {'have' if len(lacking) > 1 else 'has'}"
    if clock == CPU:
        raise UsageError(
            f"--clock cpu: {named} no CPU seconds for every graph (a trace, or a run recorded before "
            "they were); compare in wall seconds: --clock wall"
        )
    return WALL, f"{named} no CPU seconds"


def _profile_figures(records: Sequence[GraphRecord], cost: Cost = _wall_ns) -> dict[tuple[str, str], float]:
    figs: dict[tuple[str, str], float] = {(TOTAL, "compile time"): _total_s(records, cost)}
    totals: dict[str, int] = {}
    for r in records:
        totals[r.component] = totals.get(r.component, 0) + cost(r)
    for comp in ordered_components(totals):
        figs[("component", comp)] = totals[comp] / NS_PER_S
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


def _total_s(records: Sequence[GraphRecord], cost: Cost = _wall_ns) -> float:
    return sum(cost(r) for r in records) / NS_PER_S


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
    cost: Cost = _wall_ns,
) -> None:
    """The rows of one process (or one run): its total, components, phases, traced
    functions and graphs, each name after ``prefix`` (the process's, in a job); the
    total, components and graphs on ``cost``'s clock."""
    bf, nf = _profile_figures(base, cost), _profile_figures(new, cost)
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
            None if b_rec is None else cost(b_rec) / NS_PER_S,
            None if n_rec is None else cost(n_rec) / NS_PER_S,
            new_is_bad=b_rec is None,  # a new graph break or recompile
        )


def compare_runs(
    base: RunFile,
    new: RunFile,
    *,
    threshold_pct: float | None = None,
    min_seconds: float | None = None,
    gates: str | Iterable[str] | None = DEFAULT_GATES,
    clock: str | None = None,
) -> Comparison:
    """Compare two runs of the same kind and schema version (see :func:`compare_many`, of
    one run per side).

    >>> empty = RunFile("a.json", "profile", 1)
    >>> result = compare_runs(empty, empty, gates="phase")
    >>> [(c.scope, c.status) for c in result.changes][:1], result.regressions
    ([('total', 'ok')], ())
    """
    return compare_many(
        [base], [new], threshold_pct=threshold_pct, min_seconds=min_seconds, gates=gates, clock=clock
    )


# The bound a gated figure must grow beyond to fail when a side has one run: (percent of
# the base, seconds), per clock. Measured with benchmarks/gate_noise.py (--pairs 10 --hogs 4):
# a tiny program (nn.Linear, aot_eager) started warm under `compiletrace run`, 10 pairs of
# identical starts beside 4 `while 1: pass` processes on a 2-core machine already shared
# (compile CPU seconds 0.45 to 0.65 s, wall seconds 3.5 to 10.3 s). Of the 20 ordered pairs the
# largest growth was +45.1% (+0.203 s) in CPU seconds and +104.8% in wall seconds. Each bound
# sits above what was seen, with room; a real regression that leaves the seconds within it
# (a changed dtype missing every graph, a new recompile) moves a count, which is exact.
# Measured again with --pairs 15 (the gate itself judging each ordered pair): 30 of 30
# passed, the largest growth +17.7% in CPU seconds; --regressions: a changed dtype, a
# recompile and four more layers each failed, by their counts (docs/guide.md).
ONE_RUN_BOUNDS: dict[str, tuple[float, float]] = {CPU: (60.0, 0.25), WALL: (150.0, 0.25)}
BENCH_BOUND = (10.0, 0.05)  # bench averages: already means of several starts


def _check(value: float | None, option: str) -> None:
    if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise UsageError(f"{option} must be a finite number >= 0, got {value!r}")


def _bounds(
    kind: str, judged: str, several: bool, threshold_pct: float | None, min_seconds: float | None
) -> tuple[float, float, str]:
    """The thresholds (percent, seconds) and where they came from, in words: those given,
    else the default for these runs."""
    if kind == BENCH:
        pct, floor, why = (*BENCH_BOUND, "")
    elif several:
        pct, floor = FLOOR_SHARE * 100, FLOOR_S
        why = "several runs per side: each side's median, beyond the larger side's spread"
    else:
        pct, floor = ONE_RUN_BOUNDS[judged]
        why = "one run per side: the bound identical warm starts stayed within beside 4 busy processes"
    if not several and (threshold_pct is not None or min_seconds is not None):
        why = ""  # the thresholds as given
    pct = pct if threshold_pct is None else float(threshold_pct)
    floor = floor if min_seconds is None else float(min_seconds)
    return pct, floor, why


# A compared figure before judging: scope, name, base seconds, new seconds.
Row = tuple[str, str, float | None, float | None]
_IDS = re.compile(r" \[[^\]]*\]")  # a graph's compile ids, which may shift from run to run


def _rows(base: RunFile, new: RunFile, cost: Cost, min_seconds: float, by_process: bool) -> list[Row]:
    """Every figure of two runs side by side, the total first."""
    rows: list[Row] = []

    def add(scope: str, name: str, b: float | None, n: float | None, new_is_bad: bool = False) -> None:
        rows.append((scope, name, b, n))

    if base.kind == BENCH:
        for key in sorted(set(base.metrics) | set(new.metrics)):
            add(METRIC, key, base.metrics.get(key), new.metrics.get(key))
        return rows
    base_processes, new_processes = _processes_of(base), _processes_of(new)
    if not by_process:
        _compare_records(base.records, new.records, add, min_seconds, cost=cost)
        return rows
    # In total (every process's seconds added up, not the job's wall time), then process by
    # process.
    add(TOTAL, "compile time", _total_s(base.records, cost), _total_s(new.records, cost))
    for name in dict.fromkeys([*base_processes, *new_processes]):
        b_records, n_records = base_processes.get(name), new_processes.get(name)
        if b_records is None or n_records is None:  # a process only one run had
            b_s = None if b_records is None else _total_s(b_records, cost)
            n_s = None if n_records is None else _total_s(n_records, cost)
            add(TOTAL, f"{name}: compile time", b_s, n_s)
        else:
            _compare_records(b_records, n_records, add, min_seconds, prefix=f"{name}: ", cost=cost)
    return rows


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def compare_many(
    bases: Sequence[RunFile],
    news: Sequence[RunFile],
    *,
    threshold_pct: float | None = None,
    min_seconds: float | None = None,
    gates: str | Iterable[str] | None = DEFAULT_GATES,
    clock: str | None = None,
) -> Comparison:
    """Compare runs of the same kind and schema version: one or several of the program as
    it was (``bases``) and as it is (``news``).

    What the runs count (:data:`COUNTS`: graphs, frames, recompiles, cache misses per tier,
    compiles after ready) is judged first: a busy machine moves none of it, and any rise of
    a side's median fails the gate. Seconds are judged on ``clock`` (see :func:`pick_clock`)
    as each side's median: a figure in one of the ``gates`` scopes (see :func:`parse_gates`)
    regresses when it grows beyond ``threshold_pct`` percent of the base and
    ``min_seconds``, and, where a side has several runs, beyond that side's spread (half its
    range from three runs, its whole range with two, as ``doctor --verify`` reads rounds).
    Thresholds left None are the defaults: for one run per side :data:`ONE_RUN_BOUNDS`
    (measured), for several runs per side the verify floors (3% and 0.05 s) and for bench
    runs 10% and 0.05 s. A table's rows are the first runs'.
    """
    if not bases or not news:
        raise UsageError("compare needs at least one run on each side")
    gated = parse_gates(gates)
    _check(threshold_pct, "threshold")
    _check(min_seconds, "min-seconds")
    first, every = bases[0], [*bases, *news]
    for run in every[1:]:
        if run.kind != first.kind:
            raise UsageError(
                f"cannot compare a {first.kind} run ({first.path}) with a {run.kind} run ({run.path})"
            )
        if run.schema_version != first.schema_version:
            raise UsageError(
                f"cannot compare schema version {first.schema_version} ({first.path}) with "
                f"{run.schema_version} ({run.path})"
            )
    judged, why = (WALL, "bench averages") if first.kind == BENCH else _pick_clock(every, clock)
    cost = _cpu_ns if judged == CPU else _wall_ns
    several = min(len(bases), len(news)) > 1
    pct, floor, bound_why = _bounds(first.kind, judged, several, threshold_pct, min_seconds)
    by_process = any(len(_processes_of(run)) > 1 for run in every)

    rows = _rows(bases[0], news[0], cost, floor, by_process)
    # Each other run's figures, matched by scope and name (a graph's compile ids aside).
    base_values: dict[tuple[str, str], list[float]] = {}
    new_values: dict[tuple[str, str], list[float]] = {}
    for index, run in enumerate(bases):
        for scope, name, b, _ in rows if index == 0 else _rows(run, news[0], cost, floor, by_process):
            if b is not None:
                base_values.setdefault((scope, _IDS.sub("", name)), []).append(b)
    for index, run in enumerate(news):
        for scope, name, _, n in rows if index == 0 else _rows(bases[0], run, cost, floor, by_process):
            if n is not None:
                new_values.setdefault((scope, _IDS.sub("", name)), []).append(n)

    changes: list[Change] = []
    for scope, name, _, _ in rows:
        key = (scope, _IDS.sub("", name))
        b_runs, n_runs = tuple(base_values.get(key, ())), tuple(new_values.get(key, ()))
        b, n = _median(b_runs), _median(n_runs)
        noise: float | None = None
        if b is None or n is None:
            slower = scope == "graph" and b is None and n is not None  # a new graph break or recompile
        else:
            noise = max(baseline_move(b_runs), baseline_move(n_runs), floor, b * pct / 100.0)
            slower = n - b > noise
        gate = scope == METRIC or scope in gated
        shown = (b_runs, n_runs, noise) if max(len(bases), len(news)) > 1 else ((), (), None)
        changes.append(Change(scope, name, b, n, slower, gate, *shown))

    counts: list[CountChange] = []
    if first.kind != BENCH:
        for count in COUNTS:
            b_counts = tuple(run.counts.get(count, 0) for run in bases)
            n_counts = tuple(run.counts.get(count, 0) for run in news)
            counts.append(
                CountChange(
                    count, statistics.median(b_counts), statistics.median(n_counts), b_counts, n_counts
                )
            )
    return Comparison(
        bases[0],
        news[0],
        tuple(changes),
        pct,
        floor,
        gated,
        judged,
        why,
        counts=tuple(counts),
        runs=(len(bases), len(news)),
        bound_why=bound_why,
    )


def compare_files(
    base_path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    new_path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    threshold_pct: float | None = None,
    min_seconds: float | None = None,
    gates: str | Iterable[str] | None = DEFAULT_GATES,
    clock: str | None = None,
) -> Comparison:
    """Load saved runs and compare them (see :func:`compare_many`): a path per side, or a
    list of paths per side (several runs of the program as it was, and as it is).

    >>> compare_files("/no/such/base.json", "/no/such/new.json")
    Traceback (most recent call last):
    ...
    compiletrace._io.errors.RunFileError: /no/such/base.json does not exist
    """

    def load(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[RunFile]:
        many = paths if isinstance(paths, Sequence) and not isinstance(paths, str) else [paths]
        return [load_run_file(path) for path in many]

    return compare_many(
        load(base_path),
        load(new_path),
        threshold_pct=threshold_pct,
        min_seconds=min_seconds,
        gates=gates,
        clock=clock,
    )
