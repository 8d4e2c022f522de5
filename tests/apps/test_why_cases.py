"""``compiletrace why`` on real compiles: one BASE run fills a private cache, each CURRENT
runs a real program on a copy of it with one change a second machine could bring (the cases
of tests/cache_cases.py), and ``why`` must name the part that changed, and only it, with
both values and the seconds; where the keys are equal, what else kept the entry from
applying; on an unchanged re-run, nothing. Each run is recorded by ``compiletrace run``
with TORCH_TRACE on, and both are read: the job (every key's parts) and torch's trace (the
FX graph key's parts).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

import compiletrace
from compiletrace import cli
from tests.cache_cases import CASES, Recorded, causes, record, record_case

pytestmark = [pytest.mark.inductor, pytest.mark.slow]

SIDES = ("job", "trace")


@pytest.fixture(scope="module")
def where(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("why_cases")


@pytest.fixture(scope="module")
def base(where: Path) -> Recorded:
    """BASE: the run that filled the cache, once for the module."""
    return record(where, "base", where / "base.cache")


@pytest.fixture(scope="module")
def base_threads(base: Recorded) -> int:
    keys = compiletrace.load(base.job).processes[0].run.meta.cache_keys
    assert keys is not None
    return keys.facts.num_threads


def _why(base: Recorded, current: Recorded, side: str, out: Path) -> dict[str, Any]:
    """``compiletrace why`` of the two runs' jobs or traces, as its --json file."""
    paths = (base.job, current.job) if side == "job" else (base.trace, current.trace)
    assert cli.main(["why", str(paths[0]), str(paths[1]), "--json", str(out)]) == 0
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def _only_change(report: dict[str, Any]) -> dict[str, Any]:
    (group,) = report["groups"]
    (change,) = [c for c in group["reason"]["changes"] if not c["consequence"]]
    return change  # type: ignore[no-any-return]


def _record_of(current: Recorded, side: str) -> Any:
    loaded = compiletrace.load(current.job if side == "job" else current.trace)
    runs = [p.run for p in loaded.processes] if isinstance(loaded, compiletrace.ProfileJob) else [loaded]
    (record,) = [r for run in runs for r in run.records()]
    return record


def _record(where: Path, base: Recorded, name: str) -> Recorded:
    return record_case(where, base, name, CASES[name])


def _check_seconds(report: dict[str, Any], current: Recorded, side: str) -> None:
    # BASE missed too (it filled the cache): the miss cost CURRENT's whole compile of the graph.
    r = _record_of(current, side)
    (group,) = report["groups"]
    assert group["seconds"] == pytest.approx((r.backend_ns + r.backward_ns) / 1e9, abs=1e-9)
    assert group["seconds"] > 0 and report["missed"] == 1


@pytest.mark.parametrize("name", ["rerun", "g_copied", "b_home"])
def test_nothing_missed_nothing_is_named(where: Path, base: Recorded, name: str) -> None:
    current = _record(where, base, name)
    for side in SIDES:
        report = _why(base, current, side, where / f"{name}.{side}.why.json")
        assert report["missed"] == 0 and report["groups"] == [] and report["hits"] == report["compiled"] == 1
        assert report["headline"].startswith("no graph missed")
    facts = {c["name"]: c for c in _why(base, current, "job", where / f"{name}.why.json")["process_changes"]}
    # What differs between the runs is shown, and named as no cause: no key reads it.
    assert "cache_dir" in facts
    if name == "b_home":
        assert facts["env HOME"]["current"] == "/nonexistent/ct-other-home"


