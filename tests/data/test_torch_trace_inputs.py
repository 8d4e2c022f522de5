"""torch's trace read record kind by record kind, on the committed logs in
``tests/inputs/traces/`` (made by the repository's own programs: see the script there).

What each record contributes is checked against the record itself, read here with plain
``json``: ids, counts, and nanoseconds as the log writes them. No compile, no subprocess.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import compiletrace
from compiletrace import GraphRecord, ProfileJob, ProfileRun

TRACES = Path(__file__).resolve().parents[1] / "inputs" / "traces"
PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
NS_PER_US = 1_000
# One entry: glog's prefix (its pid), then the record's JSON; a payload follows, tab first.
_HEAD = re.compile(r"^(?:\[rank\d+\]:)?[VIWEC]\d{4} [\d:.]+ +(\d+) [^\]]*\] (\{.*)$")
_METRICS = ("compilation_metrics", "bwd_compilation_metrics")
# The cache-lookup artifacts: (tier, outcome).
_LOOKUP = re.compile(r"(fx_graph|aotautograd|autograd)_cache_(hit|miss|bypass)")


@dataclass
class Entry:
    pid: int
    kind: str
    meta: dict[str, Any]
    payload: str | None

    @property
    def compile_id(self) -> str | None:
        if "frame_id" in self.meta:
            return f"{self.meta['frame_id']}/{self.meta['frame_compile_id']}"
        return None

    def json(self) -> Any:
        assert self.payload is not None
        return json.loads(self.payload)


def entries(log: Path) -> list[Entry]:
    """The log's entries, read with plain json: the oracle the reader is checked against."""
    found: list[Entry] = []
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.startswith("\t"):
            last = found[-1]
            last.payload = line[1:] if last.payload is None else f"{last.payload}\n{line[1:]}"
            continue
        head = _HEAD.match(line)
        assert head is not None, line[:200]
        meta = json.loads(head[2])
        found.append(Entry(int(head[1]), next(iter(meta)), meta, None))
    return found


def log_of(case: str) -> Path:
    (log,) = (TRACES / case).glob("*.log")
    return log


def rows(log: Path, forward: bool = True) -> dict[str, dict[str, Any]]:
    """torch's metrics rows in the log, by compile id: the frames' (or the backwards')."""
    out = {}
    for e in entries(log):
        if e.kind in _METRICS:
            row = e.meta[e.kind]
            if (e.kind == "compilation_metrics" and row.get("is_forward", True) is not False) is forward:
                out[row["compile_id"]] = row
    return out


def artifacts(log: Path, name: str) -> list[Entry]:
    return [e for e in entries(log) if e.kind == "artifact" and e.meta["artifact"]["name"] == name]


def regions(log: Path, compile_id: str) -> list[dict[str, Any]]:
    """The compile's timed regions (chromium events), in log order."""
    events = [e.json() for e in entries(log) if e.kind == "chromium_event"]
    return [ev for ev in events if ev.get("args", {}).get("compile_id") == compile_id]


def read_run(path: Path) -> ProfileRun:
    run = compiletrace.load(path)
    assert isinstance(run, ProfileRun)
    return run


def read_job(path: Path) -> ProfileJob:
    job = compiletrace.load(path)
    assert isinstance(job, ProfileJob)
    return job


def by_id(run: ProfileRun) -> dict[str, GraphRecord]:
    return {r.compile_id: r for r in run.graph_records}


def seconds_ns(seconds: float) -> int:
    return round(seconds * 1_000_000_000)


def assert_frame_figures(record: GraphRecord, row: dict[str, Any]) -> None:
    """A frame compile's figures are its metrics row's, to the nanosecond."""
    where = f"compile {row['compile_id']}"
    frame_ns = seconds_ns(row["entire_frame_compile_time_s"])
    backend_ns = seconds_ns(row["backend_compile_time_s"] or 0)
    assert record.start_unix_ns == row["start_time_us"] * NS_PER_US, where
    assert (record.frame_ns, record.backend_ns) == (frame_ns, backend_ns), where
    assert record.dynamo_ns == frame_ns - backend_ns and record.end_unix_ns == record.start_unix_ns + frame_ns
    assert record.graph_node_count == (row["graph_node_count"] or 0), where  # none: a failed compile
    assert (record.code_name, record.code_filename, record.code_firstlineno) == (
        row["co_name"],
        row["co_filename"],
        row["co_firstlineno"],
    ), where


