"""The warm-start ledger of a real model's warm start (a tiny random Llama, inductor, on
CPU): its lines add up to the start, from the process's own start to its ready mark, and
that agrees with the program's own measure of it; the same start read from its TORCH_TRACE
gives the same split of every compile, line by line, and the same ready mark. One cold
run fills a private inductor cache, one warm run is measured (minutes on a loaded CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import compiletrace
from compiletrace._data.ledger import (
    AOT_CACHE,
    KERNEL_LOAD,
    LINES,
    SETUP,
    STARTUP,
    UNATTRIBUTED,
    WARM_UP_RUNS,
    run_ledger,
)
from compiletrace._data.ready import WARM_UP
from compiletrace._data.records import CacheOutcome
from compiletrace._data.run import Run
from compiletrace._data.torch_trace import read_torch_trace
from compiletrace.reports import ledger_lines

PROGRAM = Path(__file__).resolve().parents[1] / "programs" / "warm_start.py"
TIMEOUT_S = 1200
MS = 1_000_000

pytestmark = [pytest.mark.inductor, pytest.mark.slow]


def _by_torch_line(lines: tuple[tuple[str, str, int], ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, torch_line, ns in lines:
        out[torch_line] = out.get(torch_line, 0) + ns
    return out


def test_a_warm_start_ledger_adds_up_and_its_trace_agrees(tmp_path: Path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    cold = subprocess.run(
        [sys.executable, str(PROGRAM)], capture_output=True, text=True, timeout=TIMEOUT_S, env=env
    )
    assert cold.returncode == 0, cold.stderr[-2000:]
    job_file, trace = tmp_path / "job.json", tmp_path / "trace"
    warm = subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", "--ledger", "--json", str(job_file), "--",
         sys.executable, str(PROGRAM)],
        capture_output=True, text=True, timeout=TIMEOUT_S, env={**env, "TORCH_TRACE": str(trace)},
    )  # fmt: skip
    assert warm.returncode == 0, warm.stderr[-2000:]
    own = json.loads(warm.stdout)
    job = compiletrace.load(job_file)
    assert isinstance(job, compiletrace.ProfileJob)
    (process,) = job.processes
    (record,) = process.run.graph_records
    assert (record.fx_graph_cache, record.aot_autograd_cache) == (CacheOutcome.HIT, CacheOutcome.HIT)

    # Live: from the process's start to the end of its warm-up, every instant on one line.
    mark = process.run.meta.ready
    assert mark is not None and mark.how == WARM_UP
    book = run_ledger(process.run)
    lines = book.ns_by_line()
    assert sum(lines.values()) == book.total_ns and book.end_unix_ns == mark.unix_ns
    assert process.run.timeline is not None and book.start_unix_ns == process.run.timeline.start_unix_ns
    # ... which is the start the program measured itself, within 2%.
    measured = own["warmed_ns"] - own["process_start_ns"]
    assert abs(book.total_ns - measured) <= 0.02 * measured, (book.total_ns, measured)
    # The program's steps and the warm start's own lines, with little left unattributed.
    assert {
        STARTUP,
        SETUP,
        KERNEL_LOAD,
        AOT_CACHE,
        WARM_UP_RUNS,
        "import transformers",
        "build the model",
    } <= set(lines)
    assert lines.get(UNATTRIBUTED, 0) < 0.05 * book.total_ns
    assert "warm start of pid" in warm.stderr and "one-time set-up" in warm.stderr  # run --ledger

    # From the trace: the same ready mark, and the frame split the same way, line by line.
    traced = read_torch_trace(trace)
    assert isinstance(traced, Run)
    assert traced.meta.ready == mark
    (from_trace,) = traced.graph_records
    assert abs(from_trace.frame_ns - record.frame_ns) <= 1_000  # microseconds in the trace
    ours, theirs = _by_torch_line(record.frame_lines), _by_torch_line(from_trace.frame_lines)
    assert set(ours) == set(theirs)
    for line in ours:
        assert abs(ours[line] - theirs[line]) <= 1 * MS, (line, ours[line], theirs[line])
    # compiletrace's own timing moves the compiles' imports and CPU probe to one-time set-up.
    assert _by_torch_line(record.frame_lines)[KERNEL_LOAD] >= sum(
        ns for line, torch_line, ns in record.frame_lines if line == KERNEL_LOAD
    )
    traced_book = run_ledger(traced)
    compile_lines = [line for line in LINES if line not in (STARTUP, WARM_UP_RUNS)]
    for line in compile_lines:
        assert abs(book.by_torch.get(line, 0) - traced_book.ns_by_line().get(line, 0)) <= 1 * MS, line
    print(
        "\n".join(ledger_lines(book, "live")), "\n", "\n".join(ledger_lines(traced_book, "from TORCH_TRACE"))
    )
