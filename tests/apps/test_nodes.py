"""A job of several nodes read as one (``report``, ``doctor``, ``compare``, ``why`` and
``compiletrace.load`` on several job files or a directory of them), on the job files two
"nodes" of two ranks wrote on this machine (``tests/inputs/nodes/two_nodes.py``); and the
whole scenario once, live, with its spans received over OTLP."""

from __future__ import annotations

import gzip
import json
import math
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import compiletrace
from compiletrace import cli
from compiletrace._data.files import read
from compiletrace._data.job import Job
from compiletrace._data.nodes import cold, merge_jobs, number_ranges, warm
from compiletrace._io.errors import UsageError
from tests.cache_cases import causes

NODES = Path(__file__).parents[1] / "inputs" / "nodes" / "node_cache_miss"
FILES = [NODES / "node0.json", NODES / "node1.json"]


def _nodes() -> list[Job]:
    jobs = [read(path) for path in FILES]
    assert all(isinstance(job, Job) for job in jobs)
    return jobs  # type: ignore[return-value]


def test_each_process_recorded_its_node_and_host() -> None:
    for node, job in enumerate(_nodes()):
        ranks = job.ranks()
        assert len(ranks) == 2 and all(p.info.node == str(node) and p.info.host for p in ranks.values())


def test_several_job_files_load_as_one_job_named_by_node_and_global_rank() -> None:
    job = compiletrace.load(FILES)
    assert isinstance(job, compiletrace.ProfileJob)
    by_rank = {rank: p.info.role for rank, p in job.ranks().items()}
    nodes = _nodes()
    expected = {rank: f"node {n} rank {rank}" for n, one in enumerate(nodes) for rank in one.ranks()}
    assert by_rank == expected and sorted(by_rank) == [0, 1, 2, 3]
    assert len(job.processes) == sum(len(one.processes) for one in nodes)
    # A directory of them reads the same.
    again = compiletrace.load(NODES)
    assert isinstance(again, Job) and [p.info for p in again.processes] == [p.info for p in job.processes]


