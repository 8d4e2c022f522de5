"""Clean under signals, and checked before starting ranks.

- SIGTERM and SIGHUP stop ``bench startup`` and ``profile --nproc`` as Ctrl-C does: every
  child process stopped, every temporary directory removed, exit 128 + the signal number.
  Checked against real processes: the CLI runs with a private TMPDIR and a marker in its
  environment that every process it starts inherits (ranks run in sessions of their own,
  so the marker, not the session, finds them all).
- SIGKILL, which nothing can catch: the launcher, every rank and every benchmark child die
  with the killed command, and the next run removes the temporary directories it left
  (only compiletrace's own, of owners that ended).
- A full disk is exit 2 with one line naming the path, as any output that cannot be written.
- ``profile --nproc`` checks MODEL, backend, mode and device before it starts a process,
  and shows a failing rank's error on one line.
- ``gather(timeout=None)`` waits the process group's own timeout, not torch's 30 minutes.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compiletrace import cli
from compiletrace._io.signals import (
    OWNER_FILE,
    Terminated,
    owned_temporary_directory,
    remove_stale_directories,
    terminate_on_signals,
)
from compiletrace.cli.commands import report as report_command
from compiletrace.distributed.launch import rank_error

ROOT = Path(__file__).resolve().parents[2]
MARKER_ENV = "COMPILETRACE_SIGNAL_TEST"
SLEEP_S = 600.0  # the factory below: far longer than any bound, so the signal always lands mid-run
START_BOUND_S = 180.0  # until the children exist: torch imports on a busy 2-core machine
EXIT_BOUND_S = 60.0  # SIGTERM to exit; expected: a few seconds (the launcher's grace is 10 s)
JOB_BOUND_S = 120.0  # a whole multi-process job
GROUP_TIMEOUT_S = 3.0

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


# -- MODEL factories the children run ------------------------------------------------------


def sleepy(device: str = "cpu") -> Any:
    """A factory that sleeps (in the bench child or the rank) long past every bound."""
    time.sleep(SLEEP_S)
    from tests.tiny_models import tiny

    return tiny(device)


def fails_on_rank_1(device: str = "cpu") -> Any:
    """A factory that fails on rank 1 only (the parent's pre-flight does not call it)."""
    if os.environ.get("RANK") == "1":
        raise RuntimeError("no weights on this rank")
    from tests.tiny_models import tiny

    return tiny(device)


# -- processes ---------------------------------------------------------------------------------


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, session id) of a process, None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp session ...
    return fields[0], int(fields[3])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _descendants(marker: str, session: int) -> dict[int, str]:
    """Every live process (zombies are dead: left out) that carries the marker in its
    environment or runs in the CLI's session, with its command line."""
    found = {}
    needle = f"{MARKER_ENV}={marker}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        stat = _proc_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            continue
        try:
            marked = needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            marked = False
        if marked or stat[1] == session:
            found[pid] = _cmdline(pid)
    return found


