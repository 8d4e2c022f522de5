"""``compiletrace doctor --verify``: prove the doctor's advice by re-running the program with
each fix applied, and measuring.

The job's command runs as it is (the baseline) and once per fix the doctor can apply from
outside the program (``compiletrace run --apply NAME``: a Dynamo setting, an environment
variable torch reads, or a change to how the program calls torch.compile or generate, made
in every process before its first compile), each run in fresh processes on the same cache
state: a private, empty compile cache of its own. It does so in rounds (``rounds``, 3 by
default), interleaved: base, fix 1, fix 2, ..., base, fix 1, ..., so that each round's runs
share the machine's load of the moment. Each finding then gets a verdict from two readings
(``compiletrace._doctor.verdicts``):

- what the fix did to the compiled program, first: code that compiled as it is and runs
  uncompiled with the fix (past torch's recompile limit, a frame torch gave up on, blocks of
  a regional compile left without a graph), in any round, is ``runs uncompiled``, whatever
  it saved;
- the counts, by the judge of the finding's rule (each fix kind its own): the finding gone
  and fewer frames compiled (for a function past torch's recompile limit: none left running
  eagerly; for regional compilation, which raises the frame count by design: at most a frame
  per block, or fewer graph nodes in no more frames) is ``verified``; still there, smaller,
  with fewer frames, ``helped in part``; else ``did not help``;
- the seconds: per round, the compile CPU seconds of the run as it is minus those with the
  fix (CPU: what a busy machine barely moves); their median is the saving, half their range
  the spread. A fix stays verified (or helped in part) only when its saving beats the spread
  and a floor (3% of the compile, 0.05 s); within them it ``did not help``; a fix that costs
  seconds ``made it slower``, whatever it did to the counts.

``broke the program``: a run with the fix ended otherwise than the baseline's;
``cannot be applied automatically``: the fix needs an edit (the finding says which); ``gate
held``: a gate (``fail-after-ready``) stopped the program at a compile after ready, as it
should (no fix: no seconds judged; its row comes after the fixes). Every verdict but
``verified`` says why (``Verdict.why``, under the table). Beside
each verdict: the seconds the finding put at stake, the saving (median and spread, CPU and
wall), and the calibration, saved over at stake, which says how far the doctor's estimate
can be trusted. With ``alternatives``, the other fixes a finding names (dynamic shapes beside
marking one dimension dynamic) are measured too, each on its own row.

A run of ``compiletrace profile`` (a MODEL spec, no command) is verified the same way: its
MODEL and options become the command ``python -m compiletrace profile ...``, run in the
current directory, with ``--steady-calls`` added, so each trial also measures the compiled
model's steady-state call time (a fix such as dynamic shapes can make the compiled code
slower: a line under the table then says so, when the median grew by 10% or more and by
more than either trial's spread). A job's command has no call to time: its steady state is
its own to measure.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from compiletrace._app.compile_caches import cache_environment
from compiletrace._app.job import (
    INTERRUPTED,
    NEVER_READY,
    OUT_OF_BUDGET,
    STOPPED_READY,
    ProfileJob,
    UntilReady,
    run_command,
)
from compiletrace._app.trial_ports import Placement, run_on_own_port
from compiletrace._data.files import read
from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.fixes import apply_line
from compiletrace._data.job import Job
from compiletrace._data.kinds import FileKind
from compiletrace._data.records import NS_PER_S, GraphRecord
from compiletrace._data.run import Run
from compiletrace._data.run_meta import RunMeta
from compiletrace._data.verify import TrialFigures, VerifyRow
from compiletrace._doctor import (
    AT_STAKE,
    BROKE,
    COMPILES,
    DID_NOT_HELP,
    GATE_HELD,
    MANUAL,
    NOT_JUDGED,
    PARTLY,
    SLOWER,
    UNCOMPILED,
    VERIFIED,
    SecondsEffect,
    automatic_fix,
    fixes_to_verify,
    judge,
    rule_for,
    seconds_effect,
    uncompiled_why,
    why_not_verified,
    with_seconds,
)
from compiletrace._doctor.shared import AUTO_FIX, GATE_FIX, OTHER_FIXES
from compiletrace._doctor.verdicts import same_finding
from compiletrace._io.errors import UsageError
from compiletrace._io.signals import owned_temporary_directory
from compiletrace._io.text import printable
from compiletrace.reports import verify_lines as table_lines
from compiletrace.reports import verify_table as table_of

if TYPE_CHECKING:
    from compiletrace.reports._verify import VerifyTable

__all__ = [
    "BROKE",
    "COMPILES",
    "DECIDED_MARGIN",
    "DID_NOT_HELP",
    "GATE_HELD",
    "MANUAL",
    "PARTLY",
    "ROUNDS",
    "SLOWER",
    "UNCOMPILED",
    "VERIFIED",
    "Plan",
    "Trial",
    "UntilReady",
    "Verdict",
    "decided",
    "group_by_fix",
    "judge",
    "measure_edit",
    "measure_plan",
    "plan_fixes",
    "profile_command",
    "slowdown",
    "trial_differences",
    "verified_findings",
    "verify_command",
    "verify_fixes",
    "verify_job",
    "verify_lines",
    "verify_profile_run",
    "verify_rows",
    "verify_table",
]

SIGNALLED = 128  # a shell's exit status for a command a signal ended: 128 + N
STEADY_CALLS = 20  # calls timed after the warm-up in each trial of a profile run
SLOWER_CALL = 0.10  # a fix whose steady-state call is this much slower is said to slow the model
ROUNDS = 3  # rounds of runs (base and every fix, interleaved): the fewest that give a spread


@dataclass(frozen=True)
class Trial:
    """One run of the command: with no fix (``fix`` None) or with one."""

    fix: str | None
    job: ProfileJob
    wall_s: float
    steady_call_s: float | None = None  # median seconds per call after the warm-up (profile runs)
    steady_spread_s: float = 0.0  # ... and the interquartile range of those calls
    stopped: str | None = None  # the trial was stopped: after its ready mark, or never ready
    ready_after_s: float | None = None  # seconds from its start to its first ready mark
    # Why this run is no verdict on its fix ("": it is one): it could not listen on its
    # port, alone either, or --budget ran out while it ran.
    not_judged: str = ""

    @property
    def startup_s(self) -> float:
        """Its start-up, wall time: to its first ready mark, or its whole run without one."""
        return self.ready_after_s if self.ready_after_s is not None else self.wall_s

    @property
    def exit_status(self) -> int:
        """The command's exit status; 0 for one stopped after its ready mark and grace (it ran
        as it should until compiletrace ended it, whatever it does on Ctrl-C)."""
        return 0 if self.stopped == STOPPED_READY else self.job.exit_status

    @property
    def never_ready(self) -> bool:
        return self.stopped == NEVER_READY

    @property
    def frame_compiles(self) -> int:
        return len(self.job.records())

    @property
    def refused_after_ready(self) -> bool:
        """Whether torch's stance refused a compile after ready in any process of the run."""
        return any(p.run.meta.refused_after_ready for p in self.job.processes)

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
        """Compile seconds, wall time (frames and lazy backwards)."""
        return sum(self.job.by_component().values())

    @property
    def compile_cpu_s(self) -> float:
        """Compile seconds, CPU time of the compile work (wall where a record measured none)."""
        return sum(r.cpu_or_wall_ns for r in self.job.records()) / NS_PER_S

    @functools.cached_property
    def findings(self) -> list[Finding]:
        """What the doctor finds in the run (once: each verdict reads them)."""
        return self.job.diagnose()

    @property
    def records(self) -> Sequence[GraphRecord]:
        """Every frame compile of the run, in every process."""
        return self.job.records()


