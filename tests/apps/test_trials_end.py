"""Every trial ends: a run to ready (``doctor --verify``'s trials, ``bench startup --
COMMAND``, ``run --traffic``) is bounded whatever the program does. A supervisor that
restarts a crashing worker makes a new ready mark every few tenths of a second, each of
which would start the grace again: the run stops at the first mark more than its ready
timeout after the first. A run still going at its stop time (the end of ``--budget``) is
stopped, and in ``doctor --verify`` its fix's row is "not judged". Real processes
(tests/programs/restart_forever.py, ``sleep``), on clocks that move only as the loop looks,
so the bounds hold however loaded the machine is."""

from __future__ import annotations

import signal
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from compiletrace._app.job import KEPT_MARKING, OUT_OF_BUDGET, UntilReady, run_command
from compiletrace._app.verify import NOT_JUDGED, _verdict, verify_command
from compiletrace._data.job_dir import READY_SUFFIX
from compiletrace._io.errors import UsageError
from tests.apps.test_verify import _trial

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
TIMEOUT_S = 300
FIX = "mark-dynamic=L['x']:0"


class Ticks:
    """A clock that moves a second each time it is read: the loop's bounds are reached in a
    fixed number of looks, however loaded the machine is."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.mark.slow
def test_a_supervisor_restarting_a_crashing_worker_is_stopped_after_its_ready_timeout(tmp_path: Path) -> None:
    job_dir = tmp_path / "job-dir"

    class AfterFirstMark(Ticks):
        def __call__(self) -> float:  # stands still until the first worker is ready
            return super().__call__() if any(job_dir.glob(f"*{READY_SUFFIX}")) else 0.0

    # The grace alone would never end it: each worker's mark starts it again. Its 200
    # workers (a minute at least) end it by themselves, so the test ends either way.
    until = UntilReady(grace_s=1e6, timeout_s=20, stop_timeout_s=TIMEOUT_S, clock=AfterFirstMark())
    program = [sys.executable, str(PROGRAMS / "restart_forever.py"), "200"]
    outcome = run_command(program, until_ready=until, job_dir=job_dir)
    assert outcome.stopped == KEPT_MARKING
    assert len(outcome.marks) >= 2 and len({m.pid for m in outcome.marks}) == len(outcome.marks)


@pytest.mark.slow
def test_a_run_still_going_at_its_stop_time_is_stopped() -> None:
    until = UntilReady(timeout_s=1e9, stop_at=5.0, stop_timeout_s=TIMEOUT_S, clock=Ticks())
    outcome = run_command(["sleep", "600"], until_ready=until)
    assert (outcome.stopped, outcome.exit_status) == (OUT_OF_BUDGET, 128 + signal.SIGINT)


@pytest.mark.slow
def test_a_baseline_the_budget_cut_short_is_refused() -> None:
    # --budget 5 inside the round: the baseline is stopped at its end, and nothing compares.
    with pytest.raises(
        UsageError, match=r"nothing to compare: --budget ran out while it ran.*larger --budget"
    ):
        verify_command(
            ["sleep", "600"], rounds=1, until_ready=UntilReady(timeout_s=1e9, clock=Ticks()), budget_s=5
        )


def test_a_fix_whose_run_was_no_verdict_is_not_judged_saying_why() -> None:
    base = [_trial(4, recompiles=2, cpu_s=s) for s in (5.0, 5.1)]
    (finding,) = base[0].findings
    cut = replace(_trial(2, 130), not_judged="--budget ran out while it ran: it was stopped")
    verdict = _verdict(finding, FIX, base, [_trial(2, cpu_s=3.0), cut], alternative=False)
    assert (verdict.verdict, verdict.why, verdict.calibration) == (
        NOT_JUDGED,
        "--budget ran out while it ran: it was stopped",
        None,
    )
    # The baseline's run of a round is the pair's too: its fix is not judged either.
    base[1] = replace(base[1], not_judged="--budget ran out while it ran: it was stopped")
    fixed = [_trial(2, cpu_s=3.0), _trial(2, cpu_s=3.1)]
    assert _verdict(finding, FIX, base, fixed, alternative=False).verdict == NOT_JUDGED
    assert _verdict(finding, FIX, base, fixed[:1], alternative=False).verdict != NOT_JUDGED  # not its pair