class Cli:
    """``python -m compiletrace ARGS`` in a session of its own, with a private TMPDIR."""

    def __init__(self, args: list[str], tmp_path: Path, tmpdir: Path | None = None) -> None:
        self.marker = uuid.uuid4().hex
        self.tmpdir = tmpdir if tmpdir is not None else tmp_path / "tmp"
        tmp_path.mkdir(exist_ok=True)
        self.tmpdir.mkdir(exist_ok=True)
        self.out = tmp_path / "out.txt"
        self.err = tmp_path / "err.txt"
        env = dict(os.environ, TMPDIR=str(self.tmpdir), PYTHONUNBUFFERED="1")
        env[MARKER_ENV] = self.marker
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "compiletrace", *args],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its session id finds whatever stays in it
            )

    def output(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")

    def children(self) -> dict[int, str]:
        return {p: c for p, c in _descendants(self.marker, self.proc.pid).items() if p != self.proc.pid}

    def wait_for(self, what: str, count: int) -> None:
        """Until ``count`` children whose command line holds ``what`` run (bounded)."""
        deadline = time.monotonic() + START_BOUND_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(
                    f"the CLI exited ({self.proc.returncode}) before its children ran:\n{self.output()}"
                )
            if sum(what in c for c in self.children().values()) >= count:
                return
            time.sleep(0.05)
        pytest.fail(f"no {count} x {what!r} within {START_BOUND_S:g} s; children: {self.children()}")

    def temp_entries(self, *prefixes: str) -> list[str]:
        """What the run left in its TMPDIR and in compiletrace's own directory there, which
        holds every temporary directory compiletrace makes and is itself kept for good."""
        scratch = self.tmpdir / f"compiletrace-{os.getuid()}"
        entries = [p for p in self.tmpdir.iterdir() if p != scratch]
        if scratch.is_dir():
            entries += scratch.iterdir()
        return sorted(p.name for p in entries if p.name.startswith(prefixes))

    def signal_and_wait(self, sig: int) -> tuple[int, float]:
        start = time.monotonic()
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=EXIT_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the CLI did not exit within {EXIT_BOUND_S:g} s of {signal.Signals(sig).name}")
        return rc, time.monotonic() - start

    def survivors(self) -> dict[int, str]:
        # The CLI waits for its children before it exits; the grace only absorbs a kernel
        # that is still tearing a killed process down.
        deadline = time.monotonic() + 3.0
        while (left := self.children()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return left

    def finish(self) -> str:
        """Wait (bounded) for the CLI to end on its own; its output, asserted to be a success."""
        try:
            rc = self.proc.wait(timeout=JOB_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the CLI did not finish within {JOB_BOUND_S:g} s:\n{self.output()}")
        assert rc == 0, self.output()
        return self.output()

    def kill_all(self) -> None:
        """Whatever is left, whatever the test's outcome."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in self.children():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def cli_runs() -> Iterator[list[Cli]]:
    runs: list[Cli] = []
    yield runs
    for run in runs:
        run.kill_all()


def _check_clean_exit(run: Cli, sig: int) -> None:
    rc, took = run.signal_and_wait(sig)
    output = run.output()
    assert rc == 128 + sig, output
    name = signal.Signals(sig).name
    assert output.strip().splitlines()[-1] == f"compiletrace: terminated by {name} (exit status {rc})"
    assert run.survivors() == {}, f"still running {took:.1f} s after {name}"
    assert run.temp_entries("compiletrace-", "torchelastic_") == []


# -- SIGTERM and SIGHUP against real processes ---------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_signal_stops_bench_startup_child_and_removes_its_directories(
    tmp_path: Path, cli_runs: list[Cli], sig: int
) -> None:
    args = ["bench", "startup", "--backend", "eager", "--num-iters-cold", "1", "--num-iters-warm", "0"]
    run = Cli([*args, "tests.apps.test_signals:sleepy"], tmp_path)
    cli_runs.append(run)
    run.wait_for("compiletrace.bench._child", 1)
    # What the signal must clean up is there: the iteration's cache and run directories.
    entries = run.temp_entries("compiletrace-")
    assert any(e.startswith("compiletrace-cold-cache-") for e in entries), entries
    assert any(e.startswith("compiletrace-bench-run-") for e in entries), entries
    _check_clean_exit(run, sig)


@pytest.mark.slow
def test_sigterm_stops_the_launcher_and_every_rank(tmp_path: Path, cli_runs: list[Cli]) -> None:
    run = Cli(["profile", "--nproc", "2", "--backend", "eager", "tests.apps.test_signals:sleepy"], tmp_path)
    cli_runs.append(run)
    run.wait_for("-m compiletrace.distributed", 2)  # both ranks, each in a session of its own
    assert run.temp_entries("compiletrace-launch-"), run.temp_entries("")
    _check_clean_exit(run, signal.SIGTERM)


# -- SIGKILL: nothing can clean up, so nothing may outlive the killed process ---------------------


def _alive(pids: Iterator[int] | list[int]) -> list[int]:
    """The pids of ``pids`` still running (a zombie has ended: it only waits to be reaped)."""
    return [p for p in pids if (stat := _proc_stat(p)) is not None and stat[0] not in ("Z", "X")]


def _wait_gone(run: Cli, pids: list[int], what: str) -> None:
    """Until none of ``pids`` and no process carrying the run's marker is left (bounded)."""
    deadline = time.monotonic() + EXIT_BOUND_S
    while (left := _alive(pids)) or run.children():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} still running {EXIT_BOUND_S:g} s after SIGKILL: {left} {run.children()}")
        time.sleep(0.1)


@pytest.mark.slow
def test_sigkill_of_the_process_group_ends_the_launcher_and_every_rank(
    tmp_path: Path, cli_runs: list[Cli]
) -> None:
    run = Cli(["profile", "--nproc", "2", "--backend", "eager", "tests.apps.test_signals:sleepy"], tmp_path)
    cli_runs.append(run)
    run.wait_for("-m compiletrace.distributed", 2)
    children = run.children()
    assert any("torch.distributed.run" in c for c in children.values()), children  # the launcher
    os.killpg(run.proc.pid, signal.SIGKILL)  # what `timeout -s KILL` and a CI hard timeout send
    assert run.proc.wait(timeout=EXIT_BOUND_S) == -signal.SIGKILL
    _wait_gone(run, list(children), "the launcher or a rank")
    # Nothing could remove the job's directory; the next job removes it (and its own).
    stale = run.temp_entries("compiletrace-launch-")
    assert len(stale) == 1, stale
    again = Cli(
        ["profile", "--nproc", "2", "--backend", "eager", "tests.tiny_models:tiny"],
        tmp_path / "next",
        run.tmpdir,
    )
    cli_runs.append(again)
    again.finish()
    assert again.temp_entries("compiletrace-launch-") == []


@pytest.mark.slow
def test_sigkill_of_the_launcher_alone_ends_every_rank(tmp_path: Path, cli_runs: list[Cli]) -> None:
    # torchrun cannot stop its ranks: each one dies with it on its own request.
    run = Cli(["profile", "--nproc", "2", "--backend", "eager", "tests.apps.test_signals:sleepy"], tmp_path)
    cli_runs.append(run)
    run.wait_for("-m compiletrace.distributed", 2)
    children = run.children()
    (launcher,) = [p for p, c in children.items() if "torch.distributed.run" in c]
    os.kill(launcher, signal.SIGKILL)
    try:
        rc = run.proc.wait(timeout=EXIT_BOUND_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the CLI still waits {EXIT_BOUND_S:g} s after its launcher died: {run.children()}")
    assert rc == 1, run.output()
    assert "the 2-rank job failed" in run.output()
    _wait_gone(run, list(children), "a rank")
    assert run.temp_entries("compiletrace-", "torchelastic_") == []


@pytest.mark.slow
def test_sigkill_of_bench_startup_ends_its_child(tmp_path: Path, cli_runs: list[Cli]) -> None:
    args = ["bench", "startup", "--backend", "eager", "--num-iters-cold", "1", "--num-iters-warm", "0"]
    run = Cli([*args, "tests.apps.test_signals:sleepy"], tmp_path)
    cli_runs.append(run)
    run.wait_for("compiletrace.bench._child", 1)
    children = run.children()
    run.proc.kill()  # the parent alone: its child is in its session, but nothing signals it
    assert run.proc.wait(timeout=EXIT_BOUND_S) == -signal.SIGKILL
    _wait_gone(run, list(children), "the benchmark child")
    stale = run.temp_entries("compiletrace-")
    assert any(e.startswith("compiletrace-cold-cache-") for e in stale), stale
    again = Cli([*args, "tests.tiny_models:tiny"], tmp_path / "next", run.tmpdir)
    cli_runs.append(again)
    again.finish()
    assert again.temp_entries("compiletrace-") == []


_ORPHAN = """
import os, sys, time
print("started", flush=True)
while os.getppid() == int(sys.argv[1]):  # until the parent has exited: the launcher died first
    time.sleep(0.01)
from compiletrace.distributed.rank import _die_with_launcher
_die_with_launcher()
print("survived", flush=True)
"""


@pytest.mark.slow
def test_a_rank_whose_launcher_died_before_it_asked_ends_at_once(tmp_path: Path) -> None:
    # The race die_with_parent closes: the parent is gone before the request is made, so the
    # kernel would never send the signal. The rank's new parent carries no job id: it ends.
    out = tmp_path / "orphan.txt"
    env = dict(os.environ, COMPILETRACE_JOB_ID="a-job", PYTHONPATH=str(ROOT))
    starter = (
        "import os, subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', {_ORPHAN!r}, str(os.getpid())],\n"
        f"                     stdout=open({str(out)!r}, 'w'), stderr=subprocess.STDOUT)\n"
        "print(p.pid)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", starter], env=env, capture_output=True, text=True, check=True
    )
    orphan = int(done.stdout)
    deadline = time.monotonic() + START_BOUND_S
    while _alive([orphan]):
        assert time.monotonic() < deadline, f"the orphan still runs: {out.read_text()!r}"
        time.sleep(0.05)
    assert out.read_text() == "started\n"


@pytest.mark.slow
def test_die_with_parent_checks_the_parent_after_the_request() -> None:
    code = (
        "import os, sys\n"
        "from compiletrace._io.signals import die_with_parent\n"
        "print(die_with_parent(os.getppid()), flush=True)\n"
        "die_with_parent(lambda ppid: False)\n"  # as if the parent were gone: this process ends
        "print('survived', flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (-signal.SIGKILL, "True\n"), done.stderr


def test_without_pdeathsig_children_start_with_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    from compiletrace._io import signals

    monkeypatch.setattr(signals, "_prctl", lambda: None)  # as off Linux
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert signals.parent_death_preexec() is None
        assert signals.parent_death_preexec() is None
        assert signals.die_with_parent(os.getppid()) is False
    assert len(caught) == 1 and "PR_SET_PDEATHSIG is Linux only" in str(caught[0].message)


# -- stale temporary directories: the next run removes what a killed one left, and nothing else --


def _owned(root: Path, name: str, owner: Any) -> Path:
    path = root / name
    path.mkdir()
    (path / "cache.bin").write_bytes(b"x")
    if owner is not None:
        (path / OWNER_FILE).write_text(owner if isinstance(owner, str) else json.dumps(owner))
    return path


@pytest.mark.slow
def test_remove_stale_directories_removes_only_compiletraces_of_ended_owners(tmp_path: Path) -> None:
    from compiletrace._io import signals

    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait()  # its pid names no process now
    me = {"pid": os.getpid(), "start": signals.process_start_ticks(os.getpid()), "host": signals._host()}
    prefix = "compiletrace-launch-"
    stale = _owned(tmp_path, prefix + "stale", {**me, "pid": ended.pid, "start": None})
    reused = _owned(tmp_path, prefix + "reused", {**me, "start": me["start"] + 1})  # a later process
    kept = {
        "live": _owned(tmp_path, prefix + "live", me),
        "no-marker": _owned(tmp_path, prefix + "no-marker", None),
        "garbage": _owned(tmp_path, prefix + "garbage", "not json"),
        "other-host": _owned(tmp_path, prefix + "other-host", {**me, "pid": ended.pid, "host": "elsewhere"}),
        "other-prefix": _owned(tmp_path, "compiletrace-bench-run-x", {**me, "pid": ended.pid}),
        "unrelated": _owned(tmp_path, "someone-elses", {**me, "pid": ended.pid}),
    }
    target = _owned(tmp_path, "target", {**me, "pid": ended.pid})
    (tmp_path / (prefix + "link")).symlink_to(target)  # a link is never followed, nor removed
    removed = remove_stale_directories(prefix, tmp_path)
    assert sorted(removed) == sorted([str(stale), str(reused)])
    assert not stale.exists() and not reused.exists()
    assert all(p.is_dir() for p in kept.values()) and (target / "cache.bin").exists()
    assert (tmp_path / (prefix + "link")).is_symlink()
    assert remove_stale_directories(prefix, tmp_path / "no-such-dir") == []


def test_owned_temporary_directory_marks_itself_and_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with owned_temporary_directory("compiletrace-test-") as tmp:
        assert Path(tmp).parent == tmp_path / f"compiletrace-{os.getuid()}"  # the user's own parent
        owner = json.loads(Path(tmp, OWNER_FILE).read_text())
        assert owner["pid"] == os.getpid()
        assert remove_stale_directories("compiletrace-test-") == []  # its owner runs
    assert list((tmp_path / f"compiletrace-{os.getuid()}").iterdir()) == []


@pytest.mark.slow
def test_a_directory_a_sigkilled_owner_left_goes_with_the_next_one(tmp_path: Path) -> None:
    code = (
        "import os, signal\n"
        "from compiletrace._io.signals import owned_temporary_directory\n"
        "owned = owned_temporary_directory('compiletrace-launch-')\n"
        "owned.__enter__()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = dict(os.environ, TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    scratch = tmp_path / f"compiletrace-{os.getuid()}"
    (left,) = scratch.iterdir()
    assert left.name.startswith("compiletrace-launch-") and (left / OWNER_FILE).is_file()
    assert remove_stale_directories("compiletrace-launch-", scratch) == [str(left)]
    assert list(scratch.iterdir()) == []


# -- a full disk: exit 2, one line naming the path ---------------------------------------------


def _one_error_line(err: str, path: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"compiletrace: error: cannot write {path}: "), err
    assert "OutputError" not in lines[0]
    return lines[0]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_disk_full_on_a_device_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["profile", "--backend", "eager", "--json", "/dev/full"]) == 2
    line = _one_error_line(capsys.readouterr().err, "/dev/full")
    assert "No space left on device" in line


def test_disk_full_in_the_atomic_writer_exits_2_and_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from compiletrace._io import files

    out = tmp_path / "run.json"
    out.write_text("old\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", full)
    assert cli.main(["profile", "--backend", "eager", "--json", str(out)]) == 2
    line = _one_error_line(capsys.readouterr().err, str(out))
    assert "No space left on device" in line
    assert out.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


# -- the handlers themselves, in this process -------------------------------------------------


def test_terminate_on_signals_raises_once_and_restores_the_handlers() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    with pytest.raises(Terminated) as caught, terminate_on_signals():
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(10)  # the handler raises before this ends
    assert (caught.value.signum, caught.value.exit_status) == (signal.SIGHUP, 129)
    assert {s: signal.getsignal(s) for s in before} == before

    with pytest.raises(Terminated), terminate_on_signals():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)
        finally:
            # A second signal during the clean-up (timeout signals the process, then its
            # group) must not cut the clean-up short.
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
    assert {s: signal.getsignal(s) for s in before} == before


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_cli_main_maps_a_signal_to_its_exit_status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], sig: int
) -> None:
    def signalled(args: Any) -> int:
        os.kill(os.getpid(), sig)
        time.sleep(10)
        return 0

    monkeypatch.setattr(report_command, "run", signalled)  # what main() calls for "report"
    before = signal.getsignal(sig)
    assert cli.main(["report", "run.json"]) == 128 + sig
    assert capsys.readouterr().err == (
        f"compiletrace: terminated by {signal.Signals(sig).name} (exit status {128 + sig})\n"
    )
    assert signal.getsignal(sig) == before