@dataclass(frozen=True)
class Verdict:
    """A finding of the baseline, its fix, and what applying it did: the first round's runs
    (``before``, ``after``), every round's, and what the rounds made of the seconds."""

    finding: Finding
    fix: str | None
    before: Trial
    after: Trial | None
    verdict: str
    base_runs: tuple[Trial, ...] = ()  # every round's run as it is (before is the first)
    fix_runs: tuple[Trial, ...] = ()  # ... and with the fix, round by round
    cpu: SecondsEffect | None = None  # the paired compile CPU seconds: saving, spread, effect
    wall: SecondsEffect | None = None  # ... and the compile wall seconds
    alternative: bool = False  # a fix the finding names beside its own (measured when asked)
    # Whether its seconds decide: not for a fix that makes code compile (it costs them by design).
    seconds_judged: bool = True
    why: str = ""  # why the verdict is not "verified", in a line ("" for verified)
    # The other findings whose first fix this is (the same runs answer them): the fix's stake
    # is theirs and this one's together (:func:`group_by_fix`).
    answers: tuple[Finding, ...] = ()

    @property
    def at_stake_s(self) -> float:
        """The seconds the finding put at stake: what the doctor said its fix can save."""
        return _stake_s(self.finding)

    @property
    def fix_stake_s(self) -> float:
        """What the fix put at stake: the stakes of every finding it answers first, added (the
        doctor hands each compile's seconds to one finding only, so they never overlap)."""
        return self.at_stake_s + sum(_stake_s(f) for f in self.answers)

    @property
    def calibration(self) -> float | None:
        """Seconds the fix saved over the seconds it put at stake (CPU; every finding it
        answers first: one number per fix): 1.0 is an exact estimate (None where the seconds
        do not decide the verdict)."""
        if self.cpu is None or self.fix_stake_s <= 0 or not self.seconds_judged:
            return None
        return self.cpu.saving / self.fix_stake_s


def _stake_s(finding: Finding) -> float:
    stake = finding.evidence.get(AT_STAKE)
    seconds = stake.get("seconds") if isinstance(stake, dict) else None
    return float(seconds) if isinstance(seconds, (int, float)) else finding.seconds


def _answered_together(v: Verdict) -> bool:
    """Whether a verdict's fix is its finding's first, measured: a fix other findings may
    share (not an alternative, a gate or a fix that needs an edit)."""
    first = v.fix is not None and v.fix == automatic_fix(v.finding)
    return first and not v.alternative and v.after is not None


