"""Trials to ready: every re-run compiletrace makes runs the program only until it is ready,
a grace, and a stop (SIGINT to its process group, then SIGTERM, then SIGKILL), with nothing
of it left running. So a server that serves forever and a training loop that would run ten
minutes are verified in seconds, and a program that never becomes ready is stopped and said
so. Real processes: a compiled model behind ``http.server`` (tests/programs/serve_forever.py)
and a training loop (tests/programs/train_forever.py), compiled with aot_eager."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from compiletrace import cli
from compiletrace._app.job import NEVER_READY, STOPPED_READY, UntilReady, run_command
from compiletrace._app.verify import verify_command
from compiletrace._data.findings import Finding, findings_from_dict
from compiletrace._data.job_dir import READY_SUFFIX
from compiletrace._data.ready import PORT, STEP
from compiletrace._io.errors import UsageError

pytestmark = pytest.mark.slow

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
TIMEOUT_S = 300
TEN_MINUTES = 600


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()]


def _until(check: object, what: str, timeout_s: float = TIMEOUT_S) -> None:
    end = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < end, f"{what} did not happen in {timeout_s} s"
        time.sleep(0.2)


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/6", timeout=5) as reply:
            return json.loads(reply.read()) == {"shape": [6, 8]}
    except OSError:
        return False


def _run_then_ctrl_c(tmp_path: Path, ready: str, program: list[str], is_ready: object) -> dict[str, object]:
    """``compiletrace run --ready READY`` the program as a user does in a terminal, wait
    until ``is_ready()``, press Ctrl-C (SIGINT to the foreground process group): the job."""
    job = tmp_path / "job.json"
    with open(tmp_path / "run.err", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "compiletrace", "run", "--json", str(job), "--ready", ready,
             "--job-dir", str(tmp_path / "job-dir"), "--", sys.executable, *program],
            stdout=err, stderr=err, start_new_session=True, cwd=tmp_path,
        )  # fmt: skip
        try:
            _until(is_ready, "ready")
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(TIMEOUT_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    data: dict[str, object] = json.loads(job.read_text())
    return data


def _verify(tmp_path: Path, job: Path, capsys: pytest.CaptureFixture[str]) -> tuple[list[Finding], str, dict]:
    """``doctor --verify`` the job, one round: its findings, stderr, and the plan it measured."""
    out = tmp_path / "verified.json"
    status = cli.main(
        ["doctor", "--verify", "--trust", str(job), "--rounds", "1", "--grace", "1", "--json", str(out)]
    )
    printed = capsys.readouterr()
    assert status == 0, printed.err
    data = json.loads(out.read_text())
    return findings_from_dict(data), printed.err, data["plan"]


def test_a_server_stopped_with_ctrl_c_after_ready_is_verified_and_nothing_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port, pids = _free_port(), tmp_path / "pids"
    program = [str(PROGRAMS / "serve_forever.py"), str(port), str(pids)]
    # Ctrl-C once it answers and its mark is written: compiletrace sees the listening socket
    # by polling, and on a loaded machine that can come after the first answer.
    marked = tmp_path / "job-dir"
    job = _run_then_ctrl_c(
        tmp_path, f"port:{port}", program, lambda: _answers(port) and any(marked.glob(f"*{READY_SUFFIX}"))
    )
    assert job["exit_status"] == 128 + signal.SIGINT  # a signal ended it: after its ready mark
    after = job["after_ready"]
    assert isinstance(after, dict) and after["fired"] is True and after["count"] == 0
    (mark,) = after["ready"]
    assert (mark["how"], mark["what"]) == (PORT, f"port:{port}")

    findings, err, plan = _verify(tmp_path, tmp_path / "job.json", capsys)
    measured = {f.kind.value: f.evidence["verify"] for f in findings if "verify" in f.evidence}
    recompiles = measured["recompiles"]
    fix = str(recompiles["fix"])
    assert fix.startswith("mark-dynamic=")
    # Measured to ready: the warm-up's recompile gone, and each trial stopped, not timed out.
    assert recompiles["frame_compiles"] == [2, 1] and recompiles["exit_status"] == [130, 130]
    assert recompiles["verdict"] == "verified"
    # The plan: every verified fix together, one more trial, and the line that gives it.
    assert plan["fixes"] == [fix] and plan["exit_status"] == [0, 0] and not plan["never_ready"]
    assert plan["command"].startswith("compiletrace run --apply ") and plan["command"].endswith(
        f" {port} {pids}"
    )
    assert str(plan["line"]).startswith("plan: compile CPU ")
    # The baseline and the fix; the plan is that one fix, measured in its rounds: no more trials.
    assert err.count("running ") == 2
    # Every server it started (the job's and each trial's) is gone: none serves on.
    started = _pids(pids)
    assert len(started) == 3 and not any(_alive(pid) for pid in started)
    assert not _answers(port)

    # Ctrl-C during the proof stops it: the trial (or trials side by side) running then are
    # passed the interrupt and stopped, no verdict is given, nothing is written, exit 130.
    for jobs in ("1", "2"):
        out = tmp_path / f"interrupted-{jobs}.json"
        before = len(_pids(pids))
        # --jobs 1: a long grace keeps the baseline running until the interrupt; --jobs 2 with
        # --alternatives: round 1's two fixes run side by side after the baseline.
        grace = "120" if jobs == "1" else "3"
        with open(tmp_path / f"verify-{jobs}.err", "wb") as err_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "compiletrace", "doctor", "--verify", "--trust", "job.json",
                 "--alternatives", "--jobs", jobs, "--grace", grace, "--json", str(out)],
                stdout=err_file, stderr=err_file, cwd=tmp_path,
            )  # fmt: skip
            try:
                # --jobs 1: the baseline is running; --jobs 2: both fixes' trials are too.
                _until(lambda: len(_pids(pids)) >= before + (1 if jobs == "1" else 3), "the trials")  # noqa: B023
                proc.send_signal(signal.SIGINT)  # Ctrl-C: the terminal's group is this process alone
                assert proc.wait(TIMEOUT_S) == 130
            finally:
                if proc.poll() is None:
                    proc.kill()
        printed = (tmp_path / f"verify-{jobs}.err").read_text()
        assert printed.rstrip().endswith("compiletrace: interrupted"), printed[-2000:]
        assert "verified" not in printed and "broke the program" not in printed
        assert not out.exists()
        _until(lambda: not any(_alive(pid) for pid in _pids(pids)), "every trial's end", timeout_s=60)


def test_a_ten_minute_training_loop_is_verified_in_its_time_to_step_5(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pids = tmp_path / "pids"
    program = [str(PROGRAMS / "train_forever.py"), str(TEN_MINUTES), str(pids)]
    ready_dir = tmp_path / "job-dir"
    job = _run_then_ctrl_c(
        tmp_path, "step:5", program, lambda: ready_dir.is_dir() and any(ready_dir.glob("*.ready.json"))
    )
    after = job["after_ready"]
    assert isinstance(after, dict)
    (mark,) = after["ready"]
    assert (mark["how"], mark["what"]) == (STEP, "step:5")

    began = time.monotonic()
    findings, _, _ = _verify(tmp_path, tmp_path / "job.json", capsys)
    took = time.monotonic() - began
    (recompiles,) = [f.evidence["verify"] for f in findings if f.kind.value == "recompiles"]
    assert recompiles["frame_compiles"][1] < recompiles["frame_compiles"][0]
    # Two trials (the baseline and the fix, whose rounds are the plan's) of a ten-minute
    # program, each stopped at its step 5 and a second's grace.
    assert took < TEN_MINUTES and max(recompiles["wall_s"]) < TEN_MINUTES / 2
    assert not any(_alive(pid) for pid in _pids(pids))


NEVER = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
deaf = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)"
child = subprocess.Popen([sys.executable, "-c", deaf])
with open(sys.argv[1], "a") as f:
    f.write(f"{os.getpid()}\\n{child.pid}\\n")
time.sleep(600)
"""


