"""``compiletrace run`` on vLLM's CPU engine, a real server that compiles its model itself,
in its own process or in an engine-core process, on torch's ahead-of-time path (vLLM's
default). Runs where vLLM is installed (``.ci/run`` builds a venv for it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import compiletrace

if os.environ.get("COMPILETRACE_REQUIRE_VLLM") == "1":
    import vllm  # noqa: F401  (CI's vLLM venv: a failing import is an error, never a skip)
else:
    pytest.importorskip("vllm", reason="vLLM's CPU engine is not installed (see .ci/run vllm)")
pytestmark = [pytest.mark.vllm, pytest.mark.slow]

PROGRAM = Path(__file__).resolve().parent.parent / "programs" / "serve_tiny.py"
TIMEOUT_S = 1200  # a cold inductor compile of the model, beside four CPU-bound processes


Served = tuple[subprocess.CompletedProcess[str], compiletrace.ProfileJob, Path]


def _serve(tmp_path: Path, in_process: bool) -> Served:
    job_json, oracle = tmp_path / "job.json", tmp_path / "oracle.json"
    env = {
        **os.environ,
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0" if in_process else "1",
        "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache"),  # a cold start, every time
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cache"),
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", "--json", str(job_json), "--",
         sys.executable, str(PROGRAM), str(tmp_path / "model"), str(oracle)],
        capture_output=True, text=True, timeout=TIMEOUT_S, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "generated 4 tokens" in proc.stdout
    job = compiletrace.load(job_json)
    assert isinstance(job, compiletrace.ProfileJob)
    return proc, job, oracle


def test_in_process_the_language_model_matches_torchs_own_figure(tmp_path: Path) -> None:
    _, job, oracle = _serve(tmp_path, in_process=True)
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


def test_multi_process_the_worker_that_compiles_is_found_and_named(tmp_path: Path) -> None:
    proc, job, _ = _serve(tmp_path, in_process=False)
    # vLLM compiles in its worker (under its engine core), not in the process we started.
    (engine,) = job.compiling()
    assert engine.info.role.startswith(("VllmWorker", "EngineCore")), engine.info
    assert engine.info.pid != job.processes[0].info.pid or len(job.processes) == 1
    (record,) = engine.run.graph_records
    assert record.compile_id.startswith("aot") and record.dynamo_ns and record.backend_ns
    assert f"pid {engine.info.pid} ({engine.info.role})" in proc.stderr