def group_by_fix(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """Each verdict with the other findings its fix answers first (``answers``): a fix that
    answers several findings is judged once, on the stakes of all of them."""
    firsts: dict[str, list[Verdict]] = {}
    for v in verdicts:
        if _answered_together(v):
            firsts.setdefault(str(v.fix), []).append(v)
    out = []
    for v in verdicts:
        shared = firsts.get(str(v.fix), []) if _answered_together(v) else []
        others = tuple(o.finding for o in shared if o is not v)
        out.append(replace(v, answers=others) if others else v)
    return out


def slowdown(before: Trial, after: Trial) -> float | None:
    """How much slower the steady-state call is with the fix (0.25: 25% slower), when both
    trials measured it."""
    if before.steady_call_s is None or after.steady_call_s is None or before.steady_call_s <= 0:
        return None
    return after.steady_call_s / before.steady_call_s - 1


def slowed_beyond_noise(before: Trial, after: Trial) -> bool:
    """The fix made the steady-state call slower by :data:`SLOWER_CALL` or more, and by more than
    either trial's spread (medians of sub-millisecond calls in two processes move)."""
    slower = slowdown(before, after)
    if slower is None or slower < SLOWER_CALL:
        return False
    assert before.steady_call_s is not None and after.steady_call_s is not None
    return after.steady_call_s - before.steady_call_s > max(before.steady_spread_s, after.steady_spread_s)


def _run_once(
    command: Sequence[str],
    fix: str | tuple[str, ...] | None,
    cwd: str | None,
    clock: Callable[[], float],
    profiled: bool,
    ready: str | None = None,
    until_ready: UntilReady | None = None,
    side_by_side: bool = False,
) -> Trial:
    # A profile run measures its steady calls after its warm-up, and ends by itself.
    until = None if profiled else until_ready or UntilReady()
    named = " + ".join(fix) if isinstance(fix, tuple) else fix

    def attempt(placed: Placement) -> Trial:
        with owned_temporary_directory("compiletrace-verify-cache-") as cache:
            env = cache_environment(cache)  # every compile cache empty: no run warms another
            run_file = os.path.join(cache, "profile.json")
            argv = [*placed.command, "--json", run_file] if profiled else placed.command
            start = clock()
            # The program's stdout goes to this process's stderr (file descriptor 2): stdout is
            # the doctor's, --json - included.
            outcome = run_command(
                argv,
                fixes=() if fix is None else (fix,) if isinstance(fix, str) else fix,
                extra_env=env,
                cwd=cwd,
                stdout=placed.stdout,
                stderr=placed.stderr,
                ready=placed.ready,
                until_ready=until and replace(until, traffic=placed.traffic),
            )
            wall = clock() - start
            if outcome.stopped == INTERRUPTED:
                # Ctrl-C was passed on to the trial and stopped it: the proof stops, with no
                # verdict on a run the user cut short (the CLI exits 130).
                raise KeyboardInterrupt
            steady, spread = _steady_call_s(run_file) if profiled else (None, 0.0)
        return Trial(named, outcome.job, wall, steady, spread, outcome.stopped, outcome.ready_after_s)

    # Side by side, each trial on a port of its own (where the command names the port).
    trial, why = run_on_own_port(command, ready, until.traffic if until else (), side_by_side, attempt)
    if not why and trial.stopped == OUT_OF_BUDGET:
        why = "--budget ran out while it ran: it was stopped"
    return replace(trial, not_judged=why) if why else trial


def _interruptible(until_ready: UntilReady) -> UntilReady:
    """The trials' bounds with one interrupt for the whole proof: Ctrl-C in any trial stops
    them all (see :func:`_run_all`)."""
    if until_ready.interrupted is not None:
        return until_ready
    return replace(until_ready, interrupted=threading.Event())


def never_ready_verdict(until_ready: UntilReady) -> str:
    """The verdict of a fix whose run never became ready within the trials' limit.

    >>> never_ready_verdict(UntilReady(timeout_s=300))
    'never ready in 300 s'
    """
    return f"{NEVER_READY} in {until_ready.timeout_s:g} s"


def _check_baseline(trial: Trial, until_ready: UntilReady, ready: str | None) -> None:
    """A baseline that never became ready gives nothing to compare: bad input, said so."""
    if trial.not_judged:
        what = "a larger --budget" if trial.stopped == OUT_OF_BUDGET else "its port free (stop what holds it)"
        raise UsageError(f"the command as it is gives nothing to compare: {trial.not_judged}; give {what}")
    if trial.never_ready:
        mark = f"--ready {printable(ready)}" if ready else "its warm-up's end or compiletrace.ready()"
        raise UsageError(
            f"the command as it is was never ready in {until_ready.timeout_s:g} s ({mark} never came), "
            "so no fix can be judged on its start-up: give the ready mark it reaches (run --ready "
            "port:PORT, step:N, MODULE:FUNCTION or phase:NAME), or a longer --ready-timeout"
        )


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
    rounds: int = ROUNDS,
    alternatives: bool = False,
    ready: str | None = None,
    until_ready: UntilReady | None = None,
    jobs: int = 1,
    budget_s: float | None = None,
    findings: Sequence[Finding] | None = None,
) -> list[Verdict]:
    """Run ``command`` as it is and once per fix the doctor can apply to what it found, in
    ``rounds`` interleaved rounds, and judge each finding (see the module docstring).
    ``findings``: what to judge (a job's, as its own run showed them); by default what the
    first run as it is shows. A finding the trials' baseline does not show is ``not judged``,
    and its fix not run (what made it is not in the re-run: a request, an input).
    ``jobs``: the trials of a round run that many side by side (the verdict rests on compile
    CPU seconds, which other work moves little); a fix whose saving is far outside the
    spread after two rounds runs no more (:func:`decided`), and rounds stop once every fix
    is; ``budget_s`` bounds the whole proof: no round starts that would end past it.
    ``profiled``: the command is a ``compiletrace profile`` that measures its steady state
    (``--json PATH`` is added); ``alternatives``: measure the other fixes findings name too;
    ``ready``: the job's ready mark (``run --ready``), the same in every run. Each run goes
    only until the command is ready, its grace, and its stop (``until_ready``, default
    :class:`UntilReady`'s); a baseline never ready within its limit is refused
    (:class:`~compiletrace.UsageError`), a fix whose run never is gets that verdict."""
    if rounds < 1:
        raise UsageError(f"--rounds must be at least 1, got {rounds}")
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    until_ready = _interruptible(until_ready or UntilReady())
    if budget_s is not None:  # a run still going when the budget ends is stopped, not judged
        until_ready = replace(until_ready, stop_at=until_ready.clock() + budget_s)
    say = progress or (lambda line: None)
    shown = printable(" ".join(command))
    say(f"the baseline: {shown}" + (f" (round 1 of {rounds})" if rounds > 1 else ""))
    began = clock()  # the whole proof, for --budget
    base = [_run_once(command, None, cwd, clock, profiled, ready, until_ready)]
    _check_baseline(base[0], until_ready, ready)
    judged = list(findings) if findings is not None else base[0].findings
    # Each finding as the trials' baseline shows it (its twin), which the judges read.
    twins = {id(f): f if findings is None else twin_in(base[0], f) for f in judged}
    fixes = list(
        dict.fromkeys(fix for f in judged if twins[id(f)] is not None for fix in _fixes_of(f, alternatives))
    )
    runs: dict[str, list[Trial]] = {fix: [] for fix in fixes}
    cut = False  # --budget stopped the rounds before every fix had its seconds judged
    for round_number in range(1, rounds + 1):
        open_fixes = [fix for fix in fixes if not decided(base, runs[fix])]
        if round_number > 1 and not open_fixes:
            say(f"every fix decided after {round_number - 1} rounds: no round {round_number}")
            break
        spent = clock() - began
        if round_number > 1 and budget_s is not None and spent * round_number / (round_number - 1) > budget_s:
            say(f"--budget {budget_s:g} s: {spent:.0f} s spent, no room for round {round_number}")
            cut = True
            break
        of = f" (round {round_number} of {rounds})" if rounds > 1 else ""
        todo: list[tuple[str | None, str]] = [(None, f"the baseline{of}")] if round_number > 1 else []
        todo += [(fix, f"with --apply {fix}{of}") for fix in open_fixes]
        for (fix, _), trial in zip(
            todo, _run_all(todo, jobs, say, command, cwd, clock, profiled, ready, until_ready), strict=True
        ):
            (base if fix is None else runs[fix]).append(trial)
    verdicts = []
    for finding in judged:
        own = fixes_to_verify(finding)  # its fix, then its gate (a finding may name both: a row each)
        if not own:  # an edit: said so; the fixes it names to try, measured with the alternatives
            why = why_not_verified(MANUAL, MANUAL, finding, base[0], None, None)
            verdicts.append(Verdict(finding, None, base[0], None, MANUAL, tuple(base), why=why))
        twin = twins[id(finding)]
        for fix in _fixes_of(finding, alternatives):
            if twin is None:
                why = not_in_trials_why(base[0])
                verdicts.append(Verdict(finding, fix, base[0], None, NOT_JUDGED, tuple(base), why=why))
                continue
            verdict = _verdict(
                twin, fix, base, runs[fix], alternative=fix not in own, until_ready=until_ready
            )
            if cut and rounds > 1:
                verdict = _unjudged_by_budget(verdict)
            verdicts.append(replace(verdict, finding=finding))
    return group_by_fix(verdicts)


