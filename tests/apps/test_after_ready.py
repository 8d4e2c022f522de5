"""``compiletrace run --ready WHEN --after-ready warn|error``: a real program (a separate
process, as a user runs it) warms a compiled model up and serves one request; whatever
compiles after it said it was ready is named with its trigger and seconds, and the gate
fails the job on it. The program is tests/programs/serve_after_ready.py (its module
tiny_server.py holds the warm-up), compiled with aot_eager: seconds a run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
TIMEOUT_S = 600
SIZE = "tensor 'x' size mismatch at index 0. expected 4, actual 5"

pytestmark = pytest.mark.slow


def _serve(
    tmp_path: Path, *options: str, request: str, how: str = "plain"
) -> tuple[int, str, dict[str, Any]]:
    """Run the program under compiletrace run; its exit status, stderr and the job's file."""
    job = tmp_path / f"{request}-{how}.json"
    done = subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", "--json", str(job), *options, "--",
         sys.executable, str(PROGRAMS / "serve_after_ready.py"), request, how],
        capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path,
    )  # fmt: skip
    assert f"served {request}" in done.stdout, done.stderr
    return done.returncode, done.stderr, json.loads(job.read_text())


def _late(stderr: str) -> list[str]:
    return [
        line.strip() for line in stderr.splitlines() if line.startswith("  pid ") and "after ready" in line
    ]


def test_a_new_shape_after_the_warm_up_fails_the_gate_naming_the_guard(tmp_path: Path) -> None:
    # The program binds warm_up with `from tiny_server import warm_up` before anything compiles.
    status, stderr, job = _serve(
        tmp_path, "--ready", "tiny_server:warm_up", "--after-ready", "error", request="shape"
    )
    assert status == 1, stderr
    (line,) = _late(stderr)
    assert "recompiled forward 0/1 (" in line and "tiny_server.py:" in line and line.endswith(SIZE)
    assert "ready when tiny_server:warm_up returned" in stderr
    assert stderr.rstrip().endswith("compiletrace: --after-ready error: exit status 1")
    after = job["after_ready"]
    assert (after["spec"], after["fired"], after["count"]) == ("tiny_server:warm_up", True, 1)
    (late,) = after["compiles"]
    (record,) = [r for r in job["processes"][0]["run"]["registry"]["records"] if r["compile_id"] == "0/1"]
    assert late["kind"] == "recompile" and late["trigger"] == SIZE
    assert late["duration_ns"] == record["end_unix_ns"] - record["start_unix_ns"]
    assert job["ready"] == "tiny_server:warm_up"
    mark = job["processes"][0]["run"]["meta"]["ready"]
    assert mark["how"] == "function" and mark["what"] == "tiny_server:warm_up"
    assert mark["unix_ns"] <= late["start_unix_ns"]


def test_the_same_program_with_that_shape_warmed_up_passes(tmp_path: Path) -> None:
    status, stderr, job = _serve(
        tmp_path, "--ready", "tiny_server:warm_up", "--after-ready", "error", request="shape", how="both"
    )
    assert status == 0, stderr
    assert "compiletrace: 0 compiles after ready (0.00 s); ready when tiny_server:warm_up returned" in stderr
    assert (job["after_ready"]["count"], job["after_ready"]["fired"]) == (0, True)


def test_a_first_backward_after_ready_is_a_lazy_backward_compile(tmp_path: Path) -> None:
    status, stderr, job = _serve(
        tmp_path, "--ready", "tiny_server:warm_up", "--after-ready", "error", request="backward"
    )
    assert status == 1, stderr
    (line,) = _late(stderr)
    assert "compiled the backward of forward 0/0" in line and line.endswith(
        "its first .backward() after ready"
    )
    (late,) = job["after_ready"]["compiles"]
    assert late["kind"] == "lazy_backward" and late["duration_ns"] > 0


def test_compiletrace_ready_marks_code_written_for_it(tmp_path: Path) -> None:
    status, stderr, _ = _serve(tmp_path, "--after-ready", "error", request="newframe", how="call")
    assert status == 1, stderr
    (line,) = _late(stderr)
    assert "compiled helper 1/0 (" in line and line.endswith("the first call of this function")
    assert "ready when compiletrace.ready() was called" in stderr


def test_a_phase_marks_ready_when_it_ends_and_warn_only_prints(tmp_path: Path) -> None:
    status, stderr, job = _serve(
        tmp_path, "--ready", "phase:serving warm-up", "--after-ready", "warn", request="shape", how="phase"
    )
    assert status == 0, stderr
    (line,) = _late(stderr)
    assert line.endswith(SIZE) and "ready when phase:serving warm-up ended" in stderr
    assert job["after_ready"]["count"] == 1


