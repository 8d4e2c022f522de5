"""``compiletrace run`` on vLLM's CPU engine, a real server that compiles its model itself,
in its own process or in an engine-core process, on torch's ahead-of-time path (vLLM's
default). Runs where vLLM is installed (``.ci/run`` builds a venv for it)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import compiletrace
from compiletrace._app import engine_phases
from compiletrace._data.job import JobProcess
from compiletrace._data.timeline import TimelineEntry

if os.environ.get("COMPILETRACE_REQUIRE_VLLM") == "1":
    import vllm  # noqa: F401  (CI's vLLM venv: a failing import is an error, never a skip)
else:
    pytest.importorskip("vllm", reason="vLLM's CPU engine is not installed (see .ci/run vllm)")
pytestmark = [pytest.mark.vllm, pytest.mark.slow]

PROGRAM = Path(__file__).resolve().parent.parent / "programs" / "serve_tiny.py"
TIMEOUT_S = 1200  # a cold inductor compile of the model, beside four CPU-bound processes


Served = tuple[subprocess.CompletedProcess[str], compiletrace.ProfileJob, Path]


def _serve(tmp_path: Path, in_process: bool) -> Served:
    """A cold start of serve_tiny.py under ``compiletrace run``. In-process, the program then
    serves the requests its start-up did not warm up, under the after-ready gate (``error``:
    a compile after ready fails the run)."""
    job_json, oracle = tmp_path / "job.json", tmp_path / "oracle.json"
    env = {
        **os.environ,
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0" if in_process else "1",
        "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache"),  # a cold start, every time
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cache"),
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    env.pop("VLLM_CPU_CI_ENV", None)  # it skips the CPU worker's warm-up, where the model compiles
    gate = ["--after-ready", "error"] if in_process else []
    requests = ["--requests"] if in_process else []
    proc = subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", *gate, "--json", str(job_json), "--",
         sys.executable, str(PROGRAM), str(tmp_path / "model"), str(oracle), *requests],
        capture_output=True, text=True, timeout=TIMEOUT_S, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "generated 4 tokens" in proc.stdout
    job = compiletrace.load(job_json)
    assert isinstance(job, compiletrace.ProfileJob)
    return proc, job, oracle


# One job per mode for the whole module: each is a cold start of vLLM, a minute or more.
@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> Served:
    return _serve(tmp_path_factory.mktemp("in-process"), in_process=True)


@pytest.fixture(scope="module")
def multi_process(tmp_path_factory: pytest.TempPathFactory) -> Served:
    return _serve(tmp_path_factory.mktemp("multi-process"), in_process=False)


def test_in_process_the_language_model_matches_torchs_own_figure(in_process: Served) -> None:
    _, job, oracle = in_process
    (process,) = job.compiling()
    (record,) = process.run.graph_records
    # vLLM's default path: torch's aot_compile, no frame callbacks, a direct backend call.
    assert record.compile_id.startswith("aot") and record.backend == "inductor"
    assert record.component == "model"  # LlamaForCausalLM.model, the language model
    assert record.code_location.endswith("llama.py:" + str(record.code_firstlineno))
    assert record.dynamo_ns and record.backend_ns and record.phase_ns["inductor"] > 0
    torch_s = json.loads(oracle.read_text())["regions"]["fullgraph_capture"]
    assert abs(record.total_ns / 1e9 - torch_s) <= 0.02 * torch_s
    assert job.compilation_times().language_model == pytest.approx(record.total_ns / 1e9)


def test_in_process_the_cache_keys_name_the_directory_vllm_chose(in_process: Served) -> None:
    # vLLM points torch's caches at a directory it names after a hash of its factors
    # (torch_compile_cache/torch_aot_compile/<hash>/inductor_cache on its ahead-of-time
    # path): the run keeps the one its lookups used, and each lookup's key parts.
    _, job, _ = in_process
    (process,) = job.compiling()
    keys = process.run.meta.cache_keys
    assert keys is not None
    facts = keys.facts
    assert f"{os.sep}torch_compile_cache{os.sep}" in facts.cache_dir
    assert facts.cache_dir_from == "TORCHINDUCTOR_CACHE_DIR"
    assert facts.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    lookups = [c for r in process.run.graph_records for c in r.cache_lookups]
    # On vLLM 0.32's CPU engine the ahead-of-time path announces AOTAutograd's lookup alone
    # (no FX graph lookup): each lookup it makes keeps its key's parts.
    assert lookups and all(c.parts for c in lookups), lookups


def test_multi_process_the_worker_that_compiles_is_found_and_named(multi_process: Served) -> None:
    proc, job, _ = multi_process
    # vLLM compiles in its worker (under its engine core), not in the process we started.
    (engine,) = job.compiling()
    assert engine.info.role.startswith(("VllmWorker", "EngineCore")), engine.info
    assert engine.info.pid != job.processes[0].info.pid or len(job.processes) == 1
    (record,) = engine.run.graph_records
    assert record.compile_id.startswith("aot") and record.dynamo_ns and record.backend_ns
    assert f"pid {engine.info.pid} ({engine.info.role})" in proc.stderr


def _vllm_phases(process: JobProcess) -> list[TimelineEntry]:
    timeline = process.run.timeline
    assert timeline is not None
    return [e for e in timeline.entries if e.kind == "phase" and e.name.startswith("vLLM: ")]


def _assert_vllm_start_up_on_the_timeline(process: JobProcess) -> None:
    """The engine's phases in the order its engine core runs them, none overlapping the
    next, with the model's compile inside the CPU worker's warm-up (which its memory
    profiling runs). Structure and order only: never how long anything took."""
    phases = _vllm_phases(process)
    top = [e for e in phases if e.depth == 0]
    assert [e.name for e in top] == [
        engine_phases.VLLM_LOAD,
        engine_phases.VLLM_PROFILE,
        engine_phases.VLLM_KV_CACHE,
        engine_phases.VLLM_WARM_UP,  # the worker's compile_or_warm_up_model (nothing left to do on CPU)
        engine_phases.VLLM_FIRST_REQUEST,
    ]
    assert all(e.status == "ok" for e in phases)
    for before, after in itertools.pairwise(top):
        assert before.end_unix_ns <= after.start_unix_ns, (before, after)
    # On CPU the model compiles in its warm-up, inside the memory profiling.
    (nested,) = [e for e in phases if e.depth == 1]
    profile = top[1]
    assert nested.name == engine_phases.VLLM_WARM_UP
    assert profile.start_unix_ns <= nested.start_unix_ns <= nested.end_unix_ns <= profile.end_unix_ns
    warm_ups = [e for e in phases if e.name == engine_phases.VLLM_WARM_UP]
    (record,) = process.run.graph_records
    assert any(
        w.start_unix_ns <= record.start_unix_ns <= record.end_unix_ns <= w.end_unix_ns for w in warm_ups
    )
    assert set(nested.compile_by_component) == {"model"}
    assert [e.compile_ns for e in top if e is not profile] == [0, 0, 0, 0]


def test_in_process_vllms_start_up_phases_are_on_the_timeline(in_process: Served) -> None:
    _, job, _ = in_process
    (process,) = job.compiling()
    assert process.info.role == "main"  # the engine ran in the process we started
    _assert_vllm_start_up_on_the_timeline(process)


def test_multi_process_vllms_start_up_phases_are_in_the_worker_only(multi_process: Served) -> None:
    _, job, _ = multi_process
    (engine,) = job.compiling()
    _assert_vllm_start_up_on_the_timeline(engine)
    # The process we started and the engine core's, which ran no worker, show none.
    others = [p for p in job.processes if p.info.pid != engine.info.pid]
    assert others and all(_vllm_phases(p) == [] for p in others)


def test_requests_the_warm_up_did_not_cover_compile_nothing_after_ready(in_process: Served) -> None:
    """vLLM's CPU engine drops Dynamo's guards and compiles the token dimension dynamic: a
    prompt near the model's length and a batch of mixed lengths, none of them warmed up,
    compile nothing after its compile-and-warm-up phase (the default ready mark). The gate
    holds at zero, and says the mark fired."""
    proc, _, oracle = in_process
    assert proc.stdout.splitlines()[-1].startswith("generated [")  # a random model: its own lengths
    assert proc.stdout.splitlines()[-1].count(",") == 3  # the batch of four was served
    gate = (
        "compiletrace: 0 compiles after ready (0.00 s); ready when its warm-up (vLLM: compile and warm up) "
    )
    assert gate + "ended" in proc.stderr
    job = json.loads((oracle.parent / "job.json").read_text())
    assert (job["after_ready"]["fired"], job["after_ready"]["count"]) == (True, 0)
    (mark,) = job["after_ready"]["ready"]
    assert mark["how"] == "warm-up" and mark["what"] == engine_phases.VLLM_WARM_UP


# --- vLLM's OpenAI-compatible server: run to ready on its port, verified, benchmarked ---------


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_env(tmp_path: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache"),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cache"),
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    env.pop("VLLM_CPU_CI_ENV", None)
    return env


def _server_command(model: Path, port: int) -> list[str]:
    # Its 'vllm' command fails on the CPU build (the distribution is named vllm-cpu): the
    # server starts as a module, as the facts file says.
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--dtype", "float32", "--max-model-len", "256", "--port", str(port)]  # fmt: skip


def _answers(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


def _left_running(marker: str) -> list[int]:
    """Processes whose command line names ``marker`` (the model's own directory)."""
    left = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            left.append(int(entry))
    return left


def _torchs_compiles(trace: Path) -> dict[int, list[float]]:
    """torch's own record of every frame compile in a TORCH_TRACE directory: each process's
    ``compilation_metrics`` rows (pid from the log line's prefix), as their seconds."""
    found: dict[int, list[float]] = {}
    for log in trace.iterdir():
        for line in log.read_text(errors="replace").splitlines():
            head, sep, body = line.partition("] ")
            if not sep or not body.startswith('{"compilation_metrics": '):
                continue
            row = json.loads(body)["compilation_metrics"]
            seconds = (row["end_time_us"] - row["start_time_us"]) / 1e6
            found.setdefault(int(head.split()[2]), []).append(seconds)
    return found


# Five starts of vLLM's server (the run, a trial per fix, the cold and the warm iteration):
# minutes each on a loaded machine, past the suite's per-test limit.
@pytest.mark.timeout(2700)
def test_vllms_http_server_runs_to_ready_on_its_port_is_verified_and_benchmarked(tmp_path: Path) -> None:
    """The server never ends by itself: run with --ready port:PORT, stopped with Ctrl-C once
    it answers, then verified (each trial to ready, then stopped) and benchmarked cold and warm;
    nothing of it is left running. Its engine's processes are torn down by their parent
    (SIGTERM, then SIGKILL) where nothing can write at their end: what they compiled is kept
    all the same, compile for compile what torch's own trace of the same run holds."""
    import signal
    import time

    model = tmp_path / "model"
    subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(PROGRAM.parent)!r}); "
         f"from serve_tiny import build; build({str(model)!r})"],
        check=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    port, env, job_json = _free_port(), _server_env(tmp_path), tmp_path / "job.json"
    trace = tmp_path / "trace"
    with open(tmp_path / "run.err", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "compiletrace", "run", "--json", str(job_json), "--ready", f"port:{port}",
             "--", *_server_command(model, port)],
            stdout=err, stderr=err, env={**env, "TORCH_TRACE": str(trace)}, cwd=tmp_path,
            start_new_session=True,
        )  # fmt: skip
        try:
            end = time.monotonic() + TIMEOUT_S
            while not _answers(port):
                assert proc.poll() is None, (tmp_path / "run.err").read_text()[-4000:]
                assert time.monotonic() < end, "the server never answered"
                time.sleep(1)
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C, as in a terminal
            proc.wait(TIMEOUT_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    job = json.loads(job_json.read_text())
    assert job["after_ready"]["fired"] is True
    (mark,) = [m for m in job["after_ready"]["ready"] if m["how"] == "port"]
    assert mark["what"] == f"port:{port}"
    # Every compile, by process, as torch's trace holds it: the worker that compiled the model
    # was killed by its parent, and its run is the one it wrote while it ran.
    loaded = compiletrace.load(job_json)
    assert isinstance(loaded, compiletrace.ProfileJob)
    torchs = _torchs_compiles(trace)
    ours = {p.info.pid: p for p in loaded.compiling()}
    assert torchs and set(ours) == set(torchs), ((tmp_path / "run.err").read_text()[-4000:], torchs)
    for pid, seconds in torchs.items():
        records = ours[pid].run.graph_records
        assert len(records) == len(seconds), (pid, records, seconds)
        for record, theirs in zip(sorted(records, key=lambda r: r.start_unix_ns), seconds, strict=True):
            assert abs(record.total_ns / 1e9 - theirs) <= 0.02 * theirs + 0.005, (pid, record, theirs)

    verified = tmp_path / "verified.json"
    done = subprocess.run(
        [sys.executable, "-m", "compiletrace", "doctor", "--verify", "--trust", str(job_json),
         "--rounds", "1", "--grace", "5", "--json", str(verified)],
        capture_output=True, text=True, timeout=4 * TIMEOUT_S, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert "running the baseline: " in done.stderr
    findings = json.loads(verified.read_text())["findings"]
    for finding in findings:  # every fix measured to ready: none timed out
        measured = finding["evidence"].get("verify")
        if measured is not None:
            assert not str(measured["verdict"]).startswith("never ready"), measured

    bench = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "compiletrace", "bench", "startup", "--ready", f"port:{port}",
         "--num-iters-cold", "1", "--num-iters-warmup", "0", "--num-iters-warm", "1", "--grace", "2",
         "--output-json", str(bench), "--", *_server_command(model, port)],
        capture_output=True, text=True, timeout=4 * TIMEOUT_S, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    figures = json.loads(bench.read_text())
    assert figures["cold_startup_times"][0] > 0 and figures["warm_startup_times"][0] > 0
    # Each cold iteration on empty caches (inductor's and vLLM's own), the warm on filled ones.
    (cold_cpu,), (warm_cpu,) = figures["cold_compilation_cpu_times"], figures["warm_compilation_cpu_times"]
    assert cold_cpu > 1.5 * warm_cpu > 0, figures
    assert _left_running(str(model)) == []