def twin_in(trial: Trial, finding: Finding) -> Finding | None:
    """The finding as a trial shows it again: the same kind, component and place (its
    extent may differ), or None."""
    return next((f for f in trial.findings if same_finding(f, finding)), None)


def not_in_trials_why(baseline: Trial) -> str:
    """Why a job's finding is not judged: the program as it is did not show it in its trials."""
    return (
        f"the job showed it, the trials of the program as it is did not ({baseline.frame_compiles} frame "
        "compiles in the first): what made it is not in the re-run (requests: give --traffic; an "
        "input or a setting the job's run had)"
    )


def _unjudged_by_budget(verdict: Verdict) -> Verdict:
    """A fix that --budget left with one round, whose seconds would decide its verdict: not
    judged (no spread to read one difference against), never verified on one pair."""
    if not verdict.seconds_judged or len(verdict.fix_runs) > 1 or verdict.verdict not in (VERIFIED, PARTLY):
        return verdict
    saved = f"saved {verdict.cpu.saving:.2f} CPU s in one round" if verdict.cpu is not None else "one round"
    why = f"--budget left room for one round ({saved}): no spread to judge the seconds against"
    return replace(verdict, verdict=NOT_JUDGED, seconds_judged=False, why=why)


def trial_differences(findings: Sequence[Finding], frame_compiles: int, baseline: Trial) -> list[str]:
    """How the trials' baseline differs from the job it re-runs (``findings`` and
    ``frame_compiles``: the job's), in lines under the table: the verdicts judge the job's
    findings, and say so where the trials did not show one. Empty when they agree."""
    lines = []
    if baseline.frame_compiles != frame_compiles:
        lines.append(
            f"The trials differ from the job: the program as it is compiled {baseline.frame_compiles} "
            f"frame{'s' if baseline.frame_compiles != 1 else ''} in the first round, the job "
            f"{frame_compiles}."
        )
    missing = [f for f in findings if twin_in(baseline, f) is None]
    if missing:
        lines.append(
            "In the job, not in the trials (not judged): " + ", ".join(_named(f) for f in missing) + "."
        )
    extra = [f for f in baseline.findings if not any(same_finding(f, g) for g in findings)]
    if extra:
        lines.append(
            "In the trials, not in the job (not verified here): " + ", ".join(_named(f) for f in extra) + "."
        )
    return lines


def _named(finding: Finding) -> str:
    place = " ".join(part for part in (finding.component, finding.location) if part)
    return f"{finding.kind.value} ({place})" if place else finding.kind.value


# A fix whose saving (or cost) is this many times its noise after two rounds is decided:
# a third round cannot turn it (its pairs' half range would have to grow past the saving).
DECIDED_MARGIN = 2.0


def decided(base: Sequence[Trial], runs: Sequence[Trial]) -> bool:
    """Whether a fix's rounds so far decide its seconds: at least two, and a saving (or a
    cost) :data:`DECIDED_MARGIN` times beyond their noise (the spread, or the floor); a fix
    that broke the program is decided too.

    >>> decided([], [])
    False
    """
    if len(runs) < 2:
        return False
    if any(t.exit_status != b.exit_status for b, t in zip(base, runs, strict=False)):
        return True
    effect = seconds_effect([t.compile_cpu_s for t in base], [t.compile_cpu_s for t in runs])
    return effect.rounds >= 2 and abs(effect.saving) >= DECIDED_MARGIN * effect.noise


