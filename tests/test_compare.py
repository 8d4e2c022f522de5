"""compare: identical runs pass, planted regressions are named, bad input is refused."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch

import compiletrace
from compiletrace import Registry
from compiletrace._app.compare import compare_files, load_run_file


def _slow_backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
    time.sleep(0.5)  # a planted regression: a backend that got slower
    return gm.forward


def _fast_backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
    return gm.forward


def save_run(path: Path, backend: Any, shapes: tuple[int, ...]) -> Path:
    torch._dynamo.reset()
    reg = Registry()

    def encoder_fn(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2

    def lm_fn(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) + 1

    enc = compiletrace.compile(
        encoder_fn, is_encoder=True, backend=_fast_backend, dynamic=False, registry=reg
    )
    lm = compiletrace.compile(lm_fn, backend=backend, dynamic=False, registry=reg)
    for n in shapes:
        lm(enc(torch.ones(n)))
    data = {
        "kind": "compiletrace.run",
        "schema_version": 1,
        "registry": reg.to_dict(),
        "warmup": {"skipped": False, "duration_s": 0.0},
    }
    path.write_text(json.dumps(data))
    return path


def test_identical_runs_have_no_regression(tmp_path: Path) -> None:
    base = save_run(tmp_path / "base.json", _fast_backend, (2,))
    result = compare_files(base, base)
    assert result.regressions == ()
    assert "no regression" in result.table()
    assert {c.scope for c in result.changes} == {"component", "phase", "graph"}


def test_a_slower_backend_is_named(tmp_path: Path) -> None:
    # A first run pays the process's one-time costs (Dynamo's first trace of these ops can
    # take longer than the planted regression); base and new then differ by the backend only.
    save_run(tmp_path / "first.json", _fast_backend, (2,))
    base = save_run(tmp_path / "base.json", _fast_backend, (2,))
    new = save_run(tmp_path / "new.json", _slow_backend, (2,))
    # 0.5 s planted; 0.25 s minimum keeps a loaded machine's jitter out of the verdict.
    result = compare_files(base, new, threshold_pct=10, min_seconds=0.25)
    names = {(c.scope, c.name) for c in result.regressions}
    assert ("component", "language_model") in names, result.table()
    assert ("graph", "language_model:lm_fn#0") in names
    assert ("phase", "backend.other") in names  # a backend torch does not time: all "other"
    assert "REGRESSED" in result.table()


def test_an_extra_recompile_is_a_new_graph(tmp_path: Path) -> None:
    base = save_run(tmp_path / "base.json", _fast_backend, (2,))
    new = save_run(tmp_path / "new.json", _fast_backend, (2, 5))
    result = compare_files(base, new)
    new_graphs = [c for c in result.regressions if c.status == "NEW GRAPH"]
    assert [c.name.split(" ")[0] for c in new_graphs] == ["encoder:encoder_fn#1", "language_model:lm_fn#1"]
    assert all("size mismatch" in c.name for c in new_graphs)
    # And the other way round the graphs are gone, which is no regression.
    back = compare_files(new, base)
    assert {
        c.status for c in back.changes if c.scope == "graph" and c.base is not None and c.new is None
    } == {"gone"}


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
    profile = save_run(tmp_path / "p.json", _fast_backend, (2,))
    bench = tmp_path / "b.json"
    bench.write_text(json.dumps({"avg_cold_startup_time": 1.0}))
    with pytest.raises(ValueError, match="cannot compare a profile run"):
        compare_files(profile, bench)
    other = json.loads(profile.read_text())
    other["schema_version"] = 2
    (tmp_path / "v2.json").write_text(json.dumps(other))
    with pytest.raises(compiletrace.RunFileError, match="schema version 2 is not supported"):
        compare_files(profile, tmp_path / "v2.json")


def test_cli_exit_status_gates_ci(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from compiletrace import cli

    base = save_run(tmp_path / "base.json", _fast_backend, (2,))
    new = save_run(tmp_path / "new.json", _fast_backend, (2, 5))
    assert cli.main(["compare", str(base), str(base)]) == 0
    assert "no regression" in capsys.readouterr().out
    assert cli.main(["compare", str(base), str(new), "--threshold", "5"]) == 1
    out = capsys.readouterr().out
    assert "NEW GRAPH" in out and "lm_fn#1" in out
    assert cli.main(["compare", str(base), str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "Traceback" not in err
    (tmp_path / "foreign.json").write_text('{"hello": 1}')
    assert cli.main(["compare", str(base), str(tmp_path / "foreign.json")]) == 2
    assert "not a compiletrace run" in capsys.readouterr().err


def test_expensive_hits_need_a_hit_that_still_compiles() -> None:
    from compiletrace import CacheOutcome, GraphRecord
    from compiletrace._app.analysis import find_expensive_hits

    s = 1_000_000_000

    def rec(outcome: CacheOutcome, phases: dict[str, int], cid: str = "0/0") -> GraphRecord:
        backend = sum(phases.values())
        return GraphRecord(cid, "encoder", "inductor", "forward", 10, 0, backend + s, s, backend, s,
                           fx_graph_cache=outcome, aot_autograd_cache=outcome,
                           phases=tuple(sorted(phases.items())))  # fmt: skip

    cold = [rec(CacheOutcome.MISS, {"aot_autograd": 1 * s, "inductor": 2 * s, "kernel_compile": 10 * s})]
    portable = [rec(CacheOutcome.HIT, {"cache": s // 10, "kernel_compile": 9 * s, "other": s})]
    warm = [rec(CacheOutcome.HIT, {"cache": s // 10, "other": 3 * s})]  # slow, but compiles nothing
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
