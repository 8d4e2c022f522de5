"""A graph break reads the same live and from torch's trace: torch's user-facing message (its
title, explanation, hints, graph-break code and page), never Dynamo's internal name for it
(``generic_jump TensorVariable()``); and the doctor counts breaks by their sites."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import compiletrace
from compiletrace._data.findings import FindingKind
from compiletrace._data.torch_text import BREAK_PAGE, is_user_facing_break
from tests.programs.branches import clamp_twice

PROGRAM = Path(__file__).resolve().parent.parent / "programs" / "branches.py"


def _breaks(
    records: tuple[compiletrace.GraphRecord, ...] | list[compiletrace.GraphRecord],
) -> list[tuple[int, str]]:
    return [(b.lineno, b.reason) for r in records for b in r.graph_breaks]


def test_a_data_dependent_break_reads_as_torch_words_it_and_sites_are_counted() -> None:
    reg = compiletrace.Registry()
    step = compiletrace.compile(clamp_twice, backend="eager", dynamic=False, registry=reg)
    for n in (4, 5):
        step(torch.ones(n))
    breaks = _breaks(reg.records())
    assert len(breaks) == 4 and len({line for line, _ in breaks}) == 2  # 4 events, 2 sites
    for _, reason in breaks:
        assert reason.startswith("Data-dependent branching\n"), reason
        assert is_user_facing_break(reason) and "generic_jump" not in reason.splitlines()[0]
        assert BREAK_PAGE.search(reason), reason  # torch's graph-break code and its page
    (finding,) = [f for f in compiletrace.diagnose(reg) if f.kind is FindingKind.GRAPH_BREAK]
    code = BREAK_PAGE.search(breaks[0][1])
    assert code is not None
    assert "graph breaks at 2 sites" in finding.title, finding.title
    assert f"Data-dependent branching ({code[1]})" in finding.title
    assert f"torch's page on it: {code[0]}" in finding.fix


@pytest.mark.slow
def test_the_same_break_reads_alike_live_and_from_torch_trace(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    job = tmp_path / "job.json"
    proc = subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", "--json", str(job), "--", sys.executable, str(PROGRAM)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={**os.environ, "TORCH_TRACE": str(trace)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # The summary ends with the doctor's count (the breaks are findings) and how to read them.
    said = " ".join(proc.stderr.split())  # as printed, unwrapped
    assert "compiletrace: the doctor has " in said and said.endswith(f"compiletrace doctor {job}")
    live = compiletrace.load(job)
    traced = compiletrace.load(trace)
    assert isinstance(live, compiletrace.ProfileJob)
    (process,) = live.compiling()
    live_breaks = sorted(_breaks(process.run.graph_records))
    traced_breaks = sorted(_breaks(traced.graph_records))  # type: ignore[union-attr]
    assert len(live_breaks) == 4
    assert live_breaks == traced_breaks
    assert json.loads(job.read_text())  # the job file holds them as read
