"""Each trial its own port, and every trial ends. ``doctor --verify --jobs N`` runs a
server's trials side by side: each gets a free port in its command, ready mark and traffic
(where the command holds the port), or they take turns on it (where it does not, said once);
a trial that could not listen runs again alone, and is no verdict on its fix. And a trial
whose ready marks never stop (a supervisor restarting a crashing worker), or that runs past
``--budget``, is stopped. Unit tests of the substitution and the turns (no process), then
real processes: ``tests/programs/serve_forever.py`` (a compiled model behind
``http.server``) and ``tests/programs/restart_forever.py``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from compiletrace._app import trial_ports
from compiletrace._app.job import UntilReady
from compiletrace._app.trial_ports import TURNS, Placement, placement, run_on_own_port, substitute_port
from compiletrace._app.verify import verify_command, verify_job
from compiletrace._io.errors import UsageError
from compiletrace._load import load

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
TIMEOUT_S = 300
FIX = "mark-dynamic=L['x']:0"


@pytest.fixture(autouse=True)
def _no_turn_left() -> object:
    assert TURNS.idle()
    yield
    assert TURNS.idle()


def test_the_port_is_substituted_in_whole_words_and_after_an_equals_sign_or_a_colon() -> None:
    words = [
        "python", "serve.py", "8431", "--port=8431", "--bind", "0.0.0.0:8431", "http://h:8431/v1",
        "{port}", "--url=h:{port}/x", "84310", "18431", ":84312", "8431x", "8431/2", "--size=8431.5",
    ]  # fmt: skip
    assert substitute_port(words, 8431, 50123) == (
        (
            "python", "serve.py", "50123", "--port=50123", "--bind", "0.0.0.0:50123", "http://h:50123/v1",
            "50123", "--url=h:50123/x", "84310", "18431", ":84312", "8431x", "8431/2", "--size=8431.5",
        ),
        6,
    )  # fmt: skip
    assert substitute_port(["8431\n"], 8431, 1) == (("8431\n",), 0)  # a word is matched whole
    assert substitute_port(["8431"], 8431, 8431) == (("8431",), 1)  # held, even where unchanged


def test_a_trial_is_placed_on_its_port_where_the_command_holds_the_ready_marks() -> None:
    traffic = ["curl", "http://127.0.0.1:{port}/v1", "--data", "8431"]
    placed = placement(["python", "serve.py", "--port", "8431"], "port:8431", traffic, 50123)
    assert placed == Placement(
        ("python", "serve.py", "--port", "50123"),
        "port:50123",
        ("curl", "http://127.0.0.1:50123/v1", "--data", "50123"),
        50123,
    )
    assert placement(["python", "serve.py", "{port}"], "port:8431", [], 7).command == (
        "python",
        "serve.py",
        "7",
    )
    # The ready mark names a port the command does not hold (a config file's): no other port.
    assert placement(["python", "serve.py", "--config", "c.yaml"], "port:8431", traffic, 7) is None
    assert placement(["python", "serve.py", "8431"], "step:5", [], 7) is None


@dataclass(frozen=True)
class Ended:
    stopped: str | None = "ready"
    ready_after_s: float | None = 1.0


def test_side_by_side_trials_each_get_a_port_no_other_holds() -> None:
    both = threading.Barrier(2, timeout=TIMEOUT_S)  # broken unless the two run at once
    placed: list[Placement] = []

    def attempt(p: Placement) -> Ended:
        placed.append(p)
        both.wait()
        return Ended()

    def trial() -> None:
        run_on_own_port(["serve.py", "--port=8431"], "port:8431", ["load", "{port}"], True, attempt)

    threads = [threading.Thread(target=trial) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S)
    ports = {p.port for p in placed}
    assert len(placed) == 2 and len(ports) == 2 and 8431 not in ports
    for p in placed:
        assert p.command == ("serve.py", f"--port={p.port}") and p.ready == f"port:{p.port}"
        assert p.traffic == ("load", str(p.port))


def test_trials_whose_port_cannot_be_substituted_take_turns_said_once(
    capfd: pytest.CaptureFixture[str],
) -> None:
    running: list[int] = []
    most = 0

    def trial() -> None:
        run_on_own_port(["serve.py"], "port:8431", [], True, attempt)

    second = threading.Thread(target=trial)

    def attempt(p: Placement) -> Ended:
        nonlocal most
        running.append(1)
        most = max(most, len(running))
        assert p.command == ("serve.py",) and (p.ready, p.port) == ("port:8431", 8431)
        if not second.is_alive() and second.ident is None:
            # The second trial cannot start while this one holds the port (a slow machine
            # only makes this wait shorter than its start: never a false failure).
            second.start()
            time.sleep(0.5)
        running.pop()
        return Ended()

    trial()
    second.join(TIMEOUT_S)
    assert most == 1 and not second.is_alive()
    err = capfd.readouterr().err
    assert err.count("the trials of this job run one at a time") == 1, err
    assert "names a port that its command's words do not hold" in err


def test_a_trial_that_could_not_listen_runs_again_alone_and_is_no_verdict_when_it_fails_again(
    capfd: pytest.CaptureFixture[str],
) -> None:
    seen: list[Placement] = []

    def refused(p: Placement) -> Ended:
        seen.append(p)
        assert trial_ports.TURNS._alone == (len(seen) == 2)  # the second time, alone
        os.write(p.stdout, b"OSError: [Errno 98] Address al")  # the text across two writes
        os.write(p.stdout, b"ready in use\n")
        return Ended(None, None)

    result, why = run_on_own_port(["serve.py", "8431"], "port:8431", [], True, refused)
    assert len(seen) == 2 and seen[0].port != seen[1].port  # a new port for the second
    assert why.startswith("it could not listen on its port, twice, the second time alone (ended, its output")
    err = capfd.readouterr().err
    assert "Address already in use" in err  # the trial's output still reaches stderr
    assert "running it again, alone" in err

    def once(p: Placement) -> Ended:
        seen.append(p)
        return Ended(None, None) if len(seen) == 3 else Ended()

    with socket.socket() as held:  # ended before ready, its port held by another program
        held.bind(("", 0))
        held.listen()
        port = held.getsockname()[1]
        result, why = run_on_own_port(["serve.py", str(port)], f"port:{port}", [], False, once)
    assert (len(seen), why, result) == (4, "", Ended())
    assert seen[2].port == seen[3].port == port  # one at a time: the job's own port


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_side_by_side_trials_of_a_server_on_a_fixed_port_give_the_verdicts_of_one_at_a_time(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    port = _free_port()
    traffic = f"{sys.executable} {PROGRAMS / 'send_requests.py'} {{port}} 6"
    done = subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", "--json", str(tmp_path / "job.json"),
         "--ready", f"port:{port}", "--traffic", traffic,
         "--", sys.executable, str(PROGRAMS / "serve_forever.py"), str(port)],
        capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    job = load(tmp_path / "job.json")
    until = UntilReady(grace_s=1, traffic=job.traffic)  # type: ignore[union-attr]
    capfd.readouterr()

    def verdicts(jobs: int) -> list[tuple[str | None, str, int, int]]:
        # One round with --alternatives: the finding's two fixes run in one round, side by side.
        found = verify_job(job, rounds=1, alternatives=True, until_ready=until, jobs=jobs)  # type: ignore[arg-type]
        assert found and all(v.after is not None for v in found)
        return [(v.fix, v.verdict, v.after.frame_compiles, v.after.exit_status) for v in found]  # type: ignore[union-attr]

    alone = verdicts(1)
    assert [v[0] for v in alone] == [FIX, "dynamic-shapes"] and all(v[2:] == (1, 0) for v in alone), alone
    one_at_a_time = capfd.readouterr().err
    assert one_at_a_time.count(f"serving on {port}\n") == 3  # the job's own port, every trial
    assert verdicts(2) == alone
    side_by_side = capfd.readouterr().err
    assert "already in use" not in side_by_side
    served = {line.split()[-1] for line in side_by_side.splitlines() if line.startswith("serving on ")}
    # The baseline (alone) on the job's port, the two fixes side by side each on its own.
    assert len(served) == 3 and str(port) in served, side_by_side


@pytest.mark.slow
def test_a_trial_whose_port_another_program_holds_runs_again_and_the_baseline_is_refused(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "pids"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        command = [sys.executable, str(PROGRAMS / "serve_forever.py"), str(port), str(pids)]
        with pytest.raises(UsageError, match=r"the command as it is gives nothing to compare: it could not "):
            verify_command(command, rounds=1, ready=f"port:{port}", until_ready=UntilReady(grace_s=1))
    assert len(pids.read_text().split()) == 2  # run again once, then not judged


def test_trials_side_by_side_and_progress_lines_each_land_on_lines_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two trials' output (each written in pieces) and a progress line between the pieces:
    every line on stderr is one of them whole, never two run together."""
    from compiletrace._app.progress import stderr_line
    from compiletrace._app.trial_ports import _OutputWatch

    written = tmp_path / "stderr"
    saved = os.dup(2)
    with open(written, "wb") as sink:
        os.dup2(sink.fileno(), 2)
    # This process's stderr as a program has it: its stream writes to file descriptor 2.
    monkeypatch.setattr(sys, "stderr", open(2, "w", closefd=False))  # noqa: SIM115
    try:
        first, second = _OutputWatch(), _OutputWatch()
        os.write(first.fd, b"trial A says ")
        os.write(second.fd, b"trial B says ")
        stderr_line("compiletrace: running the plan")
        os.write(first.fd, b"hello\n")
        os.write(second.fd, b"world\nand ends without a newline")
        first.close()
        second.close()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    assert sorted(written.read_text().splitlines()) == [
        "and ends without a newline",
        "compiletrace: running the plan",
        "trial A says hello",
        "trial B says world",
    ]
