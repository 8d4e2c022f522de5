"""``compiletrace run`` against another local user, a pipe in the job directory, a full disk,
and processes that leave in unusual ways (docs/security.md, "compiletrace run").

The attacks that need a second user run as one: a forked child of the test that drops to a
uid of its own (root only; elsewhere those tests skip, saying so).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import compiletrace
from compiletrace._app import job as job_module
from compiletrace._app.job import bootstrap_directory, run_command
from compiletrace._data.fixes import dynamic_source_entries
from compiletrace._io.private_dir import NotPrivate, PrivateDirectory, scratch_root, unsafe_reason
from compiletrace._io.signals import process_alive
from compiletrace.cli import main

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
TIMEOUT_S = 600  # generous: the suite must pass beside four CPU-bound processes
OTHER_UID = 54321  # the other local user: no account needed, only a uid of its own

needs_root = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="acting as a second local user needs root (setuid in a forked child); CI runs as root",
)


def as_other_user(action: Callable[[], object]) -> object:
    """What ``action`` returns (or the name of what it raised) when run as another local
    user, in a forked child that drops to :data:`OTHER_UID`."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no lock taken, no import, only system calls
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            try:
                result = repr(action())
            except Exception as exc:
                result = type(exc).__name__
            os.write(write, result.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        out = pipe.read()
    os.waitpid(pid, 0)
    return out


def ct_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", *args],
        capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd,
    )  # fmt: skip


def run_leave_early(tmp_path: Path, *mode: str, status: int = 0) -> compiletrace.ProfileJob:
    """``run --json`` of ``leave_early.py MODE`` (after ``env`` settings, if any): its job."""
    *settings, name = mode
    program = [
        *(["env", *settings] if settings else []),
        sys.executable,
        str(PROGRAMS / "leave_early.py"),
        name,
    ]
    proc = ct_run("--json", str(tmp_path / "job.json"), "--", *program, cwd=tmp_path)
    assert proc.returncode == status, proc.stderr
    job = compiletrace.load(tmp_path / "job.json")
    assert isinstance(job, compiletrace.ProfileJob)
    return job


