"""The torch-free I/O leaf: atomic output files, checked run files, warnings by cause."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

import compiletrace
from compiletrace._io.envelope import Fields, read_json_file
from compiletrace._io.files import check_writable, write_bytes, write_json, write_text
from compiletrace._io.state import ProcessState


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_permissions_the_umask_gives(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_text(tmp_path / "report.html", "<p>hi</p>")
        os.umask(0o027)
        write_text(tmp_path / "private.html", "<p>hi</p>")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "report.html") == 0o644  # readable by others, as a shared report must be
    assert _mode(tmp_path / "private.html") == 0o640


def test_replacing_a_file_keeps_its_mode_and_leaves_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    out.write_text("old")
    out.chmod(0o600)
    write_json(out, {"a": 1})
    assert json.loads(out.read_text()) == {"a": 1}
    assert _mode(out) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_a_failed_write_leaves_the_old_file_whole(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    out.write_text('{"old": true}')
    with pytest.raises(compiletrace.OutputError, match=r"trace\.json"):
        write_json(out, {"bad": float("nan")})  # not JSON: refused before anything is written
    assert out.read_text() == '{"old": true}'
    missing_dir = tmp_path / "gone" / "trace.json"
    with pytest.raises(compiletrace.OutputError, match=re.escape(str(missing_dir))):
        write_text(missing_dir, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.json"]


def test_a_symlink_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_text(link, "new")
    assert link.is_symlink()
    assert target.read_text() == "new"


def test_a_fifo_is_written_through_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_bytes(fifo, b"through the pipe")
    reader.join(timeout=10)
    assert got == [b"through the pipe"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert check_writable(fifo) == fifo


def test_dash_is_standard_output(capfd: pytest.CaptureFixture[str]) -> None:
    write_text("-", "to stdout\n")
    assert capfd.readouterr().out == "to stdout\n"


@pytest.mark.parametrize(
    ("path", "match"),
    [("", "needs a file name"), (".", "is a directory"), ("/no/such/dir/x.json", "does not exist")],
)
def test_unwritable_paths_are_refused_before_any_work(path: str, match: str) -> None:
    with pytest.raises(compiletrace.UsageError, match=match):
        check_writable(path, "--json")


def _record(**changes: Any) -> dict[str, Any]:
    base = compiletrace.GraphRecord("0/0", "encoder", "eager", "forward", 3, 0, 10, 4, 6, 2).to_dict()
    return {**base, **changes}


def _run_file(tmp_path: Path, record: dict[str, Any]) -> Path:
    path = tmp_path / "run.json"
    run = {
        "kind": "compiletrace.run",
        "schema_version": 1,
        "meta": {},
        "registry": {"schema_version": 1, "records": [record]},
        "warmup": {"skipped": False, "duration_s": 1.0, "by_component": {}, "mode": "stock", "device": "cpu"},
    }
    path.write_text(json.dumps(run))
    return path


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"dynamo_ns": -5}, r"registry\.records\[0\]\.dynamo_ns' must be an integer >= 0 or null, got -5"),
        ({"component": 7}, r"registry\.records\[0\]\.component' must be a string, got 7"),
        ({"component": " "}, "must be a non-empty string"),
        ({"is_recompile": "false"}, r"is_recompile' must be true or false, got \"false\""),
        ({"status": "exploded"}, "must be one of 'ok', 'error', 'eager_fallback'"),
        ({"end_unix_ns": -1}, "end_unix_ns' must be an integer >= 0"),
        ({"start_unix_ns": 50}, "end_unix_ns' must be at least start_unix_ns"),
        ({"phases": {"inductor": 1.5}}, r"phases\.inductor' must be an integer"),
    ],
)
def test_a_damaged_run_file_names_the_field(tmp_path: Path, change: dict[str, Any], match: str) -> None:
    path = _run_file(tmp_path, _record(**change))
    with pytest.raises(compiletrace.RunFileError, match=match):
        compiletrace.ProfileRun.load(path)


def test_unreadable_json_is_a_run_file_error_not_a_crash(tmp_path: Path) -> None:
    nan = tmp_path / "nan.json"
    nan.write_text('{"kind": "compiletrace.run", "x": NaN}')
    with pytest.raises(compiletrace.RunFileError, match="NaN is not a number JSON allows"):
        read_json_file(nan)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(compiletrace.RunFileError, match="nested too deeply"):
        read_json_file(deep)
    with pytest.raises(compiletrace.RunFileError, match="is a directory"):
        read_json_file(tmp_path)


def test_a_good_run_file_round_trips(tmp_path: Path) -> None:
    path = _run_file(tmp_path, _record(phases={"inductor": 4, "other": 2}))
    run = compiletrace.ProfileRun.load(path)
    (rec,) = run.records()
    assert rec.phase_ns == {"inductor": 4, "other": 2}
    assert run.warmup.duration_s == 1.0
    assert compiletrace.ProfileRun.from_dict(run.to_dict()) == run


def test_fields_check_the_envelope() -> None:
    doc = Fields({"kind": "compiletrace.run", "schema_version": 7}, "x.json")
    with pytest.raises(compiletrace.RunFileError, match="schema version 7 is not supported"):
        doc.check_kind("compiletrace.run", {1}, "a run")
    with pytest.raises(compiletrace.RunFileError, match=r"x.json is not a bench \(its kind is"):
        doc.check_kind("compiletrace.bench", {1}, "a bench")


def test_warnings_are_keyed_by_their_cause() -> None:
    state = ProcessState()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state.warn_once("telemetry failed: ConnectionError('collector down')")
        state.warn_once("telemetry failed: ConnectionError('collector down')")
        state.warn_once("telemetry failed: KeyError('span')")  # same kind, another cause
    assert len(caught) == 2
    state.forget_warnings()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state.warn_once("telemetry failed: KeyError('span')")
    assert len(caught) == 1