class Ticks:
    """A clock that moves one second at each look: the limits below are reached in a
    fixed number of looks, however loaded the machine is."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_a_program_never_ready_is_stopped_harder_and_harder_until_none_of_it_is_left(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    program = tmp_path / "never.py"
    program.write_text(NEVER)
    command = [sys.executable, str(program), str(pids)]

    def started() -> bool:
        return pids.exists() and len(_pids(pids)) == 2

    class Waits(Ticks):
        def __call__(self) -> float:  # the clock stands still until both processes run
            return super().__call__() if started() else 0.0

    until = UntilReady(grace_s=1, timeout_s=5, stop_timeout_s=3, clock=Waits())
    outcome = run_command(command, until_ready=until)
    assert (outcome.stopped, outcome.ready_after_s, outcome.marks) == (NEVER_READY, None, ())
    # It ignored Ctrl-C and SIGTERM, and so did its child: SIGKILL ended both.
    assert outcome.exit_status == 128 + signal.SIGKILL and outcome.signal is None
    assert not any(_alive(pid) for pid in _pids(pids))


def test_a_baseline_never_ready_is_refused_saying_why(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "import time; time.sleep(600)"]
    with pytest.raises(UsageError, match=r"never ready in 4 s \(--ready port:9 never came\)"):
        verify_command(command, rounds=1, ready="port:9", until_ready=UntilReady(timeout_s=4, clock=Ticks()))


def test_a_program_that_ends_before_ready_is_left_to_end(tmp_path: Path) -> None:
    outcome = run_command([sys.executable, "-c", "raise SystemExit(3)"], until_ready=UntilReady())
    assert (outcome.exit_status, outcome.stopped, outcome.ready_after_s) == (3, None, None)
    assert STOPPED_READY != NEVER_READY


INTERRUPTED = """
import sys, time
import torch._dynamo  # recording starts here
import compiletrace
compiletrace.ready()
try:
    time.sleep(600)