def test_a_config_flipped(where: Path, base: Recorded) -> None:
    current = _record(where, base, "a_config")
    for side in SIDES:
        report = _why(base, current, side, where / f"a.{side}.why.json")
        assert causes(report) == [("inductor_config[fallback_random]", "False", "True")]
        _check_seconds(report, current, side)
        fix = report["groups"][0]["reason"]["fix"]
        assert fix.startswith("pin torch._inductor.config.fallback_random")
    # Both keys changed; the config is a part of the FX graph key (the AOTAutograd key's
    # config parts are the same, and are not recorded twice).
    report = _why(base, current, "job", where / "a.why.json")
    assert report["groups"][0]["graphs"][0]["tiers"] == [
        {"tier": "AOTAutograd", "base": "miss", "current": "miss"},
        {"tier": "FX graph", "base": "miss", "current": "miss"},
    ]
    assert _only_change(report)["tiers"] == ["FX graph"]
    # The flip did not change this graph's code: the miss rebuilt what BASE built.
    report = _why(base, current, "job", where / "a.why.json")
    (rebuilt,) = report["other_key_same_build"]
    assert rebuilt["code_base"] == rebuilt["code_current"] != ""
    # The doctor, on CURRENT alone: its cache directory holds BASE's entry of the same graph
    # under another key, and the entry's stored parts name the part that differs.
    findings = where / "a.doctor.json"
    assert cli.main(["doctor", str(current.job), "--json", str(findings)]) == 0
    (finding,) = [f for f in json.loads(findings.read_text())["findings"] if f["kind"] == "cache_miss"]
    assert finding["title"].endswith(
        "the cache held the same graph under another key: inductor_config[fallback_random]: False -> True"
    )
    assert finding["fix"].startswith("pin torch._inductor.config.fallback_random")
    (stored,) = finding["evidence"]["stored"]
    assert stored["changes"] == ["inductor_config[fallback_random]: False -> True"]
    # A crafted entry beside them (a shared cache directory's): read no further than what it
    # may build, said unreadable, and the real entry still explains the miss.
    bomb = current.cache / "fxgraph" / "zz" / "fzzcrafted" / "entry"
    bomb.parent.mkdir(parents=True)
    bomb.write_bytes(b"\x80\x04" + b"\x8f" * (4 << 20))  # 4 MiB of EMPTY_SET: about 1 GB if built
    assert cli.main(["doctor", str(current.job), "--json", str(findings)]) == 0
    (finding,) = [f for f in json.loads(findings.read_text())["findings"] if f["kind"] == "cache_miss"]
    assert finding["evidence"]["stored"][0]["changes"] == ["inductor_config[fallback_random]: False -> True"]
    (unreadable,) = finding["evidence"]["unreadable"]
    assert unreadable["path"] == str(bomb) and "would build more than 1,000,000 objects" in unreadable["why"]
    assert "1 unreadable entry in the cache directory, passed over" in finding["fix"]
    bomb.unlink()
    # ... and with BASE as its baseline, as 'why' says it.
    assert cli.main(["doctor", str(current.job), "--baseline", str(base.job), "--json", str(findings)]) == 0
    (finding,) = [f for f in json.loads(findings.read_text())["findings"] if f["kind"] == "cache_miss"]
    assert finding["evidence"]["changes"] == ["inductor_config[fallback_random]: False -> True"]


def test_b_another_user_looks_in_another_default_directory(where: Path, base: Recorded) -> None:
    current = _record(where, base, "b_user")
    for side in SIDES:
        report = _why(base, current, side, where / f"b.{side}.why.json")
        (group,) = report["groups"]
        reason = group["reason"]
        assert reason["kind"] == "cache_dir"
        assert str(base.cache) in reason["summary"] and "torchinductor_ctbob" in reason["summary"]
        moved = reason["changes"][0]
        assert (moved["name"], moved["base"]) == ("cache directory", str(base.cache))
        assert moved["current"].endswith("b_user.tmp/torchinductor_ctbob")
        _check_seconds(report, current, side)
    reason = _why(base, current, "job", where / "b.why.json")["groups"][0]["reason"]
    # The job knows how each directory was chosen, and the variables that moved it.
    moved, *env = reason["changes"]
    assert moved["source"] == "BASE's TORCHINDUCTOR_CACHE_DIR, CURRENT's torch's default (temp dir + user)"
    assert {(c["name"], c["current"]) for c in env} >= {("env USER", "'ctbob'"), ("env LOGNAME", "'ctbob'")}
    assert reason["fix"].startswith(f"set TORCHINDUCTOR_CACHE_DIR={base.cache}")


def test_c_dynamic_shifts_the_inputs(where: Path, base: Recorded) -> None:
    current = _record(where, base, "c_dynamic")
    for side in SIDES:
        report = _why(base, current, side, where / f"c.{side}.why.json")
        changes = report["groups"][0]["reason"]["changes"]
        causes = [c for c in changes if not c["consequence"]]
        # dynamic=True adds the batch size as an input: the inputs changed, nothing else.
        assert causes and all(c["kind"] == "inputs" for c in causes)
        assert any(c["current"] and c["current"].startswith("('s") for c in causes), causes
        assert any(c["base"] == "float32[4,16] stride(16,1) cpu" for c in causes), causes
        # ... and the parts that change with the inputs (the graph's code) are told apart.
        assert "gm" in {c["name"] for c in changes if c["consequence"]}
        _check_seconds(report, current, side)


