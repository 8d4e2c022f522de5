"""A run's meta is typed data (:class:`RunMeta`): read from a file field by field, every
field checked for its type, its range and its length; keys it does not know kept, bounded,
and never read; a dict given where a meta goes read with the same checks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import compiletrace
from compiletrace._data.records import CompilationTimes
from compiletrace._data.run import Run, WarmupResult
from compiletrace._data.run_meta import (
    MAX_ARG_CHARS,
    MAX_ARGS,
    MAX_EXTRA_BYTES,
    MAX_EXTRA_KEYS,
    MAX_NAMES,
    MAX_TEXT_CHARS,
    CompilationMode,
    LoadedArtifacts,
    ProcessInfo,
    RunMeta,
    TraceInfo,
)
from compiletrace._doctor import RunContext, diagnose_run
from compiletrace._io.errors import RunFileError, UsageError
from compiletrace.reports import html_report, summary_table

WARMUP = WarmupResult(False, 1.0, CompilationTimes())
ARTIFACTS = LoadedArtifacts(
    "/a.cache", 10, {"inductor": 1}, 0.5, "0" * 64, "verified", "2.13.0", True, "yours", None
)
TRACE = TraceInfo("log", 7, None, 3, {"str": 1}, 0, 0, False, {}, ("backend",), None)
FULL = RunMeta(
    source="compiletrace run",
    model="pkg.mod:build",
    backend="inductor",
    mode="max-autotune",
    compilation_mode=CompilationMode.NONE,
    device="cpu",
    components={"vision": "encoder"},
    created_unix_s=1.5,
    created="2026-12-01T00:00:00+00:00",
    torch_version="2.13.0",
    compiletrace_version="0.1.0",
    cache_artifacts=ARTIFACTS,
    eager_run_s=0.25,
    steady_call_s=0.002,
    steady_call_spread_s=0.0001,
    steady_calls=20,
    applied_fixes=("dynamic-shapes",),
    process=ProcessInfo(41, 40, "main", ("python", "x.py")),
    trace=TRACE,
    extra={"experiment": {"id": 3}},
)


def test_every_field_saves_and_reads_back() -> None:
    saved = FULL.to_dict()
    assert json.loads(json.dumps(saved)) == saved  # JSON as it is
    assert saved["pid"] == 41 and saved["argv"] == ["python", "x.py"]  # the process, flat
    assert saved["compilation_mode"] == "none" and saved["experiment"] == {"id": 3}
    assert RunMeta.from_dict(saved) == FULL
    assert RunMeta().to_dict() == {} and RunMeta().empty and not FULL.empty


BAD = [
    ("model", 3, "a string or null"),
    ("model", "m" * (MAX_TEXT_CHARS + 1), f"a string of at most {MAX_TEXT_CHARS:,} characters"),
    ("backend", "\ud800", "Unicode text"),
    ("compilation_mode", "fast", "one of 'none', 'stock'"),
    ("components", ["vision"], "a JSON object"),
    ("components", {"vision": 1}, "a string"),
    ("components", {str(i): "c" for i in range(MAX_NAMES + 1)}, f"at most {MAX_NAMES:,} components"),
    ("created_unix_s", -1, "a finite number >= 0"),
    ("created_unix_s", True, "a finite number"),
    ("eager_run_s", "0.5", "a finite number >= 0"),
    ("steady_call_s", 10**400, "a finite number"),
    ("steady_calls", 0, "an integer >= 1"),
    ("steady_calls", 2.0, "an integer >= 1"),
    ("applied_fixes", ["a", 1], "a list of strings"),
    ("applied_fixes", "dynamic-shapes", "a list of strings"),
    ("cache_artifacts", {"path": "/a"}, "'meta.cache_artifacts.size_bytes' is missing"),
    ("cache_artifacts", {**ARTIFACTS.to_dict(), "seconds": -1}, "'meta.cache_artifacts.seconds' must be"),
    ("cache_artifacts", {**ARTIFACTS.to_dict(), "artifacts": {"inductor": -1}}, "an integer >= 0"),
    ("trace", "log", "a JSON object"),
    ("trace", {**TRACE.to_dict(), "truncated": "no"}, "'meta.trace.truncated' must be true or false"),
    ("trace", {**TRACE.to_dict(), "missing": ["x"] * (MAX_NAMES + 1)}, f"at most {MAX_NAMES:,} of them"),
    ("argv", ["x"] * (MAX_ARGS + 1), f"at most {MAX_ARGS:,} of them"),
    ("argv", ["x" * (MAX_ARG_CHARS + 1)], f"each of at most {MAX_ARG_CHARS:,} characters"),
    ("role", None, "a string"),
]


@pytest.mark.parametrize(("key", "value", "expected"), BAD, ids=[f"{k}-{i}" for i, (k, *_) in enumerate(BAD)])
def test_a_bad_field_is_refused_naming_it(key: str, value: Any, expected: str) -> None:
    data = {**FULL.to_dict(), key: value}
    with pytest.raises(RunFileError) as refused:
        RunMeta.from_dict(data, "run.json", "meta")
    message = str(refused.value)
    assert message.startswith(f"run.json: field 'meta.{key}") and expected in message, message
    assert len(message) < 400  # the value is shown by its head, never whole


def test_the_process_is_all_four_fields_or_none() -> None:
    with pytest.raises(RunFileError, match=r"^run.json: field 'meta.ppid' is missing$"):
        RunMeta.from_dict({"pid": 41, "role": "main", "argv": []}, "run.json", "meta")
    assert RunMeta.from_dict({"model": "m"}).process is None


def test_a_null_is_a_field_not_recorded() -> None:
    meta = RunMeta.from_dict({"model": "m", "mode": None, "backend": None, "components": None, "trace": None})
    assert meta == RunMeta(model="m") and meta.to_dict() == {"model": "m"}


# -- keys it does not know -----------------------------------------------------------------


def test_unknown_keys_are_kept_in_order_and_saved_back() -> None:
    data = {"note": "from a newer writer", "model": "m", "sizes": [1, 2, {"a": None}]}
    meta = RunMeta.from_dict(data)
    assert meta.extra == {"note": "from a newer writer", "sizes": [1, 2, {"a": None}]}
    assert meta.to_dict() == {"model": "m", "note": "from a newer writer", "sizes": [1, 2, {"a": None}]}
    run = Run((), WARMUP, meta)
    assert Run.from_dict(json.loads(json.dumps(run.to_dict()))).meta.extra == meta.extra


def test_unknown_keys_are_bounded() -> None:
    many = {f"k{i}": i for i in range(MAX_EXTRA_KEYS + 1)}
    with pytest.raises(RunFileError, match=rf"holds {MAX_EXTRA_KEYS + 1} keys this compiletrace does not"):
        RunMeta.from_dict(many, "run.json", "meta")
    assert len(RunMeta.from_dict(dict(list(many.items())[:MAX_EXTRA_KEYS])).extra) == MAX_EXTRA_KEYS
    big = {"blob": "x" * MAX_EXTRA_BYTES}
    with pytest.raises(RunFileError, match=r"field 'meta.blob', which this compiletrace does not know"):
        RunMeta.from_dict(big, "run.json", "meta")
    for bad in ({"\ud800": 1}, {"k" * 201: 1}, {"k": "\udfff"}):
        with pytest.raises(RunFileError, match=r"^run.json: field 'meta\."):
            RunMeta.from_dict(bad, "run.json", "meta")


def test_unknown_keys_are_never_shown() -> None:
    run = Run((), WARMUP, RunMeta(model="m:f", extra={"title": "<script>SECRET</script>"}))
    assert "SECRET" not in summary_table(run) and "SECRET" not in html_report(run)


def test_extra_cannot_shadow_a_field() -> None:
    with pytest.raises(UsageError, match=r"RunMeta.extra holds keys RunMeta knows, \['model', 'pid'\]"):
        RunMeta(extra={"model": "m", "pid": 1})


# -- a dict where a meta goes, as before it was typed ---------------------------------------


def test_a_dict_given_to_run_is_read_with_the_same_checks() -> None:
    run = Run((), WARMUP, {"model": "m", "steady_calls": 5, "steady_call_s": 0.5, "mine": True})
    assert isinstance(run.meta, RunMeta) and run.meta.steady_calls == 5 and run.meta.extra == {"mine": True}
    assert Run((), WARMUP).meta == RunMeta() == Run((), WARMUP, None).meta
    assert replace(run, meta={"model": "n"}).meta.model == "n"
    with pytest.raises(RunFileError, match=r"^Run\(meta=...\): field 'steady_calls' must be an integer >= 1"):
        Run((), WARMUP, {"steady_calls": "5"})
    with pytest.raises(UsageError, match=r"must be a RunMeta or a dict, got list"):
        Run((), WARMUP, [("model", "m")])  # type: ignore[arg-type]


def test_meta_still_reads_as_a_dict() -> None:
    meta = FULL
    assert meta["model"] == "pkg.mod:build" and meta.get("mode") == "max-autotune"
    assert meta["trace"]["missing"] == ["backend"] and meta["cache_artifacts"]["seconds"] == 0.5
    assert "source" in meta and "nothing" not in meta and meta.get("nothing") is None
    assert dict(meta) == meta.to_dict() and len(meta) == len(meta.to_dict())
    with pytest.raises(KeyError):
        RunMeta(model="m")["mode"]  # not recorded: not in the file either


def test_the_doctor_takes_meta_as_either() -> None:
    assert RunContext.of({"device": "cpu", "cache_artifacts": ARTIFACTS.to_dict()}) == RunContext.of(
        RunMeta(device="cpu", cache_artifacts=ARTIFACTS)
    )
    assert RunContext.of(None) == RunContext() and RunContext.of(RunMeta(device="cuda:0")).device == "cuda:0"
    warmup = WarmupResult(False, 2.5, CompilationTimes())
    from_dict = diagnose_run([], warmup, meta={"device": "cpu"})
    assert from_dict == diagnose_run([], warmup, meta=RunMeta(device="cpu")) and from_dict


def test_a_profiled_run_saves_its_meta_and_reads_it_back(tmp_path: Path) -> None:
    run = compiletrace.profile(backend="eager", steady_calls=2)
    meta = run.meta
    assert meta.model == "compiletrace.models:build_demo" and meta.steady_calls == 2
    assert meta.compilation_mode is CompilationMode.STOCK_TORCH_COMPILE and meta.process is None
    path = tmp_path / "run.json"
    run.save(path)
    assert compiletrace.load(path).meta == meta
