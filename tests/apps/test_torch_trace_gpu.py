"""A GPU server's TORCH_TRACE read on a CPU machine: the committed logs of
``tests/inputs/traces/gpu-*`` (made by torch's own emitters, as a GPU run writes them:
``regenerate_gpu_traces.py``) give the warm-start ledger (Triton compiles, autotuning at
compile and at first calls, CUDA-graph recording) and the compiles after the ready mark,
from the trace alone. The runtime rows (``compilation_metrics_runtime``) are read, and
stand for their calls where the calls' regions are missing; and the logs still have the
format the installed torch writes."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
import torch

from compiletrace import cli
from compiletrace._data.ledger import (
    AUTOTUNE_CALLS,
    AUTOTUNE_COMPILE,
    CUDAGRAPH_LINE,
    KERNEL_COMPILE_LINE,
    run_ledger,
)
from compiletrace._data.ready import CALL, RECOMPILE, after_ready
from compiletrace._data.records import AUTOTUNE, CUDAGRAPH
from compiletrace._data.run import Run
from compiletrace._data.torch_trace import read_torch_trace
from compiletrace._doctor import diagnose_evidence, gather_evidence

LOGS = Path(__file__).resolve().parents[1] / "inputs" / "traces"
RELEASES = sorted(p.name for p in LOGS.glob("gpu-*"))
SIZE = "tensor 'x' size mismatch at index 0. expected 8, actual 12"
KERNELS = ["triton_poi_fused_add_0", "triton_red_fused_sum_1"]


def _read(path: Path) -> Run:
    run = read_torch_trace(path)
    assert isinstance(run, Run)
    return run


def _lines(release: str) -> list[str]:
    (log,) = (LOGS / release).glob("*.log")
    return log.read_text(encoding="utf-8").splitlines()


def test_every_release_torch_declares_has_its_log() -> None:
    assert "gpu-2.13" in RELEASES


@pytest.mark.parametrize("release", RELEASES)
def test_the_first_call_work_and_the_ready_mark_are_read(release: str) -> None:
    run = _read(LOGS / release)
    mark = run.meta.ready
    assert mark is not None and mark.how == CALL
    assert run.meta.trace is not None
    assert run.meta.trace.runtime_rows == 6  # three calls of each graph did such work
    by_graph = {
        cid: [(e.kind, e.backward, e.detail) for e in run.runtime_events if e.compile_id == cid]
        for cid in ("0/0", "0/1")
    }
    expected = [
        (AUTOTUNE, False, KERNELS[0]),
        (AUTOTUNE, False, KERNELS[1]),
        (CUDAGRAPH, False, "cudagraphify.get_container"),
        (CUDAGRAPH, False, "CUDAGraphNode.record"),
        (AUTOTUNE, True, "triton_poi_fused_mul_2"),
    ]
    assert by_graph == {"0/0": expected, "0/1": expected}
    assert all(e.duration_ns > 0 for e in run.runtime_events)
    # The warm-up's graph and first calls come before the mark; the request's after it.
    first, second = run.graph_records
    assert first.end_unix_ns <= mark.unix_ns <= second.start_unix_ns
    assert all(e.end_unix_ns <= mark.unix_ns for e in run.runtime_events if e.compile_id == "0/0")


@pytest.mark.parametrize("release", RELEASES)
def test_the_compiles_after_ready_of_a_gpu_trace(release: str) -> None:
    run = _read(LOGS / release)
    late = after_ready(run.graph_records, run.runtime_events, (), run.meta.ready)
    assert [(e.kind, e.compile_id) for e in late] == [(RECOMPILE, "0/1")] + [
        (kind, "0/1") for kind in (AUTOTUNE, AUTOTUNE, CUDAGRAPH, CUDAGRAPH, AUTOTUNE)
    ]
    assert late[0].trigger == SIZE and late[0].code_name == "forward"
    # The doctor says so from the trace alone.
    found = [f for f in diagnose_evidence(gather_evidence(run)) if f.kind.value == "compile_after_ready"]
    kinds = sorted(str(f.evidence["kind"]) for f in found)
    assert kinds == ["cudagraph_recording", "recompile", "runtime_autotune", "runtime_autotune"]  # fwd, bwd
    (recompile,) = [f for f in found if f.evidence["kind"] == "recompile"]
    assert recompile.title.endswith(SIZE) and "mark_dynamic(x, 0)" in recompile.fix
    assert recompile.seconds == pytest.approx(late[0].seconds)


@pytest.mark.parametrize("release", RELEASES)
def test_the_ledger_of_a_gpu_trace_prices_its_gpu_work(release: str) -> None:
    run = _read(LOGS / release)
    book = run_ledger(run)
    lines = book.ns_by_line()
    assert sum(lines.values()) == book.total_ns
    first = run.graph_records[0]
    assert book.start_unix_ns == first.start_unix_ns and book.source == "to the ready mark"
    warm = [e for e in run.runtime_events if e.compile_id == "0/0"]
    assert lines[AUTOTUNE_CALLS] == sum(e.duration_ns for e in warm if e.kind == AUTOTUNE)
    assert lines[CUDAGRAPH_LINE] == sum(e.duration_ns for e in warm if e.kind == CUDAGRAPH)
    # Inside the frame: its two Triton compiles, its template autotuning and benchmarks.
    split = {line: ns for line, _, ns in first.frame_lines}
    assert split[KERNEL_COMPILE_LINE] >= 20_000_000 and split[AUTOTUNE_COMPILE] >= 30_000_000
    assert lines[KERNEL_COMPILE_LINE] == split[KERNEL_COMPILE_LINE]


def _entries(lines: list[str]) -> list[list[str]]:
    """The log's entries: each a line and the payload lines (starting with a tab) after it."""
    entries: list[list[str]] = []
    for line in lines:
        if line.startswith("\t") and entries:
            entries[-1].append(line)
        else:
            entries.append([line])
    return entries


