"""``compiletrace doctor --verify``: prove the doctor's advice by re-running the program with
each fix applied, and measuring.

The job's command runs once as it is (the baseline) and once per fix the doctor can apply
from outside the program (``compiletrace run --apply NAME``: a Dynamo setting made in every
process before its first compile), each run in fresh processes on the same cache state: a
private, empty compile cache of its own. Each finding then gets a verdict from what the two
runs recorded, by the judge of the finding's rule (``compiletrace._doctor``):

- ``verified``: the finding is gone and the program compiled fewer frames (for a function
  past torch's recompile limit: none is left running eagerly; for regional compilation,
  which compiles the block's one frame in place of the model's: fewer graph nodes in no
  more frames, the block's code traced once instead of once per block), and no code hit
  torch's recompile limit that did not before;
- ``helped in part``: a recompile finding still there, with fewer recompiles, and fewer
  frames compiled (a static cache removes the growing cache's recompile, not a flag's);
- ``did not help``: it is still there, or nothing compiled less;
- ``broke the program``: the command ended otherwise with the fix than without it;
- ``cannot be applied automatically``: the fix needs an edit (the finding says which).

Frame compiles are counts, the same on a busy machine as on an idle one: the verdict rests on
them and on the findings. Compile seconds and the command's wall time are reported beside
them, as measured.

A run of ``compiletrace profile`` (a MODEL spec, no command) is verified the same way: its
MODEL and options become the command ``python -m compiletrace profile ...``, run in the
current directory, with ``--steady-calls`` added, so each trial also measures the compiled
model's steady-state call time (a fix such as dynamic shapes can make the compiled code
slower: a line under the table then says so, when the median grew by 10% or more and by
more than either trial's spread; the verdict itself rests on counts). A job's command has no
call to time: its steady state is its own to measure.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from compiletrace._app.job import ProfileJob, run_command
from compiletrace._data.files import read
from compiletrace._data.findings import Finding
from compiletrace._data.job import Job
from compiletrace._data.kinds import FileKind
from compiletrace._data.run import Run
from compiletrace._data.run_meta import RunMeta
from compiletrace._data.verify import TrialFigures, VerifyRow
from compiletrace._doctor import BROKE, DID_NOT_HELP, MANUAL, PARTLY, VERIFIED, fixes_to_verify, judge
from compiletrace._io.errors import UsageError
from compiletrace._io.signals import owned_temporary_directory
from compiletrace._io.text import printable
from compiletrace.reports import verify_lines as table_lines
from compiletrace.reports import verify_table as table_of

if TYPE_CHECKING:
    from compiletrace.reports._verify import VerifyTable

__all__ = [
    "BROKE",
    "DID_NOT_HELP",
    "MANUAL",
    "PARTLY",
    "VERIFIED",
    "Trial",
    "Verdict",
    "judge",
    "profile_command",
    "slowdown",
    "verified_findings",
    "verify_command",
    "verify_job",
    "verify_lines",
    "verify_profile_run",
    "verify_rows",
    "verify_table",
]

# Where torch's compile caches live: each run gets its own, empty, so no run warms another.
CACHE_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
SIGNALLED = 128  # a shell's exit status for a command a signal ended: 128 + N
STEADY_CALLS = 20  # calls timed after the warm-up in each trial of a profile run
SLOWER = 0.10  # a fix whose steady-state call is this much slower is said to slow the model


@dataclass(frozen=True)
class Trial:
    """One run of the command: with no fix (``fix`` None) or with one."""

    fix: str | None
    job: ProfileJob
    wall_s: float
    steady_call_s: float | None = None  # median seconds per call after the warm-up (profile runs)
    steady_spread_s: float = 0.0  # ... and the interquartile range of those calls

    @property
    def exit_status(self) -> int:
        return self.job.exit_status

    @property
    def refused_after_ready(self) -> bool:
        """Whether torch's stance refused a compile after ready in any process of the run."""
        return any(p.run.meta.refused_after_ready for p in self.job.processes)

    @property
    def frame_compiles(self) -> int:
        return len(self.job.records())

    @property
    def recompile_limit_hit(self) -> bool:
        """Whether any code hit torch's recompile limit (and runs eagerly)."""
        return any(r.recompile_limit_hit for r in self.job.records())

    @property
    def graph_nodes(self) -> int:
        """Nodes of every graph compiled: what Dynamo traced, as a count."""
        return sum(r.graph_node_count for r in self.job.records())

    @property
    def compile_s(self) -> float:
        return sum(self.job.by_component().values())

    @property
    def findings(self) -> list[Finding]:
        return self.job.diagnose()


@dataclass(frozen=True)
class Verdict:
    """A finding of the baseline, its fix, and what applying it did."""

    finding: Finding
    fix: str | None
    before: Trial
    after: Trial | None
    verdict: str


