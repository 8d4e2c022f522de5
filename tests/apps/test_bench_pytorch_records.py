"""``bench startup`` figures as PyTorch benchmark-database records (the files
``vllm bench startup --output-json`` writes beside its JSON): from a real, short run of the
built-in model with the eager backend, and from results built of real iteration figures."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from compiletrace import CompiletraceError, UsageError, cli
from compiletrace._app.profile import DEFAULT_MODEL
from compiletrace._io.errors import RunFileError
from compiletrace._io.files import write_json
from compiletrace.bench.pytorch_records import (
    BENCHMARK_NAME,
    pytorch_benchmark_records,
    record_paths,
    write_pytorch_records,
)
from compiletrace.bench.startup import BenchOptions, IterationResult, StartupBenchResult, run_startup_bench

# The metrics vLLM's startup bench writes, in its order (with an encoder compiled).
VLLM_METRICS = [
    f"{prefix}_{metric}"
    for prefix in ("cold", "warm")
    for metric in ("startup", "compilation", "encoder_compilation")
]


def _iteration(startup: float, compilation: float, encoder: float | None = None) -> IterationResult:
    return IterationResult(
        startup_time=startup,
        compilation_time=compilation,
        encoder_compilation_time=encoder or 0.0,
        encoder_compiled=encoder is not None,
        import_time=0.5,
        process_time=startup + 0.5,
        exit_time=0.01,
        cache_hits=0,
        cache_misses=2,
    )


def _args(out: Path, *extra: str) -> dict[str, Any]:
    # The arguments the CLI parses for this run: what a caller passes as args.
    argv = ["bench", "startup", "--backend", "eager", *extra, "--output-json", str(out)]
    return vars(cli.build_parser().parse_args(argv))


@pytest.fixture(scope="module")
def real_run() -> tuple[BenchOptions, StartupBenchResult]:
    """Two cold and one warm iteration of the built-in model, eager backend: real child
    processes (seconds each), shared by the tests of this module that need them."""
    options = BenchOptions(backend="eager", num_iters_cold=2, num_iters_warmup=0, num_iters_warm=1)
    return options, run_startup_bench(options)


@pytest.mark.slow
def test_a_real_run_writes_vllms_files_and_records(
    real_run: tuple[BenchOptions, StartupBenchResult], tmp_path: Path
) -> None:
    _, result = real_run
    out = tmp_path / "bench.json"
    write_json(out, result.to_dict())  # as --output-json writes it
    data = json.loads(out.read_text())
    args = _args(out, "--num-iters-cold", "2", "--num-iters-warmup", "0", "--num-iters-warm", "1")

    paths = write_pytorch_records(data, out, args=args)

    assert [p.name for p in paths] == [f"bench.{m}.pytorch.json" for m in VLLM_METRICS]
    assert sorted(p.name for p in tmp_path.glob("*.pytorch.json")) == sorted(p.name for p in paths)
    expected = pytorch_benchmark_records(data, args=args)
    for metric, path in zip(VLLM_METRICS, paths, strict=True):
        records = json.loads(path.read_text())
        assert records == expected[metric]  # the file round-trips as JSON
        assert len(records) == 1
        (record,) = records
        assert set(record) == {"benchmark", "model", "metric"}
        assert record["benchmark"]["name"] == BENCHMARK_NAME
        assert record["benchmark"]["extra_info"]["args"] == json.loads(json.dumps(args))
        assert record["benchmark"]["extra_info"]["use_compile"] is True
        assert record["model"] == {"name": DEFAULT_MODEL}
        # vLLM's keys: the average as the value, the iterations and percentiles beside it.
        assert set(record["metric"]) == {"name", "benchmark_values", "extra_info"}
        assert record["metric"]["name"] == f"avg_{metric}_time"
        assert record["metric"]["benchmark_values"] == [data[f"avg_{metric}_time"]]
        assert record["metric"]["extra_info"] == {
            f"{metric}_times": data[f"{metric}_times"],
            f"{metric}_percentiles": data[f"{metric}_percentiles"],
        }
    cold = json.loads(paths[0].read_text())[0]["metric"]["extra_info"]["cold_startup_times"]
    assert cold == data["cold_startup_times"] and len(cold) == 2 and all(t > 0 for t in cold)
    assert set(data["cold_startup_percentiles"]) == {"10", "25", "50", "75", "90", "99"}


@pytest.mark.slow
def test_metrics_without_iterations_write_no_file_and_portable_ones_do(
    real_run: tuple[BenchOptions, StartupBenchResult], tmp_path: Path
) -> None:
    options, result = real_run
    # The run's own cold iterations with no warm ones: warm metrics have no figures.
    cold_only = StartupBenchResult(cold=result.cold, options=dataclasses.replace(options, num_iters_warm=0))
    data = cold_only.to_dict()
    assert "avg_warm_startup_time" not in data
    paths = write_pytorch_records(data, tmp_path / "cold.json", args=_args(tmp_path / "cold.json"))
    assert [p.name for p in paths] == [f"cold.{m}.pytorch.json" for m in VLLM_METRICS[:3]]
    assert not list(tmp_path.glob("cold.warm_*"))

    # The same real iterations counted as portable ones: compiletrace's own metrics follow.
    portable = StartupBenchResult(
        cold=result.cold,
        portable=result.cold,
        options=dataclasses.replace(options, cache_artifacts="demo.cache", num_iters_warm=0),
    ).to_dict()
    records = pytorch_benchmark_records(portable, args={})
    assert list(records) == [
        *VLLM_METRICS[:3],
        "portable_startup",
        "portable_compilation",
        "portable_encoder_compilation",
        "portable_artifact_load",
    ]
    load = records["portable_artifact_load"][0]["metric"]
    assert load["name"] == "avg_portable_artifact_load_time"
    assert load["extra_info"]["portable_artifact_load_times"] == [it.artifact_load_time for it in result.cold]


def test_no_encoder_no_encoder_record_and_the_model_from_the_args(tmp_path: Path) -> None:
    result = StartupBenchResult(
        cold=[_iteration(2.0, 1.0), _iteration(3.0, 1.5)],
        options=BenchOptions(model="pkg.mod:build", num_iters_warm=0, compilation_mode="none"),
    )
    records = pytorch_benchmark_records(result.to_dict(), args={"model": "pkg.mod:build"})
    assert list(records) == ["cold_startup", "cold_compilation"]
    record = records["cold_startup"][0]
    assert record["model"] == {"name": "pkg.mod:build"}
    assert record["benchmark"]["extra_info"]["use_compile"] is False  # ran eagerly
    assert record["metric"]["benchmark_values"] == [2.5]
    assert record["metric"]["extra_info"]["cold_startup_times"] == [2.0, 3.0]


def test_no_iterations_at_all_writes_nothing(tmp_path: Path) -> None:
    data = StartupBenchResult(options=BenchOptions(num_iters_cold=0, num_iters_warm=0)).to_dict()
    assert pytorch_benchmark_records(data, args={}) == {}
    assert write_pytorch_records(data, tmp_path / "b.json", args={}) == []
    assert list(tmp_path.iterdir()) == []


def test_a_directory_that_does_not_exist_is_a_one_line_error_and_writes_nothing(tmp_path: Path) -> None:
    data = StartupBenchResult(cold=[_iteration(2.0, 1.0, 0.5)]).to_dict()
    out = tmp_path / "no-such-dir" / "bench.json"
    with pytest.raises(UsageError) as info:
        write_pytorch_records(data, out, args={})
    assert isinstance(info.value, CompiletraceError)
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        f"cannot write PyTorch benchmark records '{tmp_path}/no-such-dir/bench.cold_startup.pytorch.json': "
        f"directory '{tmp_path}/no-such-dir' does not exist"
    )
    assert not (tmp_path / "no-such-dir").exists()


def test_standard_output_has_no_directory_to_write_beside(tmp_path: Path) -> None:
    data = StartupBenchResult(cold=[_iteration(2.0, 1.0)]).to_dict()
    with pytest.raises(UsageError, match="beside the --output-json file"):
        write_pytorch_records(data, "-", args={})


def test_file_names_follow_vllms(tmp_path: Path) -> None:
    names = {k: str(v) for k, v in record_paths("runs/b.json", ["cold_startup"]).items()}
    assert names == {"cold_startup": "runs/b.cold_startup.pytorch.json"}
    # vLLM strips whatever extension the path has, and keeps a path without one.
    assert record_paths("runs/b.out", ["warm_startup"])["warm_startup"].name == "b.warm_startup.pytorch.json"
    assert record_paths("runs/b", ["warm_startup"])["warm_startup"].name == "b.warm_startup.pytorch.json"


def test_args_that_are_not_json_are_made_json(tmp_path: Path) -> None:
    data = StartupBenchResult(cold=[_iteration(2.0, 1.0)]).to_dict()
    args = {"cache": tmp_path, "components": ("a", "b"), "limit": float("inf"), "stream": sys.stderr}
    (path, *_) = write_pytorch_records(data, tmp_path / "b.json", args=args)
    saved = json.loads(path.read_text())[0]["benchmark"]["extra_info"]["args"]
    assert saved["cache"] == str(tmp_path) and saved["components"] == ["a", "b"]
    assert saved["limit"] == "inf" and isinstance(saved["stream"], str)


def test_a_bad_figure_is_named() -> None:
    data = {"avg_cold_startup_time": 2.0, "cold_startup_times": [2.0, "two"]}
    with pytest.raises(RunFileError, match=r"'cold_startup_times\.1' must be a finite number >= 0"):
        pytorch_benchmark_records(data, args={})
    with pytest.raises(RunFileError, match="is not a start-up benchmark"):
        pytorch_benchmark_records({"kind": "compiletrace.run", "schema_version": 1}, args={})


@pytest.mark.slow
def test_the_cli_writes_them_beside_its_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    argv = ["bench", "startup", "--backend", "eager", "--num-iters-cold", "1", "--num-iters-warmup", "0",
            "--num-iters-warm", "0", "--output-json", str(out), "--pytorch-records"]  # fmt: skip
    assert cli.main(argv) == 0
    assert f"wrote 3 PyTorch benchmark record file(s) beside {out}" in capsys.readouterr().out
    data = json.loads(out.read_text())
    # The cold figures only (no warm iterations; the built-in model compiles an encoder).
    assert sorted(p.name for p in tmp_path.glob("*.pytorch.json")) == [
        "bench.cold_compilation.pytorch.json",
        "bench.cold_encoder_compilation.pytorch.json",
        "bench.cold_startup.pytorch.json",
    ]
    startup = json.loads((tmp_path / "bench.cold_startup.pytorch.json").read_text())
    assert startup[0]["metric"]["benchmark_values"] == [data["avg_cold_startup_time"]]


def test_the_cli_refuses_records_with_nowhere_to_put_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "startup", "--pytorch-records"]) == 2
    assert "--pytorch-records needs --output-json PATH" in capsys.readouterr().err
    assert cli.main(["bench", "startup", "--pytorch-records", "--output-json", "-"]) == 2
