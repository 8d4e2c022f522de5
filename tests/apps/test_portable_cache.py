"""The expensive-hit flag on real processes: cache artifacts loaded into a fresh cache
directory hit every cache yet recompile the kernels; a plain warm start does not."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compiletrace import CacheOutcome, GraphRecord, Registry
from compiletrace._data.cache_hits import find_expensive_hits

pytestmark = [pytest.mark.inductor, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def run_child(action: str, artifacts: Path, cache_dir: Path) -> tuple[GraphRecord, ...]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache_dir)}
    out = subprocess.run(
        [sys.executable, "-m", "tests.portable_cache_child", action, str(artifacts)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return Registry.from_dict(json.loads(out.stdout.strip().splitlines()[-1])).records()


def test_portable_cache_hit_is_flagged_and_plain_warm_hit_is_not(tmp_path: Path) -> None:
    artifacts = tmp_path / "cache.bin"
    cold = run_child("save", artifacts, tmp_path / "cold")
    assert artifacts.stat().st_size > 0
    portable = run_child("load", artifacts, tmp_path / "fresh")
    warm = run_child("none", artifacts, tmp_path / "cold")

    assert [r.cache_outcome for r in cold] == [CacheOutcome.MISS]
    assert [r.cache_outcome for r in portable] == [CacheOutcome.HIT]
    assert [r.cache_outcome for r in warm] == [CacheOutcome.HIT]

    # Judged by the share of the cold compile alone: seconds stretch on a loaded machine (a
    # plain warm hit's kernel loading took 2.3 s beside four CPU-bound processes, past the
    # one-second rule), the share of a cold compile run beside it much less.
    (flag,) = find_expensive_hits(portable, cold=cold, min_seconds=math.inf)
    assert flag.dominant_phase == "kernel_compile"
    assert flag.share_of_cold is not None and flag.share_of_cold >= 0.25
    assert "hit, but" in flag.explanation() and "compiling kernels" in flag.explanation()
    assert find_expensive_hits(warm, cold=cold, min_seconds=math.inf) == []