def slowdown(before: Trial, after: Trial) -> float | None:
    """How much slower the steady-state call is with the fix (0.25: 25% slower), when both
    trials measured it."""
    if before.steady_call_s is None or after.steady_call_s is None or before.steady_call_s <= 0:
        return None
    return after.steady_call_s / before.steady_call_s - 1


def slowed_beyond_noise(before: Trial, after: Trial) -> bool:
    """The fix made the steady-state call slower by :data:`SLOWER` or more, and by more than
    either trial's spread (medians of sub-millisecond calls in two processes move)."""
    slower = slowdown(before, after)
    if slower is None or slower < SLOWER:
        return False
    assert before.steady_call_s is not None and after.steady_call_s is not None
    return after.steady_call_s - before.steady_call_s > max(before.steady_spread_s, after.steady_spread_s)


def _run_once(
    command: Sequence[str],
    fix: str | None,
    cwd: str | None,
    clock: Callable[[], float],
    profiled: bool,
    ready: str | None = None,
) -> Trial:
    with owned_temporary_directory("compiletrace-verify-cache-") as cache:
        env = {name: os.path.join(cache, name.lower()) for name in CACHE_ENV}
        run_file = os.path.join(cache, "profile.json")
        if profiled:
            command = [*command, "--json", run_file]
        start = clock()
        # The program's stdout goes to this process's stderr (file descriptor 2): stdout is
        # the doctor's, --json - included.
        outcome = run_command(
            command, fixes=() if fix is None else (fix,), extra_env=env, cwd=cwd, stdout=2, ready=ready
        )
        wall = clock() - start
        steady, spread = _steady_call_s(run_file) if profiled else (None, 0.0)
    return Trial(fix, outcome.job, wall, steady, spread)


def _steady_call_s(run_file: str) -> tuple[float | None, float]:
    if not os.path.exists(run_file):
        return None, 0.0  # the profile failed: its exit status says so
    run = read(run_file, accept={FileKind.RUN}, command="compiletrace doctor --verify")
    assert isinstance(run, Run)  # what accept={RUN} reads
    return run.meta.steady_call_s, run.meta.steady_call_spread_s or 0.0


def verify_command(
    command: Sequence[str],
    *,
    cwd: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: Callable[[str], None] | None = None,
    profiled: bool = False,
    ready: str | None = None,
) -> list[Verdict]:
    """Run ``command`` as it is, then once per fix the doctor can apply to what it found,
    and judge each finding (see the module docstring). ``profiled``: the command is a
    ``compiletrace profile`` that measures its steady state (``--json PATH`` is added).
    ``ready``: the job's ready mark (``run --ready``), the same in every run."""
    say = progress or (lambda line: None)
    say(f"the baseline: {printable(' '.join(command))}")
    before = _run_once(command, None, cwd, clock, profiled, ready)
    findings = before.findings
    trials: dict[str, Trial] = {}
    for finding in findings:
        for fix in fixes_to_verify(finding):
            if fix not in trials:
                say(f"with --apply {fix}")
                trials[fix] = _run_once(command, fix, cwd, clock, profiled, ready)
    verdicts = []
    for finding in findings:
        fixes = fixes_to_verify(finding)
        if not fixes:
            verdicts.append(Verdict(finding, None, before, None, MANUAL))
        for fix in fixes:  # its fix, then its gate (a finding may name both: a row each)
            after = trials[fix]
            verdicts.append(Verdict(finding, fix, before, after, judge(finding, before, after)))
    return verdicts


def verify_job(job: Job, *, progress: Callable[[str], None] | None = None) -> list[Verdict]:
    """:func:`verify_command` on a saved job's command, in the directory it ran in. Raises
    :class:`~compiletrace.UsageError`, running nothing, for a job that a signal ended (a
    server stopped by hand: a re-run would not end) or whose directory is gone."""
    if job.exit_status >= SIGNALLED:
        raise UsageError(
            f"the job ended by a signal (exit status {job.exit_status}): --verify re-runs the command "
            "to its end, so give a job whose command ends by itself (a script, not a server)"
        )
    if job.cwd and not os.path.isdir(job.cwd):
        raise UsageError(f"the directory the job ran in ({printable(job.cwd)}) is gone; --verify runs there")
    return verify_command(job.command, cwd=job.cwd or None, progress=progress, ready=job.ready or None)


