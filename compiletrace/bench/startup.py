"""``compiletrace bench startup``: cold vs warm (vs portable) start-up, each iteration a fresh process.

With cache artifacts (``--cache-artifacts``), PORTABLE iterations each get a fresh, empty
cache with the artifacts loaded first; loading them is part of their start-up and is also
reported on its own (``avg_portable_artifact_load_time``).

Cold iterations each get a fresh, empty compile cache (a temporary directory for every
on-disk cache torch keeps), removed afterwards. Warm iterations share one cache that the
untimed warm-up iterations filled. Every iteration reports its start-up time (build the
model, compile, warm up; measured in the child after its imports), its compilation time
(every component but the encoder), its encoder compilation time, and its cache hits and
misses (graphs whose cache lookups all hit / at least one missed). Each also reports its
start-up timeline, per phase: from the child process's own start (interpreter start, the
imports of torch and compiletrace, building the model, the compile set-up, the warm-up,
the phases the model declares, and what no phase covers) to the end of its run.

The JSON keeps the standard start-up benchmark keys (``avg_cold_startup_time``,
``cold_startup_times``, ``cold_startup_percentiles``, ...), so existing dashboards read it,
and adds the phases in the same shape: ``avg_cold_phase_time``, ``cold_phase_times`` and
``cold_phase_percentiles``, each keyed by phase name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from compiletrace._app.compile_caches import CACHE_ENV_DIRS
from compiletrace._app.progress import Progress
from compiletrace._data.bench import PERCENTILES, seconds_lists
from compiletrace._data.kinds import FileKind
from compiletrace._io.errors import ChildFailed, UsageError
from compiletrace._io.signals import owned_temporary_directory, parent_death_preexec
from compiletrace._io.text import tail_lines

__all__ = [
    "CACHE_ENV_DIRS",
    "PERCENTILES",
    "BenchOptions",
    "ChildFailed",
    "IterationResult",
    "StartupBenchResult",
    "format_results",
    "run_iteration",
    "run_startup_bench",
]

BENCH_KIND = FileKind.BENCH.value
BENCH_SCHEMA_VERSION = FileKind.BENCH.schema_version


CHILD_COMMAND = (sys.executable, "-m", "compiletrace.bench._child")
STDERR_TAIL_LINES = 20


@dataclass(frozen=True)
class BenchOptions:
    """What each child process runs (the profile options that make sense for a benchmark)."""

    model: str | None = None  # MODEL spec; None for the built-in demo
    backend: str = "inductor"
    mode: str | None = None
    compilation_mode: str = "stock"
    device: str = "cpu"
    components: tuple[tuple[str, str], ...] = ()  # --component PATH=NAME overrides
    num_iters_cold: int = 3
    num_iters_warmup: int = 1
    num_iters_warm: int = 3
    cache_artifacts: str | None = None  # adds PORTABLE iterations that load these artifacts first
    num_iters_portable: int | None = None  # None: as many as cold
    trust_cache_artifacts: bool = False  # load them unchecked (they are code: only your own)

    @property
    def portable_iters(self) -> int:
        if self.cache_artifacts is None:
            return 0
        return self.num_iters_cold if self.num_iters_portable is None else self.num_iters_portable

    def child_options(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "backend": self.backend,
            "mode": self.mode,
            "compilation_mode": self.compilation_mode,
            "device": self.device,
            "components": [list(c) for c in self.components],
        }


@dataclass(frozen=True)
class IterationResult:
    """One child process's figures (seconds)."""

    startup_time: float  # build + compile + warm-up, in the child after its imports
    compilation_time: float  # compile time of every component but the encoder
    encoder_compilation_time: float
    encoder_compiled: bool
    import_time: float  # spawn to ready: interpreter start and imports (torch, compiletrace)
    process_time: float  # the child process's whole wall time, seen by the parent
    exit_time: float  # result written to process reaped: interpreter teardown
    cache_hits: int  # graphs whose cache lookups all hit
    cache_misses: int  # graphs with at least one cache miss
    artifact_load_time: float = 0.0  # portable iterations: loading the cache artifacts
    # Seconds per start-up phase, from the process's start (empty from a child that has none).
    phase_times: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_child(cls, data: dict[str, Any], process_time: float, end_unix_s: float) -> IterationResult:
        return cls(
            startup_time=float(data["startup_time"]),
            compilation_time=float(data["compilation_time"]),
            encoder_compilation_time=float(data["encoder_compilation_time"]),
            encoder_compiled=bool(data["encoder_compiled"]),
            import_time=float(data["import_time"]),
            process_time=process_time,
            exit_time=max(0.0, end_unix_s - float(data.get("done_unix_s", end_unix_s))),
            cache_hits=int(data["cache_hits"]),
            cache_misses=int(data["cache_misses"]),
            artifact_load_time=float(data.get("artifact_load_time", 0.0)),
            phase_times=_phase_times(data.get("phase_times")),
        )


