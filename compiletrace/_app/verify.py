"""``compiletrace doctor --verify``: prove the doctor's advice by re-running the program with
each fix applied, and measuring.

The job's command runs once as it is (the baseline) and once per fix the doctor can apply
from outside the program (``compiletrace run --apply NAME``: a Dynamo setting made in every
process before its first compile), each run in fresh processes on the same cache state: a
private, empty compile cache of its own. Each finding then gets a verdict from what the two
runs recorded:

- ``verified``: the finding is gone and the program compiled fewer frames (for a function
  past torch's recompile limit: none is left running eagerly);
- ``did not help``: it is still there, or nothing compiled less;
- ``broke the program``: the command ended otherwise with the fix than without it;
- ``cannot be applied automatically``: the fix needs an edit (the finding says which).

Frame compiles are counts, the same on a busy machine as on an idle one: the verdict rests on
them and on the findings. Compile seconds and the command's wall time are reported beside
them, as measured; a program's steady-state speed is its own to measure (a fix such as
dynamic shapes can make the compiled code slower, which these figures do not show).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from compiletrace._app.doctor import automatic_fix
from compiletrace._app.job import ProfileJob, run_command
from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.job import Job
from compiletrace._io.errors import UsageError
from compiletrace._io.signals import owned_temporary_directory
from compiletrace._io.text import printable

__all__ = ["Trial", "Verdict", "judge", "verified_findings", "verify_command", "verify_job", "verify_lines"]

VERIFIED = "verified"
DID_NOT_HELP = "did not help"
BROKE = "broke the program"
MANUAL = "cannot be applied automatically"
# Where torch's compile caches live: each run gets its own, empty, so no run warms another.
CACHE_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
SIGNALLED = 128  # a shell's exit status for a command a signal ended: 128 + N


@dataclass(frozen=True)
class Trial:
    """One run of the command: with no fix (``fix`` None) or with one."""

    fix: str | None
    job: ProfileJob
    wall_s: float

    @property
    def frame_compiles(self) -> int:
        return len(self.job.records())

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


def _identity(f: Finding) -> tuple[str, str, str]:
    return (f.kind.value, f.component, f.location)


def judge(finding: Finding, before: Trial, after: Trial) -> str:
    """The verdict on one finding from the runs without and with its fix."""
    if after.job.exit_status != before.job.exit_status:
        return BROKE  # a crash compiles less too: never a fix
    still = any(_identity(f) == _identity(finding) for f in after.findings)
    if still:
        return DID_NOT_HELP
    if finding.kind is FindingKind.RECOMPILE_LIMIT:
        # Raising the limit compiles every variant: more frames, none left running eagerly.
        return VERIFIED if not any(r.recompile_limit_hit for r in after.job.records()) else DID_NOT_HELP
    return VERIFIED if after.frame_compiles < before.frame_compiles else DID_NOT_HELP


def _run_once(command: Sequence[str], fix: str | None, cwd: str | None, clock: Callable[[], float]) -> Trial:
    with owned_temporary_directory("compiletrace-verify-cache-") as cache:
        env = {name: os.path.join(cache, name.lower()) for name in CACHE_ENV}
        start = clock()
        # The program's stdout goes to this process's stderr (file descriptor 2): stdout is
        # the doctor's, --json - included.
        outcome = run_command(command, fixes=() if fix is None else (fix,), extra_env=env, cwd=cwd, stdout=2)
        wall = clock() - start
    return Trial(fix, outcome.job, wall)


def verify_command(
    command: Sequence[str],
    *,
    cwd: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: Callable[[str], None] | None = None,
) -> list[Verdict]:
    """Run ``command`` as it is, then once per fix the doctor can apply to what it found,
    and judge each finding (see the module docstring)."""
    say = progress or (lambda line: None)
    say(f"baseline: {printable(' '.join(command))}")
    before = _run_once(command, None, cwd, clock)
    findings = before.findings
    trials: dict[str, Trial] = {}
    for finding in findings:
        fix = automatic_fix(finding)
        if fix is not None and fix not in trials:
            say(f"with --apply {fix}")
            trials[fix] = _run_once(command, fix, cwd, clock)
    verdicts = []
    for finding in findings:
        fix = automatic_fix(finding)
        after = trials.get(fix) if fix is not None else None
        verdict = MANUAL if after is None else judge(finding, before, after)
        verdicts.append(Verdict(finding, fix, before, after, verdict))
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
    return verify_command(job.command, cwd=job.cwd or None, progress=progress)


def verified_findings(verdicts: Iterable[Verdict]) -> list[Finding]:
    """The baseline's findings, each with what verifying it measured in its evidence
    (``evidence["verify"]``: the fix, the verdict, and before/after pairs), for the JSON."""
    found = []
    for v in verdicts:
        measured: dict[str, object] = {"fix": v.fix, "verdict": v.verdict}
        if v.after is not None:
            measured.update(
                frame_compiles=[v.before.frame_compiles, v.after.frame_compiles],
                compile_s=[round(v.before.compile_s, 4), round(v.after.compile_s, 4)],
                wall_s=[round(v.before.wall_s, 3), round(v.after.wall_s, 3)],
                exit_status=[v.before.job.exit_status, v.after.job.exit_status],
            )
        found.append(replace(v.finding, evidence={**v.finding.evidence, "verify": measured}))
    return found


def verify_lines(verdicts: Iterable[Verdict]) -> list[str]:
    """The before/after table, one row per finding."""
    from compiletrace.reports._table import render_table

    verdicts = list(verdicts)
    if not verdicts:
        return ["No findings: nothing to verify."]
    rows = []
    for v in verdicts:
        after = v.after
        rows.append(
            [
                f"{v.finding.kind.value} ({v.finding.component})",
                v.fix or "-",
                f"{v.before.frame_compiles} -> {after.frame_compiles}"
                if after
                else f"{v.before.frame_compiles}",
                f"{v.before.compile_s:.2f} -> {after.compile_s:.2f}"
                if after
                else f"{v.before.compile_s:.2f}",
                f"{v.before.wall_s:.1f} -> {after.wall_s:.1f}" if after else f"{v.before.wall_s:.1f}",
                v.verdict,
            ]
        )
    header = ["finding", "fix (run --apply)", "frame compiles", "compile s", "wall s", "verdict"]
    lines = list(render_table(header, rows))
    lines.append(
        "Each run: fresh processes, an empty compile cache of its own. The verdict rests on frame "
        "compiles and findings (counts); seconds are as measured, steady-state speed is not."
    )
    return [printable(line) for line in lines]