def test_c_mode_sets_its_options(where: Path, base: Recorded) -> None:
    current = _record(where, base, "c_mode")
    expected = {f"inductor_config[{k}]" for k in torch._inductor.list_mode_options("reduce-overhead")}
    for side in SIDES:
        report = _why(base, current, side, where / f"cm.{side}.why.json")
        named = {name: (b, c) for name, b, c in causes(report)}
        assert set(named) == expected | {"fx_kwargs[cudagraphs]"}
        assert named["inductor_config[triton.cudagraphs]"] == ("False", "True")
        _check_seconds(report, current, side)


def test_e_dtype(where: Path, base: Recorded) -> None:
    current = _record(where, base, "e_dtype")
    for side in SIDES:
        report = _why(base, current, side, where / f"ed.{side}.why.json")
        named = causes(report)
        assert {c[0] for c in named} == {"input 0", "input 1", "input 2"}  # weight, bias, x
        assert all(b.startswith("float32[") and c == b.replace("float32", "float64") for _, b, c in named)
        _check_seconds(report, current, side)


def test_e_shape(where: Path, base: Recorded) -> None:
    current = _record(where, base, "e_shape")
    for side in SIDES:
        report = _why(base, current, side, where / f"es.{side}.why.json")
        assert causes(report) == [
            ("input 2", "float32[4,16] stride(16,1) cpu", "float32[8,16] stride(16,1) cpu")
        ]
        _check_seconds(report, current, side)


def test_f_environment_variable_in_the_key(where: Path, base: Recorded) -> None:
    current = _record(where, base, "f_env")
    for side in SIDES:
        report = _why(base, current, side, where / f"fe.{side}.why.json")
        assert causes(report) == [("inductor_config[size_asserts]", "True", "False")]
        _check_seconds(report, current, side)
    change = _only_change(_why(base, current, "job", where / "fe.why.json"))
    assert change["source"] == "set by TORCHINDUCTOR_SIZE_ASSERTS: unset -> '0'"


def test_f_thread_count(where: Path, base: Recorded, base_threads: int) -> None:
    if base_threads < 2:
        pytest.skip("one CPU thread: torch caps the count at the cores, so only fewer could change it")
    current = _record(where, base, "f_threads")
    for side in SIDES:
        report = _why(base, current, side, where / f"ft.{side}.why.json")
        assert causes(report) == [("cpp_runtime_thread_count", str(base_threads), "1")]
        assert "OMP_NUM_THREADS" in report["groups"][0]["reason"]["fix"]
        _check_seconds(report, current, side)
    change = _only_change(_why(base, current, "job", where / "ft.why.json"))
    assert change["source"] == "set by OMP_NUM_THREADS: unset -> '1'"


def test_f_ci_changes_the_aot_key_only(where: Path, base: Recorded) -> None:
    current = _record(where, base, "f_ci")
    for side in SIDES:
        report = _why(base, current, side, where / f"fc.{side}.why.json")
        # functorch's config is one opaque part of the AOTAutograd key: the runs' config tells
        # which entry it was. The FX graph key is the same, and hit.
        assert causes(report) == [("autograd_config[error_on_custom_op_aliasing]", "False", "True")]
        (graph,) = report["groups"][0]["graphs"]
        assert [t["tier"] for t in graph["tiers"]] == ["AOTAutograd"]
        _check_seconds(report, current, side)
    change = _only_change(_why(base, current, "job", where / "fc.why.json"))
    assert change["source"] == "set by CI: unset -> '1'"


@pytest.mark.parametrize(("name", "kind"), [("h_evicted", "evicted"), ("i_unreadable", "unreadable")])
def test_equal_keys_the_miss_came_from_elsewhere(where: Path, base: Recorded, name: str, kind: str) -> None:
    current = _record(where, base, name)
    for side in SIDES:
        report = _why(base, current, side, where / f"{name}.{side}.why.json")
        (group,) = report["groups"]
        assert group["reason"]["kind"] == kind and group["reason"]["changes"] == []
        _check_seconds(report, current, side)