def _run_all(
    todo: Sequence[tuple[str | tuple[str, ...] | None, str]],
    jobs: int,
    say: Callable[[str], None],
    command: Sequence[str],
    cwd: str | None,
    clock: Callable[[], float],
    profiled: bool,
    ready: str | None,
    until_ready: UntilReady | None,
) -> list[Trial]:
    """The trials of one round, in ``todo``'s order: one after another, or ``jobs`` side by
    side (each its own processes, process group and empty cache)."""

    def one(item: tuple[str | tuple[str, ...] | None, str]) -> Trial:
        say(item[1])
        return _run_once(command, item[0], cwd, clock, profiled, ready, until_ready, jobs > 1)

    if jobs <= 1 or len(todo) <= 1:
        return [one(item) for item in todo]
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="compiletrace-trial")
    try:
        return list(pool.map(one, todo))
    except KeyboardInterrupt:
        # Ctrl-C reached this thread alone (the trials run in process groups of their own):
        # every trial running beside it stops too, before the proof does.
        if until_ready is not None and until_ready.interrupted is not None:
            until_ready.interrupted.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def measure_edit(
    command: Sequence[str],
    edited: Sequence[str],
    kind: FindingKind | str,
    *,
    change: str,
    cwd: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: Callable[[str], None] | None = None,
    rounds: int = ROUNDS,
    ready: str | None = None,
    until_ready: UntilReady | None = None,
) -> Verdict | None:
    """A fix that needs an edit, measured as :func:`verify_command` measures one applied
    from outside: the program as it is (``command``) and as edited (``edited``, the edit
    ``change`` names), interleaved, ``rounds`` times, each run only until it is ready; the
    first finding of ``kind`` the program as it is shows is judged on them (None when it
    shows none)."""
    say = progress or (lambda line: None)
    until_ready = _interruptible(until_ready or UntilReady())
    base: list[Trial] = []
    runs: list[Trial] = []
    for round_number in range(1, rounds + 1):
        say(f"the baseline (round {round_number} of {rounds})")
        base.append(_run_once(command, None, cwd, clock, False, ready, until_ready))
        _check_baseline(base[-1], until_ready, ready)
        say(f"edited: {change} (round {round_number} of {rounds})")
        runs.append(_run_once(edited, None, cwd, clock, False, ready, until_ready))
    found = [f for f in base[0].findings if f.kind == FindingKind(kind)]
    if not found:
        return None
    return _verdict(found[0], change, base, runs, alternative=False, until_ready=until_ready)


def _fixes_of(finding: Finding, alternatives: bool) -> list[str]:
    """The fix a finding names and its gate, then (with ``alternatives``) the others it names
    (a finding whose own fix is an edit may name one to try as the program is)."""
    own = fixes_to_verify(finding)
    others = finding.evidence.get(OTHER_FIXES) if alternatives else None
    extra = [str(f) for f in others if isinstance(f, str)] if isinstance(others, list) else []
    return list(dict.fromkeys([*own, *extra]))


def _verdict(
    finding: Finding,
    fix: str,
    base: Sequence[Trial],
    runs: Sequence[Trial],
    *,
    alternative: bool,
    until_ready: UntilReady | None = None,
) -> Verdict:
    before, after = base[0], runs[0]
    cpu = seconds_effect([t.compile_cpu_s for t in base], [t.compile_cpu_s for t in runs])
    wall = seconds_effect([t.compile_s for t in base], [t.compile_s for t in runs])
    rule = rule_for(finding.kind)
    # Another fix than the finding's own (an alternative, one to try) is judged as that fix:
    # the finding as if it named it first (regional compilation's judge is its own).
    as_fix = (
        finding
        if fix == automatic_fix(finding) or fix == finding.evidence.get(GATE_FIX)
        else replace(finding, evidence={**finding.evidence, AUTO_FIX: fix})
    )
    judged = rule.seconds_judged(as_fix)
    counts = judge(as_fix, before, after)
    # What the fix did to the compiled program, in any round: code left uncompiled.
    uncompiled = next(
        (why for b, t in zip(base, runs, strict=False) if (why := uncompiled_why(as_fix, b, t))), None
    )
    not_judged = next((t.not_judged for t in (*runs, *base[: len(runs)]) if t.not_judged), "")
    if not_judged:
        # A run that could not listen, or that the budget cut short: no verdict on the fix.
        verdict, judged = NOT_JUDGED, False
    elif any(t.never_ready for t in runs):
        # Its start-up never ended: no seconds to compare, and no saving to claim.
        verdict, judged = never_ready_verdict(until_ready or UntilReady()), False
    elif rule.reads_exit_status:
        verdict = counts  # a gate ends the program on purpose: its judge reads how
        judged = judged and verdict not in (GATE_HELD, UNCOMPILED)  # seconds saved by no compile are none
    elif any(t.exit_status != b.exit_status for b, t in zip(base, runs, strict=False)):
        verdict = BROKE  # a round that ended otherwise: the fix is not safe, whatever the first said
    elif uncompiled is not None:
        verdict, judged = UNCOMPILED, False  # a saving made by not compiling is none
    elif not judged:
        verdict = COMPILES if counts == VERIFIED else counts  # making code compile adds seconds by design
    else:
        verdict = with_seconds(counts, cpu)
    why = (
        not_judged
        if verdict == NOT_JUDGED
        else uncompiled
        if verdict == UNCOMPILED and uncompiled
        else why_not_verified(verdict, counts, as_fix, before, after, cpu)
    )
    return Verdict(
        finding, fix, before, after, verdict, tuple(base), tuple(runs), cpu, wall, alternative, judged, why
    )


