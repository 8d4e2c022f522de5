"""``compiletrace bench startup -- COMMAND``: cold and warm start-ups of any command, each run
only until it is ready; here a compiled model behind ``http.server`` that would serve forever
(tests/programs/serve_forever.py, aot_eager), with ``--ready port:PORT``."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from compiletrace import cli
from compiletrace._io.errors import UsageError

SERVER = str(Path(__file__).resolve().parent.parent / "programs" / "serve_forever.py")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_a_server_that_never_ends_gets_cold_and_warm_start_ups_to_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port, out = _free_port(), tmp_path / "bench.json"
    argv = ["bench", "startup", "--ready", f"port:{port}", "--num-iters-cold", "1", "--num-iters-warmup", "0",
            "--num-iters-warm", "1", "--grace", "0.5", "--output-json", str(out), "--pytorch-records",
            "--", sys.executable, SERVER, str(port)]  # fmt: skip
    assert cli.main(argv) == 0
    printed = capsys.readouterr()
    assert "COLD (1 iteration)" in printed.out and "WARM (1 iteration)" in printed.out
    data = json.loads(out.read_text())
    assert data["options"]["command"] == [sys.executable, SERVER, str(port)]
    assert data["options"]["ready"] == f"port:{port}"
    for prefix in ("cold", "warm"):
        (startup,) = data[f"{prefix}_startup_times"]
        (processes,) = data[f"{prefix}_process_startup_times"]
        (own,) = processes.values()  # the one process that compiled and listened
        # The job's start-up (from the command's start) holds its process's (from its start).
        assert 0 < own <= startup == data[f"avg_{prefix}_startup_time"]
        assert set(data[f"{prefix}_startup_percentiles"]) == {"10", "25", "50", "75", "90", "99"}
        (cpu,) = data[f"{prefix}_compilation_cpu_times"]
        assert cpu > 0 and data[f"{prefix}_compilation_times"][0] > 0
    record = json.loads(out.with_name("bench.cold_startup.pytorch.json").read_text())[0]
    assert record["model"]["name"] == f"{sys.executable} {SERVER} {port}"
    assert record["metric"]["benchmark_values"] == [data["avg_cold_startup_time"]]


_SCRIPT = """
import sys
import torch

