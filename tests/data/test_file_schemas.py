"""Every malformed file is bad input: exit 2 with one line naming the file, never a crash,
and never exit 1 (which ``compare`` means as "regressed", so CI would report a damaged file
as a regression).

Property-based: hypothesis takes a valid run, bench or gather file, replaces one value
anywhere in it with an awkward JSON value (a 400-digit integer, ``1.0`` for an integer,
a lone surrogate, a control character, a nested list, ...) and runs the commands that read
that kind of file in-process.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compiletrace
from compiletrace import cli
from compiletrace._data.bench import BenchResult
from compiletrace.distributed import GatherResult, RankTimes

_AWKWARD_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([10**400, -(10**400), 2**63, -1, 0, 1.0, 1.5, -0.5, 1e308]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["\ud800", "a\udfffb", "\x1b[2J", "\x07", "", "compiletrace.run"]),
)
_AWKWARD = st.recursive(
    _AWKWARD_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON tree a value can be replaced (the root excluded)."""
    found: list[tuple[Any, ...]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        found.append((*prefix, key))
        found.extend(_paths(child, (*prefix, key)))
    return found


def _replaced(doc: Any, path: tuple[Any, ...], new: Any) -> Any:
    copy = json.loads(json.dumps(doc))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return copy


def _damaged(doc: Any, choice: int, value: Any) -> Path:
    """``doc`` written with the value at one of its places (picked by ``choice``) replaced."""
    places = _paths(doc)
    return _write(_replaced(doc, places[choice % len(places)], value))


# One directory for every example hypothesis makes, removed with the process (a directory
# an example left in the system temp directory was never removed); made again if a cleaner
# of the temp directory took it meanwhile.
_SCRATCH: list[tempfile.TemporaryDirectory[str]] = []


def _scratch() -> str:
    if not _SCRATCH or not os.path.isdir(_SCRATCH[-1].name):
        _SCRATCH.append(tempfile.TemporaryDirectory(prefix="compiletrace-schema-"))
    return _SCRATCH[-1].name


def _write(doc: Any) -> Path:
    # ensure_ascii: a lone surrogate travels as the escape JSON allows ("\ud800").
    path = Path(tempfile.mkdtemp(dir=_scratch())) / "file.json"
    path.write_text(json.dumps(doc, ensure_ascii=True), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def valid_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("valid")
    run_path = work / "run.json"
    compiletrace.profile(backend="eager").save(run_path)  # a real run of the built-in model
    bench = {
        "kind": "compiletrace.bench.startup",
        "schema_version": 1,
        "avg_cold_startup_time": 3.5,
        "avg_cold_compilation_time": 2.0,
        "avg_warm_startup_time": 1.25,
        "avg_cold_phase_time": {"load weights": 0.5, "compile": 2.0},
    }
    gather = GatherResult.of(
        [
            RankTimes(0, {"language_model": 2.0, "encoder": 1.0}, graphs=4, host="a"),
            RankTimes(1, {"language_model": 2.5, "encoder": 0.5}, graphs=3, host="b"),
        ]
    ).to_dict()
    return {"run": json.loads(run_path.read_text()), "bench": bench, "gather": gather}


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _check(argv: list[str], path: Path, allowed: set[int], capsys: pytest.CaptureFixture[str]) -> int:
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code in allowed, (argv, code, err)
    if code == 2:
        line = _one_line(err)
        assert str(path) in line, line
        assert "Error:" not in line.split(str(path))[0], line  # a message, not a stray exception name
    else:
        assert "Traceback" not in err
    return code


@_SETTINGS
@given(choice=st.integers(min_value=0), value=_AWKWARD)
def test_a_damaged_run_file_is_exit_0_or_2_for_report_doctor_and_compare(
    valid_files: dict[str, Any], choice: int, value: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = valid_files["run"]
    path = _damaged(doc, choice, value)
    _check(["report", str(path)], path, {0, 2}, capsys)
    _check(["doctor", str(path)], path, {0, 2}, capsys)
    base = _write(doc)
    # Against itself as the base, a file that reads is identical or differs: never a crash.
    code = _check(["compare", str(base), str(path)], path, {0, 1, 2}, capsys)
    if code == 1:  # a regression, named in the table: only a valid file can regress
        assert cli.main(["report", str(path)]) == 0
        capsys.readouterr()


@_SETTINGS
@given(choice=st.integers(min_value=0), value=_AWKWARD)
def test_a_damaged_bench_file_is_exit_0_1_or_2_for_compare_never_a_crash(
    valid_files: dict[str, Any], choice: int, value: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = valid_files["bench"]
    path = _damaged(doc, choice, value)
    base = _write(doc)
    _check(["compare", str(base), str(path)], path, {0, 1, 2}, capsys)
    _check(["compare", str(path), str(base)], path, {0, 1, 2}, capsys)


@_SETTINGS
@given(choice=st.integers(min_value=0), value=_AWKWARD)
def test_a_damaged_gather_file_is_exit_0_or_2_for_doctor(
    valid_files: dict[str, Any], choice: int, value: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _damaged(valid_files["gather"], choice, value)
    _check(["doctor", str(path)], path, {0, 2}, capsys)


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("schema_version",), 1.0, "schema version 1.0 is not supported"),
        (("schema_version",), True, "schema version True is not supported"),
        (("registry", "records", 0, "backend_ns"), 10**400, "an integer of 401 digits"),
        (("registry", "records", 0, "end_unix_ns"), 10**400, "an integer of 401 digits"),
        (("registry", "records", 0, "component"), "lm\ud800", "a string of Unicode text"),
    ],
    ids=["version-float", "version-bool", "huge-backend-ns", "huge-end-ns", "lone-surrogate"],
)
def test_the_reported_crashes_are_one_line_naming_the_field(
    valid_files: dict[str, Any],
    path: tuple[Any, ...],
    value: Any,
    expected: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = valid_files["run"]
    if path[0] == "registry":  # the field must exist, or the case tests nothing
        assert path[-1] in doc["registry"]["records"][0], sorted(doc["registry"]["records"][0])
    damaged = _write(_replaced(doc, path, value))
    base = _write(doc)
    for argv in (["compare", str(base), str(damaged)], ["report", str(damaged)]):
        assert cli.main(argv) == 2, argv
        line = _one_line(capsys.readouterr().err)
        assert str(damaged) in line and expected in line, line


def test_a_file_of_a_kind_the_command_cannot_use_says_what_it_is(
    valid_files: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    gather, run = _write(valid_files["gather"]), _write(valid_files["run"])
    assert cli.main(["compare", str(run), str(gather)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"{gather} is a multi-rank job's figures" in line and "compare reads" in line, line
    assert cli.main(["report", str(gather)]) == 2
    assert str(gather) in _one_line(capsys.readouterr().err)


def test_load_gives_every_kind_back_as_the_object_that_wrote_it(
    valid_files: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    run = compiletrace.load(_write(valid_files["run"]))
    assert isinstance(run, compiletrace.ProfileRun) and run.to_dict() == valid_files["run"]
    job = compiletrace.load(_write(valid_files["gather"]))
    assert isinstance(job, GatherResult) and [r.rank for r in job.ranks] == [0, 1]
    assert job.diagnose() == GatherResult.from_dict(valid_files["gather"]).diagnose()
    bench = compiletrace.load(_write(valid_files["bench"]))
    assert isinstance(bench, BenchResult)
    assert bench.metrics["avg_cold_phase_time[load weights]"] == 0.5

    # The doctor's own file reads back as its findings.
    run_path = _write(valid_files["run"])
    out = run_path.with_name("findings.json")
    assert cli.main(["doctor", str(run_path), "--json", str(out)]) == 0
    capsys.readouterr()
    findings = compiletrace.load(out)
    assert isinstance(findings, list) and findings == run.diagnose()