SINGLE_PROCESS = ["breaks_and_recompiles", "inductor_cold", "inductor_warm", "cache_bypass", "failed_compile"]


@pytest.mark.parametrize("case", SINGLE_PROCESS)
def test_each_metrics_row_is_one_frame_compile_with_its_figures(case: str) -> None:
    log = log_of(case)
    run = read_run(log.parent)
    torch_rows = rows(log)
    assert [r.compile_id for r in run.graph_records] == list(torch_rows)  # one record a row, in order
    for record in run.graph_records:
        assert_frame_figures(record, torch_rows[record.compile_id])
    (version,) = artifacts(log, "torch_version")
    assert run.meta.torch_version == version.json()["pytorch_version"]
    trace = run.meta.trace
    assert trace is not None
    assert trace.entries == len(entries(log)) and trace.pid == entries(log)[0].pid
    assert (trace.damaged_lines, trace.rejected_compiles, trace.truncated) == (0, 0, False)


def test_recompiles_carry_torchs_reason_and_their_attempt() -> None:
    log = log_of("breaks_and_recompiles")
    run = read_run(log.parent)
    torch_rows = rows(log)
    # fixable.py: a break in forward (a graph before it, one after), then a second batch size.
    assert [r.compile_id for r in run.graph_records] == ["0/0", "1/0", "0/1", "1/1"]
    for record in run.graph_records:
        reason = torch_rows[record.compile_id]["recompile_reason"]
        assert record.recompile_reason == reason
        assert record.is_recompile is (reason is not None)
        assert record.frame_attempt == int(record.compile_id.split("/")[1])
    assert [r.is_recompile for r in run.graph_records] == [False, False, True, True]
    assert by_id(run)["0/1"].recompile_reason.startswith("0/0: tensor 'x' size mismatch")  # type: ignore[union-attr]
    # A trace names code: the resume function after the break is its forward's component.
    assert {r.component for r in run.graph_records} == {"forward (fixable.py)"}


def test_a_graph_break_is_torchs_reason_at_the_users_line() -> None:
    log = log_of("breaks_and_recompiles")
    run = read_run(log.parent)
    breaks = artifacts(log, "dynamo_graph_break_reason")
    assert [b.compile_id for b in breaks] == ["0/0", "0/1"]  # forward's, each time it is traced
    print_line = 1 + (PROGRAMS / "fixable.py").read_text().splitlines().index('        print("step")')
    for artifact in breaks:
        assert artifact.payload is not None
        (found,) = by_id(run)[str(artifact.compile_id)].graph_breaks
        assert (found.filename, found.lineno) == ("/repo/tests/programs/fixable.py", print_line)
        # torch's reason, without the sentence the log frames it with.
        assert found.reason.startswith("Failed to trace builtin operator\n")
        assert found.reason in artifact.payload
        assert "Encountered graph break" not in found.reason
    assert [r.graph_breaks for r in run.graph_records if r.compile_id.startswith("1/")] == [(), ()]


def test_a_restart_is_named_by_torchs_reasons() -> None:
    log = log_of("breaks_and_recompiles")
    run = read_run(log.parent)
    torch_rows = rows(log)
    restarted = {cid for cid, row in torch_rows.items() if row["restart_reasons"]}
    assert restarted == {"0/0", "0/1"}  # the break: Dynamo traced forward again up to the print
    for record in run.graph_records:
        assert record.restart_reasons == tuple(torch_rows[record.compile_id]["restart_reasons"])


def test_a_lazy_backward_is_its_forwards_with_its_own_time() -> None:
    log = log_of("inductor_cold")
    run = read_run(log.parent)
    (row,) = rows(log, forward=False).values()
    (record,) = run.graph_records
    assert record.compile_id == row["compile_id"] == "0/0"  # the backward row names the forward's id
    assert row.get("entire_frame_compile_time_s") is None  # so its duration is the row's own
    assert record.backward_ns == row["duration_us"] * NS_PER_US > 0
    assert record.backward_start_unix_ns == row["start_time_us"] * NS_PER_US
    assert record.backward_start_unix_ns >= record.end_unix_ns  # compiled at the first .backward()
    # Warm, the backward came from the cache with the forward: no backward row, no time.
    assert rows(log_of("inductor_warm"), forward=False) == {}
    (warm,) = read_run(TRACES / "inductor_warm").graph_records
    assert (warm.backward_ns, warm.backward_start_unix_ns) == (0, None)