def profile_command(meta: RunMeta, python: str = sys.executable) -> list[str]:
    """The ``compiletrace profile`` command that re-runs a profile run, from its meta (with
    ``--steady-calls``). Raises :class:`~compiletrace.UsageError` for a run that names no
    model, or whose options are not what ``profile`` writes.

    >>> from compiletrace._data.run_meta import CompilationMode
    >>> meta = RunMeta(model="pkg.mod:build", backend="eager", compilation_mode=CompilationMode("stock"),
    ...                device="cpu", components={"vision": "encoder"})
    >>> profile_command(meta, python="python")[3:]
    ['profile', 'pkg.mod:build', '--backend', 'eager', '--compilation-mode', 'stock', '--device', \
'cpu', '--component', 'vision=encoder', '--steady-calls', '20']
    """

    def option(name: str, value: str | None) -> str:
        # Each becomes an argument of a command: none may be taken for an option.
        if not value or value.startswith("-"):
            raise UsageError(
                f"the run's {name!r} is {printable(repr(value))}: not one 'compiletrace profile' wrote"
            )
        return value

    model, backend = option("model", meta.model), option("backend", meta.backend)
    command = [python, "-m", "compiletrace", "profile", model, "--backend", backend]
    if meta.mode is not None:
        command += ["--mode", option("mode", meta.mode)]
    cmode = meta.compilation_mode.value if meta.compilation_mode is not None else None
    command += ["--compilation-mode", option("compilation_mode", cmode)]
    command += ["--device", option("device", meta.device)]
    for path, name in (meta.components or {}).items():
        if not path or not name or "=" in path or path.startswith("-"):
            raise UsageError(
                f"the run's component {printable(repr(path))} is not a submodule path profile wrote"
            )
        command += ["--component", f"{path}={name}"]
    return [*command, "--steady-calls", str(STEADY_CALLS)]


def verify_profile_run(
    meta: RunMeta, *, cwd: str | None = None, progress: Callable[[str], None] | None = None
) -> list[Verdict]:
    """:func:`verify_command` on the ``compiletrace profile`` command a run was made by
    (:func:`profile_command`), in ``cwd`` (where its MODEL imports from)."""
    return verify_command(profile_command(meta), cwd=cwd, progress=progress, profiled=True)


def verified_findings(verdicts: Iterable[Verdict]) -> list[Finding]:
    """The baseline's findings, each with what verifying it measured in its evidence
    (``evidence["verify"]``: the fix, the verdict, and before/after pairs), for the JSON."""
    found: list[Finding] = []
    previous: Finding | None = None
    for v in verdicts:
        measured: dict[str, object] = {"fix": v.fix, "verdict": v.verdict}
        if v.after is not None:
            measured.update(
                frame_compiles=[v.before.frame_compiles, v.after.frame_compiles],
                graph_nodes=[v.before.graph_nodes, v.after.graph_nodes],
                compile_s=[round(v.before.compile_s, 4), round(v.after.compile_s, 4)],
                wall_s=[round(v.before.wall_s, 3), round(v.after.wall_s, 3)],
                exit_status=[v.before.job.exit_status, v.after.job.exit_status],
            )
            if v.before.steady_call_s is not None or v.after.steady_call_s is not None:
                measured["steady_call_s"] = [v.before.steady_call_s, v.after.steady_call_s]
                slower = slowdown(v.before, v.after)
                if slower is not None:
                    measured["slower_per_call"] = round(slower, 4)
        if v.finding is previous:
            # The finding's gate, measured after its fix: beside it, not in place of it.
            found[-1] = replace(found[-1], evidence={**found[-1].evidence, "verify_gate": measured})
            continue
        previous = v.finding
        found.append(replace(v.finding, evidence={**v.finding.evidence, "verify": measured}))
    return found


def _figures(trial: Trial) -> TrialFigures:
    return TrialFigures(
        trial.frame_compiles, trial.graph_nodes, trial.compile_s, trial.wall_s, trial.steady_call_s
    )


def verify_rows(verdicts: Iterable[Verdict]) -> list[VerifyRow]:
    """The table's rows: each verdict's figures, as plain data (a fix that slowed the
    compiled model's call beyond the trials' spread says by how much)."""
    rows = []
    for v in verdicts:
        after = v.after
        slower = None
        if after is not None and slowed_beyond_noise(v.before, after):
            slower = slowdown(v.before, after)
        rows.append(
            VerifyRow(
                f"{v.finding.kind.value} ({v.finding.component})",
                v.fix,
                _figures(v.before),
                None if after is None else _figures(after),
                v.verdict,
                slower,
            )
        )
    return rows


def verify_table(verdicts: Iterable[Verdict]) -> VerifyTable:
    """The before/after table of ``verdicts`` (:func:`compiletrace.reports.verify_table`):
    finding, fix, frame compiles, graph nodes, compile and wall seconds (and call ms, for a
    profile run), verdict."""
    return table_of(verify_rows(verdicts), steady_calls=STEADY_CALLS)


def verify_lines(verdicts: Iterable[Verdict]) -> list[str]:
    """The before/after table as text, one row per finding."""
    return table_lines(verify_rows(verdicts), steady_calls=STEADY_CALLS)