def wait_for(path: Path, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


def one_error_line(run: Callable[[], int], status: int, message: str, tmp_path: Path) -> None:
    err_path = tmp_path / "stderr"
    with open(err_path, "w") as err, contextlib.redirect_stderr(err):
        assert run() == status
    text = err_path.read_text()
    assert text.count("\n") == 1 and text.startswith("compiletrace: error:"), text
    assert message in text, text


@contextlib.contextmanager
def world_writable_sticky_dir() -> Iterator[Path]:
    """A directory like /tmp, where another user may make entries of their own."""
    base = Path(tempfile.mkdtemp(prefix="compiletrace-test-shared-"))
    base.chmod(0o1777)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- 1: the bootstrap leaves no path another user could create on a surviving process ------------


@pytest.mark.slow
@needs_root
def test_a_process_that_outlives_its_command_keeps_no_path_another_user_can_take(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    # A server started with '&': the command ends at once, the server lives on.
    background = f"{sys.executable} {PROGRAMS / 'outlive.py'} {state} >{state}/out 2>{state}/err </dev/null &"
    proc = ct_run("--", "sh", "-c", background, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    wait_for(state / "env.json")
    env = json.loads((state / "env.json").read_text())
    entries = [e for e in env["PYTHONPATH"].split(os.pathsep) if e]
    job_dir = env["COMPILETRACE_JOB_DIR"]
    assert entries and not Path(job_dir).exists()  # the job is over: its directory is gone

    def plant() -> list[str]:
        taken = []
        for entry in entries:
            try:
                os.makedirs(entry, exist_ok=True)
                Path(entry, "sitecustomize.py").write_text("# planted by another user\n")
                taken.append(entry)
            except OSError:
                pass
        return taken

    assert as_other_user(plant) == "[]"  # no entry of its PYTHONPATH can be made or written

    # Nor can its job directory's name be taken again: it lay in a directory of the user's own.
    assert Path(job_dir).parent == Path(scratch_root())
    assert as_other_user(lambda: os.mkdir(job_dir, 0o777)) == "PermissionError"
    (state / "go").write_text("")  # the survivor now starts a Python child that compiles
    wait_for(state / "child.json")
    child = json.loads((state / "child.json").read_text())
    assert child["status"] == 0 and child["stdout"] == "2.0\n"
    warnings = [line for line in child["stderr"].splitlines() if line.startswith("compiletrace:")]
    assert len(warnings) == 1 and "recording is off in this process" in warnings[0], child["stderr"]
    assert not Path(job_dir).exists()


@pytest.mark.slow
@needs_root
def test_a_scratch_root_another_user_holds_is_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with world_writable_sticky_dir() as shared:
        squatted = shared / f"compiletrace-{os.getuid()}"
        assert as_other_user(lambda: os.mkdir(squatted, 0o777)) == "None"
        monkeypatch.setattr(tempfile, "tempdir", str(shared))
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        assert scratch_root() == str(tmp_path / "cache" / "compiletrace" / "tmp")
        outcome = run_command(["true"])
        assert (
            outcome.exit_status == 0
            and Path(outcome.job_dir).parent == tmp_path / "cache" / "compiletrace" / "tmp"
        )
        assert os.listdir(squatted) == []


def test_the_bootstrap_is_the_packages_own_directory_when_no_one_else_can_change_it() -> None:
    directory = bootstrap_directory()
    assert unsafe_reason(directory, ["sitecustomize.py"]) is None
    # The installed package's own directory, wherever the checkout lies (under /tmp too):
    # never a temporary copy.
    assert directory == job_module.BOOTSTRAP_DIR


def test_a_bootstrap_others_could_change_is_copied_to_a_private_cache_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exposed = tmp_path / "site" / "_bootstrap"
    shutil.copytree(job_module.BOOTSTRAP_DIR, exposed)
    exposed.chmod(0o777)  # an install others can write to
    monkeypatch.setattr(job_module, "BOOTSTRAP_DIR", str(exposed))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    directory = bootstrap_directory()
    assert directory.startswith(str(tmp_path / "cache" / "compiletrace" / "bootstrap-"))
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    source = (exposed / "sitecustomize.py").read_bytes()
    assert Path(directory, "sitecustomize.py").read_bytes() == source
    assert bootstrap_directory() == directory  # the same content, the same directory: kept, not remade


# -- 2 and 16: the job directory ------------------------------------------------------------------


@needs_root
def test_a_job_dir_another_user_made_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with world_writable_sticky_dir() as shared:
        job_dir = shared / "job"
        assert as_other_user(lambda: os.mkdir(job_dir, 0o777)) == "None"
        marker = tmp_path / "ran"
        one_error_line(
            lambda: main(["run", "--job-dir", str(job_dir), "--", "touch", str(marker)]),
            2,
            f"belongs to another user (uid {OTHER_UID})",
            tmp_path,
        )
        assert not marker.exists() and os.listdir(job_dir) == []


def test_a_job_dir_others_can_write_or_a_link_is_refused(tmp_path: Path) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    for path, message in ((open_dir, "writable by other users"), (link, "is a symbolic link")):
        one_error_line(lambda p=path: main(["run", "--job-dir", str(p), "--", "true"]), 2, message, tmp_path)


def test_a_job_dir_that_cannot_be_a_directory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    cases = [
        (str(a_file), "is not a directory"),
        (str(a_file / "under"), "a parent of it is not a directory"),
        ("/dev/null", "is not a directory"),
        ("", "needs a directory name"),
        (str(tmp_path / "no" / "such"), "its parent directory does not exist"),
    ]
    for path, message in cases:
        one_error_line(lambda p=path: main(["run", "--job-dir", p, "--", "true"]), 2, message, tmp_path)


@pytest.mark.slow
def test_a_new_job_dir_is_made_private(tmp_path: Path) -> None:
    outcome = run_command(["true"], job_dir=tmp_path / "job")
    assert outcome.exit_status == 0
    assert stat.S_IMODE(os.stat(tmp_path / "job").st_mode) == 0o700


def test_a_file_is_never_written_through_a_link_in_the_job_dir(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    job = PrivateDirectory.claim(str(tmp_path / "job"))
    (tmp_path / "job" / "1-0-abcdef01.run.json").symlink_to(victim)
    job.write("1-0-abcdef01.run.json", b"{}")
    assert victim.read_text() == "precious\n"  # the link was replaced, its target never opened
    assert not (tmp_path / "job" / "1-0-abcdef01.run.json").is_symlink()


def test_a_job_dir_swapped_for_another_directory_or_a_link_gets_nothing(tmp_path: Path) -> None:
    job = PrivateDirectory.claim(str(tmp_path / "job"))
    (tmp_path / "job").rename(tmp_path / "moved-away")  # still there: its inode is not reused
    (tmp_path / "other").mkdir(mode=0o700)
    (tmp_path / "other").rename(tmp_path / "job")  # another directory of the user's, at its path
    with pytest.raises(NotPrivate, match="not the directory it was"):
        job.write("x.run.json", b"{}")
    (tmp_path / "job").rmdir()
    (tmp_path / "job").symlink_to(tmp_path / "moved-away")  # a link to the very directory
    with pytest.raises(NotPrivate, match="cannot be opened"):
        job.write("x.run.json", b"{}")
    assert os.listdir(tmp_path / "moved-away") == []


def test_unsafe_reason_names_what_another_user_could_change(tmp_path: Path) -> None:
    base = tmp_path / "base"
    (base / "inner").mkdir(parents=True)
    assert unsafe_reason(str(base / "inner")) is None
    base.chmod(0o777)  # a parent anyone can write, not sticky: entries can be swapped
    assert unsafe_reason(str(base / "inner")) == f"{base} is writable by other users"
    base.chmod(0o1777)  # sticky, as /tmp: others' entries only
    assert unsafe_reason(str(base / "inner")) is None
    (base / "inner" / "mod.py").write_text("")
    (base / "inner" / "mod.py").chmod(0o666)
    assert (
        unsafe_reason(str(base / "inner"), ["mod.py"])
        == f"{base / 'inner' / 'mod.py'} is writable by other users"
    )
    base.chmod(0o755)


# -- 3: a FIFO in the job directory ---------------------------------------------------------------


@pytest.mark.slow
def test_a_fifo_named_like_a_run_file_is_named_and_never_waited_on(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    plant = 'mkfifo "$COMPILETRACE_JOB_DIR/1-0-abcdef01.run.json"'
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(run_command(["sh", "-c", plant])), daemon=True)
    worker.start()
    worker.join(TIMEOUT_S)
    assert not worker.is_alive(), "compiletrace run waited on a FIFO in its job directory"
    (outcome,) = done
    assert isinstance(outcome, job_module.RunOutcome) and outcome.exit_status == 0
    assert "1-0-abcdef01.run.json is not a regular file" in capfd.readouterr().err


# -- 4 and 18: one pid, two processes; exec and os._exit ---------------------------------------------


@pytest.mark.slow
def test_a_program_that_execs_keeps_the_compiles_of_both_images(tmp_path: Path) -> None:
    job = run_leave_early(tmp_path, "exec")
    # One pid, two program images, two runs: neither overwrote the other, nothing missing.
    by_image = {p.info.argv[-1]: p for p in job.processes}
    assert sorted(by_image) == ["exec", "second"] and len(job.processes) == 2 and job.missing == ()
    assert by_image["exec"].info.pid == by_image["second"].info.pid
    assert len(by_image["exec"].run.graph_records) == 1  # written before os.execv replaced it
    assert len(by_image["second"].run.graph_records) == 2


@pytest.mark.slow
def test_a_program_that_leaves_with_os_exit_keeps_its_compiles(tmp_path: Path) -> None:
    job = run_leave_early(tmp_path, "_exit", status=5)
    (process,) = job.processes
    assert len(process.run.graph_records) == 1 and job.missing == ()


# -- 5: the program's own sitecustomize, from a zip ---------------------------------------------------


@pytest.mark.slow
def test_the_programs_own_sitecustomize_from_a_zip_still_runs(tmp_path: Path) -> None:
    archive = tmp_path / "site.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("sitecustomize.py", "MARK = 'from the zip'\n")
    out = tmp_path / "out"
    code = "import sitecustomize; print(getattr(sitecustomize, 'MARK', 'missing'))"
    with open(out, "w") as stdout:
        outcome = run_command(
            [sys.executable, "-c", code], extra_env={"PYTHONPATH": str(archive)}, stdout=stdout
        )
    assert outcome.exit_status == 0
    assert out.read_text() == "from the zip\n"


# -- 6: an output that cannot be written ----------------------------------------------------------


@pytest.mark.slow
def test_an_output_that_cannot_be_written_keeps_the_status_the_other_outputs_and_the_run_files(
    tmp_path: Path,
) -> None:
    code = "import sys, torch; torch.compile(lambda x: x + 1, backend='eager')(torch.ones(1)); sys.exit(3)"
    html = tmp_path / "job.html"
    proc = ct_run("--json", "/dev/full", "--html", str(html), "--", sys.executable, "-c", code, cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr  # the command's own status, not 2
    assert "cannot write /dev/full" in proc.stderr
    assert html.read_text().startswith("<!DOCTYPE html>")  # the next output was still written
    (kept,) = [line.rsplit(" ", 1)[1] for line in proc.stderr.splitlines() if "run files are kept in" in line]
    try:
        runs = [n for n in os.listdir(kept) if n.endswith(".run.json")]
        assert len(runs) == 1
        run = compiletrace.load(Path(kept, runs[0]))
        assert len(run.graph_records) == 1
    finally:
        shutil.rmtree(kept)


# -- 7: a killed launcher's job, still running ----------------------------------------------------


@pytest.mark.slow
def test_a_killed_launchers_job_is_kept_while_its_processes_run(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    program = [sys.executable, str(PROGRAMS / "leave_early.py"), "wait", str(state)]
    launcher = subprocess.Popen(
        [sys.executable, "-m", "compiletrace", "run", "--", *program],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(state / "ready")
    job_dir = Path((state / "ready").read_text())
    launcher.send_signal(signal.SIGKILL)
    launcher.wait(TIMEOUT_S)
    (marker,) = [n for n in os.listdir(job_dir) if n.endswith(".started.json")]
    pid = json.loads((job_dir / marker).read_text())["process"]["pid"]
    assert process_alive(pid, None)
    run_command(["true"])  # a later run cleans up what killed launchers left ...
    assert job_dir.is_dir()  # ... but not a job whose processes still run
    (state / "go").write_text("")
    deadline = time.monotonic() + TIMEOUT_S
    while process_alive(pid, None):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    run_command(["true"])
    assert not job_dir.exists()  # once they have ended, it goes


# -- 14 and 15: forked workers, and a rank's own children --------------------------------------------


@pytest.mark.slow
def test_dataloader_workers_that_compile_nothing_are_not_taken_for_killed_processes(tmp_path: Path) -> None:
    job = run_leave_early(tmp_path, "workers")
    assert job.missing == ()
    assert len(job.compiling()) == 1
    assert "killed before" not in job.summary()


@pytest.mark.slow
def test_a_ranks_own_child_is_named_as_its_child_not_as_the_rank(tmp_path: Path) -> None:
    # As torchrun starts a rank; the program then starts a Python child that compiles too.
    job = run_leave_early(tmp_path, "RANK=0", "LOCAL_RANK=0", "WORLD_SIZE=1", "child")
    rank, child = job.compiling()
    assert rank.info.role == "rank 0" and child.info.role == f"pid {child.info.pid} of rank 0"
    assert job.ranks() == {0: rank}


def test_a_ready_mark_with_a_final_line_break_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--ready reaches every process's environment: it is matched whole, so a value that ends
    in a line break (which "$" lets through) is bad input, exit 2, and the command never runs."""
    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    for bad in ("os:getcwd\n", "os\n:getcwd", "os:getcwd\n\n"):
        assert main(["run", "--ready", bad, "--", *command]) == 2
        assert "give MODULE:FUNCTION" in capsys.readouterr().err
        assert not marker.exists()


def test_a_mark_dynamic_fix_from_a_file_sets_input_names_only_and_nothing_else_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A doctor's file (from anywhere) names the mark-dynamic fix --verify applies through the
    environment: each entry must be an input as torch names one (built to match only that:
    no spaces, no commas, no characters outside a source's quotes), else nothing runs."""
    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    for bad in (
        "mark-dynamic=L['x'] ;touch /tmp/x:0",
        "mark-dynamic=$(touch x)",
        "mark-dynamic=L['x']:0\nLD_PRELOAD=/tmp/x.so",
        "mark-dynamic=L['x']:0:1",
        "mark-dynamic=x:0",
        "mark-dynamic=L['a]+*']:0",  # read as a regular expression by torch: a bracket closes a class
        "mark-dynamic=L['a\\']:0",
        "mark-dynamic=L['x']:0\n",  # "$" matches before a final line break: matched whole instead
        "mark-dynamic=L['x']\n",
        "mark-dynamic=L['x']:\u0663",  # a Unicode digit: \d takes it, torch never writes one
    ):
        assert main(["run", "--apply", bad, "--", *command]) == 2
        assert "is not an input as torch names it" in capsys.readouterr().err
        assert not marker.exists()
    # What is admitted is a name, and, read as a regular expression as torch also reads it,
    # one with nothing to repeat outside a character class.
    for good in ("L['kwargs']['cache'].layers[0].keys:2", 'L["x"]:0', "G['buf_0']", "L['self'].w"):
        (entry,) = dynamic_source_entries(good)
        re.compile(entry)  # torch's re.match on it raises nothing
        unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "", entry)
        assert not set(unquoted) & set("*+?{}()|\\^$"), entry
    env = job_module.child_environment(
        PrivateDirectory(str(tmp_path), "0:0"),
        (),
        False,
        bootstrap_dir=str(tmp_path),
        fixes=["mark-dynamic=L['kwargs']['input_ids']:1"],
        extra_env={"TORCH_COMPILE_DYNAMIC_SOURCES": "L['y']"},
    )
    assert env["TORCH_COMPILE_DYNAMIC_SOURCES"] == "L['y'],L['kwargs']['input_ids']:1"  # the user's kept
