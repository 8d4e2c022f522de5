"""Every file kind's versions: files written by earlier releases load, and save back as
they were read.

The committed files are what compiletrace wrote, kept as they were written: the saved runs
under ``tests/inputs/runs`` (``regenerate_runs.py``, ``make_cli_small.py``; of version 1, and
those made since of version 2) and one file of each other kind under ``tests/inputs/v1``
(``make_v1.py``), all version 1. A reader that stops reading one of them breaks a promise to
every user holding such a file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import compiletrace
from compiletrace._data.bench import BenchResult
from compiletrace._data.files import read, read_data
from compiletrace._data.findings import doctor_dict
from compiletrace._data.gather import GatherResult
from compiletrace._data.job import Job
from compiletrace._data.kinds import VERSIONS, FileKind
from compiletrace._data.run import Run
from compiletrace._data.run_meta import CompilationMode, RunMeta
from compiletrace._io.errors import RunFileError

INPUTS = Path(__file__).resolve().parents[1] / "inputs"
V1 = INPUTS / "v1"
COMMITTED = sorted([*(INPUTS / "runs").glob("*.json"), *V1.glob("*.json")])
# Those written before a kind's version 2 (a saved run made since is that version's).
VERSION_1_FILES = [p for p in COMMITTED if json.loads(p.read_text(encoding="utf-8"))["schema_version"] == 1]
NEWER_FILES = [p for p in COMMITTED if p not in VERSION_1_FILES]


def _raw(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _recorded(meta: dict[str, Any]) -> dict[str, Any]:
    """A file's meta as it saves back: a null is a field not recorded, left out."""
    return {key: value for key, value in meta.items() if value is not None}


# What a run file gained after version 1, in each graph record: saved back, they are there
# (empty: a version-1 record had none).
# Version 4's: no CPU time measured, no block seen repeated inside a graph, no
# automatic-dynamic state read; and of each graph break, no .item() known to feed a branch.
RECORD_FIELDS_SINCE_1 = {
    "frame_lines": [],
    "cpu_ns": None,
    "setup_cpu_ns": 0,
    "repeated_block": None,
    "dynamic_sources": [],
}
BREAK_FIELDS_SINCE_1 = {"scalar_in_branch": False}


def _as_version_1(registry: dict[str, Any]) -> dict[str, Any]:
    """A registry saved by this compiletrace, with what later versions added taken out again
    (after checking it holds what a version-1 record reads as)."""
    records = []
    for record in (dict(r) for r in registry["records"]):
        for key, empty in RECORD_FIELDS_SINCE_1.items():
            assert record.pop(key) == empty, key
        breaks = [dict(b) for b in record["graph_breaks"]]
        for graph_break in breaks:
            for key, empty in BREAK_FIELDS_SINCE_1.items():
                assert graph_break.pop(key) == empty, key
        records.append({**record, "graph_breaks": breaks})
    return {**registry, "records": records}


def test_the_committed_files_hold_every_kind_the_one_reader_reads() -> None:
    kinds = {FileKind.of(_raw(path)) for path in VERSION_1_FILES}
    assert NEWER_FILES, "a saved run of the run file's newest version is committed too"
    assert kinds == {kind for kind in FileKind if kind.loadable}
    assert len(COMMITTED) >= 20 and len(VERSION_1_FILES) >= 15


