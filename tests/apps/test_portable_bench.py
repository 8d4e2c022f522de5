"""Portable caches through the command line: ``cache save``, ``cache load``, and
``bench startup --cache-artifacts`` with one iteration of each kind (a tiny model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compiletrace import cli

pytestmark = [pytest.mark.inductor, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
MODEL = "tests.tiny_models:tiny"


def test_save_load_and_bench_portable_iterations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    artifacts = tmp_path / "tiny.cache"
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "save-cache")}
    saved = subprocess.run(
        [sys.executable, "-m", "compiletrace", "cache", "save", str(artifacts), MODEL],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert saved.returncode == 0, saved.stderr
    assert "saved " in saved.stdout and "inductor" in saved.stdout
    assert artifacts.stat().st_size > 0

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "load-cache"))
    assert cli.main(["cache", "load", str(artifacts)]) == 0
    assert "loaded " in capsys.readouterr().out

    out = tmp_path / "bench.json"
    argv = ["bench", "startup", MODEL, "--num-iters-cold", "1", "--num-iters-warmup", "1",
            "--num-iters-warm", "1", "--cache-artifacts", str(artifacts),
            "--output-json", str(out)]  # fmt: skip
    assert cli.main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "COLD (1 iteration)" in printed and "PORTABLE (1 iteration)" in printed
    assert "artifact load time" in printed
    data = json.loads(out.read_text())
    assert data["kind"] == "compiletrace.bench.startup"
    for prefix in ("cold", "warm", "portable"):
        assert len(data[f"{prefix}_startup_times"]) == 1
        assert set(data[f"{prefix}_compilation_percentiles"]) == {"10", "25", "50", "75", "90", "99"}
    assert data["portable_cache_hits"] == [2] and data["portable_cache_misses"] == [0]
    assert data["cold_cache_misses"] == [2]
    assert data["avg_portable_artifact_load_time"] > 0
    assert len(data["portable_artifact_load_times"]) == 1


def test_cache_commands_refuse_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["cache", "load", str(tmp_path / "missing.cache")]) == 2
    assert "does not exist" in capsys.readouterr().err
    junk = tmp_path / "junk.cache"
    junk.write_bytes(b"not an artifact file")
    assert cli.main(["cache", "load", str(junk)]) == 2
    assert "has no digest beside it" in capsys.readouterr().err  # refused before it is read
    assert cli.main(["cache", "load", str(junk), "--trust"]) == 2
    assert "not a torch cache-artifacts file" in capsys.readouterr().err
    assert cli.main(["cache", "save", str(tmp_path / "x.cache"), "--backend", "eager"]) == 2
    assert "saves none" in capsys.readouterr().err
    assert cli.main(["bench", "startup", "--cache-artifacts", str(tmp_path / "missing.cache")]) == 2
    assert "does not exist" in capsys.readouterr().err