# -- --nproc: checked before any process starts ------------------------------------------------


@pytest.fixture
def no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a process was started: {args[0] if args else kwargs}")

    monkeypatch.setattr(subprocess, "Popen", refuse)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--backend", "eager", "no.such.module:factory"], "cannot import module 'no.such.module'"),
        (["--backend", "eager", "tests.tiny_models:torch"], "not a callable factory"),
        (["--backend", "no-such-backend"], "unknown backend 'no-such-backend'"),
        (["--mode", "no-such-mode"], "unknown mode 'no-such-mode'"),
        (["--backend", "eager", "--mode", "max-autotune"], "applies to the inductor backend only"),
        (["--backend", "eager", "--device", "no-such-device"], "--device 'no-such-device' is not a device"),
        (["--backend", "eager", "--component", "vision=encoder"], "--nproc > 1 takes"),
    ],
    ids=["module", "not-callable", "backend", "mode", "mode-backend", "device", "option"],
)
def test_nproc_preflight_is_one_line_and_starts_nothing(
    no_process: None, capsys: pytest.CaptureFixture[str], extra: list[str], expected: str
) -> None:
    assert cli.main(["profile", "--nproc", "2", *extra]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith("compiletrace: error: "), err
    assert expected in err


def test_nproc_preflight_refuses_cuda_without_gpus(
    no_process: None, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
        pytest.skip("two GPUs here: --device cuda is valid")
    assert cli.main(["profile", "--nproc", "2", "--backend", "eager", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--device cuda" in err, err


@pytest.mark.slow
def test_a_failing_rank_is_one_line_with_its_rank(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)  # the ranks import the factory from tests/
    code = cli.main(
        ["profile", "--nproc", "2", "--backend", "eager", "tests.apps.test_signals:fails_on_rank_1"]
    )
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.splitlines() == [
        "compiletrace: error: the 2-rank job failed with exit status 1: rank 1: UsageError: factory "
        "'tests.apps.test_signals:fails_on_rank_1' raised RuntimeError: no weights on this rank "
        "(--debug shows the job's whole output)"
    ]


def test_launch_sets_omp_threads_and_keeps_its_files_private(monkeypatch: pytest.MonkeyPatch) -> None:
    from compiletrace.distributed import launch
    from compiletrace.distributed.launch import JOB_ID_ENV

    class Started(Exception):
        pass

    seen: list[tuple[list[str], dict[str, str]]] = []

    def popen(cmd: list[str], **kwargs: Any) -> Any:
        seen.append((cmd, kwargs["env"]))
        raise Started

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    with pytest.raises(Started):
        launch(2, ["--backend", "eager"])
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    with pytest.raises(Started):
        launch(2, ["--backend", "eager"])
    (cmd, env), (_, env_set) = seen
    # torchrun prints its banner only when it sets the variable itself; the user's value stands.
    assert (env["OMP_NUM_THREADS"], env_set["OMP_NUM_THREADS"]) == ("1", "3")
    assert len(env[JOB_ID_ENV]) == 32 and env[JOB_ID_ENV] != env_set[JOB_ID_ENV]
    # The launcher's logs (else a torchelastic_* directory) go in the job's own directory,
    # removed with it.
    log_dir = Path(next(a for a in cmd if a.startswith("--log-dir=")).partition("=")[2])
    assert log_dir.parent.name.startswith("compiletrace-launch-") and not log_dir.parent.exists()


def test_rank_error_finds_the_failing_rank() -> None:
    output = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "x.py", line 1, in <module>',
            "RuntimeError: boom",
            "compiletrace: rank 0: GatherError: compiletrace gather failed on rank 0 of 2",
            "compiletrace: rank 1: RuntimeError: boom",
            "E1130 torch.distributed.elastic... failed (exitcode: 1)",
        ]
    )
    assert rank_error(output) == "rank 1: RuntimeError: boom"  # the cause, not the echo
    summary = """Root Cause (first observed failure):
[0]:
  time      : 2025-11-30_09:36:00
  host      : vm
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 1234)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 1234
"""
    assert rank_error(summary) == "rank 1: exited with status -9 (Signal 9 (SIGKILL) received by PID 1234)"
    assert rank_error("nothing useful\n") is None


# -- gather(timeout=None): the group's own timeout -----------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _gather_rank(rank: int, port: int, out_dir: str, ready: Any, done: Any) -> None:
    """Rank 0 gathers with timeout=None; rank 1 joins the group and never calls gather."""
    try:
        import torch.distributed as dist

        import compiletrace
        from compiletrace.distributed import GatherError, gather

        ready.wait(JOB_BOUND_S)  # both ranks have imported torch: the short timeout is for gather
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=2,
            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S),
        )
        report: dict[str, Any] = {"rank": rank}
        if rank == 1:
            done.wait(JOB_BOUND_S)
        else:
            start = time.monotonic()
            try:
                gather(compiletrace.Registry(), timeout=None)
                report["error"] = None
            except GatherError as exc:
                report["error"] = str(exc)
            report["elapsed_s"] = time.monotonic() - start
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(report))
    except BaseException as exc:  # report it instead of leaving the test to time out
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps({"crash": repr(exc)}))
    os._exit(0)  # skip teardown: a failed gloo group may block in its destructor


