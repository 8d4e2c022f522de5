"""Compiles after ready, as data: the mark a process is judged by, what counts as after it
(a frame, a recompile, a lazy backward, first-call work; never inside a warm-up phase), the
job's gate figures, and the mark's file format. Exact figures, made-up times."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from compiletrace import cli
from compiletrace._data.job import Job, JobProcess, ProcessInfo
from compiletrace._data.ready import (
    CALL,
    FUNCTION,
    LAZY_BACKWARD,
    NEW_FRAME,
    PHASE,
    PORT,
    RECOMPILE,
    STEP,
    WARM_UP,
    ReadyMark,
    after_ready,
    default_mark,
    parse_ready,
)
from compiletrace._data.records import AUTOTUNE, CUDAGRAPH, CompilationTimes, GraphRecord, RuntimeEvent
from compiletrace._data.run import Run, WarmupResult
from compiletrace._data.timeline import PROCESS, PhaseRecord, build_timeline
from compiletrace._io.errors import RunFileError, UsageError

S = 1_000_000_000
MS = 1_000_000
SIZE = "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 5"


def _record(cid: str, start: int, end: int, **kw: object) -> GraphRecord:
    fields: dict[str, object] = {"code_filename": "m.py", "code_firstlineno": 3}
    fields.update(kw)
    return GraphRecord(cid, "lm", "eager", "forward", 3, start, end, 0, 0, None, **fields)  # type: ignore[arg-type]


def test_a_spec_is_a_function_or_a_phase_and_nothing_else() -> None:
    assert parse_ready("myserver:warm_up") == (FUNCTION, "myserver", "warm_up")
    assert parse_ready("pkg.app:Server.warm_up").text == "pkg.app:Server.warm_up"
    assert parse_ready("phase:vLLM: compile and warm up") == (PHASE, "", "vLLM: compile and warm up")
    for bad in (
        "warm_up",
        "myserver:",
        ":warm_up",
        "my-server:warm_up",
        "m:f()",
        "phase:",
        "m:f.1",
        "os:getcwd\n",
    ):
        with pytest.raises(UsageError, match=r"MODULE:FUNCTION|phase:NAME"):
            parse_ready(bad)


def test_a_port_or_an_optimizer_step_marks_any_server_or_training_loop() -> None:
    assert parse_ready("port:8000") == (PORT, "", "8000") and parse_ready("port:8000").number == 8000
    assert parse_ready("step:5") == (STEP, "", "5") and parse_ready("step:05").text == "step:5"
    for bad in ("port:", "port:0", "port:65536", "port:http", "step:0", "step:-1", "step:1.5", "port:8 0"):
        with pytest.raises(UsageError, match=r"needs a whole number from 1 to"):
            parse_ready(bad)
    mark = ReadyMark(5 * S, 7, PORT, "port:8000")
    assert ReadyMark.from_dict(mark.to_dict()) == mark and mark.described == "it listened (port:8000)"
    assert ReadyMark(5 * S, 7, STEP, "step:5").described == "its optimizer step ended (step:5)"


def test_what_starts_at_or_after_the_mark_outside_warm_up_is_after_ready() -> None:
    mark = ReadyMark(10 * S, 7, FUNCTION, "m:warm_up")
    records = [
        _record("0/0", 2 * S, 3 * S),  # the warm-up's compile: before ready
        _record("0/1", 12 * S, 12 * S + 300 * MS, is_recompile=True, recompile_reason=SIZE),
        _record("1/0", 14 * S, 14 * S + 40 * MS),  # a new function
        # compiled before ready, its backward after: the backward is after ready
        _record("2/0", 4 * S, 5 * S, backward_ns=2 * MS, backward_start_unix_ns=16 * S),
        # inside a later warm-up phase: what that phase is for
        _record("3/0", 21 * S, 22 * S),
        _record("4/0", 25 * S, 25 * S, recompile_limit_hit=True),  # refused: compiled nothing
    ]
    runtime = [
        RuntimeEvent(AUTOTUNE, "0/1", False, 13 * S, 20 * MS, "triton_poi_fused_add_0"),
        RuntimeEvent(CUDAGRAPH, "0/0", True, 9 * S, 30 * MS, "CUDAGraphNode.record"),  # before ready
    ]
    phases = [PhaseRecord("Warmup (GPU)", 20 * S, 23 * S, phase_id=1)]
    late = after_ready(records, runtime, phases, mark)
    assert [(e.kind, e.compile_id, e.duration_ns) for e in late] == [
        (RECOMPILE, "0/1", 300 * MS),
        (AUTOTUNE, "0/1", 20 * MS),
        (NEW_FRAME, "1/0", 40 * MS),
        (LAZY_BACKWARD, "2/0", 2 * MS),
    ]
    recompile, autotune, frame, backward = late
    assert recompile.trigger == "tensor 'x' size mismatch at index 0. expected 4, actual 5"
    assert recompile.location == "m.py:3" and recompile.seconds == 0.3
    assert autotune.trigger == "autotuned triton_poi_fused_add_0 at its first call"
    assert autotune.code_name == "forward" and autotune.component == "lm"  # its graph's
    assert frame.trigger == "the first call of this function"
    assert backward.trigger == "its first .backward() after ready"
    assert recompile.describe(mark) == (
        "recompiled forward 0/1 (m.py:3): 0.30 s, 2.00 s after ready: tensor 'x' size mismatch at index 0. "
        "expected 4, actual 5"
    )
    assert after_ready(records, runtime, phases, None) == []


def test_the_default_mark_is_the_end_of_the_first_top_level_warm_up() -> None:
    # vLLM's CPU worker warms up inside its memory profiling, then again (empty) at top level.
    phases = [
        PhaseRecord("vLLM: profile memory", 1 * S, 9 * S, phase_id=1),
        PhaseRecord("vLLM: compile and warm up", 2 * S, 8 * S, phase_id=2, parent_id=1),
        PhaseRecord("vLLM: compile and warm up", 11 * S, 12 * S, phase_id=3),
        PhaseRecord("Warmup (CPU)", 13 * S, 14 * S, phase_id=4),
    ]
    assert default_mark(phases, pid=5) == ReadyMark(12 * S, 5, WARM_UP, "vLLM: compile and warm up")
    assert default_mark(phases[:2]) == ReadyMark(8 * S, 0, WARM_UP, "vLLM: compile and warm up")
    assert default_mark([PhaseRecord("load", 0, S)]) is None


def _process(
    pid: int, records: list[GraphRecord], mark: ReadyMark | None, phases: tuple[PhaseRecord, ...] = ()
) -> JobProcess:
    meta: dict[str, object] = {"pid": pid, "ppid": 1, "role": f"pid {pid}", "argv": []}
    if mark is not None:
        meta["ready"] = mark.to_dict()
    timeline = build_timeline(phases, records, 0, 100 * S)
    run = Run(tuple(records), WarmupResult(True, 0.0, CompilationTimes()), meta, timeline)
    return JobProcess(ProcessInfo(pid, 1, f"pid {pid}", ()), run)


def test_a_process_without_a_mark_is_judged_by_the_jobs_earliest() -> None:
    # A server's parent became ready at 10 s; a worker it spawned compiles at 30 s.
    parent = _process(10, [_record("0/0", 1 * S, 2 * S)], ReadyMark(10 * S, 10, CALL, "compiletrace.ready()"))
    worker = _process(11, [_record("0/0", 30 * S, 31 * S)], None)
    job = Job(("python", "serve.py"), 0, (parent, worker), ready="")
    after = job.after_ready()
    assert after.fired and after.count == 1 and after.seconds == 1.0
    assert [(p.label, p.own_mark, len(p.events)) for p in after.processes] == [
        ("pid 10 (pid 10)", True, 0),
        ("pid 11 (pid 11)", False, 1),
    ]
    lines = after.lines()
    assert lines[0] == (
        "compiletrace: 1 compile after ready (1.00 s); ready when compiletrace.ready() was called in "
        "pid 10 (pid 10)"
    )
    assert lines[1].startswith(
        "  pid 11 (pid 11): compiled forward 0/0 (m.py:3): 1.00 s, 20.00 s after ready"
    )
    saved = job.to_dict()["after_ready"]
    assert (saved["count"], saved["fired"], saved["seconds"]) == (1, True, 1.0)
    assert parent.run.meta.ready is not None
    assert saved["ready"] == [{"process": "pid 10 (pid 10)", **parent.run.meta.ready.to_dict()}]
    assert saved["compiles"][0]["process"] == "pid 11 (pid 11)" and saved["compiles"][0]["kind"] == NEW_FRAME
    # The job file keeps the spec and reads back; the summary is derived, never trusted.
    assert Job.from_dict(job.to_dict()) == job


def test_a_gate_that_never_fired_says_so() -> None:
    job = Job(
        ("python", "serve.py"), 0, (_process(10, [_record("0/0", 1 * S, 2 * S)], None),), ready="m:nope"
    )
    after = job.after_ready()
    assert not after.fired and after.count == 0
    assert after.lines() == [
        "compiletrace: ready never fired (--ready m:nope was never reached): nothing can be said of compiles "
        "after ready; give --ready MODULE:FUNCTION, phase:NAME, port:PORT or step:N, or call "
        "compiletrace.ready()"
    ]
    # With no --ready, a warm-up phase is the mark; none seen says that.
    plain = Job(("python", "serve.py"), 0, job.processes)
    assert "no warm-up phase was seen, and no --ready was given" in plain.after_ready().lines()[0]
    warm = (PhaseRecord("Warmup (CPU)", 0, S, phase_id=1), PhaseRecord("py", 0, 0, kind=PROCESS))
    warmed = Job(("python", "serve.py"), 0, (_process(10, [_record("0/0", 3 * S, 4 * S)], None, warm),))
    assert warmed.after_ready().fired and warmed.after_ready().count == 1


def test_a_malformed_mark_is_a_damaged_file() -> None:
    job = Job(("python",), 0, (_process(10, [], ReadyMark(1, 10, CALL, "x")),))
    data = job.to_dict()
    data["processes"][0]["run"]["meta"]["ready"] = {"unix_ns": -1, "pid": 10, "how": "call", "what": "x"}
    with pytest.raises(RunFileError, match="unix_ns"):
        Job.from_dict(data)
    data["processes"][0]["run"]["meta"]["ready"] = {"unix_ns": 1, "pid": 10, "how": "guess", "what": "x"}
    with pytest.raises(RunFileError, match="how"):
        Job.from_dict(data)


def test_a_job_files_ready_mark_is_checked_whole_before_verify_runs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """doctor --verify runs a job file's command again with its ready mark in every
    process's environment: a mark that is not one (a final line break, which "$" lets
    through) makes the file damaged, exit 2, and nothing runs."""
    marker = tmp_path / "ran"
    job = Job(
        (sys.executable, "-c", f"open({str(marker)!r}, 'w')"), 0, (), cwd=str(tmp_path), ready="os:getcwd"
    )
    assert Job.from_dict(job.to_dict()) == job
    for bad in ("os:getcwd\n", "os\n:getcwd", "not a mark"):
        data = job.to_dict()
        data["ready"] = bad
        with pytest.raises(RunFileError, match="field 'ready' must be a ready mark"):
            Job.from_dict(data)
        path = tmp_path / "job.json"
        path.write_text(json.dumps(data))
        assert cli.main(["doctor", "--verify", "--trust", str(path), "--rounds", "1"]) == 2
        assert "field 'ready' must be a ready mark" in capsys.readouterr().err
        assert not marker.exists()
