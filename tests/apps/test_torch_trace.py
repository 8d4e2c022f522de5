"""torch's own trace (``TORCH_TRACE=DIR``) read by compiletrace.

Real programs run with the variable set, read back through the one reader, and checked
against what compiletrace recorded live of the same run, compile id by compile id: on each
torch ``.ci/run`` proves, the proof that the reader and live recording agree. The rest reads
the committed logs in ``tests/inputs/traces/`` (the reader record kind by record kind:
``tests/data/test_torch_trace_inputs.py``): every command on a trace, bad and crafted input,
logs cut short, interleaved or of ranks that diverge."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import compiletrace
from compiletrace import GraphRecord, RunFileError, cli
from compiletrace._data.records import RESUME_PREFIX, root_code_name
from compiletrace._doctor.shared import owners

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
# fixable.py's trace (eager): a graph break in forward and recompiles, four batch sizes.
FIXABLE_TRACE = Path(__file__).resolve().parent.parent / "inputs" / "traces" / "breaks_and_recompiles"
TIMEOUT_S = 600  # generous: the suite must pass beside four CPU-bound processes
TORCH_ROUNDING_NS = 10_000  # torch writes its figures to the microsecond


def _traced(program: str, trace: Path, *args: str, cwd: Path, live: Path | None = None) -> str:
    """Run ``program`` with TORCH_TRACE=trace (under ``compiletrace run --json live`` too
    when given); returns its stderr."""
    env = {**os.environ, "TORCH_TRACE": str(trace)}
    command = [sys.executable, str(PROGRAMS / program), *args]
    if live is not None:
        command = [sys.executable, "-m", "compiletrace", "run", "--json", str(live), "--", *command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


@pytest.fixture
def fixable_trace() -> Path:
    """The committed trace of a program with a graph break and three recompiles (eager)."""
    return FIXABLE_TRACE


def _log(trace: Path) -> Path:
    (log,) = trace.glob("*.log")
    return log


def _reason(text: str | None) -> str | None:
    # torch's row says "0/0: tensor 'x' ..." where its callback says "tensor 'x' ...".
    return None if text is None else re.sub(r"^\d+/\d+: ", "", text.splitlines()[0])


def _agree(live: GraphRecord, traced: GraphRecord) -> None:
    where = f"compile {live.compile_id}"
    # Frame time: both are torch's own reading of its frame region (live recording takes its
    # bounds from torch's timed regions), which the log rounds to the microsecond.
    assert abs(live.frame_ns - traced.frame_ns) <= TORCH_ROUNDING_NS, where
    assert live.graph_node_count == traced.graph_node_count, where
    assert live.code_name == traced.code_name and live.code_filename == traced.code_filename, where
    assert live.is_recompile == traced.is_recompile, where
    assert _reason(live.recompile_reason) == _reason(traced.recompile_reason), where
    assert [b.location for b in live.graph_breaks] == [b.location for b in traced.graph_breaks], where
    assert [b.reason.splitlines()[0] for b in live.graph_breaks] == [
        b.reason.splitlines()[0] for b in traced.graph_breaks
    ], where
    assert (live.fx_graph_cache, live.aot_autograd_cache) == (
        traced.fx_graph_cache,
        traced.aot_autograd_cache,
    )
    assert live.status == traced.status and live.restart_reasons == traced.restart_reasons, where


@pytest.mark.slow
@pytest.mark.parametrize(
    ("program", "args"),
    [("fixable.py", ()), ("two_towers.py", ("{oracle}", "0", "spawn"))],
    ids=["breaks-and-recompiles", "two-processes"],
)
def test_a_trace_agrees_with_the_live_recording_compile_by_compile(
    tmp_path: Path, program: str, args: tuple[str, ...]
) -> None:
    trace, live_json = tmp_path / "trace", tmp_path / "job.json"
    _traced(
        program, trace, *(a.format(oracle=tmp_path / "oracle") for a in args), cwd=tmp_path, live=live_json
    )
    live = compiletrace.load(live_json)
    traced = compiletrace.load(trace)
    assert isinstance(live, compiletrace.ProfileJob)
    compiling = live.compiling()
    if len(compiling) == 1:
        assert isinstance(traced, compiletrace.ProfileRun)
        traced_runs = {compiling[0].info.pid: traced}
    else:  # a log per process: a job, its processes told by pid
        assert isinstance(traced, compiletrace.ProfileJob)
        traced_runs = {p.info.pid: p.run for p in traced.processes if p.compiled}
    assert set(traced_runs) == {p.info.pid for p in compiling}
    for process in compiling:
        mine = {r.compile_id: r for r in process.run.graph_records}
        theirs = {r.compile_id: r for r in traced_runs[process.info.pid].graph_records}
        assert set(mine) == set(theirs) and mine
        for cid, record in mine.items():
            _agree(record, theirs[cid])
    if program == "fixable.py":
        (run,) = traced_runs.values()
        kinds = {f.kind for f in run.diagnose()}
        assert {"graph_break", "recompiles"} <= kinds  # the doctor reads the trace as a run


@pytest.mark.slow
def test_an_inductor_step_agrees_cold_and_warm_its_caches_phases_and_backward(tmp_path: Path) -> None:
    """One inductor program twice on one private compile cache: cold (every tier a miss,
    kernels compiled, a lazy backward) then warm (every tier a hit)."""
    cache = tmp_path / "inductor-cache"
    runs = []
    for name in ("cold", "warm"):
        env = {**os.environ, "TORCH_TRACE": str(tmp_path / name), "TORCHINDUCTOR_CACHE_DIR": str(cache)}
        live_json = tmp_path / f"{name}.json"
        command = [sys.executable, "-m", "compiletrace", "run", "--json", str(live_json), "--",
                   sys.executable, str(PROGRAMS / "inductor_backward.py")]  # fmt: skip
        proc = subprocess.run(
            command, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path, env=env
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        live = compiletrace.load(live_json)
        traced = compiletrace.load(tmp_path / name)
        assert isinstance(live, compiletrace.ProfileJob) and isinstance(traced, compiletrace.ProfileRun)
        (process,) = live.compiling()
        (mine,), (theirs,) = process.run.graph_records, traced.graph_records
        _agree(mine, theirs)
        assert theirs.backend == "inductor" == mine.backend
        # The process's one-time set-up (imports, torch's cache keys, its CPU probe) is in
        # this, its first compile, and the report shows it on its own line.
        assert 0 < mine.setup_ns <= mine.frame_ns
        assert "one-time set-up:" in compiletrace.reports.summary_table(process.run)
        # The lazy backward as live measured it; the same backend phases, adding up to the
        # backend time. (Each phase's seconds are two clocks' reading of nested regions: on a
        # loaded machine one read 250 ms live and 377 ms in the trace, so they are not compared.)
        assert abs(mine.backward_ns - theirs.backward_ns) <= TORCH_ROUNDING_NS
        assert {k for k, v in mine.phases if v} == {k for k, v in theirs.phases if v}
        assert sum(v for _, v in theirs.phases) == theirs.backend_ns
        # Every lookup live saw is in the trace (it also logs the backward graph's own).
        for tier in ("fx_graph", "aot_autograd"):
            assert {k.key for k in mine.cache_lookups if k.tier == tier} <= {
                k.key for k in theirs.cache_lookups if k.tier == tier
            }
        runs.append(theirs)
    cold, warm = runs
    assert (cold.fx_graph_cache.value, cold.aot_autograd_cache.value) == ("miss", "miss")
    assert (warm.fx_graph_cache.value, warm.aot_autograd_cache.value) == ("hit", "hit")
    assert cold.backward_ns > 0 and dict(cold.phases).get("kernel_compile", 0) > 0


@pytest.mark.slow
def test_the_built_in_model_profiled_agrees_with_its_trace(tmp_path: Path) -> None:
    """compiletrace profile's own backend records, against torch's trace of the same run."""
    env = {**os.environ, "TORCH_TRACE": str(tmp_path / "trace")}
    command = [
        sys.executable,
        "-m",
        "compiletrace",
        "profile",
        "--backend",
        "aot_eager",
        "--json",
        "run.json",
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    live = compiletrace.load(tmp_path / "run.json")
    traced = compiletrace.load(tmp_path / "trace")
    assert isinstance(live, compiletrace.ProfileRun) and isinstance(traced, compiletrace.ProfileRun)
    theirs = {r.compile_id: r for r in traced.graph_records}
    assert sorted(theirs) == sorted(r.compile_id for r in live.graph_records)
    for record in live.graph_records:
        _agree(record, theirs[record.compile_id])
    # The trace names code, not modules: the encoder and the language model by their forwards.
    assert {r.component for r in live.graph_records} == {"encoder", "language_model"}
    assert {r.component for r in traced.graph_records} == {"forward (models.py)"}


@pytest.mark.slow
def test_the_ranks_of_a_torchrun_job_are_one_job(tmp_path: Path) -> None:
    trace, live_json = tmp_path / "trace", tmp_path / "job.json"
    torchrun = Path(sys.executable).with_name("torchrun")
    env = {**os.environ, "TORCH_TRACE": str(trace)}
    proc = subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", "--json", str(live_json), "--",
         str(torchrun), "--standalone", "--nproc-per-node", "2", str(PROGRAMS / "ranks.py"),
         str(tmp_path / "oracle")],
        capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = compiletrace.load(trace)
    live = compiletrace.load(live_json)
    assert isinstance(job, compiletrace.ProfileJob) and isinstance(live, compiletrace.ProfileJob)
    ranks = job.ranks()
    assert sorted(ranks) == [0, 1] == sorted(live.ranks())
    for rank, process in ranks.items():
        mine = {r.compile_id: r for r in live.ranks()[rank].run.graph_records}
        for record in process.run.graph_records:
            _agree(mine[record.compile_id], record)  # live against the trace, rank by rank
        oracle = {
            row["compile_id"]: row["seconds"]
            for row in json.loads(Path(f"{tmp_path}/oracle.rank{rank}.json").read_text())
        }
        ours = {r.compile_id: r.frame_s for r in process.run.graph_records}
        assert set(ours) == set(oracle)
        assert all(
            abs(ours[k] - oracle[k]) <= 1e-6 for k in oracle
        )  # torch's own figures, to the microsecond
        assert {r.rank for r in process.run.graph_records} == {rank}
    assert cli.main(["report", str(trace)]) == 0


# -- one log, read every way it can come ------------------------------------------------


def _figures(run: object) -> list[tuple[str, int, int, str]]:
    assert isinstance(run, compiletrace.ProfileRun)
    return [(r.compile_id, r.frame_ns, r.graph_node_count, r.component) for r in run.graph_records]


def test_a_log_cut_short_keeps_every_whole_entry_and_says_so(fixable_trace: Path, tmp_path: Path) -> None:
    text = _log(fixable_trace).read_text()
    whole = compiletrace.load(fixable_trace)
    assert isinstance(whole, compiletrace.ProfileRun) and whole.meta.trace and not whole.meta.trace.truncated
    # Killed after the last frame's metrics row began: that compile is lost, the rest kept.
    last_row = text.rindex('{"compilation_metrics"')
    cut = tmp_path / "killed"
    cut.mkdir()
    (cut / "dedicated_log_torch_trace_x.log").write_text(text[: last_row + 200])
    run = compiletrace.load(cut)
    assert isinstance(run, compiletrace.ProfileRun)
    assert run.meta.trace and run.meta.trace.truncated is True and run.meta.trace.damaged_lines == 0
    assert _figures(run) == _figures(whole)[:-1]


def test_unknown_records_and_damaged_lines_are_skipped_and_counted(
    fixable_trace: Path, tmp_path: Path
) -> None:
    lines = _log(fixable_trace).read_text().splitlines(keepends=True)
    odd = 'V1201 10:00:00.000000 1 torch/_logging/x.py:1] {"a_record_from_a_newer_torch": {"x": 1}}\n'
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "dedicated_log_torch_trace_y.log").write_text(
        "".join([odd, *lines[:3], "not a trace line\n", *lines[3:]])
    )
    run = compiletrace.load(mixed)
    assert isinstance(run, compiletrace.ProfileRun)
    trace = run.meta.trace
    assert trace and trace.skipped["a_record_from_a_newer_torch"] == 1
    assert trace.damaged_lines == 1 and trace.truncated is False
    assert _figures(run) == _figures(compiletrace.load(fixable_trace))


@pytest.mark.parametrize("case", ["empty directory", "damaged gzip", "not a trace", "damaged zip"])
def test_bad_input_is_one_line_and_exit_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in"
    if case == "empty directory":
        path.mkdir()
        message = "holds no TORCH_TRACE logs"
    elif case == "damaged gzip":
        path.write_bytes(gzip.compress(b"V1201 10:00:00.000000 1 a.py:1] {}\n" * 50)[:40])
        message = "could not be read"
    elif case == "damaged zip":
        path.write_bytes(b"PK\x03\x04" + b"\x00" * 40)
        message = "damaged zip archive"
    else:
        path.write_text("V1201 is how a glog line starts, but this one is prose\n")
        message = "is not"
    with pytest.raises(RunFileError, match=message):
        compiletrace.load(path)
    assert cli.main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_every_command_takes_a_trace(
    fixable_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "report",
        str(fixable_trace),
        "--html",
        str(tmp_path / "r.html"),
        "--json",
        str(tmp_path / "r.json"),
    ]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "model TORCH_TRACE" in out and "forward (fixable.py)" in out
    assert "Findings" in (tmp_path / "r.html").read_text()
    # Read once, kept as compiletrace's own run file: the same records come back from it.
    assert _figures(compiletrace.load(tmp_path / "r.json")) == _figures(compiletrace.load(fixable_trace))
    assert cli.main(["doctor", str(fixable_trace), "--fail-on", "graph_break"]) == 1  # the gate fires
    assert "[graph_break]" in capsys.readouterr().out
    # A trace against a run file compiletrace wrote: the same run, so nothing regressed.
    saved = tmp_path / "run.json"
    run = compiletrace.load(fixable_trace)
    assert isinstance(run, compiletrace.ProfileRun)
    run.save(saved)
    assert cli.main(["compare", str(saved), str(fixable_trace)]) == 0
    out = capsys.readouterr().out
    # A trace names no model: the runs are not said to differ for that.
    assert "no regression" in out and "warning" not in out


def test_component_rules_name_a_traces_compiles_by_code_file_or_function(
    fixable_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    by_file = compiletrace.load(fixable_trace, components=["*/fixable.py=vision_tower"])
    assert isinstance(by_file, compiletrace.ProfileRun)
    assert {r.component for r in by_file.graph_records} == {"vision_tower"}
    # The resume function after the break is its forward's: a rule on "forward" takes both.
    by_function = compiletrace.load(fixable_trace, components=["forward=language_model", "*=other"])
    assert isinstance(by_function, compiletrace.ProfileRun)
    assert {r.component for r in by_function.graph_records} == {"language_model"}
    assert cli.main(["report", str(fixable_trace), "--component", "forward=encoder"]) == 0
    assert re.search(r"^encoder\s+\d+\s", capsys.readouterr().out, re.M)
    # A file compiletrace wrote was named when it was recorded: a rule there is a mistake.
    saved = tmp_path / "run.json"
    by_file.save(saved)
    assert cli.main(["doctor", str(saved), "--component", "forward=encoder"]) == 2
    assert "names the compiles of torch's trace" in capsys.readouterr().err


def _entries_of(text: str) -> list[str]:
    """A log's entries: a header line and the payload lines (tab first) that follow it."""
    entries: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("\t") and entries:
            entries[-1] += line
        else:
            entries.append(line)
    return entries


