"""``bench startup`` for real: the built-in model with inductor, one cold and one warm run.

The one inductor benchmark test (tens of seconds): a cold process compiles from an empty
cache and misses; a warm one reads the cache the warm-up process filled, hits, and compiles
faster.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiletrace import cli


@pytest.mark.inductor
@pytest.mark.slow
def test_warm_start_hits_the_cache_and_compiles_faster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    argv = ["bench", "startup", "--num-iters-cold", "1", "--num-iters-warmup", "1", "--num-iters-warm", "1",
            "--output-json", str(out)]  # fmt: skip
    assert cli.main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "COLD (1 iteration)\n" in printed and "WARM (1 iteration)\n" in printed
    data = json.loads(out.read_text())
    assert data["cold_cache_misses"] == [2] and data["cold_cache_hits"] == [0]
    assert data["warm_cache_hits"] == [2] and data["warm_cache_misses"] == [0]
    assert data["avg_warm_compilation_time"] < data["avg_cold_compilation_time"]
    assert data["avg_warm_encoder_compilation_time"] < data["avg_cold_encoder_compilation_time"]
    assert data["avg_warm_startup_time"] < data["avg_cold_startup_time"]
    for prefix in ("cold", "warm"):
        for metric in ("startup", "compilation", "encoder_compilation"):
            assert len(data[f"{prefix}_{metric}_times"]) == 1
            assert set(data[f"{prefix}_{metric}_percentiles"]) == {"10", "25", "50", "75", "90", "99"}