def _phase_times(value: Any) -> dict[str, float]:
    # A child's own figures, but still only what makes sense: names to seconds.
    if not isinstance(value, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in value.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
    }


@dataclass
class StartupBenchResult:
    """Every iteration's figures; :meth:`to_dict` gives the standard JSON keys."""

    cold: list[IterationResult] = field(default_factory=list)
    warm: list[IterationResult] = field(default_factory=list)
    portable: list[IterationResult] = field(default_factory=list)
    options: BenchOptions = field(default_factory=BenchOptions)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": BENCH_KIND, "schema_version": BENCH_SCHEMA_VERSION}
        for prefix, its in (("cold", self.cold), ("warm", self.warm), ("portable", self.portable)):
            if not its:
                continue
            series: dict[str, Sequence[float]] = {
                "startup": [i.startup_time for i in its],
                "compilation": [i.compilation_time for i in its],
            }
            if any(i.encoder_compiled for i in its):
                series["encoder_compilation"] = [i.encoder_compilation_time for i in its]
            if prefix == "portable":
                series["artifact_load"] = [i.artifact_load_time for i in its]
            out.update(series_stats(prefix, series))
            out[f"{prefix}_cache_hits"] = [i.cache_hits for i in its]
            out[f"{prefix}_cache_misses"] = [i.cache_misses for i in its]
            out[f"{prefix}_import_times"] = [i.import_time for i in its]
            out[f"{prefix}_process_times"] = [i.process_time for i in its]
            out[f"{prefix}_exit_times"] = [i.exit_time for i in its]
            if any(i.phase_times for i in its):
                out.update(_phase_stats(prefix, [i.phase_times for i in its]))
        out["options"] = {
            **self.options.child_options(),
            "num_iters_cold": self.options.num_iters_cold,
            "num_iters_warmup": self.options.num_iters_warmup,
            "num_iters_warm": self.options.num_iters_warm,
            "num_iters_portable": self.options.portable_iters,
            "cache_artifacts": self.options.cache_artifacts,
            "trust_cache_artifacts": self.options.trust_cache_artifacts,
            "torch_version": str(torch.__version__),  # the parent's: its children import the same
        }
        return out


def _stats(name: str, values: Sequence[float], avg_key: str) -> dict[str, Any]:
    arr = np.asarray(values, dtype=float)
    pcts = np.percentile(arr, PERCENTILES)
    return {
        avg_key: float(arr.mean()),
        f"{name}_times": [float(v) for v in arr],
        f"{name}_percentiles": {str(p): float(v) for p, v in zip(PERCENTILES, pcts, strict=True)},
    }


def series_stats(prefix: str, series: dict[str, Sequence[float]]) -> dict[str, Any]:
    """:func:`_stats` of each named series of one kind of iteration (``cold``, ``warm``...):
    ``avg_<prefix>_<name>_time``, ``<prefix>_<name>_times`` and ``<prefix>_<name>_percentiles``."""
    out: dict[str, Any] = {}
    for name, values in series.items():
        out.update(_stats(f"{prefix}_{name}", values, f"avg_{prefix}_{name}_time"))
    return out


def _phase_stats(prefix: str, per_iteration: Sequence[dict[str, float]]) -> dict[str, Any]:
    """``avg_<prefix>_phase_time``, ``<prefix>_phase_times`` and ``<prefix>_phase_percentiles``:
    the other keys' shape, keyed by phase name (0.0 for an iteration without the phase)."""
    avg: dict[str, float] = {}
    times: dict[str, list[float]] = {}
    pcts: dict[str, dict[str, float]] = {}
    for name, values in seconds_lists(per_iteration).items():
        stats = _stats("phase", values, "avg")
        avg[name], times[name], pcts[name] = stats["avg"], stats["phase_times"], stats["phase_percentiles"]
    return {
        f"avg_{prefix}_phase_time": avg,
        f"{prefix}_phase_times": times,
        f"{prefix}_phase_percentiles": pcts,
    }


