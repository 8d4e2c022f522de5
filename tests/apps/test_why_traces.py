"""``compiletrace why`` on torch's own traces of the cache cases, committed
(tests/inputs/traces/cache, made by make_cache_traces.py from real compiles of
tests/cache_cases.py): the FX graph key's parts are all a trace keeps, and they are enough
to name each changed part; ``compare --why`` and ``doctor --baseline`` say the same. And
the case of another torch release: a run of this torch against BASE, recorded on 2.13.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

import compiletrace
from compiletrace import cli
from tests.cache_cases import causes, record

TRACES = Path(__file__).resolve().parent.parent / "inputs" / "traces" / "cache"
BASE = TRACES / "base.log.gz"
BASE_JOB = TRACES / "base.job.json"


def _why(base: Path, current: Path, out: Path) -> dict[str, Any]:
    assert cli.main(["why", str(base), str(current), "--json", str(out)]) == 0
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def test_the_traces_were_made_by_the_torch_the_base_run_names() -> None:
    base = compiletrace.load(BASE)
    assert base.meta.torch_version == "2.13.0+cpu"
    keys = compiletrace.load(BASE_JOB).processes[0].run.meta.cache_keys
    assert keys is not None and keys.facts.torch == "2.13.0+cpu"


def test_an_unchanged_rerun_finds_nothing(tmp_path: Path) -> None:
    report = _why(BASE, TRACES / "rerun.log.gz", tmp_path / "w.json")
    assert report["missed"] == 0 and report["hits"] == 1 and report["groups"] == []


@pytest.mark.parametrize(
    ("case", "changed"),
    [
        ("a_config", [("inductor_config[fallback_random]", "False", "True")]),
        ("f_ci", [("autograd_config[error_on_custom_op_aliasing]", "False", "True")]),
    ],
)
def test_the_part_that_changed_and_only_it(
    tmp_path: Path, case: str, changed: list[tuple[str, str, str]]
) -> None:
    current = TRACES / f"{case}.log.gz"
    report = _why(BASE, current, tmp_path / "w.json")
    assert causes(report) == changed
    (group,) = report["groups"]
    (record_,) = compiletrace.load(current).records()
    assert group["seconds"] == pytest.approx((record_.backend_ns + record_.backward_ns) / 1e9, abs=1e-9)


def test_dynamic_changes_the_inputs_only(tmp_path: Path) -> None:
    report = _why(BASE, TRACES / "c_dynamic.log.gz", tmp_path / "w.json")
    named = causes(report)
    assert named and all(name.startswith("input ") for name, _, _ in named)
    assert ("input 2", "float32[4,16] stride(16,1) cpu", named[0][2]) in named
    assert named[0][2].startswith("('s")  # the batch size, now a symbol


def test_a_group_whose_graphs_changed_each_their_own_way_reads_in_json_as_in_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # tests/programs/cache_graphs.py at batch 2, then 3 (make_cache_traces.py graphs): a
    # convolution's image and a Linear layer's rows changed, one group, each its own values.
    monkeypatch.setenv("COLUMNS", "400")
    report = _why(TRACES / "graphs_base.log.gz", TRACES / "graphs_batch3.log.gz", tmp_path / "w.json")
    text = capsys.readouterr().out
    group = report["groups"][0]
    own = [g["reason"]["summary"] for g in group["graphs"]]
    assert len(set(own)) == len(own) == 2 and group["alike"] is False
    images = "input 2: float32[2,3,8,8] stride(192,64,8,1) cpu -> float32[3,3,8,8] stride(192,64,8,1) cpu"
    rows = "input 2: float32[2,16] stride(16,1) cpu -> float32[3,16] stride(16,1) cpu"
    assert sorted(own) == sorted([images, rows])
    # The group's reason is the text's line, not its first graph's values for all of them.
    summary = group["reason"]["summary"]
    assert summary == "their inputs changed (dtype, shape or dynamic dimensions)"
    assert f"1. 2 graphs: {summary} (" in text
    assert group["reason"]["changes"] == []  # no change (with its values) that every graph holds
    assert group["reason"]["kind"] == "parts"
    assert group["reason"]["fix"].startswith("the graph's inputs changed")
    for graph in group["graphs"]:  # each graph keeps its own values, as the text prints under it
        assert f"      {graph['reason']['summary']}" in text.splitlines()
    alike = report["groups"][1]  # one graph: alike, its reason whole
    assert alike["alike"] is True and alike["reason"] == alike["graphs"][0]["reason"]


@pytest.mark.parametrize(("case", "kind"), [("b_user", "cache_dir"), ("h_evicted", "evicted")])
def test_equal_keys_name_where_the_miss_came_from(tmp_path: Path, case: str, kind: str) -> None:
    report = _why(BASE, TRACES / f"{case}.log.gz", tmp_path / "w.json")
    (group,) = report["groups"]
    assert group["reason"]["kind"] == kind
    if kind == "cache_dir":  # the trace knows the directories, not how they were chosen
        assert "torchinductor_ctbob" in group["reason"]["summary"]
        (moved,) = group["reason"]["changes"]
        assert moved["name"] == "cache directory" and moved["source"] == ""
    else:
        assert group["reason"]["changes"] == []


def test_a_job_against_a_trace(tmp_path: Path) -> None:
    # BASE recorded live (every key's parts), CURRENT as torch's trace: the FX graph key
    # is in both, and says it.
    report = _why(BASE_JOB, TRACES / "a_config.log.gz", tmp_path / "w.json")
    assert causes(report) == [("inductor_config[fallback_random]", "False", "True")]


def test_compare_why_says_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compare", str(BASE), str(TRACES / "f_ci.log.gz"), "--why"]) == 0
    out = capsys.readouterr().out
    table, _, why = out.partition("\nwhy: BASE ")
    assert "gate: total, component" in table
    assert "the graph: autograd_config[error_on_custom_op_aliasing]: False -> True" in why


def test_text_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "why.html"
    assert cli.main(["why", str(BASE), str(TRACES / "a_config.log.gz"), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "1 of 1 graph missed the compile cache in CURRENT" in out
    assert "the graph: inductor_config[fallback_random]: False -> True" in out
    assert "fix: pin torch._inductor.config.fallback_random" in out
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "inductor_config[fallback_random]" in html
    assert 'data-table="why"' in html and "<script>" in html


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["why", str(BASE), str(tmp_path / "missing.json")]) == 2
    assert "missing.json does not exist" in capsys.readouterr().err
    why_json = tmp_path / "w.json"
    _why(BASE, TRACES / "rerun.log.gz", why_json)
    assert cli.main(["why", str(BASE), str(why_json)]) == 2
    assert "w.json is why a cache did not apply" in capsys.readouterr().err


@pytest.mark.inductor
@pytest.mark.slow
def test_another_torch_release_names_torch_version(tmp_path: Path) -> None:
    """(d): CURRENT made by this torch, BASE by 2.13 (committed): the key's torch part
    changed, and the config the release brought changed with it."""
    if torch.__version__.split("+")[0] == "2.13.0":
        pytest.skip("needs another torch release than BASE's 2.13.0: '.ci/run releases' runs it on each")
    current = record(tmp_path, "current", tmp_path / "cache")
    for base, now in ((BASE_JOB, current.job), (BASE, current.trace)):
        report = _why(base, now, tmp_path / "w.json")
        (group,) = report["groups"]
        causes = [c for c in group["reason"]["changes"] if not c["consequence"]]
        assert [c["name"] for c in causes] == ["torch_version"], causes
        assert causes[0]["source"] == f"torch 2.13.0+cpu -> {torch.__version__}"
        assert group["reason"]["fix"].startswith("another torch build: fill the cache once per torch version")
        assert {c["name"] for c in report["process_changes"]} >= {"torch"}
    shutil.rmtree(tmp_path / "cache")


@pytest.mark.parametrize("width", [80, 400])
def test_the_text_fits_columns_and_never_cuts_a_fix(
    width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    assert cli.main(["why", str(BASE), str(TRACES / "c_dynamic.log.gz")]) == 0
    lines = capsys.readouterr().out.splitlines()
    # Wider only where one word cannot be cut: a path, on its own line.
    assert all(len(line) <= width or " " not in line.strip() for line in lines), lines
    (at,) = [i for i, line in enumerate(lines) if line.startswith("   fix: ")]
    fix = " ".join(line.strip() for line in lines[at : at + 4]).split(" the processes")[0]
    assert "…" not in fix and "keep dtypes fixed" in fix
    if width == 400:  # room for the whole fix on its line
        assert lines[at].endswith("keep dtypes fixed")


def test_a_trace_keeps_no_environment_so_none_is_told_unset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # BASE's job keeps its environment (HOME among it); torch's trace of the re-run keeps none.
    keys = compiletrace.load(BASE_JOB).processes[0].run.meta.cache_keys
    assert keys is not None and "HOME" in keys.facts.env
    report = _why(BASE_JOB, TRACES / "rerun.log.gz", tmp_path / "w.json")
    assert [c["name"] for c in report["process_changes"] if c["name"].startswith("env ")] == []
    assert "env HOME" not in capsys.readouterr().out
    # Two jobs that both keep it still say what moved.
    job = json.loads(BASE_JOB.read_text())
    job["processes"][0]["run"]["meta"]["cache_keys"]["facts"]["env"]["HOME"] = "/elsewhere"
    moved = tmp_path / "moved.job.json"
    moved.write_text(json.dumps(job))
    report = _why(BASE_JOB, moved, tmp_path / "m.json")
    assert [(c["name"], c["current"]) for c in report["process_changes"]] == [("env HOME", "/elsewhere")]


def test_doctor_baseline_on_traces_prints_no_empty_changes_line(capsys: pytest.CaptureFixture[str]) -> None:
    # Equal keys (the FX entries evicted): the reason is elsewhere, and no part changed.
    current = str(TRACES / "h_evicted.log.gz")
    cli.main(["doctor", current, "--baseline", str(BASE)])
    out = capsys.readouterr().out
    assert "the FX graph entry it names was gone" in " ".join(out.split())
    assert all(line.strip() != "changes:" for line in out.splitlines()), out
    # A part that changed is still listed.
    cli.main(["doctor", str(TRACES / "f_ci.log.gz"), "--baseline", str(BASE)])
    assert "changes: autograd_config[error_on_custom_op_aliasing]: False -> True" in capsys.readouterr().out
