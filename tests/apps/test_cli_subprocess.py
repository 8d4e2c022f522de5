"""The CLI end to end, as a user runs it: a separate process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_python_m_compiletrace_profile_then_report(tmp_path: Path) -> None:
    run_json = tmp_path / "run.json"
    proc = subprocess.run(
        [sys.executable, "-m", "compiletrace", "profile", "--backend", "aot_eager", "--json", str(run_json)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no terminal: no progress display
    summary = [line for line in proc.stdout.splitlines() if line.startswith("compilation took")]
    assert len(summary) == 1 and "encoder:" in summary[0]
    data = json.loads(run_json.read_text())
    assert {r["component"] for r in data["registry"]["records"]} == {"encoder", "language_model"}
    assert all(r["backend"] == "aot_eager" for r in data["registry"]["records"])

    bad = subprocess.run(
        [sys.executable, "-m", "compiletrace", "report", str(tmp_path / "missing.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "does not exist" in bad.stderr