fn = torch.compile(lambda x: x.sin() * 2, backend="aot_eager")
fn(torch.ones(4))
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.slow
def test_a_script_that_ends_is_measured_to_its_end_and_one_that_fails_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A program that compiles and ends (no --ready, no warm-up marked): its start-up is its
    whole run, as doctor --verify counts it; one that fails is a failed iteration, said so."""
    script, out = tmp_path / "script.py", tmp_path / "bench.json"
    script.write_text(_SCRIPT)
    argv = ["bench", "startup", "--num-iters-cold", "1", "--num-iters-warmup", "0", "--num-iters-warm", "1",
            "--output-json", str(out), "--", sys.executable, str(script), "0"]  # fmt: skip
    assert cli.main(argv) == 0, capsys.readouterr().err
    data = json.loads(out.read_text())
    for prefix in ("cold", "warm"):
        (startup,) = data[f"{prefix}_startup_times"]
        (process_time,) = data[f"{prefix}_process_times"]
        (processes,) = data[f"{prefix}_process_startup_times"]
        (own,) = processes.values()  # the script's one process, start to end
        assert 0 < own <= startup <= process_time
        assert data[f"{prefix}_compilation_cpu_times"][0] > 0
    capsys.readouterr()
    argv[-1] = "3"
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "exit status 3 before any process of it marked ready" in err and "--ready" in err, err


def test_a_command_with_a_model_or_without_words_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, message in (
        (["pkg.mod:build", "--", "python", "x.py"], "give MODEL (pkg.mod:build) or '-- COMMAND', not both"),
        (["--"], "needs a command after '--'"),
        (["--ready", "port:0", "--", "python"], "port:N needs a whole number from 1 to 65535"),
        (["--grace", "-1", "--", "python"], "--grace must be a number of seconds of at least 0"),
        (["--ready", "port:80"], "--ready is for '-- COMMAND'"),
        # MODEL's build and compile: a command chooses its own, which its figures name.
        (
            ["--backend", "eager", "--", "python"],
            "--backend is for MODEL; '-- COMMAND' compiles as the command",
        ),
        (["--device", "cuda", "--", "python"], "--device is for MODEL"),
        (["--compilation-mode", "none", "--", "python"], "--compilation-mode is for MODEL"),
        (["--mode", "max-autotune", "--", "python"], "--mode is for MODEL"),
        (["--component", "a=b", "--", "python"], "--component is for MODEL"),
    ):
        assert cli.main(["bench", "startup", *argv]) == 2, argv
        assert message in capsys.readouterr().err, argv


@pytest.mark.slow
def test_a_commands_records_name_the_backend_it_compiled_with_not_bench_defaults_for_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The script compiles with aot_eager and chooses no mode nor device: its figures and each
    PyTorch record say aot_eager, and claim none of MODEL's defaults (inductor, stock, cpu)."""
    script, out = tmp_path / "script.py", tmp_path / "bench.json"
    script.write_text(_SCRIPT)
    argv = ["bench", "startup", "--num-iters-cold", "1", "--num-iters-warmup", "0", "--num-iters-warm", "0",
            "--output-json", str(out), "--pytorch-records",
            "--", sys.executable, str(script), "0"]  # fmt: skip
    assert cli.main(argv) == 0, capsys.readouterr().err
    data = json.loads(out.read_text())
    assert data["options"]["backend"] == "aot_eager"
    written = sorted(tmp_path.glob("bench.*.pytorch.json"))
    assert [p.name for p in written] == [
        "bench.cold_compilation.pytorch.json",
        "bench.cold_startup.pytorch.json",
    ]
    for path in written:
        (record,) = json.loads(path.read_text())
        extra = record["benchmark"]["extra_info"]
        assert extra["use_compile"] is True
        assert extra["args"]["backend"] == "aot_eager"
        for chosen_by_bench_for_a_model in (
            "compilation_mode",
            "device",
            "mode",
            "component",
            "cache_artifacts",
        ):
            assert chosen_by_bench_for_a_model not in extra["args"], path
        assert extra["args"]["command_argv"] == [sys.executable, str(script), "0"]
        assert record["model"]["name"] == f"{sys.executable} {script} 0"


_CACHE_SEER = """
import os, sys

cache = os.environ["TORCHINDUCTOR_CACHE_DIR"]
with open(sys.argv[1], "a") as log:
    log.write(f"{sorted(os.listdir(cache)) if os.path.isdir(cache) else []}\\n")
os.makedirs(cache, exist_ok=True)
with open(os.path.join(cache, f"entry-{os.getpid()}"), "w") as entry:
    entry.write("compiled")
"""


@pytest.mark.slow
def test_with_no_warm_up_the_last_cold_iteration_fills_the_warm_ones_cache(tmp_path: Path) -> None:
    """A warm iteration never starts on an empty cache: with --num-iters-warmup 0, the last
    cold iteration (on an empty cache too) fills the cache the warm ones read."""
    from compiletrace.bench.command import run_command_bench

    script, seen = tmp_path / "seer.py", tmp_path / "seen.txt"
    script.write_text(_CACHE_SEER)
    result = run_command_bench(
        [sys.executable, str(script), str(seen)], num_iters_cold=2, num_iters_warmup=0, num_iters_warm=2
    )
    assert len(result.cold) == 2 and len(result.warm) == 2
    cold_one, cold_two, warm_one, warm_two = seen.read_text().splitlines()
    assert cold_one == cold_two == "[]"  # each cold iteration on an empty cache
    assert warm_one.count("entry-") == 1 and warm_two.count("entry-") == 2  # the last cold's, then more
    with pytest.raises(UsageError, match="nothing fills the warm iterations' cache"):
        run_command_bench([sys.executable, str(script), str(seen)], num_iters_cold=0, num_iters_warmup=0)