def verify_job(
    job: Job,
    *,
    progress: Callable[[str], None] | None = None,
    rounds: int = ROUNDS,
    alternatives: bool = False,
    until_ready: UntilReady | None = None,
    jobs: int = 1,
    budget_s: float | None = None,
    findings: Sequence[Finding] | None = None,
) -> list[Verdict]:
    """:func:`verify_command` on a saved job's command, in the directory it ran in, each run
    only until it is ready (``until_ready``). A job that a signal ended after its ready mark
    (a server stopped with Ctrl-C once it served, a training job stopped after its first
    steps) is verified; raises :class:`~compiletrace.UsageError`, running nothing, for one a
    signal ended before any process was ready (nothing says when its start-up ended) or
    whose directory is gone."""
    if job.exit_status >= SIGNALLED and not job.after_ready().fired:
        raise UsageError(
            f"the job ended by a signal (exit status {job.exit_status}) before any process of it was "
            "ready: --verify runs the command until it is ready, and nothing said when that is; run it "
            "again with its ready mark (run --ready port:PORT for a server, step:N for a training "
            "job, MODULE:FUNCTION, phase:NAME, or compiletrace.ready() in the program) and stop it after"
        )
    if job.cwd and not os.path.isdir(job.cwd):
        raise UsageError(f"the directory the job ran in ({printable(job.cwd)}) is gone; --verify runs there")
    return verify_command(
        job.command,
        cwd=job.cwd or None,
        progress=progress,
        rounds=rounds,
        alternatives=alternatives,
        ready=job.ready or None,
        until_ready=until_ready,
        jobs=jobs,
        budget_s=budget_s,
        # The job's own, as its run showed them (the caller's, where it has them already).
        findings=ProfileJob.of(job).diagnose() if findings is None else findings,
    )


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
    meta: RunMeta,
    *,
    cwd: str | None = None,
    progress: Callable[[str], None] | None = None,
    rounds: int = ROUNDS,
    alternatives: bool = False,
    until_ready: UntilReady | None = None,
    jobs: int = 1,
    budget_s: float | None = None,
) -> list[Verdict]:
    """:func:`verify_command` on the ``compiletrace profile`` command a run was made by
    (:func:`profile_command`), in ``cwd`` (where its MODEL imports from)."""
    return verify_command(
        profile_command(meta),
        cwd=cwd,
        progress=progress,
        profiled=True,
        rounds=rounds,
        alternatives=alternatives,
        until_ready=until_ready,
        jobs=jobs,
        budget_s=budget_s,
    )


def verified_findings(verdicts: Iterable[Verdict]) -> list[Finding]:
    """The baseline's findings, each with what verifying it measured in its evidence
    (``evidence["verify"]``: the fix, the verdict, before/after pairs of the first round,
    the rounds' medians and the saving; ``evidence["verify_gate"]`` for its gate, measured
    after its fix; and ``evidence["verify_other"]`` for the other fixes measured), for the JSON."""
    found: dict[int, Finding] = {}
    order: list[int] = []
    for v in verdicts:
        key = id(v.finding)
        if key not in found:
            found[key] = v.finding
            order.append(key)
        measured = _measured(v)
        finding = found[key]
        if v.alternative:
            others = [*finding.evidence.get("verify_other", []), measured]
            found[key] = replace(finding, evidence={**finding.evidence, "verify_other": others})
        elif "verify" in finding.evidence and v.fix != automatic_fix(v.finding):
            # The finding's gate, measured after its fix: beside it, not in place of it.
            found[key] = replace(finding, evidence={**finding.evidence, "verify_gate": measured})
        else:
            found[key] = replace(finding, evidence={**finding.evidence, "verify": measured})
    return [found[key] for key in order]