_TIER = {"fx_graph": "fx_graph", "aotautograd": "aot_autograd", "autograd": "aot_autograd"}


Lookup = tuple[str, str, str, str]  # tier, outcome, key, detail


def logged_lookups(log: Path) -> list[tuple[str, Lookup]]:
    """The log's cache artifacts as (compile id, lookup), in log order."""
    out = []
    for e in entries(log):
        name = e.meta.get("artifact", {}).get("name", "") if e.kind == "artifact" else ""
        found = _LOOKUP.fullmatch(name)
        if found:
            data = e.json()
            detail = data.get("cache_bypass_reason") or data.get("reason") or ""
            out.append((str(e.compile_id), (_TIER[found[1]], found[2], data.get("key") or "", detail[:200])))
    return out


@pytest.mark.parametrize(
    ("case", "outcome", "count"),
    [("inductor_cold", "miss", 3), ("inductor_warm", "hit", 3), ("cache_bypass", "bypass", 2)],
)
def test_cache_artifacts_give_each_tier_its_outcome_and_lookups(case: str, outcome: str, count: int) -> None:
    log = log_of(case)
    (record,) = read_run(log.parent).graph_records
    logged = logged_lookups(log)
    # Every lookup of the compile (inductor's forward and backward graphs, AOTAutograd's one).
    assert len(logged) == count and {cid for cid, _ in logged} == {record.compile_id}
    assert [(k.tier, k.outcome, k.key, k.detail) for k in record.cache_lookups] == [k for _, k in logged]
    assert {lookup.tier for lookup in record.cache_lookups} == {"fx_graph", "aot_autograd"}
    assert (record.fx_graph_cache.value, record.aot_autograd_cache.value) == (outcome, outcome)
    if outcome == "bypass":  # the reason torch gave, and no key: nothing was looked up
        aot = next(lookup for lookup in record.cache_lookups if lookup.tier == "aot_autograd")
        assert (aot.key, aot.detail) == ("", "Cannot cache a graph with freezing enabled")
    else:
        assert all(lookup.key and not lookup.detail for lookup in record.cache_lookups)
    if outcome != "bypass":  # the metrics row's counter says the same of the FX-graph tier
        (row,) = rows(log).values()
        assert row[f"inductor_fx_local_cache_{outcome}_count"] > 0


@pytest.mark.parametrize(
    ("case", "backend", "phases"),
    [
        ("breaks_and_recompiles", "unknown", {"other"}),  # eager: no region inside the backend
        ("ranks", "aot_autograd", {"aot_autograd", "other"}),
        ("inductor_cold", "inductor", {"aot_autograd", "cache", "inductor", "kernel_compile", "other"}),
        ("inductor_warm", "inductor", {"cache", "kernel_compile", "other"}),
    ],
)
def test_timed_regions_place_the_backend_and_split_its_time(
    case: str, backend: str, phases: set[str]
) -> None:
    logs = sorted((TRACES / case).glob("*.log"))
    loaded = compiletrace.load(TRACES / case)
    runs = [p.run for p in loaded.processes] if isinstance(loaded, ProfileJob) else [loaded]
    for log, run in zip(logs, runs, strict=True):
        for record in run.graph_records:
            events = regions(log, record.compile_id)
            backend_events = [ev for ev in events if ev["name"] == "backend_compile"]
            window_start = int(backend_events[0]["ts"] * NS_PER_US)
            window_end = int(backend_events[-1]["ts"] * NS_PER_US)
            assert backend_events[0]["ph"] == "B" and backend_events[-1]["ph"] == "E"
            assert record.backend_start_unix_ns == window_start  # the region's start, as logged
            assert record.backend == backend
            # The phases torch's regions name, scaled to add up to the row's backend time.
            split = dict(record.phases)
            assert set(split) == phases and sum(split.values()) == record.backend_ns
            if "kernel_compile" in phases:  # the C++ compiler's regions, in the backend's window
                compiled = _union_ns(events, ("compile_file", "async_compile"), window_start, window_end)
                scale = record.backend_ns / (window_end - window_start)
                assert split["kernel_compile"] == int(compiled * scale) > 0