def test_without_ready_the_end_of_the_warm_up_is_the_mark(tmp_path: Path) -> None:
    status, stderr, job = _serve(tmp_path, "--after-ready", "error", request="shape", how="warm_up")
    assert status == 1, stderr
    assert "ready when its warm-up (Warmup (CPU)) ended" in stderr
    assert job["processes"][0]["run"]["meta"]["ready"]["how"] == "warm-up"


def test_a_function_of_the_program_itself_can_mark_ready(tmp_path: Path) -> None:
    status, stderr, _ = _serve(
        tmp_path, "--ready", "__main__:main_warm_up", "--after-ready", "error", request="shape", how="main"
    )
    assert status == 1, stderr
    assert "ready when __main__:main_warm_up returned" in stderr and _late(stderr)[0].endswith(SIZE)


def test_a_ready_mark_never_reached_fails_the_gate(tmp_path: Path) -> None:
    status, stderr, job = _serve(
        tmp_path, "--ready", "tiny_server:nope", "--after-ready", "error", request="same"
    )
    assert status == 1, stderr
    assert "compiletrace: --ready tiny_server:nope: tiny_server has no nope" in stderr
    assert "ready never fired (--ready tiny_server:nope was never reached)" in stderr
    assert (job["after_ready"]["fired"], job["after_ready"]["count"]) == (False, 0)


def test_a_bad_ready_mark_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", "--ready", "warm_up", "--",
         sys.executable, "-c", "print(1)"],
        capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert "--ready 'warm_up': give MODULE:FUNCTION" in done.stderr


def test_fail_after_ready_stops_the_program_at_the_compile(tmp_path: Path) -> None:
    job_file = tmp_path / "job.json"
    done = subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", "--json", str(job_file),
         "--ready", "tiny_server:warm_up", "--apply", "fail-after-ready", "--after-ready", "error", "--",
         sys.executable, str(PROGRAMS / "serve_after_ready.py"), "shape"],
        capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path,
    )  # fmt: skip
    # The program's own failure is its exit status: the gate never speaks over it.
    assert done.returncode == 1 and "served" not in done.stdout
    assert "Detected recompile when torch.compile stance is 'fail_on_recompile'" in done.stderr
    job = json.loads(job_file.read_text())
    meta = job["processes"][0]["run"]["meta"]
    assert meta["applied_fixes"] == ["fail-after-ready"]
    assert meta["refused_after_ready"].startswith("Detected recompile when torch.compile stance is")
    assert job["after_ready"]["count"] == 0  # the compile it refused never happened


def test_a_training_step_after_ready_is_at_stake_in_the_after_ready_findings_first(tmp_path: Path) -> None:
    """A no-grad warm-up, then a training step: a recompile for the grad mode and a lazy
    backward, both after ready. The compile_after_ready findings claim their seconds first
    (their fix, a warm-up with that mode and one .backward(), is what removes them from the
    request); the recompiles finding's fix (one grad mode) would not serve a training step,
    and no longer takes them (they were at 0.00 s in the after-ready findings)."""
    from compiletrace._data.files import read
    from compiletrace._data.job import Job
    from compiletrace._doctor import diagnose_job
    from compiletrace._doctor.stake import claimable_ns

    status, stderr, _ = _serve(tmp_path, "--ready", "tiny_server:warm_up", request="train")
    assert status == 0, stderr
    job = read(tmp_path / "train-plain.json")
    assert isinstance(job, Job)
    findings = diagnose_job(job)
    late = {f.evidence["kind"]: f for f in findings if f.kind == "compile_after_ready"}
    assert set(late) == {"recompile", "lazy_backward"}
    (recompiled,) = [r for r in job.records() if r.is_recompile]
    (recompiles,) = [f for f in findings if f.kind == "recompiles"]
    frame_part = round(claimable_ns(recompiled) * recompiled.frame_ns / recompiled.total_ns) / 1e9
    assert late["recompile"].seconds == pytest.approx(frame_part, abs=1e-6) and frame_part > 0
    backward_part = claimable_ns(recompiled) / 1e9 - frame_part
    assert late["lazy_backward"].seconds == pytest.approx(backward_part, abs=1e-6)
    assert recompiles.seconds == pytest.approx(0.0, abs=1e-6)  # nothing left of the record to claim