def _median(values: Iterable[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _measured(v: Verdict) -> dict[str, object]:
    measured: dict[str, object] = {"fix": v.fix, "verdict": v.verdict}
    if v.why:
        measured["why"] = v.why
    if v.after is None:
        return measured
    measured.update(
        frame_compiles=[v.before.frame_compiles, v.after.frame_compiles],
        graph_nodes=[v.before.graph_nodes, v.after.graph_nodes],
        compile_s=[round(v.before.compile_s, 4), round(v.after.compile_s, 4)],
        wall_s=[round(v.before.wall_s, 3), round(v.after.wall_s, 3)],
        exit_status=[v.before.job.exit_status, v.after.job.exit_status],
    )
    if v.base_runs and v.fix_runs:
        measured.update(
            rounds=len(v.fix_runs),
            compile_cpu_s=[
                round(_median(t.compile_cpu_s for t in v.base_runs), 4),
                round(_median(t.compile_cpu_s for t in v.fix_runs), 4),
            ],
            compile_cpu_s_runs=[
                [round(t.compile_cpu_s, 4) for t in v.base_runs],
                [round(t.compile_cpu_s, 4) for t in v.fix_runs],
            ],
            compile_s_runs=[
                [round(t.compile_s, 4) for t in v.base_runs],
                [round(t.compile_s, 4) for t in v.fix_runs],
            ],
        )
    if v.answers:  # the fix answers other findings first too: its stake is theirs and this one's
        measured.update(answers=[_row_name(f) for f in v.answers], fix_at_stake_s=round(v.fix_stake_s, 4))
    if v.cpu is not None:
        measured.update(
            at_stake_s=round(v.at_stake_s, 4),
            saved_cpu_s={"median": round(v.cpu.saving, 4), "spread": round(v.cpu.spread, 4)},
            seconds=v.cpu.effect.value,
        )
        calibration = v.calibration
        if calibration is not None:
            measured["calibration"] = round(calibration, 3)
    if v.wall is not None:
        measured["saved_wall_s"] = {"median": round(v.wall.saving, 4), "spread": round(v.wall.spread, 4)}
    if v.before.steady_call_s is not None or v.after.steady_call_s is not None:
        measured["steady_call_s"] = [v.before.steady_call_s, v.after.steady_call_s]
        slower = slowdown(v.before, v.after)
        if slower is not None:
            measured["slower_per_call"] = round(slower, 4)
    return measured


def _figures(trial: Trial, runs: Sequence[Trial] = ()) -> TrialFigures:
    """A trial's figures; with ``runs`` (every round's), the compile CPU seconds' median."""
    cpu = _median(t.compile_cpu_s for t in runs) if runs else trial.compile_cpu_s
    return TrialFigures(
        trial.frame_compiles, trial.graph_nodes, trial.compile_s, trial.wall_s, trial.steady_call_s, cpu
    )


def _row_name(finding: Finding) -> str:
    return finding.kind.value + (f" ({finding.component})" if finding.component else "")


def verify_rows(verdicts: Iterable[Verdict]) -> list[VerifyRow]:
    """The table's rows: each fix's figures, as plain data: one row per fix, naming every
    finding it answers first (their stakes added, one calibration), and a row for each fix
    measured otherwise (an alternative, a gate, one that needs an edit); a fix that slowed
    the compiled model's call beyond the trials' spread says by how much."""
    rows = []
    verdicts = list(verdicts)
    shown: set[str] = set()  # fixes that have their row, with every finding they answer
    for v in verdicts:
        if v.answers and v.fix in shown:
            continue
        after = v.after
        names, why = [_row_name(v.finding)], v.why
        if v.answers:
            shown.add(str(v.fix))
            mates = [o for o in verdicts if o is not v and o.fix == v.fix and o.finding in v.answers]
            names += [_row_name(o.finding) for o in mates]
            # The counts are each finding's judge's: where another's verdict differs, it is said.
            differ = [f"{_row_name(o.finding)}: {o.verdict}" for o in mates if o.verdict != v.verdict]
            why = "; ".join(w for w in (why, *differ) if w)
        gate = v.fix is not None and v.finding.evidence.get(GATE_FIX) == v.fix
        slower = None
        if after is not None and slowed_beyond_noise(v.before, after):
            slower = slowdown(v.before, after)
        rows.append(
            VerifyRow(
                " + ".join(names),
                v.fix,
                _figures(v.before, v.base_runs),
                None if after is None else _figures(after, v.fix_runs),
                v.verdict,
                slower,
                at_stake_s=v.fix_stake_s,
                # A gate saves no seconds: what its stopped run did not compile is no saving.
                saved_cpu=None if v.cpu is None or gate else (v.cpu.saving, v.cpu.spread),
                saved_wall=None if v.wall is None or gate else (v.wall.saving, v.wall.spread),
                calibration=v.calibration,
                rounds=len(v.fix_runs) or 1,
                alternative=v.alternative,
                why=why,
                gate=gate,
                answers=tuple(names),
            )
        )
    return rows


def verify_fixes(verdicts: Iterable[Verdict]) -> list[dict[str, object]]:
    """One entry per fix measured, for the doctor's JSON (``"fixes"``): the findings it
    answers, its stake (theirs together), its saving, its calibration and its verdict."""
    return [row.to_dict() for row in verify_rows(verdicts) if row.fix is not None]


def verify_table(verdicts: Iterable[Verdict], notes: Sequence[str] = ()) -> VerifyTable:
    """The before/after table of ``verdicts`` (:func:`compiletrace.reports.verify_table`):
    finding, fix, frame compiles, graph nodes, compile and wall seconds (and call ms, for a
    profile run), verdict; ``notes`` first under it (:func:`trial_differences`)."""
    return table_of(verify_rows(verdicts), steady_calls=STEADY_CALLS, notes=notes)


def verify_lines(verdicts: Iterable[Verdict], notes: Sequence[str] = ()) -> list[str]:
    """The before/after table as text, one row per finding."""
    return table_lines(verify_rows(verdicts), steady_calls=STEADY_CALLS, notes=notes)


@dataclass(frozen=True)
class Plan:
    """Every verified fix applied together (fixes interact), measured as a fix is: in rounds
    paired with the program as it is, run the same way (side by side with ``--jobs``), their
    paired differences read as a fix's are (:func:`seconds_effect`): what ``compiletrace run
    --apply ... --apply ...`` gives."""

    fixes: tuple[str, ...]
    command: tuple[str, ...]
    base_runs: tuple[Trial, ...]  # the program as it is, one per round
    runs: tuple[Trial, ...]  # ... and with every fix, round by round beside it

    @property
    def rounds(self) -> int:
        return len(self.runs)

    @property
    def cpu(self) -> SecondsEffect:
        """Compile CPU seconds saved: the paired differences' median and spread."""
        return seconds_effect([t.compile_cpu_s for t in self.base_runs], [t.compile_cpu_s for t in self.runs])

    @property
    def wall(self) -> SecondsEffect:
        """Start-up wall seconds saved (to the first ready mark, or the whole run), paired."""
        return seconds_effect([t.startup_s for t in self.base_runs], [t.startup_s for t in self.runs])

    @property
    def cpu_s(self) -> tuple[float, float]:
        """Compile CPU seconds, before and after (the rounds' medians)."""
        return _median(t.compile_cpu_s for t in self.base_runs), _median(t.compile_cpu_s for t in self.runs)

    @property
    def wall_s(self) -> tuple[float, float]:
        """Start-up wall seconds (to the first ready mark, or the whole run without one),
        before and after (the rounds' medians)."""
        return _median(t.startup_s for t in self.base_runs), _median(t.startup_s for t in self.runs)

    @property
    def never_ready(self) -> bool:
        return any(t.never_ready for t in self.runs)

    @property
    def broke(self) -> Trial | None:
        """A round with every fix that ended otherwise than the program as it is (None: none)."""
        return next(
            (t for b, t in zip(self.base_runs, self.runs, strict=False) if t.exit_status != b.exit_status),
            None,
        )

    @property
    def run_line(self) -> str:
        r"""The ``compiletrace run`` that applies the plan, as a shell line: pasted, it runs
        exactly the command verified, with exactly its arguments (shown as it is, never
        through ``printable``, which would double a ``\d+``'s backslash)."""
        return apply_line(self.fixes, self.command)

    def line(self) -> str:
        """``plan: compile CPU 2.10 s -> 0.80 s (saved 1.30 ± 0.05), start-up 9.50 s -> 8.10 s
        (wall, saved 1.40 ± 0.30), 3 paired rounds, with 2 fixes together: compiletrace run ...``"""
        if self.never_ready:
            return f"plan: with every verified fix together the program was never ready; {self.run_line}"
        broke = self.broke
        if broke is not None:
            return (
                f"plan: every verified fix together broke the program (exit status "
                f"{broke.exit_status}); apply them one by one: {self.run_line}"
            )
        (cpu0, cpu1), (wall0, wall1) = self.cpu_s, self.wall_s
        if self.rounds > 1:
            cpu, wall = self.cpu, self.wall
            saved = (
                f" (saved {cpu.saving:.2f} ± {cpu.spread:.2f})",
                f", saved {wall.saving:.2f} ± {wall.spread:.2f}",
            )
            rounds = f"{self.rounds} paired rounds"
        else:
            saved, rounds = ("", ""), "one round (the seconds not judged)"
        return (
            f"plan: compile CPU {cpu0:.2f} s -> {cpu1:.2f} s{saved[0]}, start-up {wall0:.2f} s -> "
            f"{wall1:.2f} s (wall{saved[1]}), {rounds}, with {len(self.fixes)} "
            f"fix{'es' if len(self.fixes) != 1 else ''} together: {self.run_line}"
        )

    def to_dict(self) -> dict[str, object]:
        cpu, wall = self.cpu, self.wall
        broke = self.broke
        return {
            "fixes": list(self.fixes),
            "command": self.run_line,
            "rounds": self.rounds,
            "compile_cpu_s": [round(v, 4) for v in self.cpu_s],
            "startup_wall_s": [round(v, 4) for v in self.wall_s],
            "saved_cpu_s": {"median": round(cpu.saving, 4), "spread": round(cpu.spread, 4)},
            "saved_wall_s": {"median": round(wall.saving, 4), "spread": round(wall.spread, 4)},
            "compile_cpu_s_runs": [
                [round(t.compile_cpu_s, 4) for t in self.base_runs],
                [round(t.compile_cpu_s, 4) for t in self.runs],
            ],
            "startup_wall_s_runs": [
                [round(t.startup_s, 4) for t in self.base_runs],
                [round(t.startup_s, 4) for t in self.runs],
            ],
            "exit_status": [self.base_runs[0].exit_status, (broke or self.runs[0]).exit_status],
            "never_ready": self.never_ready,
            "line": self.line(),
        }


def plan_fixes(verdicts: Iterable[Verdict]) -> list[str]:
    """The fixes of the plan: per finding, its verified fix that saved the most CPU seconds
    (one of a finding's alternatives, not all of them); never a gate, which ends the program
    on purpose.

    >>> plan_fixes([])
    []
    """
    best: dict[int, Verdict] = {}
    for v in verdicts:
        if v.verdict != VERIFIED or v.fix is None or rule_for(v.finding.kind).reads_exit_status:
            continue
        held = best.get(id(v.finding))
        saving = v.cpu.saving if v.cpu is not None else 0.0
        if held is None or saving > (held.cpu.saving if held.cpu is not None else 0.0):
            best[id(v.finding)] = v
    return list(dict.fromkeys(v.fix for v in best.values() if v.fix is not None))


def measure_plan(
    verdicts: Sequence[Verdict],
    command: Sequence[str],
    *,
    cwd: str | None = None,
    ready: str | None = None,
    until_ready: UntilReady | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: Callable[[str], None] | None = None,
    rounds: int = ROUNDS,
    jobs: int = 1,
    budget_s: float | None = None,
) -> Plan | None:
    """Every fix :func:`plan_fixes` picks, together, measured as a fix is (None when no fix
    was verified, or ``budget_s``, the seconds the proof has left, holds no round of it).

    One fix: the plan is that fix, and its own rounds beside the baseline are the plan's.
    Several: ``rounds`` more rounds, each the program as it is and with every fix, on empty
    caches of their own, to ready; with ``jobs`` of 2 or more, each round's pair side by side
    (``jobs // 2`` pairs at once), as the fixes' trials ran. No round starts that would end
    past ``budget_s``; the rounds run are the plan's."""
    say = progress or (lambda line: None)
    fixes = tuple(plan_fixes(verdicts))
    if not fixes:
        return None
    if len(fixes) == 1:
        own = [v for v in verdicts if v.fix == fixes[0] and v.fix_runs]
        if own:
            paired = own[0].fix_runs
            return Plan(fixes, tuple(command), own[0].base_runs[: len(paired)], paired)
    base = next((v.base_runs for v in verdicts if v.base_runs), ())
    if not base:
        return None
    until = _interruptible(until_ready or UntilReady())
    if budget_s is not None:  # a plan round still going when the budget ends is stopped
        until = replace(until, stop_at=until.clock() + budget_s)
    at_once = max(1, jobs // 2)  # pairs side by side
    # A round of the plan: a baseline and a trial with every fix, beside each other or in turn.
    per_round_s = max(t.wall_s for t in base) * (1 if jobs >= 2 else 2)
    began = clock()
    base_runs: list[Trial] = []
    runs: list[Trial] = []
    while len(runs) < rounds:
        pairs = min(at_once, rounds - len(runs))
        spent = clock() - began
        done = len(runs) // at_once
        estimate = spent / done if done else per_round_s
        if budget_s is not None and spent + estimate > budget_s:
            left = f"{budget_s - spent:.0f} s left" if budget_s > spent else "none left"
            if not runs:
                say(f"--budget: {left}, no room for the plan (a round takes about {estimate:.0f} s)")
                return None
            say(f"--budget: {left}, no room for plan round {len(runs) + 1}")
            break
        todo: list[tuple[str | tuple[str, ...] | None, str]] = []
        for i in range(len(runs) + 1, len(runs) + pairs + 1):
            of = f" (round {i} of {rounds})" if rounds > 1 else ""
            todo += [
                (None, f"the baseline beside the plan{of}"),
                (fixes, f"the plan: {', '.join(fixes)}{of}"),
            ]
        trials = _run_all(todo, jobs, say, command, cwd, clock, False, ready, until)
        # A pair with a run that is no verdict (cut short by the budget, or that could not
        # listen) is left out: the plan is what the rounds that ran whole measured.
        whole = [
            (b, t)
            for b, t in zip(trials[0::2], trials[1::2], strict=True)
            if not (b.not_judged or t.not_judged)
        ]
        base_runs += [b for b, _ in whole]
        runs += [t for _, t in whole]
        if len(whole) < pairs:
            lost = pairs - len(whole)
            say(f"the plan: {lost} round{'s' if lost != 1 else ''} left out (cut short)")
            break
    if not runs:
        return None
    return Plan(fixes, tuple(command), tuple(base_runs), tuple(runs))