def _union_ns(events: list[dict[str, Any]], prefixes: tuple[str, ...], start: int, end: int) -> int:
    """Nanoseconds inside [start, end] covered by the regions whose names start so."""
    spans: list[tuple[int, int]] = []
    opened: dict[str, list[int]] = {}
    for ev in events:
        if not ev["name"].startswith(prefixes):
            continue
        ns = int(ev["ts"] * NS_PER_US)
        if ev["ph"] == "B":
            opened.setdefault(ev["name"], []).append(ns)
        elif ev["ph"] == "E" and opened.get(ev["name"]):
            spans.append((max(opened[ev["name"]].pop(), start), min(ns, end)))
    total, reached = 0, start
    for a, b in sorted(spans):
        a = max(a, reached)
        if b > a:
            total += b - a
            reached = b
    return total


def test_a_failed_compile_is_an_error_of_torchs_failure_type() -> None:
    log = log_of("failed_compile")
    (record,) = read_run(log.parent).graph_records
    (row,) = rows(log).values()
    assert row["fail_type"] == "BackendCompilerFailed"
    assert (record.status.value, record.error_type) == ("error", row["fail_type"])
    assert row["graph_node_count"] is None and record.graph_node_count == 0  # no graph was kept


def test_records_the_reader_does_not_read_are_skipped_and_counted_by_kind() -> None:
    log = log_of("failed_compile")
    run = read_run(log.parent)
    read = {"chromium_event", *_METRICS}
    expected: Counter[str] = Counter()
    for e in entries(log):
        if e.kind == "artifact":
            name = e.meta["artifact"]["name"]
            if not (_LOOKUP.fullmatch(name) or name in ("dynamo_graph_break_reason", "torch_version")):
                expected[f"artifact:{name}"] += 1
        elif e.kind not in read:
            expected[e.kind] += 1
    assert run.meta["trace"]["skipped"] == dict(expected)
    # The program's own record, a kind no torch writes today: counted, and nothing else changes.
    assert run.meta["trace"]["skipped"]["a_record_kind_from_a_newer_torch"] == 1
    assert [r.compile_id for r in run.graph_records] == ["0/0"]


def test_a_directory_of_rank_logs_is_one_job_its_ranks_by_file_name() -> None:
    job = read_job(TRACES / "ranks")
    logs = sorted((TRACES / "ranks").glob("*.log"))
    assert sorted(job.ranks()) == [0, 1]
    for rank, log in enumerate(logs):
        assert f"_rank_{rank}_" in log.name
        process = job.ranks()[rank]
        assert process.info.pid == entries(log)[0].pid and process.info.role == f"rank {rank}"
        torch_rows = rows(log)
        assert [r.compile_id for r in process.run.graph_records] == list(torch_rows) == ["0/0"]
        for record in process.run.graph_records:
            assert record.rank == rank
            assert_frame_figures(record, torch_rows[record.compile_id])
    # The doctor reads the job: both ranks compiled the same graph, so none diverges.
    assert not [f for f in job.diagnose() if f.kind == "rank_divergence"]


def _figures(run: ProfileRun) -> list[dict[str, Any]]:
    return [r.to_dict() for r in run.graph_records]


def test_a_gzip_of_a_log_reads_as_the_log() -> None:
    (gz,) = (TRACES / "archives").glob("*.log.gz")
    plain = log_of("failed_compile")
    assert gzip.decompress(gz.read_bytes()) == plain.read_bytes()  # the committed log, gzipped
    from_gz, from_log = read_run(gz), read_run(plain)
    assert _figures(from_gz) == _figures(from_log) and from_gz.graph_records
    assert {**from_gz.meta["trace"], "log": ""} == {**from_log.meta["trace"], "log": ""}


def test_a_zip_of_rank_logs_reads_as_their_directory() -> None:
    """The zip holds rank 0's log as it is and rank 1's gzipped inside it."""
    zipped, directory = read_job(TRACES / "archives" / "ranks.zip"), read_job(TRACES / "ranks")
    assert [p.info.role for p in zipped.processes] == [p.info.role for p in directory.processes]
    for mine, theirs in zip(zipped.processes, directory.processes, strict=True):
        assert _figures(mine.run) == _figures(theirs.run) and mine.run.graph_records
        assert mine.run.meta["trace"]["log"].startswith(f"{TRACES / 'archives' / 'ranks.zip'}:ranks/")
    assert zipped.processes[1].run.meta["trace"]["log"].endswith(".log.gz")
