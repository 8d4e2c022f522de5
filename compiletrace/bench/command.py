"""``compiletrace bench startup -- COMMAND``: cold and warm start-ups of any command, to ready.

Each iteration runs the command under ``compiletrace run`` (every Python process recorded)
only until it is ready (:class:`~compiletrace._app.job.UntilReady`: its ready mark, a grace,
then SIGINT, SIGTERM, SIGKILL to its process group), so a server or a training job is
measured in its start-up's time, not its life. COLD iterations each get a fresh, empty
compile cache; WARM ones share one cache that untimed warm-up iterations filled.

An iteration's start-up is the job's critical path: from the command's start to the last
ready mark of its processes (a job is ready when its slowest process is); a program that
ends by itself with no mark (a script) is measured to its end, as ``doctor --verify`` does. Beside it: each
process's own start-up (its start to its mark), the job's compile seconds (wall, and the CPU
of the compile work), and its graphs' cache hits and misses. The JSON keeps the standard
start-up benchmark keys (``avg_cold_startup_time``, ``cold_startup_times``,
``cold_startup_percentiles``, ...), as ``bench startup MODEL`` writes them, so the same
dashboards and PyTorch benchmark-database records read it. The command chooses its own
backend, mode and device: its options name the backend its runs' compiles used
(``"aot_eager"``; several joined, ``"aot_eager, inductor"``; none where nothing compiled),
and nothing of what ``bench startup MODEL`` would have chosen.

>>> it = CommandIteration(startup_time=4.0, process_startups={"pid 7 (main)": 4.0},
...                       compilation_time=1.5, compilation_cpu_time=1.25, encoder_compilation_time=0.0,
...                       cache_hits=0, cache_misses=2, process_time=5.5)
>>> CommandBenchResult(("python", "serve.py"), "port:8000", cold=[it]).to_dict()["avg_cold_startup_time"]
4.0
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from compiletrace._app.compile_caches import cache_environment
from compiletrace._app.job import NEVER_READY, ProfileJob, RunOutcome, UntilReady, run_command
from compiletrace._data.kinds import FileKind
from compiletrace._data.records import NS_PER_S, CacheOutcome
from compiletrace._io.errors import ChildFailed, UsageError
from compiletrace._io.signals import owned_temporary_directory
from compiletrace.bench.startup import series_stats

__all__ = ["CommandBenchResult", "CommandIteration", "iteration_of", "run_command_bench"]

ENCODER = "encoder"  # the component whose compile seconds are reported on their own


@dataclass(frozen=True)
class CommandIteration:
    """One run of the command to ready (seconds)."""

    startup_time: float  # the command's start to its last process's ready mark: the critical path
    process_startups: dict[str, float]  # each ready process: its start to its own mark
    compilation_time: float  # compile wall seconds of every component but the encoder
    compilation_cpu_time: float  # ... and the CPU seconds of that compile work
    encoder_compilation_time: float
    cache_hits: int  # graphs whose cache lookups all hit
    cache_misses: int  # graphs with at least one cache miss
    process_time: float  # the command's whole wall time, its grace and stop included
    encoder_compiled: bool = False
    backends: tuple[str, ...] = ()  # the backends its compiles used, as its records name them


def iteration_of(
    outcome: RunOutcome, started_unix_ns: int, process_time: float, label: str
) -> CommandIteration:
    """An iteration's figures from the job it ran; :class:`ChildFailed` for a command that
    was never ready (or ended by itself before any process of it was)."""
    job: ProfileJob = outcome.job
    marks = [p for p in job.processes if p.run.meta.ready is not None]
    if outcome.stopped == NEVER_READY:
        why = f"it was never ready (exit status {outcome.exit_status})"
        raise ChildFailed(label, outcome.exit_status, why)
    per_process = {}
    # The last ready mark; None: the whole run is the start-up (process_time itself, which
    # through nanoseconds could round past it).
    last: int | None = None
    if marks:
        for p in marks:
            mark = p.run.meta.ready
            assert mark is not None
            start = p.run.timeline.start_unix_ns if p.run.timeline is not None else started_unix_ns
            per_process[p.info.label] = max(0, mark.unix_ns - start) / NS_PER_S
        last = max(p.run.meta.ready.unix_ns for p in marks if p.run.meta.ready is not None)
    elif outcome.exit_status != 0:
        raise ChildFailed(
            label,
            outcome.exit_status,
            f"it ended with exit status {outcome.exit_status} before any process of it marked ready "
            "(a program that does not end needs --ready: port:PORT, step:N, MODULE:FUNCTION)",
        )
    else:
        # A program that ends and marks nothing (a script: compile, run, exit): its start-up is
        # its whole run, as doctor --verify counts it; each process's is its own run.
        for p in job.processes:
            if p.run.timeline is not None:
                per_process[p.info.label] = p.run.timeline.total_ns / NS_PER_S
    by_component = job.by_component()
    records = job.records()
    encoder_cpu = sum(r.cpu_or_wall_ns for r in records if r.component == ENCODER)
    return CommandIteration(
        startup_time=process_time if last is None else max(0, last - started_unix_ns) / NS_PER_S,
        process_startups=per_process,
        compilation_time=sum(s for name, s in by_component.items() if name != ENCODER),
        compilation_cpu_time=(sum(r.cpu_or_wall_ns for r in records) - encoder_cpu) / NS_PER_S,
        encoder_compilation_time=by_component.get(ENCODER, 0.0),
        cache_hits=sum(r.cache_outcome is CacheOutcome.HIT for r in records),
        cache_misses=sum(r.cache_outcome is CacheOutcome.MISS for r in records),
        process_time=process_time,
        encoder_compiled=ENCODER in by_component,
        backends=tuple(sorted({r.backend for r in records if r.backend})),
    )


@dataclass
class CommandBenchResult:
    """Every iteration's figures; :meth:`to_dict` gives the standard start-up benchmark keys."""

    command: tuple[str, ...]
    ready: str  # the ready mark each run went to ("": the default, its warm-up's end)
    cold: list[CommandIteration] = field(default_factory=list)
    warm: list[CommandIteration] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": FileKind.BENCH.value, "schema_version": FileKind.BENCH.schema_version}
        for prefix, its in (("cold", self.cold), ("warm", self.warm)):
            if not its:
                continue
            series: dict[str, Sequence[float]] = {
                "startup": [i.startup_time for i in its],
                "compilation": [i.compilation_time for i in its],
                "compilation_cpu": [i.compilation_cpu_time for i in its],
            }
            if any(i.encoder_compiled for i in its):
                series["encoder_compilation"] = [i.encoder_compilation_time for i in its]
            out.update(series_stats(prefix, series))
            out[f"{prefix}_cache_hits"] = [i.cache_hits for i in its]
            out[f"{prefix}_cache_misses"] = [i.cache_misses for i in its]
            out[f"{prefix}_process_times"] = [i.process_time for i in its]
            out[f"{prefix}_process_startup_times"] = [dict(i.process_startups) for i in its]
        out["options"] = {"command": list(self.command), "ready": self.ready, **self.options}
        backends = sorted({b for i in (*self.cold, *self.warm) for b in i.backends})
        if backends:  # what the command compiled with, as its runs recorded it (it chose, not bench)
            out["options"]["backend"] = ", ".join(backends)
        return out


