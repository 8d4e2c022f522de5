"""How ``doctor --verify`` reads trials that ran to ready: a run stopped after its ready mark
ran as it should, a fix whose run was never ready gets that verdict (never a saving), and the
plan takes each finding's best verified fix, all together. Made-up trials, exact figures."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from compiletrace._app import verify
from compiletrace._app.job import NEVER_READY, STOPPED_READY, UntilReady
from compiletrace._app.verify import Plan, Trial, Verdict, _verdict, plan_fixes
from compiletrace._data.findings import Finding
from compiletrace._doctor import DID_NOT_HELP, NOT_JUDGED, SLOWER, VERIFIED, Effect
from compiletrace._io.errors import UsageError
from tests.apps.test_verify import _trial

FIX = "mark-dynamic=L['x']:0"


def _staked() -> tuple[list[Trial], Finding]:
    base = [_trial(4, 130, recompiles=2, cpu_s=s) for s in (5.0, 5.4, 5.1)]
    base = [replace(t, stopped=STOPPED_READY, ready_after_s=9.0) for t in base]
    (finding,) = base[0].findings
    return base, replace(finding, seconds=1.25, evidence={**finding.evidence, "at_stake": {"seconds": 1.25}})


def test_a_run_stopped_after_ready_ran_as_it_should_and_one_never_ready_saves_nothing() -> None:
    base, finding = _staked()
    # Stopped by compiletrace after its ready mark: whatever Ctrl-C made it exit with.
    assert base[0].job.exit_status == 130 and base[0].exit_status == 0 and base[0].startup_s == 9.0
    fixed = [replace(_trial(2, 143, cpu_s=s), stopped=STOPPED_READY) for s in (3.9, 4.0, 4.2)]
    assert _verdict(finding, FIX, base, fixed, alternative=False).verdict == VERIFIED
    # One round whose run was never ready: its seconds cannot be compared, so no saving.
    never = [fixed[0], replace(_trial(0, 137), stopped=NEVER_READY), fixed[2]]
    until = UntilReady(timeout_s=120)
    verdict = _verdict(finding, FIX, base, never, alternative=False, until_ready=until)
    assert verdict.verdict == "never ready in 120 s"


def test_the_plan_applies_each_findings_best_verified_fix_together() -> None:
    base, finding = _staked()
    fixed = [replace(_trial(2, cpu_s=s), stopped=STOPPED_READY, ready_after_s=7.5) for s in (3.9, 4.0, 4.2)]
    slower = [_trial(2, cpu_s=s) for s in (6.9, 7.0, 7.2)]
    best = _verdict(finding, FIX, base, fixed, alternative=False)
    worse = _verdict(finding, "dynamic-shapes", base, slower, alternative=True)
    assert (best.verdict, worse.verdict) == (VERIFIED, SLOWER)
    assert plan_fixes([worse, best]) == [FIX]  # the slower alternative stays out
    plan = Plan((FIX,), ("python", "serve.py", "--port", "8000"), tuple(base), tuple(fixed))
    assert plan.cpu_s == (5.1, pytest.approx(4.0)) and plan.wall_s == (9.0, 7.5)
    assert (
        plan.run_line == "compiletrace run --apply \"mark-dynamic=L['x']:0\" -- python serve.py --port 8000"
    )
    # Paired round by round: 1.1, 1.4, 0.9 CPU s saved; start-up 1.5 s each.
    assert plan.line() == (
        "plan: compile CPU 5.10 s -> 4.00 s (saved 1.10 ± 0.25), start-up 9.00 s -> 7.50 s (wall, saved "
        f"1.50 ± 0.00), 3 paired rounds, with 1 fix together: {plan.run_line}"
    )
    data = plan.to_dict()
    assert data["startup_wall_s"] == [9.0, 7.5] and data["rounds"] == 3
    assert data["saved_cpu_s"] == {"median": 1.1, "spread": 0.25}
    assert data["saved_wall_s"] == {"median": 1.5, "spread": 0.0}
    one = Plan((FIX,), ("python", "x.py"), tuple(base[:1]), tuple(fixed[:1]))
    assert "-> 7.50 s (wall), one round (the seconds not judged), with 1 fix" in one.line()
    broken = Plan((FIX,), ("python", "x.py"), tuple(base), (fixed[0], _trial(2, exit_status=1), fixed[2]))
    assert broken.line().startswith("plan: every verified fix together broke the program (exit status 1)")


class _Runs:
    """Stands in for one trial of the program: the baseline compiles 5 s of CPU, the fix
    ``cpu[fix]`` per round; each trial moves the clock 10 s and is logged with its thread."""

    def __init__(self, cpu: dict[str, list[float]]) -> None:
        self.cpu = cpu
        self.now = 0.0
        self.log: list[tuple[str | None, str]] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, command: object, fix: str | None, *args: object) -> Trial:
        self.log.append((fix, threading.current_thread().name))
        self.now += 10.0
        if fix is None:
            return _trial(4, recompiles=2, cpu_s=self.cpu.get("base", [5.0] * 9)[self.bases() - 1])
        done = sum(1 for f, _ in self.log if f == fix)
        key = " + ".join(fix) if isinstance(fix, tuple) else fix
        return _trial(2, cpu_s=self.cpu[key][done - 1])

    def bases(self) -> int:
        return sum(1 for f, _ in self.log if f is None)


def _verify_with(runs: _Runs, monkeypatch: pytest.MonkeyPatch, **options: object) -> list[str | None]:
    monkeypatch.setattr(verify, "_run_once", runs)
    monkeypatch.setattr(verify, "fixes_to_verify", lambda finding: [FIX])
    lines: list[str] = []
    runs.verdicts = verify.verify_command(  # type: ignore[attr-defined]
        ["python", "x.py"],
        clock=runs.clock,
        progress=lines.append,
        **options,  # type: ignore[arg-type]
    )
    runs.lines = lines  # type: ignore[attr-defined]
    return [fix for fix, _ in runs.log]


def test_rounds_stop_once_every_fix_is_decided_and_a_budget_bounds_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A saving far outside its spread after two rounds needs no third.
    runs = _Runs({FIX: [3.0, 3.0, 3.0, 3.0, 3.0]})
    assert _verify_with(runs, monkeypatch, rounds=5) == [None, FIX, None, FIX]
    assert runs.lines[-1] == "every fix decided after 2 rounds: no round 3"  # type: ignore[attr-defined]
    # A saving within its spread runs every round.
    runs = _Runs({FIX: [4.0, 5.5, 4.2]})
    assert _verify_with(runs, monkeypatch, rounds=3) == [None, FIX, None, FIX, None, FIX]
    # 20 s for the first round: a second would end at 40 s, past a 35 s budget.
    runs = _Runs({FIX: [4.0, 5.5, 4.2]})
    assert _verify_with(runs, monkeypatch, rounds=3, budget_s=35) == [None, FIX]
    assert runs.lines[-1] == "--budget 35 s: 20 s spent, no room for round 2"  # type: ignore[attr-defined]


def test_jobs_run_a_rounds_trials_side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _Runs({FIX: [4.0, 5.5]})
    fixes = _verify_with(runs, monkeypatch, rounds=2, jobs=2)
    assert fixes[:2] == [None, FIX] and sorted(map(str, fixes[2:])) == sorted([str(None), FIX])
    # The first baseline runs alone (its findings name the fixes); round 2's two side by side.
    threads = [name for _, name in runs.log]
    assert threads[0] == threading.main_thread().name
    assert all(name.startswith("compiletrace-trial") for name in threads[2:])
    with pytest.raises(UsageError, match="--jobs must be at least 1, got 0"):
        verify.verify_command(["python", "x.py"], jobs=0)


def test_a_saving_within_the_baselines_own_move_is_not_verified(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two rounds: the baseline moved 1.53 s between them; the fix "saved" 1.00 ± 0.97.
    runs = _Runs({"base": [5.00, 6.53], FIX: [4.97, 4.56]})
    _verify_with(runs, monkeypatch, rounds=2)
    (verdict,) = runs.verdicts  # type: ignore[attr-defined]
    assert verdict.cpu is not None and verdict.cpu.effect is Effect.NOISE
    assert (round(verdict.cpu.saving, 2), round(verdict.cpu.spread, 2), round(verdict.cpu.noise, 2)) == (
        1.0,
        0.97,
        1.53,
    )
    assert verdict.verdict == DID_NOT_HELP
    # The same pairs with a baseline that held still: verified.
    runs = _Runs({"base": [5.50, 5.53], FIX: [4.47, 3.53]})
    _verify_with(runs, monkeypatch, rounds=2)
    assert [v.verdict for v in runs.verdicts] == [VERIFIED]  # type: ignore[attr-defined]


def test_a_fix_the_budget_left_one_round_is_not_judged_and_gets_no_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = _Runs({FIX: [3.0, 3.0, 3.0]})
    assert _verify_with(runs, monkeypatch, rounds=3, budget_s=35) == [None, FIX]
    (verdict,) = runs.verdicts  # type: ignore[attr-defined]
    assert verdict.verdict == NOT_JUDGED and not verdict.seconds_judged
    assert verdict.why.startswith("--budget left room for one round (saved 2.00 CPU s in one round)")
    (row,) = verify.verify_rows([verdict])
    assert row.calibration is None
    assert plan_fixes([verdict]) == []  # a plan rests on verified fixes only
    # --rounds 1 asked for: the counts' quick look, as documented (no budget cut it).
    runs = _Runs({FIX: [3.0]})
    _verify_with(runs, monkeypatch, rounds=1)
    assert [v.verdict for v in runs.verdicts] == [VERIFIED]  # type: ignore[attr-defined]
    assert "2.00 -" not in "\n".join(verify.verify_lines(runs.verdicts))  # type: ignore[attr-defined]


def _two_fix_verdicts(monkeypatch: pytest.MonkeyPatch, runs: _Runs) -> list[Verdict]:
    other = "reorderable-print"
    monkeypatch.setattr(verify, "_run_once", runs)
    monkeypatch.setattr(verify, "fixes_to_verify", lambda finding: [FIX])
    base = [_trial(4, recompiles=2, cpu_s=s) for s in (5.0, 5.2)]
    (finding,) = base[0].findings
    twin = replace(finding, location="m.py:9")
    one = verify._verdict(finding, FIX, base, [_trial(2, cpu_s=s) for s in (3.0, 3.1)], alternative=False)
    two = verify._verdict(twin, other, base, [_trial(2, cpu_s=s) for s in (4.0, 4.1)], alternative=False)
    assert one.verdict == two.verdict == VERIFIED
    return [one, two]


def test_the_plan_is_measured_in_paired_rounds_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _Runs({"base": [5.0, 5.4, 5.1], f"{FIX} + reorderable-print": [2.0, 2.5, 2.1]})
    verdicts = _two_fix_verdicts(monkeypatch, runs)
    lines: list[str] = []
    plan = verify.measure_plan(
        verdicts, ["python", "x.py"], clock=runs.clock, progress=lines.append, rounds=3
    )
    assert plan is not None and plan.rounds == 3
    assert [f for f, _ in runs.log] == [None, (FIX, "reorderable-print")] * 3
    assert lines[:2] == [
        "the baseline beside the plan (round 1 of 3)",
        f"the plan: {FIX}, reorderable-print (round 1 of 3)",
    ]
    data = plan.to_dict()
    # Paired: 3.0, 2.9, 3.0 CPU s saved.
    assert data["saved_cpu_s"] == {"median": 3.0, "spread": 0.05} and data["rounds"] == 3
    assert data["compile_cpu_s_runs"] == [[5.0, 5.4, 5.1], [2.0, 2.5, 2.1]]
    assert "(saved 3.00 ± 0.05)" in plan.line() and "3 paired rounds" in plan.line()
    # Side by side with --jobs 2: each round's pair together, in threads of their own.
    runs = _Runs({"base": [5.0, 5.4], f"{FIX} + reorderable-print": [2.0, 2.5]})
    verdicts = _two_fix_verdicts(monkeypatch, runs)
    plan = verify.measure_plan(verdicts, ["python", "x.py"], clock=runs.clock, rounds=2, jobs=2)
    assert plan is not None and plan.rounds == 2
    assert all(name.startswith("compiletrace-trial") for _, name in runs.log)
    # A budget with room for one round (10 s a trial, two a round): one; with none: no plan.
    runs = _Runs({"base": [5.0] * 3, f"{FIX} + reorderable-print": [2.0] * 3})
    verdicts = _two_fix_verdicts(monkeypatch, runs)
    lines = []
    plan = verify.measure_plan(
        verdicts, ["python", "x.py"], clock=runs.clock, progress=lines.append, rounds=3, budget_s=25
    )
    assert (
        plan is not None and plan.rounds == 1 and lines[-1] == "--budget: 5 s left, no room for plan round 2"
    )
    lines = []
    assert verify.measure_plan(verdicts, ["x"], clock=runs.clock, progress=lines.append, budget_s=1.5) is None
    assert lines == ["--budget: 2 s left, no room for the plan (a round takes about 2 s)"]
    # One fix: the plan is that fix, measured in its own rounds (nothing more runs).
    runs = _Runs({})
    monkeypatch.setattr(verify, "_run_once", runs)
    plan = verify.measure_plan(verdicts[:1], ["python", "x.py"], clock=runs.clock)
    assert plan is not None and runs.log == [] and plan.runs == verdicts[0].fix_runs


def test_verify_judges_the_jobs_findings_and_says_where_the_trials_differ(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = _trial(6, recompiles=2, cpu_s=5.0)
    (recompiles,) = job.findings
    elsewhere = replace(recompiles, location="serve.py:40")  # made by a request the trials lack
    runs = _Runs({FIX: [3.0, 3.0]})
    fixes = _verify_with(runs, monkeypatch, rounds=2, findings=[recompiles, elsewhere])
    assert fixes == [None, FIX, None, FIX]  # the fix of the finding the trials lack: not run
    judged, unjudged = runs.verdicts  # type: ignore[attr-defined]
    assert judged.finding is recompiles and judged.verdict == VERIFIED
    assert unjudged.finding is elsewhere and unjudged.verdict == NOT_JUDGED and unjudged.after is None
    assert unjudged.why.startswith("the job showed it, the trials of the program as it is did not (4 frame")
    assert verify.trial_differences([recompiles, elsewhere], 6, judged.before) == [
        "The trials differ from the job: the program as it is compiled 4 frames in the first round, "
        "the job 6.",
        "In the job, not in the trials (not judged): recompiles (lm serve.py:40).",
    ]
    assert verify.trial_differences([recompiles], 4, judged.before) == []