def test_processes_interleaved_in_one_log_are_told_apart_by_pid(fixable_trace: Path, tmp_path: Path) -> None:
    text = _log(fixable_trace).read_text()
    first = _entries_of(text)
    # The same program as a second process (another pid, and rank prefixes), its entries
    # interleaved with the first's, as logs of several processes appended to one file are.
    second = [re.sub(r"^(V\d{4} [\d:.]+ +)\d+ ", r"[rank1]:\g<1>424242 ", e) for e in _entries_of(text)]
    mixed = tmp_path / "mixed.log"
    mixed.write_text("".join(e for pair in zip(first, second, strict=True) for e in pair))
    job = compiletrace.load(mixed)
    assert isinstance(job, compiletrace.ProfileJob)
    single = _figures(compiletrace.load(fixable_trace))
    assert [p.info.pid for p in job.processes][1] == 424242
    assert [p.info.role for p in job.processes][1] == "rank 1"
    for process in job.processes:
        assert [(r.compile_id, r.frame_ns, r.graph_node_count) for r in process.run.graph_records] == [
            f[:3] for f in single
        ]


def test_the_doctor_finds_ranks_that_diverge_across_the_rank_logs(
    fixable_trace: Path, tmp_path: Path
) -> None:
    entries = _entries_of(_log(fixable_trace).read_text())
    rows = [i for i, e in enumerate(entries) if '{"compilation_metrics"' in e]
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / "dedicated_log_torch_trace_rank_0_a.log").write_text("".join(entries))
    # Rank 1 compiled one graph fewer (its last frame's row is not in its log).
    (job_dir / "dedicated_log_torch_trace_rank_1_b.log").write_text("".join(entries[: rows[-1]]))
    job = compiletrace.load(job_dir)
    assert isinstance(job, compiletrace.ProfileJob) and sorted(job.ranks()) == [0, 1]
    (divergence,) = [f for f in job.diagnose() if f.kind == "rank_divergence"]
    assert divergence.evidence["ranks"] == [1] and divergence.component == "forward (fixable.py)"
    assert "absent" in str(divergence.evidence["graphs"])