def run_command_bench(
    command: Sequence[str],
    *,
    ready: str | None = None,
    num_iters_cold: int = 3,
    num_iters_warmup: int = 1,
    num_iters_warm: int = 3,
    until_ready: UntilReady | None = None,
    note: Callable[[str], None] | None = None,
) -> CommandBenchResult:
    """Run ``command`` to ready: ``num_iters_cold`` times each on a fresh empty compile cache,
    then ``num_iters_warmup`` untimed times and ``num_iters_warm`` timed times on one shared
    cache (with no warm-up, the last cold iteration runs on that cache, empty then, and fills
    it: a warm iteration never starts on an empty cache). The command's output goes to
    stderr. Raises :class:`ChildFailed` for a run that was never ready,
    :class:`~compiletrace.UsageError` for bad counts or a bad ready mark."""
    for name, value in (("cold", num_iters_cold), ("warmup", num_iters_warmup), ("warm", num_iters_warm)):
        if value < 0:
            raise UsageError(f"--num-iters-{name} must be >= 0, got {value}")
    if num_iters_warm and not num_iters_warmup and not num_iters_cold:
        raise UsageError(
            "--num-iters-warm with no warm-up and no cold iteration: nothing fills the warm "
            "iterations' cache, so they would be cold starts; give --num-iters-warmup 1 or more"
        )
    until = until_ready or UntilReady()
    say = note or (lambda line: None)
    result = CommandBenchResult(
        tuple(command),
        ready or "",
        options={
            "num_iters_cold": num_iters_cold,
            "num_iters_warmup": num_iters_warmup,
            "num_iters_warm": num_iters_warm,
            "grace_s": until.grace_s,
            "ready_timeout_s": until.timeout_s,
        },
    )

    def once(cache: str, label: str) -> CommandIteration:
        started_ns = time.time_ns()
        began = time.perf_counter()
        outcome = run_command(
            command, extra_env=cache_environment(cache), stdout=2, ready=ready, until_ready=until
        )
        it = iteration_of(outcome, started_ns, time.perf_counter() - began, label)
        say(f"{label}: start-up {it.startup_time:.2f} s (compile {it.compilation_cpu_time:.2f} s CPU)")
        return it

    with contextlib.ExitStack() as stack:
        warm = (
            stack.enter_context(owned_temporary_directory("compiletrace-bench-cache-"))
            if num_iters_warm
            else None
        )
        for i in range(num_iters_cold):
            label = f"cold {i + 1} of {num_iters_cold}"
            if warm is not None and not num_iters_warmup and i == num_iters_cold - 1:
                # No warm-up: the last cold iteration, on an empty cache too, fills the warm
                # iterations' (a warm start reads what a cold one wrote, never an empty cache).
                result.cold.append(once(warm, label))
                continue
            with owned_temporary_directory("compiletrace-bench-cache-") as cache:
                result.cold.append(once(cache, label))
        if warm is not None:
            for i in range(num_iters_warmup):
                once(warm, f"warm-up {i + 1} of {num_iters_warmup} (untimed)")
            for i in range(num_iters_warm):
                result.warm.append(once(warm, f"warm {i + 1} of {num_iters_warm}"))
    return result