except KeyboardInterrupt:
    open(sys.argv[1], "w").write("interrupted")
"""


def test_a_trial_gets_ctrl_c_even_where_compiletrace_was_started_with_it_ignored(tmp_path: Path) -> None:
    # A background job of a script, or nohup, starts compiletrace with SIGINT ignored, which
    # a child inherits; a trial's child gets it back, so its stop begins as a user's does.
    program, seen = tmp_path / "wait.py", tmp_path / "seen"
    program.write_text(INTERRUPTED)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        outcome = run_command(
            [sys.executable, str(program), str(seen)],
            until_ready=UntilReady(grace_s=0, stop_timeout_s=TIMEOUT_S),
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    assert outcome.stopped == STOPPED_READY and outcome.exit_status == 0
    assert seen.read_text() == "interrupted"
    (mark,) = outcome.marks
    assert mark.how == "call"


def test_a_stop_signals_each_process_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # One process in the trial's group, one recorded process that left it: each gets the
    # signal once (a second Ctrl-C would land in the run the first one makes it write).
    from compiletrace._app import job as job_module

    inside = subprocess.Popen(["sleep", "60"], process_group=0)
    outside = subprocess.Popen(["sleep", "60"], process_group=0)
    sent: list[tuple[str, int]] = []
    monkeypatch.setattr(
        job_module, "_live_processes", lambda names: [(inside.pid, None), (outside.pid, None)]
    )
    monkeypatch.setattr(os, "killpg", lambda pgid, signum: sent.append(("group", pgid)))
    monkeypatch.setattr(os, "kill", lambda pid, signum: sent.append(("pid", pid)))

    class Directory:
        def names(self) -> list[str]:
            return []

    try:
        assert job_module._signal_all(inside.pid, Directory(), signal.SIGINT)  # type: ignore[arg-type]
    finally:
        monkeypatch.undo()
        for proc in (inside, outside):
            proc.kill()
            proc.wait()
    assert sent == [("group", inside.pid), ("pid", outside.pid)]
