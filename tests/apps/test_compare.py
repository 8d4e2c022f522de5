"""compare: identical runs pass, planted regressions are named, bad input is refused.

The runs compared are built from records with exact figures (binary fractions of a second,
so every delta is exact), written as compiletrace writes them; one real profiled run checks
that what ``profile`` saves compares too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import compiletrace
from compiletrace import CacheOutcome, GraphRecord
from compiletrace._app.compare import compare_files, load_run_file
from compiletrace._data.kinds import FileKind
from tests.conftest import S, make_record, save_run

REASON = "tensor 'x' size mismatch at index 0. expected 2, actual 5"
PLANTED_NS = S // 2  # the regression planted in the language model's backend: 0.5 s


def first_call(lm_backend_ns: int = S // 4) -> list[GraphRecord]:
    """The graphs of a first call: an encoder function, then a language-model function."""
    return [
        make_record("0/0", "encoder", code_name="encoder_fn", frame_ns=S // 8, backend_ns=S // 16),
        make_record(
            "1/0", "language_model", code_name="lm_fn", start_unix_ns=S // 8,
            frame_ns=S // 8 + lm_backend_ns, backend_ns=lm_backend_ns,
        ),
    ]  # fmt: skip


def second_shape() -> list[GraphRecord]:
    """The recompiles a call with a new static shape adds."""
    return [
        make_record(f"{frame}/1", component, code_name=code, start_unix_ns=S, frame_ns=S // 8,
                    is_recompile=True, recompile_reason=REASON)
        for frame, component, code in (("0", "encoder", "encoder_fn"), ("1", "language_model", "lm_fn"))
    ]  # fmt: skip


def test_identical_runs_have_no_regression(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    compiletrace.profile(backend="eager").save(base)  # a real run, as ``profile --json`` saves it
    result = compare_files(base, base)
    assert result.regressions == ()
    assert all(c.delta == 0 and c.status == "ok" for c in result.changes)
    assert "no regression" in result.table()
    assert {c.scope for c in result.changes} == {"total", "component", "phase", "graph"}


def test_a_slower_backend_is_named(tmp_path: Path) -> None:
    base = save_run(tmp_path / "base.json", first_call())
    new = save_run(tmp_path / "new.json", first_call(S // 4 + PLANTED_NS))
    old = {"threshold_pct": 10.0, "min_seconds": 0.05}  # the thresholds this test names
    result = compare_files(base, new, **old)  # gates: total, component
    deltas = {(c.scope, c.name): c.delta for c in result.changes if c.delta}
    # The planted 0.5 s, exactly, in the total, the language model, its graph and its backend;
    # nothing else moved.
    assert deltas == {
        ("total", "compile time"): 0.5,
        ("component", "language_model"): 0.5,
        ("phase", "backend.other"): 0.5,  # a backend torch does not time: all "other"
        ("graph", "language_model:lm_fn#0 [1/0]"): 0.5,
    }
    assert {(c.scope, c.name) for c in result.regressions} == {
        ("total", "compile time"),
        ("component", "language_model"),
    }
    assert {(c.scope, c.name) for c in result.ungated_slower} == set(deltas) - set(
        (c.scope, c.name) for c in result.regressions
    )
    assert "REGRESSED" in result.table()
    verdict = "FAILED: total compile time 0.500 -> 1.000 s (+0.500 s, +100.0%), beyond 0.050 s (10% and"
    assert verdict + " 0.05 s); component language_model" in " ".join(result.table().split())
    every = ("total", "component", "phase", "graph")
    assert {(c.scope, c.name) for c in compare_files(base, new, gates=every, **old).regressions} == set(
        deltas
    )
    # A figure must grow by more than both thresholds. The largest growth is the backend's:
    # 0.5 s on 0.3125 s, 160%.
    slower = compare_files(base, new, threshold_pct=159, gates=every).regressions
    assert [c.name for c in slower] == ["backend.other"]
    assert compare_files(base, new, threshold_pct=160, gates=every).regressions == ()
    assert compare_files(base, new, min_seconds=0.5).regressions == ()


def test_an_extra_recompile_is_a_new_graph(tmp_path: Path) -> None:
    base = save_run(tmp_path / "base.json", first_call())
    new = save_run(tmp_path / "new.json", [*first_call(), *second_shape()])
    result = compare_files(base, new, gates="graph")
    new_graphs = [c for c in result.regressions if c.status == "NEW GRAPH"]
    assert [c.name for c in new_graphs] == [
        "encoder:encoder_fn#1 [0/1] (recompile)",
        "language_model:lm_fn#1 [1/1] (recompile)",
    ]
    assert [(c.base, c.new) for c in new_graphs] == [(None, 0.125), (None, 0.125)]
    # And the other way round the graphs are gone, which is no regression.
    back = compare_files(new, base)
    gone = [c for c in back.changes if c.scope == "graph" and c.base is not None and c.new is None]
    assert [c.status for c in gone] == ["gone", "gone"]
    assert not any(c.scope == "graph" for c in back.regressions)


def test_bench_runs_compare_their_averages(tmp_path: Path) -> None:
    base = {"avg_cold_startup_time": 10.0, "avg_warm_startup_time": 2.0, "avg_cold_compilation_time": 8.0}
    new = {**base, "avg_warm_startup_time": 3.0}
    (tmp_path / "a.json").write_text(json.dumps(base))
    (tmp_path / "b.json").write_text(json.dumps(new))
    result = compare_files(tmp_path / "a.json", tmp_path / "b.json")
    assert [c.name for c in result.regressions] == ["avg_warm_startup_time"]


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("not json", "is not JSON"),
        ('{"hello": 1}', "is not a compiletrace run"),
        ("[1, 2]", "is not a compiletrace run"),
        (
            '{"kind": "compiletrace.run", "schema_version": 1, '
            '"registry": {"schema_version": 1, "records": [5]}}',
            r"field 'registry.records\[0\]' must be a JSON object, got 5",
        ),
    ],
)
def test_bad_files_are_refused(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=match):
        load_run_file(path)


def test_missing_file_and_mismatched_runs(tmp_path: Path) -> None:
    with pytest.raises(compiletrace.RunFileError, match=r"nope\.json does not exist"):
        load_run_file(tmp_path / "nope.json")
    profile = save_run(tmp_path / "p.json", first_call())
    bench = tmp_path / "b.json"
    bench.write_text(json.dumps({"avg_cold_startup_time": 1.0}))
    with pytest.raises(ValueError, match="cannot compare a profile run"):
        compare_files(profile, bench)
    other = json.loads(profile.read_text())
    newer = FileKind.RUN.schema_version + 1  # a version this compiletrace does not know
    other["schema_version"] = newer
    (tmp_path / "newer.json").write_text(json.dumps(other))
    with pytest.raises(compiletrace.RunFileError, match=f"schema version {newer} is not supported"):
        compare_files(profile, tmp_path / "newer.json")


def test_cli_exit_status_gates_ci(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from compiletrace import cli

    base = save_run(tmp_path / "base.json", first_call())
    new = save_run(tmp_path / "new.json", [*first_call(), *second_shape()])
    assert cli.main(["compare", str(base), str(base)]) == 0
    assert "no regression" in capsys.readouterr().out
    assert cli.main(["compare", str(base), str(new), "--threshold", "5"]) == 1
    out = capsys.readouterr().out
    assert "new graph (not gated)" in out and "lm_fn#1" in out  # the components' growth fails it
    assert cli.main(["compare", str(base), str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err
    (tmp_path / "foreign.json").write_text('{"hello": 1}')
    assert cli.main(["compare", str(base), str(tmp_path / "foreign.json")]) == 2
    assert "not a compiletrace run" in capsys.readouterr().err


def test_expensive_hits_need_a_hit_that_still_compiles() -> None:
    from compiletrace._data.cache_hits import find_expensive_hits

    def rec(outcome: CacheOutcome, phases: dict[str, int]) -> GraphRecord:
        backend_ns = sum(phases.values())
        return make_record(
            backend="inductor", graph_node_count=10, frame_ns=backend_ns + S, phases=phases,
            fx_graph_cache=outcome, aot_autograd_cache=outcome,
        )  # fmt: skip

    cold = [rec(CacheOutcome.MISS, {"aot_autograd": 1 * S, "inductor": 2 * S, "kernel_compile": 10 * S})]
    portable = [rec(CacheOutcome.HIT, {"cache": S // 10, "kernel_compile": 9 * S, "other": S})]
    warm = [rec(CacheOutcome.HIT, {"cache": S // 10, "other": 3 * S})]  # slow, but compiles nothing
    (hit,) = find_expensive_hits(portable, cold=cold)
    assert hit.dominant_phase == "kernel_compile"
    assert hit.share_of_cold == pytest.approx(9 / 13)
    assert hit.explanation() == (
        "FX graph cache hit, but 9.0 s compiling kernels "
        "(graph 0/0 forward, encoder; 69% of its cold compile)"
    )
    assert find_expensive_hits(warm, cold=cold) == []
    assert find_expensive_hits(cold) == []  # misses are no hits
    (alone,) = find_expensive_hits(portable)  # no cold run: the absolute threshold decides
    assert alone.share_of_cold is None
    assert find_expensive_hits(portable, min_seconds=10.0) == []


def test_runs_of_different_models_backends_or_torch_are_named_before_the_table(tmp_path: Path) -> None:
    meta = {"model": "pkg.a:build", "backend": "inductor", "torch_version": "2.13.0+cpu"}
    base = save_run(tmp_path / "base.json", first_call(), meta=meta)
    other = {**meta, "model": "pkg.b:build", "torch_version": "2.15.0"}
    new = save_run(tmp_path / "new.json", first_call(), meta=other)
    result = compare_files(base, new)
    assert result.differences == ("model: pkg.a:build vs pkg.b:build", "torch: 2.13.0+cpu vs 2.15.0")
    first = result.table().splitlines()[0]
    assert first.startswith("warning: the runs differ (model: pkg.a:build vs pkg.b:build; torch: ")
    # The same model, backend and torch: no warning.
    same = compare_files(base, base)
    assert same.differences == () and not same.table().startswith("warning")


def test_a_multi_line_recompile_reason_stays_out_of_the_graph_names(tmp_path: Path) -> None:
    stack = '  File "m.py", line 3\n' * 40
    reason = f"0/0: tensor 'x' size mismatch at index 0\nUser stack trace:\n{stack}"
    recompile = make_record("0/1", "encoder", code_name="encoder_fn", start_unix_ns=S, frame_ns=S // 8,
                            is_recompile=True, recompile_reason=reason)  # fmt: skip
    base = save_run(tmp_path / "base.json", first_call())
    new = save_run(tmp_path / "new.json", [*first_call(), recompile])
    table = compare_files(base, new).table()
    assert "encoder:encoder_fn#1 [0/1]" in table and "User stack trace" not in table
    assert max(len(line) for line in table.splitlines()) <= 100  # no terminal: 100 columns


def save_job(path: Path, processes: dict[str, list[GraphRecord]]) -> Path:
    """A job file as ``run --json`` writes one: each named process with its run."""
    from compiletrace._data.job import Job, JobProcess
    from compiletrace._data.run_meta import ProcessInfo

    made = []
    for pid, (role, records) in enumerate(processes.items(), start=100):
        run = compiletrace.load(save_run(path.with_suffix(f".{pid}.json"), records))
        made.append(JobProcess(ProcessInfo(pid, 1, role, ("python", "train.py")), run))
    Job(("python", "train.py"), 0, tuple(made)).save(path)
    return path


def test_jobs_compare_in_total_and_process_by_process(tmp_path: Path) -> None:
    base = save_job(tmp_path / "base.json", {"rank 0": first_call(), "rank 1": first_call()})
    new = save_job(tmp_path / "new.json", {"rank 0": first_call(), "rank 1": first_call(S // 4 + PLANTED_NS)})
    result = compare_files(base, new, threshold_pct=10, min_seconds=0.05)
    deltas = {(c.scope, c.name): c.delta for c in result.changes if c.delta}
    # The total adds up both processes; rank 1's planted 0.5 s is named as rank 1's.
    assert deltas == {
        ("total", "compile time"): 0.5,
        ("total", "rank 1: compile time"): 0.5,
        ("component", "rank 1: language_model"): 0.5,
        ("phase", "rank 1: backend.other"): 0.5,
        ("graph", "rank 1: language_model:lm_fn#0 [1/0]"): 0.5,
    }
    total = next(c for c in result.changes if c.name == "compile time")
    assert total.base == 2 * (0.125 + 0.125 + 0.25)
    assert {c.name for c in result.regressions} == {
        "compile time", "rank 1: compile time", "rank 1: language_model"
    }  # fmt: skip
    assert "rank 0: encoder" in result.table()
    # A single run stands for a job's one process: a profile run against a job of one.
    single = save_run(tmp_path / "single.json", first_call())
    one = save_job(tmp_path / "one.json", {"main": first_call(S // 4 + PLANTED_NS)})
    against = compare_files(single, one, threshold_pct=10, min_seconds=0.05)
    assert {c.name for c in against.regressions} == {"compile time", "language_model"}
    # A process only one job has is named, in the total's scope.
    three = {f"rank {n}": first_call() for n in range(3)}
    more = save_job(tmp_path / "more.json", three)
    rows = {c.name: c.status for c in compare_files(base, more).changes if c.scope == "total"}
    assert rows["rank 2: compile time"] == "new"


def test_torch_traces_of_several_processes_compare_rank_by_rank() -> None:
    traces = Path(__file__).resolve().parent.parent / "inputs" / "traces" / "ranks"
    result = compare_files(traces, traces)
    names = [c.name for c in result.changes if c.scope == "total"]
    assert names == ["compile time", "rank 0: compile time", "rank 1: compile time"]
    assert result.regressions == () and all(c.delta == 0 for c in result.changes)


def test_a_job_file_compares_with_the_trace_it_was_read_from(tmp_path: Path) -> None:
    from compiletrace._data.files import read
    from compiletrace._data.job import Job

    traces = Path(__file__).resolve().parent.parent / "inputs" / "traces" / "ranks"
    job = read(traces)
    assert isinstance(job, Job)
    job.save(tmp_path / "job.json")
    for base, new in ((tmp_path / "job.json", traces), (traces, tmp_path / "job.json")):
        result = compare_files(base, new)
        assert len(result.changes) > 3 and all(c.delta == 0 for c in result.changes)


def test_a_base_of_no_seconds_has_no_percentage(tmp_path: Path) -> None:
    base = save_run(tmp_path / "base.json", [make_record("0/0", "encoder", frame_ns=S, backward_ns=100)])
    new = save_run(tmp_path / "new.json", [make_record("0/0", "encoder", frame_ns=S, backward_ns=S + S // 4)])
    result = compare_files(base, new)
    lines = [line.split() for line in result.table().splitlines()]
    (row,) = [cells for cells in lines if cells[:2] == ["phase", "backward"]]
    assert row[2:6] == ["0.000", "1.250", "+1.250", "-"]  # not +1250000000.0%


@pytest.mark.slow
def test_two_runs_of_a_command_gate_in_ci(tmp_path: Path) -> None:
    """The README's workflow: ``run --json`` twice, then ``compare`` the two jobs."""
    import os
    import re
    import subprocess
    import sys

    program = Path(__file__).resolve().parent.parent / "programs" / "two_towers.py"
    jobs = []
    for name in ("base", "new"):
        job = tmp_path / f"{name}.json"
        command = [sys.executable, "-m", "compiletrace", "run", "--json", str(job), "--"]
        command += [sys.executable, str(program), str(tmp_path / name), "0", "spawn"]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        jobs.append(str(job))
    # A generous gate: two runs of one program differ only by the machine's noise.
    proc = subprocess.run(
        [sys.executable, "-m", "compiletrace", "compare", *jobs, "--min-seconds", "30"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = [re.split(r"\s{2,}", line)[1] for line in proc.stdout.splitlines() if line.startswith("total ")]
    assert names == ["compile time", "main: compile time", "SpawnProcess-1: compile time"]
    assert "main: encoder" in proc.stdout and "SpawnProcess-1: backend.other" in proc.stdout