@pytest.mark.slow
def test_gather_without_a_timeout_waits_the_groups_own(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    ready, done = ctx.Barrier(2), ctx.Event()
    port = _free_port()
    procs = [ctx.Process(target=_gather_rank, args=(r, port, str(tmp_path), ready, done)) for r in (0, 1)]
    for p in procs:
        p.start()
    try:
        procs[0].join(JOB_BOUND_S)
        done.set()
        procs[1].join(JOB_BOUND_S)
        assert not any(p.is_alive() for p in procs), f"the job did not end within {JOB_BOUND_S:g} s"
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    report = json.loads((tmp_path / "rank0.json").read_text())
    assert "crash" not in report, report
    assert report["error"] is not None, "gather returned although rank 1 never called it"
    assert f"did not call gather() within {GROUP_TIMEOUT_S:g} s" in report["error"]
    # The group's 3 s, not torch's 30 minutes (the bound leaves room for a busy machine).
    assert GROUP_TIMEOUT_S - 0.5 <= report["elapsed_s"] < GROUP_TIMEOUT_S + 30


def test_unreadable_group_timeout_falls_back_to_30_minutes_with_one_warning() -> None:
    from compiletrace._core.torch_compat import process_group_timeout

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = process_group_timeout(object(), "cpu")  # no _get_backend: a future torch, say
        again = process_group_timeout(object(), "cpu")
    assert first == again == 1800.0
    assert len(caught) == 1 and "process group's timeout" in str(caught[0].message)
