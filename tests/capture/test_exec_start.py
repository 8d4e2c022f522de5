"""The start-up timeline of a program a shell exec'd: it starts at the exec, and the time the
process ran the shell's earlier commands is a figure of its own, outside the total.

Linux dates a process from its fork, and an exec keeps that date; the exec is dated from the
time the process has been runnable (``compiletrace._io.exec_time``). The real-process tests
compare figures of one run with each other and with the moment the shell's sleep ended, never
with how fast the machine is.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compiletrace import CompilationTimes, ProfileRun, RunFileError, WarmupResult
from compiletrace._data.timeline import ORIGIN_EXEC, ORIGIN_FORK, ORIGIN_PROCESS, PhaseRecord, build_timeline
from compiletrace._io.exec_time import FLOOR_NS, ExecProbe, exec_start
from compiletrace.reports import chrome_trace_dict
from compiletrace.reports._timeline import timeline_html, timeline_lines

S = 1_000_000_000
FORK = 100 * S


def _probe(at_s: float, runnable_s: float, reaped: bool = True, pid: int | None = None) -> ExecProbe:
    return ExecProbe(os.getpid() if pid is None else pid, FORK + int(at_s * S), int(runnable_s * S), reaped)


# -- dating the exec ----------------------------------------------------------------------


def test_the_exec_is_the_import_less_the_time_runnable() -> None:
    # 10 s since the fork, 2 s of them runnable: the shell was blocked for 8 s before the exec.
    assert exec_start(_probe(10, 2), FORK) == (FORK + 8 * S, 8 * S)


def test_a_process_that_waited_for_no_child_ran_nothing_before_its_exec() -> None:
    # A program started directly, blocked before the import (a cold disk, a sleep): not a shell.
    assert exec_start(_probe(10, 2, reaped=False), FORK) == (FORK, 0)


def test_a_forked_child_has_no_exec_of_its_own() -> None:
    assert exec_start(_probe(10, 2, pid=os.getpid() + 1), FORK) == (FORK, 0)


def test_without_a_probe_the_exec_cannot_be_told() -> None:
    assert exec_start(None, FORK) == (FORK, None)


def test_under_the_fork_times_resolution_the_start_stays_at_the_fork() -> None:
    below = (FLOOR_NS - 1) / S
    assert exec_start(_probe(1, 1 - below), FORK) == (FORK, 0)
    assert exec_start(_probe(1, 1 - FLOOR_NS / S), FORK) == (FORK + FLOOR_NS, FLOOR_NS)


def test_the_exec_never_lies_before_the_fork_or_after_the_import() -> None:
    # More runnable time than wall time (clock-tick rounding of the fork time): the fork.
    assert exec_start(_probe(1, 1.5), FORK) == (FORK, 0)
    assert exec_start(_probe(1, -1), FORK)[0] == FORK + S


# -- the timeline says which --------------------------------------------------------------


def _exec_timeline(before_exec_ns: int | None = 3 * S, origin: str = ORIGIN_EXEC):  # type: ignore[no-untyped-def]
    load = PhaseRecord("load weights", 0, 3 * S, phase_id=1)
    return build_timeline([load], [], 0, 4 * S, origin=origin, before_exec_ns=before_exec_ns)


def test_an_exec_timeline_says_so_and_leaves_the_time_before_out_of_the_total(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tl = _exec_timeline()
    assert tl.total_ns == 4 * S
    data = tl.to_dict()
    assert data["origin"] == "exec" and data["before_exec_s"] == 3.0 and data["total_s"] == 4.0
    monkeypatch.setenv("COLUMNS", "200")  # the last lines unwrapped
    lines = timeline_lines(tl)
    assert lines[0] == "Start-up timeline (seconds since the exec of this program)"
    assert lines[-2] == "4.000 s since the exec of this program: 3.000 s in phases, 1.000 s unattributed"
    assert lines[-1] == (
        "before the exec: 3.000 s in the program that exec'd this one (a shell's earlier commands), "
        "not in the total"
    )
    page = timeline_html(tl)
    assert '<p class="before-exec">before the exec: 3.000 s' in page
    assert "since the exec of this program" in page


def test_a_timeline_from_the_fork_says_the_time_before_an_exec_is_inside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the last line unwrapped
    lines = timeline_lines(_exec_timeline(None, ORIGIN_FORK))
    assert lines[0] == "Start-up timeline (seconds since the process started)"
    assert lines[-1].startswith("the process's start is its fork: any time it ran another program")


def test_a_process_that_ran_nothing_before_its_exec_reads_as_before() -> None:
    lines = timeline_lines(_exec_timeline(0, ORIGIN_PROCESS))
    assert lines[0] == "Start-up timeline (seconds since the process started)"
    assert lines[-1] == "4.000 s since the process started: 3.000 s in phases, 1.000 s unattributed"


def test_the_chrome_trace_names_its_origin_and_the_time_before_the_exec() -> None:
    other = chrome_trace_dict(_run(_exec_timeline()))["otherData"]
    assert other == {"origin_unix_ns": 0, "startup_origin": "exec", "before_exec_s": 3.0}


def _run(timeline) -> ProfileRun:  # type: ignore[no-untyped-def]
    return ProfileRun((), WarmupResult(False, 1.0, CompilationTimes()), {"model": "tests"}, timeline)


def test_a_saved_run_keeps_the_time_before_the_exec(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    _run(_exec_timeline()).save(path)
    loaded = ProfileRun.load(path).timeline
    assert loaded is not None and (loaded.origin, loaded.before_exec_ns) == ("exec", 3 * S)


def test_a_run_saved_before_the_field_existed_still_loads(tmp_path: Path) -> None:
    data = _run(_exec_timeline(None, ORIGIN_PROCESS)).to_dict()
    assert "before_exec_ns" not in json.dumps(data)  # unknown: written as older versions did
    loaded = ProfileRun.from_dict(data).timeline
    assert loaded is not None and (loaded.origin, loaded.before_exec_ns) == ("process start", None)


def test_a_negative_time_before_the_exec_is_refused() -> None:
    data = _run(_exec_timeline()).to_dict()
    data["timeline"]["before_exec_ns"] = -1
    with pytest.raises(RunFileError, match="before_exec_ns"):
        ProfileRun.from_dict(data)


# -- real processes -----------------------------------------------------------------------

PROGRAM = textwrap.dedent(
    """
    import json
    import compiletrace
    from compiletrace._app.timeline import startup_timeline
    print(json.dumps(startup_timeline().to_dict()))
    """
)


def _timeline_of(cmd: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _read(proc: subprocess.Popen[str]) -> dict:  # type: ignore[type-arg]
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return json.loads(out)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/schedstat").exists(), reason="needs Linux's /proc/self/schedstat")
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_program_a_shell_execs_starts_at_the_exec(tmp_path: Path) -> None:
    prog, slept = tmp_path / "prog.py", tmp_path / "slept"
    prog.write_text(PROGRAM, encoding="utf-8")
    python, mark = shlex.quote(sys.executable), shlex.quote(str(slept))
    # The shell notes when its sleep ended (a builtin: no process of its own), then execs.
    script = f'sleep 1.5; printf %s "$EPOCHREALTIME" > {mark}; exec {python} {shlex.quote(str(prog))}'
    # Both at once: the direct one is the control, on a machine just as loaded.
    exec_d = _timeline_of(["bash", "-c", script])
    direct = _timeline_of([sys.executable, str(prog)])
    shell, plain = _read(exec_d), _read(direct)

    assert shell["origin"] == "exec"
    assert shell["before_exec_s"] >= 1.2  # the shell's sleep, apart from the interpreter's start
    first = shell["entries"][0]
    assert first["name"] == "interpreter start" and first["start_s"] == 0.0
    # The timeline starts after the sleep, give or take the shell's own time on the CPU (and
    # waiting for one): interpreter start holds none of the sleep, however slow the machine.
    assert shell["start_unix_ns"] / S >= float(slept.read_text().replace(",", ".")) - 0.5
    assert shell["total_s"] == pytest.approx(sum(e["counted_s"] for e in shell["entries"]), abs=1e-6)

    assert plain["origin"] == "process start"
    assert (plain["before_exec_s"] or 0.0) < 0.5
    assert plain["entries"][0]["name"] == "interpreter start"