def test_the_report_leads_with_the_critical_path_then_nodes_then_alike_ranks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["report", *map(str, FILES)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    job = compiletrace.load(FILES)
    assert isinstance(job, Job)
    ranks = job.ranks()
    startup = {r: p.run.timeline.total_s if p.run.timeline else 0.0 for r, p in ranks.items()}
    compile_s = {r: sum(g.total_s for g in p.run.graph_records) for r, p in ranks.items()}
    whole = {r: max(startup[r], compile_s[r]) for r in ranks}
    slowest = max(ranks, key=lambda r: (whole[r], compile_s[r], -r))
    node = ranks[slowest].info.node
    assert lines[0] == "compiletrace: a job of 2 nodes, 4 ranks (exit status 0)"
    assert lines[1] == (
        f"  critical path: node {node} rank {slowest}, start-up {whole[slowest]:.2f} s, "
        f"compiling {compile_s[slowest]:.2f} s"
    )
    cpu = sum(g.cpu_or_wall_ns for p in ranks.values() for g in p.run.graph_records) / 1e9
    assert lines[2].startswith(f"  every rank: {cpu:.2f} CPU-seconds of compiling, 4 graphs")
    # A line per node, then the ranks alike (as many graphs, hits and misses) folded: node 0
    # (another thread count) missed; its ranks compiled side by side, so a rank of it that
    # looked in the cache after the other had compiled may have hit what that one wrote.
    counts = {
        r: (
            len(p.run.graph_records),
            sum(map(warm, p.run.graph_records)),
            sum(map(cold, p.run.graph_records)),
        )
        for r, p in ranks.items()
    }
    for n in "01":
        mine = [r for r, p in ranks.items() if p.info.node == n]
        hits, misses = sum(counts[r][1] for r in mine), sum(counts[r][2] for r in mine)
        worst = max(mine, key=lambda r: (whole[r], compile_s[r], -r))
        assert f"  node {n}: 2 ranks, 2 graphs ({hits} hit, {misses} missed); slowest rank {worst} " in out
    assert sum(c[2] for r, c in counts.items() if ranks[r].info.node == "0") >= 1
    assert all(c == (1, 1, 0) for r, c in counts.items() if ranks[r].info.node == "1")
    folded = {c: sorted(r for r in ranks if counts[r] == c) for c in counts.values()}
    rows = [line for line in lines if line.startswith("  rank")]
    assert len(rows) == len(folded)
    for (graphs, hits, misses), alike in folded.items():
        who = f"rank{'s' if len(alike) > 1 else ''} {number_ranges(alike)}"
        outcome = f"{graphs} graph ({hits} hit, {misses} missed){' each' if len(alike) > 1 else ''}, "
        assert any(row.startswith(f"  {who} (") and outcome in row for row in rows), (who, outcome, rows)
    assert f"== pid {ranks[slowest].info.pid} (node {node} rank {slowest})" in out  # its tables alone
    assert out.count("\n== ") == 1


def test_the_doctor_names_the_node_that_missed_and_the_key_part(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor", *map(str, FILES)]) == 0
    out = capsys.readouterr().out
    assert "[node_cache_miss]" in out
    assert "node 0 missed the compile cache on 1 graph that node 1 hit:" in out
    assert "cpp_runtime_thread_count: 2 -> 1, set by OMP_NUM_THREADS: '2' -> '1'" in " ".join(out.split())


def test_compare_and_why_read_a_directory_of_nodes_as_one_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "base"
    shutil.copytree(NODES, base)
    assert cli.main(["compare", str(base), str(NODES)]) == 0
    assert cli.main(["why", str(base), str(NODES)]) == 0
    out = capsys.readouterr().out
    assert "node 1 rank 3" in out
    assert "no graph missed the compile cache in CURRENT" not in out  # node 0's misses are there


def test_why_of_a_directory_of_nodes_compares_the_node_that_missed_with_the_one_that_hit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # docs/distributed.md: a directory of the nodes' job files, given to why alone. Node 1 hit
    # (OMP_NUM_THREADS as the cache was filled), node 0 missed: node 0 against node 1, as the
    # two files given as BASE and CURRENT say it.
    assert cli.main(["why", str(NODES), "--json", str(tmp_path / "dir.json")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith(f"why: BASE {NODES}: node 1 -> CURRENT {NODES}: node 0")
    assert "note: node 1 hit the compile cache most: it is BASE; node 0 missed most: CURRENT" in out
    by_dir = json.loads((tmp_path / "dir.json").read_text())
    assert cli.main(["why", str(FILES[1]), str(FILES[0]), "--json", str(tmp_path / "files.json")]) == 0
    by_files = json.loads((tmp_path / "files.json").read_text())
    for key in ("compiled", "hits", "missed", "seconds", "process_changes"):
        assert by_dir[key] == by_files[key], key
    assert [g["reason"] for g in by_dir["groups"]] == [g["reason"] for g in by_files["groups"]]
    # Each graph named by its node and rank, one file's ranks by their rank alone.
    graphs = [(g["current"], g["base"]) for group in by_dir["groups"] for g in group["graphs"]]
    assert graphs == [
        (f"node 0 {g['current']}", f"node 1 {g['base']}")
        for group in by_files["groups"]
        for g in group["graphs"]
    ]
    assert ("cpp_runtime_thread_count", "2", "1") in causes(by_dir)
    # One node has no other to compare with: bad input, saying what to give.
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(FILES[0], alone / "node0.json")
    capsys.readouterr()
    assert cli.main(["why", str(alone)]) == 2
    err = capsys.readouterr().err
    assert "is the job of one node, with no other node to compare it with" in err
    assert "give two runs, BASE (which filled or used the cache) and CURRENT" in err


def test_one_rank_in_two_files_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match=r"rank 0 is in both .*node0.json and .*node0.json"):
        compiletrace.load([FILES[0], FILES[0]])
    assert cli.main(["report", str(FILES[0]), str(FILES[0])]) == 2
    err = capsys.readouterr().err
    assert "these are not the nodes of one job" in err


def test_a_link_in_a_directory_of_nodes_is_not_followed(tmp_path: Path) -> None:
    folder = tmp_path / "nodes"
    folder.mkdir()
    shutil.copy(FILES[0], folder / "node0.json")
    os.symlink(FILES[1], folder / "node1.json")
    with pytest.raises(compiletrace.RunFileError, match="symbolic link"):
        compiletrace.load(folder)


# What a node's console held (torchrun's warning, glog-style as torch's trace is, then what
# its ranks printed), as a scheduler keeps it beside the node's job file: no trace of torch's.
_TORCHRUN = "W1207 11:58:21.307000 41873 torch/distributed/run.py:793] "
_CONSOLE = "\n".join(
    [
        _TORCHRUN,
        _TORCHRUN + "*" * 41,
        _TORCHRUN + "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to "
        "avoid your system being overloaded, please further tune the variable for optimal performance in "
        "your application as needed.",
        _TORCHRUN + "*" * 41,
        *[f"[rank{i % 2}]: step {i} loss 0.25" for i in range(400)],  # past the head a format is told by
        "compiled",
        "",
    ]
)


def test_a_directory_of_job_files_with_each_nodes_console_log_beside_reads_the_job_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "nodes"
    folder.mkdir()
    for path in FILES:
        shutil.copy(path, folder / path.name)
        (folder / path.with_suffix(".log").name).write_text(_CONSOLE)
    (folder / "node1.err.log.gz").write_bytes(gzip.compress(b"Traceback (most recent call last):\n"))
    job = compiletrace.load(folder)
    assert isinstance(job, Job)
    assert [p.info for p in job.processes] == [p.info for p in compiletrace.load(NODES).processes]
    assert cli.main(["report", str(folder)]) == 0
    assert capsys.readouterr().out.startswith("compiletrace: a job of 2 nodes, 4 ranks")
    assert cli.main(["why", str(folder)]) == 0
    assert "node 0 missed most: CURRENT" in " ".join(capsys.readouterr().out.split())


def test_a_directory_of_job_files_and_torchs_trace_says_what_it_holds_and_what_to_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "nodes"
    folder.mkdir()
    for path in FILES:
        shutil.copy(path, folder / path.name)
    trace = Path(__file__).parents[1] / "inputs" / "traces" / "cache" / "base.log.gz"
    shutil.copy(trace, folder / "dedicated_log_torch_trace_rank_0.log.gz")
    (folder / "node0.log").write_text(_CONSOLE)
    assert cli.main(["report", str(folder)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{folder} holds both torch's trace (dedicated_log_torch_trace_rank_0.log.gz, of 2 logs)" in err
    assert f"and 2 .json file(s) (node0.json, ...): give the job files ({folder}/*.json)" in err


def test_a_run_file_of_no_process_is_no_node(tmp_path: Path) -> None:
    run = tmp_path / "run.json"
    compiletrace.profile(backend="eager").save(run)
    with pytest.raises(compiletrace.RunFileError, match="not a node's job"):
        compiletrace.load([FILES[0], run])


def test_a_node_name_that_is_no_plain_name_is_refused(tmp_path: Path) -> None:
    data = json.loads(FILES[0].read_text())
    data["processes"][0]["process"]["node"] = "0 rank 9"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(compiletrace.RunFileError, match=r"field 'processes\[0\]\.process\.node'"):
        compiletrace.load(bad)


@pytest.mark.slow
def test_two_nodes_side_by_side_read_as_one_job_and_one_job_in_the_collector(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole scenario once (inductor on four ranks is the cost): two nodes' ``compiletrace
    run -- torchrun ...`` side by side on one filled cache, node 0 with OMP_NUM_THREADS=1."""
    from tests.apps.test_run import _OtlpReceiver
    from tests.inputs.nodes.two_nodes import RUN_ID, run_two_nodes

    receiver = _OtlpReceiver()
    try:
        node0, node1 = run_two_nodes(tmp_path, otlp_endpoint=receiver.url)
    finally:
        receiver.close()
    assert cli.main(["report", str(node0), str(node1)]) == 0
    report = capsys.readouterr().out
    assert report.startswith("compiletrace: a job of 2 nodes, 4 ranks (exit status 0)\n")
    assert "  node 0: 2 ranks, " in report and "  node 1: 2 ranks, 2 graphs (2 hit, 0 missed)" in report
    assert cli.main(["doctor", str(node0), str(node1)]) == 0
    doctor = " ".join(capsys.readouterr().out.split())
    assert (
        "[node_cache_miss]" in doctor
        and "node 0 missed the compile cache on 1 graph that node 1 hit" in doctor
    )
    assert "cpp_runtime_thread_count: 2 -> 1, set by OMP_NUM_THREADS: '2' -> '1'" in doctor

    # Every rank's compile reached the collector, each from its process, with one job id,
    # its node and its global rank on the resource.
    job = compiletrace.load([node0, node1])
    assert isinstance(job, Job)
    graph_spans = [(res, s) for res, s in receiver.spans() if s.name == "Compile graph"]
    by_pid = {res["process.pid"].int_value: res for res, _ in graph_spans}
    for rank, process in job.ranks().items():
        res = by_pid[process.info.pid]
        assert res["compiletrace.job.id"].string_value == RUN_ID
        assert res["compiletrace.node.rank"].int_value == int(process.info.node)
        assert res["compiletrace.rank"].int_value == rank
        assert res["host.name"].string_value == process.info.host
        assert res["service.name"].string_value == "compiletrace"
    assert len(graph_spans) == len(job.records())


def test_reading_a_nodes_file_allocates_about_its_size_not_the_readers_limit() -> None:
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        read(FILES[0])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The file is 111 KB; its parsed data a few times that. The limit (1 GiB) is never allocated.
    assert peak < 20 * FILES[0].stat().st_size


@pytest.mark.slow
def test_the_report_of_64_nodes_of_8_ranks_fits_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _bench_nodes().build(tmp_path, 64, 8)
    monkeypatch.setenv("COLUMNS", "80")
    job = compiletrace.load(tmp_path)
    assert isinstance(job, compiletrace.ProfileJob) and len(job.ranks()) == 512
    text = job.summary()
    assert max(map(len, text.splitlines())) <= 80
    summary = text.split("\n\n== ")[0].splitlines()
    assert summary[0] == "compiletrace: a job of 64 nodes, 512 ranks (exit status 0)"
    assert sum(line.startswith("  node ") for line in summary) == 64
    # The ranks alike fold into one row per kind: warm and cold, a few ranges each.
    rows = [line for line in summary if line.startswith(("  ranks", "  480 ranks", "  32 ranks"))]
    assert [row.split(" (")[0] for row in rows] == [
        "  480 ranks, 0, 2, 4, 6, ...",
        "  32 ranks, 1, 3, 5, 7, ...",
    ]
    assert "(64 nodes): 1 graph (1 hit, 0 missed) each" in rows[0]


def _bench_nodes() -> Any:
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    try:
        import bench_nodes
    finally:
        sys.path.pop(0)
    return bench_nodes


def _job_of_nodes(nodes: int) -> compiletrace.ProfileJob:
    """``nodes`` nodes of 8 ranks each, built as ``bench_nodes.py --lean`` builds them from the
    two real nodes' files, every other node cold (its ranks missed the cache the others hit)."""
    bench = _bench_nodes()
    cold, warm = (json.loads(path.read_text()) for path in FILES)
    jobs = [
        (f"node{n}.json", Job.from_dict(bench._node_file(cold if n % 2 == 0 else warm, n, 8, lean=True)))
        for n in range(nodes)
    ]
    return compiletrace.ProfileJob.of(merge_jobs(jobs))


def _python_calls(work: Callable[[], object]) -> int:
    """The Python function calls ``work()`` makes: work counted, not timed."""
    calls = 0

    def count(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(count)
    try:
        work()
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.slow
@pytest.mark.parametrize("view", ["summary", "diagnose"])
def test_the_report_and_the_doctor_of_many_nodes_grow_with_the_ranks_not_their_square(view: str) -> None:
    small, large = _job_of_nodes(16), _job_of_nodes(64)  # 128 ranks, then 512
    assert len(large.ranks()) == 4 * len(small.ranks()) == 512
    getattr(small, view)()  # what a first call imports is not the view's work
    grown = _python_calls(getattr(large, view)) / _python_calls(getattr(small, view))
    # 4x the ranks: 4x the work, or n log n at most (4 x log 512 / log 128 = 5.1); the rank
    # table rebuilt per process, or every node against every rank, made it 12.6x and 6.0x.
    assert grown <= 4 * math.log(512) / math.log(128)


def test_two_nodes_processes_of_one_pid_are_two_tracks_of_the_chrome_trace(tmp_path: Path) -> None:
    data = json.loads(FILES[1].read_text())
    first = json.loads(FILES[0].read_text())["processes"][0]["process"]["pid"]
    data["processes"][0]["process"]["pid"] = data["processes"][0]["run"]["meta"]["pid"] = first
    same = tmp_path / "node1.json"
    same.write_text(json.dumps(data))
    job = compiletrace.load([FILES[0], same])
    assert isinstance(job, compiletrace.ProfileJob)
    names = {
        e["pid"]: e["args"]["name"]
        for e in job.chrome_trace()["traceEvents"]
        if e.get("name") == "process_name"
    }
    assert sorted(names) == [1, 2, 3, 4]
    assert sorted(names.values()) == sorted(f"{p.info.role} (pid {p.info.pid})" for p in job.processes)


def test_torchs_traces_of_two_nodes_read_as_one_job_each_node_named_by_its_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = Path(__file__).parents[1] / "inputs" / "traces" / "ranks"
    for node, log in enumerate(sorted(traces.glob("*.log"))):  # rank 0's log, then rank 1's
        (tmp_path / f"node{node}").mkdir()
        shutil.copy(log, tmp_path / f"node{node}" / log.name)
    job = compiletrace.load([tmp_path / "node0", tmp_path / "node1"])
    assert isinstance(job, compiletrace.ProfileJob)
    assert {rank: p.info.role for rank, p in job.ranks().items()} == {0: "node 0 rank 0", 1: "node 1 rank 1"}
    assert cli.main(["report", str(tmp_path / "node0"), str(tmp_path / "node1")]) == 0
    assert capsys.readouterr().out.startswith("compiletrace: a job of 2 nodes, 2 ranks (exit status 0)\n")
    # One directory of both logs is torch's trace of one job, as it was.
    both = compiletrace.load(traces)
    assert isinstance(both, Job) and {p.info.role for p in both.processes} == {"rank 0", "rank 1"}


def test_the_ranks_equal_cache_key_sets_are_held_once_and_only_equal_ones(tmp_path: Path) -> None:
    data = json.loads(FILES[1].read_text())
    sets = data["processes"][1]["run"]["meta"]["cache_keys"]["config_sets"]
    sid = next(iter(sets))
    name, digest, value = sets[sid][0]  # a set saved whole: [name, hash, value] per part
    sets[sid][0] = [name, "0" * len(digest), value]  # one id, other content
    crafted = tmp_path / "node1.json"
    crafted.write_text(json.dumps(data))
    job = compiletrace.load([FILES[0], crafted])
    assert isinstance(job, Job)
    held = [p.run.meta.cache_keys.config_sets for p in job.ranks().values()]  # type: ignore[union-attr]
    assert all(h[sid] is held[0][sid] for h in held[:3])  # ranks 0-2: equal sets, one object
    assert held[3][sid] is not held[0][sid] and held[3][sid] != held[0][sid]  # rank 3 keeps its own


def test_verify_re_runs_one_nodes_command_not_several(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor", "--verify", "--trust", *map(str, FILES)]) == 2
    assert "--verify re-runs one command on this machine: give one node's job" in capsys.readouterr().err