def cache_env(cache_dir: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child whose compile caches all live under ``cache_dir``."""
    env = dict(os.environ if base is None else base)
    for var, sub in CACHE_ENV_DIRS.items():
        env[var] = str(cache_dir / sub)
    return env


def _stderr_tail(path: Path) -> str:
    try:
        return tail_lines(path.read_text(encoding="utf-8", errors="replace"), STDERR_TAIL_LINES)
    except OSError:
        return ""


def run_iteration(
    options: BenchOptions,
    cache_dir: Path,
    label: str,
    *,
    progress: Progress | None = None,
    on_tick: Callable[[], None] | None = None,
    child_command: Sequence[str] = CHILD_COMMAND,
    extra_options: dict[str, Any] | None = None,
) -> IterationResult:
    """Run one child process against ``cache_dir`` and return its figures.

    On KeyboardInterrupt (or any exception from ``on_tick``) the child is ended before
    the exception propagates. Raises :class:`ChildFailed` when the child exits non-zero.
    """
    with owned_temporary_directory("compiletrace-bench-run-") as work:
        result_path = Path(work) / "result.json"
        stderr_path = Path(work) / "stderr.txt"
        if progress is not None:
            progress.set(label)
        child_options = {**options.child_options(), **(extra_options or {}), "spawn_unix_s": time.time()}
        cmd = [*child_command, json.dumps(child_options), str(result_path)]
        start = time.perf_counter()
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=cache_env(cache_dir),
                preexec_fn=parent_death_preexec(),  # a SIGKILL of this process ends the child too
            )
            try:
                while True:
                    try:
                        proc.wait(timeout=0.1)
                        break
                    except subprocess.TimeoutExpired:
                        if on_tick is not None:
                            on_tick()
            except BaseException:
                _end(proc)
                raise
        process_time = time.perf_counter() - start
        end_unix_s = time.time()
        if proc.returncode != 0:
            raise ChildFailed(label, proc.returncode, _stderr_tail(stderr_path))
        try:
            data = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ChildFailed(label, proc.returncode, f"no result from the child: {exc}") from None
        return IterationResult.from_child(data, process_time, end_unix_s)


def _end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_startup_bench(
    options: BenchOptions,
    *,
    progress: Progress | None = None,
    child_command: Sequence[str] = CHILD_COMMAND,
) -> StartupBenchResult:
    """Run the cold iterations (each on a fresh empty cache), then the untimed warm-up
    iterations and the warm iterations (sharing one cache), then the portable ones (each
    on a fresh empty cache with the artifacts loaded first). Temporary caches are removed
    whatever happens, Ctrl-C included; on Linux each child dies with this process, SIGKILL
    included, and the caches a killed run left are removed by the next run."""
    for name in ("num_iters_cold", "num_iters_warmup", "num_iters_warm"):
        if getattr(options, name) < 0:
            raise UsageError(f"{name} must be >= 0, got {getattr(options, name)}")
    if options.num_iters_warm and not options.num_iters_warmup and not options.num_iters_cold:
        raise UsageError(
            "--num-iters-warm with no warm-up and no cold iteration: nothing fills the warm "
            "iterations' cache, so they would be cold starts; give --num-iters-warmup 1 or more"
        )
    if options.cache_artifacts is not None and options.portable_iters:
        from compiletrace._app.cache import check_cache_artifacts

        # Once here, before minutes of cold and warm iterations: a file the portable
        # children would refuse fails now, with the reason (each child checks it again).
        check_cache_artifacts(options.cache_artifacts, trust=options.trust_cache_artifacts)
    result = StartupBenchResult(options=options)
    note = progress.note if progress is not None else (lambda line: None)

    def finished(label: str, it: IterationResult) -> None:
        note(
            f"{label} finished in {it.process_time:.2f} s (start-up {it.startup_time:.2f} s; "
            f"cache {it.cache_hits} hit, {it.cache_misses} miss)"
        )

    def iterate(cache: str, label: str, extra: dict[str, Any] | None = None) -> IterationResult:
        return run_iteration(
            options, Path(cache), label, progress=progress, child_command=child_command, extra_options=extra
        )

    def fresh_cache_iterations(
        kind: str, n: int, extra: dict[str, Any] | None = None, fills: str | None = None
    ) -> list[IterationResult]:
        # Each iteration on its own fresh, empty cache, removed afterwards; with ``fills``,
        # the last on that one (empty then), which it fills for the warm iterations.
        its = []
        for i in range(n):
            if fills is not None and i == n - 1:
                it = iterate(fills, f"{kind} {i + 1}/{n}", extra)
            else:
                with owned_temporary_directory(f"compiletrace-{kind}-cache-") as cache:
                    it = iterate(cache, f"{kind} {i + 1}/{n}", extra)
            its.append(it)
            finished(f"{kind} {i + 1}/{n}", it)
        return its

    with owned_temporary_directory("compiletrace-warm-cache-") as cache:
        # No warm-up: the last cold iteration fills the warm iterations' cache (a warm start
        # reads what a cold one wrote, never an empty cache).
        fills = cache if options.num_iters_warm and not options.num_iters_warmup else None
        result.cold = fresh_cache_iterations("cold", options.num_iters_cold, fills=fills)
        if options.num_iters_warm:
            for i in range(options.num_iters_warmup):
                label = f"warm-up {i + 1}/{options.num_iters_warmup} (untimed)"
                finished(label, iterate(cache, label))
            for i in range(options.num_iters_warm):
                label = f"warm {i + 1}/{options.num_iters_warm}"
                it = iterate(cache, label)
                result.warm.append(it)
                finished(label, it)
    result.portable = fresh_cache_iterations(
        "portable",
        options.portable_iters,
        {"cache_artifacts": options.cache_artifacts, "trust": options.trust_cache_artifacts},
    )
    return result


def format_results(data: dict[str, Any]) -> str:
    """The COLD, WARM and PORTABLE tables of a benchmark's JSON (:meth:`StartupBenchResult.to_dict`):
    :func:`compiletrace.reports.bench_text`."""
    from compiletrace.reports import bench_text

    return bench_text(data)
