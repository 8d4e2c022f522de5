"""Gates that cannot be fooled and inputs that are checked: the compare gate refuses
non-finite options and damaged files, outputs never overwrite inputs, a factory's bad
return is bad input, and a server that compiles for days keeps a bounded registry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import compiletrace
from compiletrace import cli
from compiletrace._data.kinds import FileKind
from compiletrace.models import Demo
from tests.conftest import MS, make_record, save_run


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    base = save_run(tmp_path / "base.json", [make_record("0/0", "encoder", frame_ns=1000 * MS)])
    slower = save_run(tmp_path / "new.json", [make_record("0/0", "encoder", frame_ns=11_000 * MS)])
    return base, slower


@pytest.mark.parametrize(
    "option",
    [["--threshold", "nan"], ["--min-seconds", "nan"], ["--threshold", "inf"], ["--min-seconds", "-1"]],
)
def test_non_finite_or_negative_gate_options_are_bad_input(
    runs: tuple[Path, Path], option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    base, slower = runs
    assert cli.main(["compare", str(base), str(slower)]) == 1  # a real 10 s regression
    assert cli.main(["compare", str(base), str(slower), *option]) == 2
    assert "must be a finite number >= 0" in capsys.readouterr().err


def test_a_nan_or_negative_figure_is_a_damaged_file(
    tmp_path: Path, runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base, slower = runs
    data = json.loads(slower.read_text())
    data["registry"]["records"][0]["backend_ns"] = -5
    slower.write_text(json.dumps(data))
    assert cli.main(["compare", str(base), str(slower)]) == 2
    assert "registry.records[0].backend_ns' must be an integer >= 0, got -5" in capsys.readouterr().err
    bench = tmp_path / "bench.json"
    bench.write_text('{"avg_cold_startup_time": NaN}')
    assert cli.main(["compare", str(bench), str(bench)]) == 2
    assert "NaN is not a number JSON allows" in capsys.readouterr().err
    bench.write_text(
        '{"kind": "compiletrace.bench.startup", "schema_version": 1, "avg_cold_startup_time": -1}'
    )
    assert cli.main(["compare", str(bench), str(bench)]) == 2
    assert "avg_cold_startup_time' must be a finite number >= 0, got -1" in capsys.readouterr().err


def test_an_unknown_schema_version_is_refused(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base, slower = runs
    data = json.loads(slower.read_text())
    unknown = FileKind.RUN.schema_version + 1  # what a later compiletrace would write
    data["schema_version"] = unknown
    slower.write_text(json.dumps(data))
    assert cli.main(["compare", str(base), str(slower)]) == 2
    assert f"schema version {unknown} is not supported" in capsys.readouterr().err


def test_an_output_never_overwrites_the_input(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base, _ = runs
    before = base.read_text()
    assert cli.main(["report", str(base), "--html", str(base)]) == 2
    assert "is the same file as the input" in capsys.readouterr().err
    assert cli.main(["report", str(base), "--html", "x.html", "--chrome-trace", "x.html"]) == 2
    assert "is the same file as --html" in capsys.readouterr().err
    assert cli.main(["report", str(base), "--html", ""]) == 2
    assert "--html needs a file name" in capsys.readouterr().err
    assert base.read_text() == before


def five_as_inputs() -> Demo:
    return Demo(model=torch.nn.Linear(2, 2), example_inputs=5, components={".": "language_model"})  # type: ignore[arg-type]


def components_as_a_list() -> Any:
    return Demo(model=torch.nn.Linear(2, 2), example_inputs=(torch.ones(2),), components=["x"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("five_as_inputs", "example_inputs must be a tuple of positional arguments, got int"),
        ("components_as_a_list", "components must map submodule paths to component names"),
    ],
)
def test_a_factory_that_breaks_the_contract_is_bad_input(
    factory: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["profile", f"tests.apps.test_gates:{factory}", "--backend", "eager"]) == 2
    assert message in capsys.readouterr().err


def test_a_backend_returning_nothing_is_recorded_as_the_error_torch_raises() -> None:
    reg = compiletrace.Registry()

    def returns_none(gm: torch.fx.GraphModule, inputs: Any) -> Any:
        return None

    fn = compiletrace.compile(lambda x: x + 1, backend=returns_none, registry=reg)
    with pytest.raises(Exception) as raised:
        fn(torch.ones(2))
    (rec,) = reg.records()
    assert rec.status is compiletrace.CompileStatus.ERROR
    assert rec.error_type is not None and rec.error_type.endswith(type(raised.value).__name__)


@pytest.mark.slow
def test_only_a_live_telemetry_handle_keeps_an_exit_hook() -> None:
    # Each configure() used to leave the SDK's two exit hooks (and so live providers) behind,
    # even after shutdown(). Now a handle has one hook of its own, gone when it shuts down.
    code = """
import atexit
import opentelemetry.sdk.metrics, opentelemetry.sdk.trace  # their import-time hooks are not ours
from compiletrace import telemetry
hooks = []
register, unregister = atexit.register, atexit.unregister
atexit.register = lambda f, *a, **k: (hooks.append(f), register(f, *a, **k))[1]
atexit.unregister = lambda f: (hooks.__setitem__(slice(None), [h for h in hooks if h != f]), unregister(f))[1]
done = telemetry.configure(exporter="memory", set_global=False)
live = telemetry.configure(exporter="memory", set_global=False)
done.shutdown()
print([getattr(h, "__self__", None) is live for h in hooks])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[True]"


def test_a_bounded_registry_keeps_exact_totals_and_says_what_it_dropped() -> None:
    reg = compiletrace.Registry(capacity=3)
    handles = [reg.add(make_record(f"{i}/0", "encoder", frame_ns=MS)) for i in range(5)]
    assert [r.compile_id for r in reg.records()] == ["2/0", "3/0", "4/0"]
    assert reg.dropped == 2 and len(reg) == 3
    assert reg.by_component() == {"encoder": pytest.approx(0.005, abs=0)}
    assert reg.add_backward(handles[0], 0, MS) is None  # dropped: nothing to update
    updated = reg.add_backward(handles[4], 0, MS)
    assert updated is not None and updated.backward_ns == MS
    text = compiletrace.summary(reg)
    assert "2 older graphs were dropped past the registry's capacity (3)" in text
    assert text.endswith("compilation took 0.01 s (encoder: 0.01 s)")
    assert compiletrace.get_registry().capacity == 10_000


def test_reports_of_a_hundred_thousand_graphs_stay_small() -> None:
    from compiletrace.reports import html_report, summary_table

    records = [
        make_record(f"{i}/0", "encoder", start_unix_ns=i * MS, frame_ns=(i % 97 + 1) * MS)
        for i in range(100_000)
    ]
    text = summary_table(records)
    per_graph = text.split("Per graph")[1]
    assert "... and 98000 more graphs" in per_graph
    assert len(text) < 500_000
    page = html_report(records)
    assert len(page) < 5_000_000
    assert "98000 more graphs" in page