def test_crafted_entries_are_counted_never_a_crash_and_what_is_kept_reads_back(
    fixable_trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from compiletrace._data import torch_trace

    real_log = _log(fixable_trace).read_text()
    pid = re.match(r"^V\d{4} [\d:.]+ +(\d+) ", real_log)[1]  # type: ignore[index]  # one process's entries
    head = f"V1201 10:00:00.000000 {pid} torch/_dynamo/utils.py:1] "
    row = {"compile_id": "90/0", "co_name": "f", "co_filename": "x.py", "start_time_us": 1, "duration_us": 5}
    crafted = [
        head + "{}\n",  # an empty record
        head + "[" * 100_000 + "]" * 100_000 + "\n",  # nesting past Python's limit
        head + json.dumps({"compilation_metrics": {**row, "graph_node_count": "abc"}}) + "\n",
        head + json.dumps({"compilation_metrics": {**row, "compile_id": "91/0", "duration_us": -5}}) + "\n",
        head + json.dumps({"compilation_metrics": {**row, "compile_id": "0/\u00b2"}}) + "\n",
        head
        + json.dumps({"compilation_metrics": {**row, "compile_id": "92/0", "restart_reasons": 5}})
        + "\n",
        head + '{"chromium_event": {}, "has_payload": "x"}\n\t{"name": "backend_compile", "ts": NaN, '
        '"ph": "B", "args": {"compile_id": "0/0"}}\n',
        head + '{"str": ["' + "a" * 600_000 + '", 0]}\n',  # past the (lowered) line limit
    ]
    # Lowered from 16 MB, still above torch's real rows (its metrics row is some 100 kB).
    monkeypatch.setattr(torch_trace, "MAX_LINE_CHARS", 500_000)
    log = tmp_path / "crafted" / "dedicated_log_torch_trace_z.log"
    log.parent.mkdir()
    log.write_text("".join(crafted) + real_log)
    run = compiletrace.load(log.parent)
    assert isinstance(run, compiletrace.ProfileRun)
    trace = run.meta.trace
    assert trace and trace.damaged_lines >= 3 and trace.rejected_compiles >= 2
    ids = [r.compile_id for r in run.graph_records]
    assert not {"91/0", "92/0"} & set(ids)  # out of range, or of the wrong type: not kept
    real = [r.compile_id for r in compiletrace.load(fixable_trace).graph_records]
    assert real and [i for i in ids if i in real] == real  # the real compiles, all kept
    assert "0/\u00b2" in ids  # an odd compile id is only a name: kept, and no crash
    # Whatever was kept is a file compiletrace reads back.
    assert cli.main(["report", str(log.parent), "--json", str(tmp_path / "kept.json")]) == 0
    capsys.readouterr()
    assert [r.compile_id for r in compiletrace.load(tmp_path / "kept.json").graph_records] == ids


def test_a_zip_read_closes_what_it_opened(
    fixable_trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[zipfile.ZipFile] = []

    class Recorded(zipfile.ZipFile):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            opened.append(self)

    zipped = tmp_path / "trace.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr(
            "t/dedicated_log_torch_trace_a.log.gz", gzip.compress(_log(fixable_trace).read_bytes())
        )
    monkeypatch.setattr(zipfile, "ZipFile", Recorded)
    run = compiletrace.load(zipped)
    assert isinstance(run, compiletrace.ProfileRun) and run.graph_records
    assert opened and all(z.fp is None for z in opened)  # every archive opened was closed


# -- the encoder's seconds, against torch's own stacks ---------------------------------------


def _under_call(trace: Path, filename: str, caller: str, lines: set[int]) -> dict[str, float]:
    """torch's own seconds (``entire_frame_compile_time_s``) of each compile whose stack at
    its start (``dynamo_start``) passes through a module call made by ``caller`` in
    ``filename`` at one of ``lines``: the compiles torch's trace puts under that call."""
    names: dict[int, str] = {}
    under: set[str] = set()
    seconds: dict[str, float] = {}
    for line in _log(trace).read_text().splitlines():
        found = re.search(r"\] (\{.*)$", line)
        if found is None:
            continue
        head = json.loads(found[1])
        if "str" in head:
            names[head["str"][1]] = head["str"][0]
        cid = f"{head.get('frame_id')}/{head.get('frame_compile_id')}"
        if "dynamo_start" in head:
            stack = head["dynamo_start"]["stack"]
            # A frame of the caller at the call's line with a frame inside it: compiled
            # inside the call (the caller itself, stopped there, is the last frame).
            for here in stack[:-1]:
                if (
                    names.get(here["filename"], "").endswith(filename)
                    and here["name"] == caller
                    and here["line"] in lines
                ):
                    under.add(cid)
        if "compilation_metrics" in head:
            seconds[cid] = head["compilation_metrics"]["entire_frame_compile_time_s"]
    return {cid: seconds[cid] for cid in under}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "model", "call", "helpers"),
    [("qwen2-vl", "Qwen2VLModel", "self.visual(", 10), ("llava", "LlavaModel", "self.vision_tower(", 1)],
    ids=["qwen2-vl", "llava"],
)
def test_the_encoder_holds_what_torchs_own_stacks_put_under_the_vision_tower(
    tmp_path: Path, case: str, model: str, call: str, helpers: int
) -> None:
    """A vision-language model compiled whole, no edit (Qwen2-VL's tower breaks in library
    helpers and attention functions it calls). Every compile torch's own trace puts under
    the tower's module call is ``encoder``, and nothing else is (the seconds within 2%); no
    resume function is named apart from the function it continues."""
    import inspect

    import transformers

    trace, live_json = tmp_path / "trace", tmp_path / "job.json"
    _traced("hf_cases.py", trace, case, cwd=tmp_path, live=live_json)
    method = inspect.unwrap(getattr(transformers, model).get_image_features)
    source, first = inspect.getsourcelines(method)
    calls = {first + i for i, text in enumerate(source) if call in text}
    filename = Path(inspect.getsourcefile(method) or "").name
    tower = _under_call(trace, filename, "get_image_features", calls)
    live = compiletrace.load(live_json)
    assert isinstance(live, compiletrace.ProfileJob)
    (process,) = live.compiling()
    records = process.run.graph_records
    encoder = {r.compile_id: r.frame_ns / 1e9 for r in records if r.component == "encoder"}
    assert len(tower) >= helpers  # Qwen2-VL: the tower's helpers are frames of their own
    assert set(encoder) == set(tower)
    assert abs(sum(encoder.values()) - sum(tower.values())) <= 0.02 * sum(tower.values())
    # The rest of every function after a break is in that function's component and owner,
    # where the function's first part is a frame of its own.
    named = [(o, r) for o, r in zip(owners(records), records, strict=True)]
    first_parts: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for o, r in named:
        if not r.code_name.startswith(RESUME_PREFIX):
            first_parts.setdefault((r.code_filename, r.code_name), set()).add((o[0], o[2]))
    rests = [(o, r) for o, r in named if (r.code_filename, root_code_name(r.code_name)) in first_parts]
    assert [r for _, r in rests if r.code_name.startswith(RESUME_PREFIX)]
    apart = [
        r.code_name
        for o, r in rests
        if r.code_name.startswith(RESUME_PREFIX)
        and (o[0], o[2]) not in first_parts[(r.code_filename, root_code_name(r.code_name))]
    ]
    assert not apart
