"""How ``doctor --verify`` reads trials that ran to ready: a run stopped after its ready mark
ran as it should, a fix whose run was never ready gets that verdict (never a saving), and the
plan takes each finding's best verified fix, all together. Made-up trials, exact figures."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from compiletrace._app import verify
from compiletrace._app.job import NEVER_READY, STOPPED_READY, UntilReady
from compiletrace._app.verify import Plan, Trial, _verdict, plan_fixes
from compiletrace._data.findings import Finding
from compiletrace._doctor import SLOWER, VERIFIED
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
    plan = Plan((FIX,), ("python", "serve.py", "--port", "8000"), tuple(base), fixed[1])
    assert plan.cpu_s == (5.1, pytest.approx(4.0)) and plan.wall_s == (9.0, 7.5)
    assert (
        plan.run_line == "compiletrace run --apply \"mark-dynamic=L['x']:0\" -- python serve.py --port 8000"
    )
    assert plan.line() == (
        "plan: compile CPU 5.10 s -> 4.00 s, start-up 9.00 s -> 7.50 s (wall), with 1 fix "
        f"together: {plan.run_line}"
    )
    assert plan.to_dict()["startup_wall_s"] == [9.0, 7.5]
    broken = Plan((FIX,), ("python", "x.py"), tuple(base), _trial(2, exit_status=1))
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
            return _trial(4, recompiles=2, cpu_s=5.0)
        done = sum(1 for f, _ in self.log if f == fix)
        return _trial(2, cpu_s=self.cpu[fix][done - 1])


def _verify_with(runs: _Runs, monkeypatch: pytest.MonkeyPatch, **options: object) -> list[str | None]:
    monkeypatch.setattr(verify, "_run_once", runs)
    monkeypatch.setattr(verify, "fixes_to_verify", lambda finding: [FIX])
    lines: list[str] = []
    verify.verify_command(["python", "x.py"], clock=runs.clock, progress=lines.append, **options)  # type: ignore[arg-type]
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