@pytest.mark.parametrize("path", VERSION_1_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_version_1_file_loads_and_saves_back_as_it_was_read(path: Path) -> None:
    raw = _raw(path)
    kind = FileKind.of(raw)
    assert kind is not None and raw["schema_version"] == 1
    data = read(path)  # the one reader: every field checked
    assert compiletrace.load(path) is not None  # and the front door gives its object
    if isinstance(data, Run):
        assert _recorded(raw["meta"]) == data.meta.to_dict()  # meta, unknown keys included
        saved = data.to_dict()
        assert _as_version_1(saved["registry"]) == raw["registry"] and saved["warmup"] == raw["warmup"]
    elif isinstance(data, Job):
        for process, was in zip(data.processes, raw["processes"], strict=True):
            assert process.run.meta.to_dict() == _recorded(was["run"]["meta"])
            assert process.run.meta.process == process.info  # the process, as its run names it
        saved = data.to_dict()
    elif isinstance(data, GatherResult):
        saved = data.to_dict()
        assert saved == raw
    elif isinstance(data, BenchResult):
        assert data.schema_version == 1 and data.metrics["avg_cold_startup_time"] > 0
        return  # a bench file is read, never written back
    else:
        saved = doctor_dict(data)
        assert saved == raw
    assert read_data(saved, path.name) == data  # what it saves reads back the same


@pytest.mark.parametrize("path", NEWER_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_newer_file_loads_and_saves_back_exactly(path: Path) -> None:
    raw = _raw(path)
    kind = FileKind.of(raw)
    assert kind is not None and raw["schema_version"] == kind.schema_version > 1
    data = read(path)
    assert isinstance(data, Run)  # the saved runs the doctor's rules are tested on
    assert data.to_dict() == {**raw, "meta": _recorded(raw["meta"])}


def test_the_meta_of_each_writer_reads_back_typed() -> None:
    steady = read(V1 / "steady.run.json")
    assert isinstance(steady, Run)
    assert steady.meta.steady_calls == 3 and (steady.meta.steady_call_s or 0) > 0
    assert steady.meta.compilation_mode is CompilationMode.STOCK_TORCH_COMPILE
    assert steady.meta.components == {"vision": "encoder", "language_model": "language_model"}
    assert steady.meta.mode is None and steady.meta.source is None  # profile's: no source

    eager = read(V1 / "eager.run.json")
    assert isinstance(eager, Run) and eager.graph_records == ()
    assert eager.meta.compilation_mode is CompilationMode.NONE and (eager.meta.eager_run_s or 0) > 0

    artifacts = read(V1 / "artifacts.run.json")
    assert isinstance(artifacts, Run) and artifacts.meta.cache_artifacts is not None
    loaded = artifacts.meta.cache_artifacts
    assert loaded.checked and loaded.digest == "verified" and loaded.path.endswith("demo.cache")
    assert sum(loaded.artifacts.values()) >= 2 and loaded.size_bytes > 0

    job = read(V1 / "job.json")
    assert isinstance(job, Job)
    (process,) = job.processes
    meta = process.run.meta
    assert meta.source == "compiletrace run" and meta.applied_fixes == ()
    assert meta.process is not None and meta.process.role == "main"
    assert meta.model == "tests/programs/fixable.py"

    # A maker's own keys (the rule runs name the program that made them) are kept, unread.
    rule_run = read(INPUTS / "runs" / "recompiles.run.json")
    assert isinstance(rule_run, Run)
    assert rule_run.meta.extra["made_by"] == "tests/inputs/runs/regenerate_runs.py"
    assert rule_run.meta.backend == "eager" and rule_run.meta.model is None


@pytest.mark.parametrize("name", ["job.json", "doctor.json", "bench.json", "gather.json", "steady.run.json"])
def test_a_version_this_compiletrace_does_not_know_is_refused_naming_those_it_reads(name: str) -> None:
    raw = _raw(V1 / name)
    kind = FileKind.of(raw)
    assert kind is not None
    unknown = kind.schema_version + 1
    readable = ", ".join(str(v) for v in sorted(kind.readable_versions))
    newer = {**raw, "schema_version": unknown}
    refused = rf"schema version {unknown} is not supported; this compiletrace reads version {readable} "
    with pytest.raises(RunFileError, match=refused):
        read_data(newer, name)


def test_each_kind_writes_its_newest_version_and_reads_every_one() -> None:
    assert set(VERSIONS) == set(FileKind)
    for kind in FileKind:
        assert kind.schema_version == max(kind.versions) and kind.readable_versions == set(kind.versions)
        assert kind.versions[1] and kind.description
        written = kind.envelope({})
        assert written == {"kind": kind.value, "schema_version": kind.schema_version}


def test_a_start_marker_is_the_launchers_alone() -> None:
    # Its kind is known (it says what the file is), but no command reads it.
    marker = FileKind.JOB_STARTED.envelope({"process": {"pid": 1, "ppid": 0, "role": "main", "argv": []}})
    with pytest.raises(RunFileError) as refused:
        read_data(marker, "x.started.json", command="report")
    assert str(refused.value) == (
        "x.started.json is a job process's start marker; report reads "
        + " or ".join(k.description for k in FileKind if k.loadable)
    )


def test_meta_of_a_run_file_is_required() -> None:
    raw = _raw(V1 / "steady.run.json")
    del raw["meta"]
    with pytest.raises(RunFileError, match=r"run.json: field 'meta' is missing"):
        read_data(raw, "run.json")
    assert RunMeta.from_dict(_raw(V1 / "steady.run.json")["meta"]).model == "compiletrace.models:build_demo"
