"""A server that compiles at its first requests (no warm-up, or one that missed the serving
shapes), run with the requests that made it compile (``run --traffic``): the run ends when
they do, what they compiled is after ready, and ``doctor --verify`` replays them in every
trial, so the fix for those compiles is measured where they happen. Real processes: a
compiled model behind ``http.server`` (tests/programs/serve_forever.py, ``cold``: no
warm-up), and a client (tests/programs/send_requests.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import compiletrace
from compiletrace import cli
from compiletrace._data.findings import findings_from_dict
from tests.apps.test_trials_to_ready import _alive, _free_port

pytestmark = pytest.mark.slow

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
TIMEOUT_S = 300


def _verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict]:
    """``doctor --verify`` the job in ``tmp_path``, one round, replaying its traffic: what
    was measured for each finding, by kind."""
    out = tmp_path / "verified.json"
    status = cli.main(
        ["doctor", "--verify", "--trust", str(tmp_path / "job.json"), "--rounds", "1", "--grace", "1",
         "--json", str(out)]
    )  # fmt: skip
    printed = capsys.readouterr()
    assert status == 0, printed.err
    return {f.kind.value: f.evidence["verify"] for f in findings_from_dict(json.loads(out.read_text()))
            if "verify" in f.evidence}  # fmt: skip


def _run(tmp_path: Path, port: int, sizes: list[str], pids: Path) -> subprocess.CompletedProcess[str]:
    traffic = f"{sys.executable} {PROGRAMS / 'send_requests.py'} {{port}} {' '.join(sizes)}"
    return subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", "--json", str(tmp_path / "job.json"),
         "--ready", f"port:{port}", "--traffic", traffic,
         "--", sys.executable, str(PROGRAMS / "serve_forever.py"), str(port), str(pids), "cold"],
        capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path,
    )  # fmt: skip


def test_a_server_that_compiles_at_its_requests_is_run_and_verified_with_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port, pids = _free_port(), tmp_path / "pids"
    done = _run(tmp_path, port, ["4", "5"], pids)
    # The run ends with its traffic: no Ctrl-C, the traffic's exit status.
    assert done.returncode == 0, done.stderr[-4000:]
    assert "sent 2 requests" in done.stdout
    job = json.loads((tmp_path / "job.json").read_text())
    assert job["traffic"] == [sys.executable, str(PROGRAMS / "send_requests.py"), "{port}", "4", "5"]
    after = job["after_ready"]
    assert after["fired"] is True and after["count"] == 2, after  # the first request, and the second size
    loaded = compiletrace.load(tmp_path / "job.json")
    assert isinstance(loaded, compiletrace.ProfileJob) and loaded.traffic == tuple(job["traffic"])
    (process,) = loaded.compiling()
    assert [r.compile_id for r in process.run.graph_records] == ["0/0", "0/1"]

    # Without the requests, its trials would compile nothing: refused, saying what to give.
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({**job, "traffic": []}))
    assert cli.main(["doctor", "--verify", "--trust", str(bare), "--rounds", "1"]) == 2
    err = capsys.readouterr().err
    assert "2 compiles came after the server was ready" in err and "--traffic 'COMMAND'" in err, err

    # With them, replayed from the job: each trial compiles what the requests compile.
    recompiles = _verified(tmp_path, capsys)["recompiles"]
    assert str(recompiles["fix"]).startswith("mark-dynamic=")
    assert recompiles["frame_compiles"] == [2, 1], recompiles  # the baseline got both requests
    # Every server it started (the job's and each trial's) is gone.
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) >= 3 and not any(_alive(pid) for pid in started)


def test_a_run_whose_traffic_fails_exits_with_the_traffics_status(tmp_path: Path) -> None:
    port, pids = _free_port(), tmp_path / "pids"
    done = _run(tmp_path, port, ["4", "not-a-size"], pids)  # the second request: HTTP 500
    assert done.returncode == 1, done.stderr[-4000:]
    assert "the traffic command ended with exit status 1" in done.stderr
    job = json.loads((tmp_path / "job.json").read_text())
    assert job["after_ready"]["count"] == 1  # the first request compiled; the run was still recorded
    assert not any(_alive(int(pid)) for pid in pids.read_text().split())


def test_traffic_that_uses_a_port_needs_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--traffic", "curl http://127.0.0.1:{port}/", "--", "true"]) == 2
    assert "give --ready port:PORT" in capsys.readouterr().err
    assert cli.main(["run", "--ready", "port:8000", "--traffic", "", "--", "true"]) == 2
    assert "--traffic needs a command" in capsys.readouterr().err


def test_an_asyncio_llm_server_compiling_at_its_first_requests_is_verified_with_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tiny transformers Llama behind an asyncio server, no warm-up: its first request
    compiles, a second prompt length recompiles; each trial replays the requests, so the
    recompile's fix (the prompt length marked dynamic) is measured where it happens."""
    port, pids = _free_port(), tmp_path / "pids"
    traffic = f"{sys.executable} {PROGRAMS / 'send_requests.py'} {{port}} 5 7 9"
    done = subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", "--json", str(tmp_path / "job.json"),
         "--ready", f"port:{port}", "--traffic", traffic,
         "--", sys.executable, str(PROGRAMS / "serve_llm_asyncio.py"), str(port), str(pids)],
        capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0 and "sent 3 requests" in done.stdout, done.stderr[-4000:]
    loaded = compiletrace.load(tmp_path / "job.json")
    assert isinstance(loaded, compiletrace.ProfileJob)
    # The server's process compiled twice, both after it listened: the first request, then
    # the second length (the third, a third length, runs the dynamic graph).
    (server,) = loaded.compiling()
    assert server.info.pid == int(pids.read_text().split()[0])
    assert [r.compile_id for r in server.run.graph_records] == ["0/0", "0/1"]
    assert loaded.after_ready().count == 2

    recompiles = _verified(tmp_path, capsys)["recompiles"]
    assert recompiles["fix"] == "mark-dynamic=L['kwargs']['input_ids']:1", recompiles
    assert recompiles["frame_compiles"] == [2, 1] and recompiles["verdict"] == "verified", recompiles
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) >= 3 and not any(_alive(pid) for pid in started)