def _write(tmp_path: Path, entries: list[list[str]]) -> Path:
    log = tmp_path / "edited.log"
    log.write_text("".join(line + "\n" for entry in entries for line in entry))
    return log


FIRST_CALL_REGIONS = ('"name": "CachingAutotuner.', '"name": "cudagraphify.', '"name": "CUDAGraphNode.')


def test_the_runtime_rows_stand_for_calls_whose_regions_are_missing(tmp_path: Path) -> None:
    # The log without the first-call regions (a torch that logs none, or a log cut short):
    # each runtime row gives its call's work, ending where the call ended.
    lines = _lines("gpu-2.13")
    kept = [e for e in _entries(lines) if not any(n in "".join(e[1:]) for n in FIRST_CALL_REGIONS)]
    stripped, full = _read(_write(tmp_path, kept)), _read(LOGS / "gpu-2.13")
    rows = [
        next(iter(json.loads(line.split("] ", 1)[1]).values())) for line in lines if "metrics_runtime" in line
    ]
    assert len(rows) == 6 and len(stripped.runtime_events) == 8  # a call that did both: two events
    for row in rows:
        end, duration = row["end_time_us"] * 1000, row["duration_us"] * 1000
        mine = [
            e for e in stripped.runtime_events if end - duration <= e.start_unix_ns and e.end_unix_ns <= end
        ]
        assert sum(e.duration_ns for e in mine) == duration
        assert all(e.detail == "(torch's runtime row)" for e in mine)
    assert sum(e.duration_ns for e in stripped.runtime_events) == pytest.approx(
        sum(e.duration_ns for e in full.runtime_events), rel=0.01
    )


def test_a_runtime_row_of_no_graph_is_still_read(tmp_path: Path) -> None:
    # torch writes a null compile id (and a "stack" key) for a graph it knows no id of.
    entries = [
        e for e in _entries(_lines("gpu-2.13")) if not any(n in "".join(e[1:]) for n in FIRST_CALL_REGIONS)
    ]
    first = next(e for e in entries if '{"compilation_metrics_runtime"' in e[0])
    head, _, body = first[0].partition("] ")
    data = json.loads(body)
    data["compilation_metrics_runtime"]["compile_id"] = None
    del data["frame_id"], data["frame_compile_id"]
    data["stack"] = []
    first[0] = f"{head}] {json.dumps(data)}"
    run = _read(_write(tmp_path, entries))
    assert [e.kind for e in run.runtime_events if e.compile_id == ""] == [AUTOTUNE, CUDAGRAPH]


def test_report_prints_the_ledger_of_a_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", "--ledger", str(LOGS / "gpu-2.13")]) == 0
    out = capsys.readouterr().out
    # No lookup of a compile cache is in that trace: a start, neither cold nor warm.
    assert re.search(r"^start: ", out, re.M) and "ready when compiletrace.ready() was called" in out
    for line in (AUTOTUNE_CALLS, CUDAGRAPH_LINE, AUTOTUNE_COMPILE, "total"):
        assert re.search(rf"^{re.escape(line)}\s+\d+\.\d{{3}}\s+\d+%", out, re.M), line


def _trace_call_line(function: object, call: str) -> int:
    """The line of ``call`` inside ``function``: what a trace entry it writes names."""
    source, first = inspect.getsourcelines(function)  # type: ignore[arg-type]
    return first + next(i for i, text in enumerate(source) if call in text)


def test_the_log_of_this_release_is_in_the_format_this_torch_writes() -> None:
    release = "gpu-" + ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if release not in RELEASES:
        pytest.skip(f"no committed log for {release}: run regenerate_gpu_traces.py with this torch")
    import torch._dynamo.utils as utils

    rows = _trace_call_line(utils.record_compilation_metrics, "torch._logging.trace_structured(")
    events = _trace_call_line(utils.ChromiumEventLogger._log_timed_event, "torch._logging.trace_structured(")
    lines = _lines(release)
    metric_lines = [
        line for line in lines if '{"compilation_metrics' in line or '{"bwd_compilation_metrics' in line
    ]
    assert metric_lines and all(f"torch/_dynamo/utils.py:{rows}] " in line for line in metric_lines)
    assert any(f"torch/_dynamo/utils.py:{events}] " in line and '"chromium_event"' in line for line in lines)
    # Each runtime row has the fields the reader reads, with torch's own key order first.
    for line in metric_lines:
        row = json.loads(line.split("] ", 1)[1])
        kind, fields = next(iter(row.items()))
        assert list(fields)[:3] == ["compile_id", "frame_key", "co_name"]
        if kind.endswith("_runtime"):
            assert fields["is_runtime"] is True and fields["end_time_us"] > 0
            assert "attempt" not in row  # runtime rows carry no attempt


def test_the_ledger_of_a_cold_start_says_cold(capsys: pytest.CaptureFixture[str]) -> None:
    # Every graph of that trace missed inductor's caches: its start was cold, not warm.
    assert cli.main(["report", "--ledger", str(LOGS / "inductor_cold")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^cold start: \d+\.\d{3} s", out, re.M) and "warm start" not in out
    assert cli.main(["report", "--ledger", str(LOGS / "inductor_warm")]) == 0
    assert re.search(r"^warm start: ", capsys.readouterr().out, re.M)
