"""The CLI, in-process through main(argv)."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from compiletrace import ProfileRun, cli
from compiletrace._data.kinds import FileKind
from compiletrace.bench.startup import BenchOptions, ChildFailed, run_startup_bench

DOCS = Path(__file__).resolve().parents[2] / "docs"

FIXTURE_MODULE = textwrap.dedent(
    """
    import torch
    from compiletrace.models import Demo, build_demo

    CALLS = []

    def good(device="cpu"):
        CALLS.append(device)
        return build_demo(device)

    def boom():
        raise RuntimeError("kaboom")

    def wrong():
        return 42

    def single():
        CALLS.append("single")
        return Demo(torch.nn.Linear(4, 4), (torch.ones(2, 4),), {".": "language_model"})
    """
)


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    name = f"ct_models_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(FIXTURE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    mod = importlib.import_module(name)
    mod.NAME = name  # type: ignore[attr-defined]
    return mod


def test_profile_prints_tables_and_writes_every_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json, out_html, out_trace = tmp_path / "run.json", tmp_path / "run.html", tmp_path / "trace.json"
    rc = cli.main(
        ["profile", "--backend", "eager", "--json", str(out_json), "--html", str(out_html),
         "--chrome-trace", str(out_trace)]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    out = captured.out
    assert "Per component" in out and "Per graph" in out
    assert re.search(r"^encoder\s+1\s+0\s", out, re.M)
    assert re.search(r"^language_model\s+1\s+0\s", out, re.M)
    assert re.search(
        r"compilation took \d+\.\d\d s \(language_model: \d+\.\d\d s, encoder: \d+\.\d\d s\)", out
    )
    assert "warm-up took" in out
    assert captured.err == ""  # stderr is not a terminal: no progress display
    data = json.loads(out_json.read_text())
    assert data["kind"] == "compiletrace.run" and data["schema_version"] == FileKind.RUN.schema_version
    assert data["meta"]["model"] == "compiletrace.models:build_demo"
    assert data["meta"]["backend"] == "eager"
    run = ProfileRun.from_dict(data)
    assert sorted(r.component for r in run.records()) == ["encoder", "language_model"]
    assert all(r.backend == "eager" and r.graph_node_count > 0 for r in run.records())
    assert not run.warmup.skipped and run.warmup.duration_s > 0
    assert "<svg" in out_html.read_text()
    trace = json.loads(out_trace.read_text())
    assert any(e.get("ph") == "X" for e in trace["traceEvents"])
    assert not list(tmp_path.glob(".*tmp"))  # atomic writes leave no temporary file


def test_report_renders_a_saved_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "run.json"
    assert cli.main(["profile", "--backend", "eager", "--json", str(out_json)]) == 0
    profile_out = capsys.readouterr().out
    html_path = tmp_path / "again.html"
    assert cli.main(["report", str(out_json), "--html", str(html_path)]) == 0
    report_out = capsys.readouterr().out
    summary = next(line for line in profile_out.splitlines() if line.startswith("compilation took"))
    assert summary in report_out.splitlines()
    page = html_path.read_text()
    assert summary in page and "Timeline of graphs" in page


def test_component_option_replaces_the_factorys_mapping(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["profile", "--backend", "eager", "--component", "language_model=text"])
    out = capsys.readouterr().out
    assert rc == 0
    assert re.search(r"^text\s+1\s", out, re.M)
    assert not re.search(r"^encoder\s", out, re.M)


def test_compilation_mode_none_compiles_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["profile", "--backend", "eager", "--compilation-mode", "none"]) == 0
    out = capsys.readouterr().out
    assert "warm-up skipped" in out
    assert re.search(r"^eager run \(the baseline\): \d+\.\d{3} s$", out, re.M)
    assert "compilation took" not in out  # nothing compiled: no line that names one component


def test_user_factory_with_root_component(models: object, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["profile", f"{models.NAME}:single", "--backend", "eager"]) == 0  # type: ignore[attr-defined]
    assert models.CALLS == ["single"]  # type: ignore[attr-defined]
    assert re.search(r"^language_model\s+1\s", capsys.readouterr().out, re.M)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["profile", "no-colon"], "MODEL must look like 'package.module:factory'"),
        (["profile", "ct_no_such_module_xyz:f"], "cannot import module 'ct_no_such_module_xyz'"),
        (["profile", "compiletrace.models:nope"], "has no attribute 'nope'"),
        (["profile", "--component", "nope"], "--component must look like PATH=NAME"),
        (["profile", "--component", "no.such=encoder"], "is not a submodule"),
        (
            ["profile", "--component", "vison=encoder"],
            "is not a submodule of MultimodalDemo; did you mean 'vision'? its top-level submodules: "
            "vision, language_model",
        ),
        (["profile", "--backend", "no_such_backend"], "unknown backend 'no_such_backend'"),
        (["report", "/no/such/run.json"], "does not exist"),
        (["bench", "startup", "bad spec"], "MODEL must look like"),
        (["bench", "startup", "--num-iters-cold", "-1"], "--num-iters-cold must be >= 0"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


USER_MODULE = textwrap.dedent(
    """
    import torch
    from compiletrace.models import Demo

    class Tagger(torch.nn.Module):  # takes keywords only, as a transformers model does
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Linear(4, 4)
            self.head = torch.nn.Linear(4, 2)

        def forward(self, *, input_ids, attention_mask):
            return self.head(self.encoder(input_ids) * attention_mask)

    STEPS = []

    def keywords():
        inputs = {"input_ids": torch.ones(1, 4), "attention_mask": torch.ones(1, 4)}
        components = {"encoder": "encoder", "head": "language_model"}
        return Demo(Tagger(), example_kwargs=inputs, components=components)

    def two_requests():
        def step(model):
            STEPS.append(type(model).__name__)
            for n in (1, 1):  # a request twice: one compile per component, run twice
                model(input_ids=torch.ones(n, 4), attention_mask=torch.ones(n, 4))
        return Demo(Tagger(), components={"encoder": "encoder", "head": "language_model"}, step=step)
    """
)


def test_a_model_module_in_the_current_directory_imports_as_python_m_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compiletrace profile mymodule:build`` beside mymodule.py, from the installed command
    (whose import path does not start with the current directory), with keyword inputs."""
    name = f"ct_user_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert cli.main(["profile", f"{name}:keywords", "--backend", "eager"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^encoder\s+1\s", out, re.M) and re.search(r"^language_model\s+1\s", out, re.M)
    # A run callable: what one request does (generate, a training step), given the model.
    assert cli.main(["profile", f"{name}:two_requests", "--backend", "eager", "--json", "run.json"]) == 0
    assert sys.modules[name].STEPS == ["Tagger"]  # type: ignore[attr-defined]
    run = ProfileRun.load(tmp_path / "run.json")
    assert sorted(r.component for r in run.graph_records) == ["encoder", "language_model"]


def test_factory_that_raises_or_returns_junk(models: object, capsys: pytest.CaptureFixture[str]) -> None:
    name = models.NAME  # type: ignore[attr-defined]
    assert cli.main(["profile", f"{name}:boom"]) == 2
    err = capsys.readouterr().err
    assert "raised RuntimeError: kaboom" in err and err.count("\n") == 1
    assert cli.main(["profile", f"{name}:wrong"]) == 2
    assert "without model, example_inputs" in capsys.readouterr().err


def test_debug_shows_the_traceback(models: object, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["profile", f"{models.NAME}:boom", "--debug"]) == 2  # type: ignore[attr-defined]
    err = capsys.readouterr().err
    assert "Traceback" in err and "kaboom" in err


@pytest.mark.parametrize("flag", ["--json", "--html", "--chrome-trace"])
def test_unwritable_output_fails_before_building(
    flag: str, models: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for bad in (tmp_path / "missing-dir" / "out.json", tmp_path):  # no such directory; a directory
        rc = cli.main(["profile", f"{models.NAME}:good", "--backend", "eager", flag, str(bad)])  # type: ignore[attr-defined]
        err = capsys.readouterr().err
        assert rc == 2 and f"{flag}" in err and err.count("\n") == 1
    assert models.CALLS == []  # type: ignore[attr-defined]  # the factory never ran


def test_report_rejects_foreign_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    assert cli.main(["report", str(path)]) == 2
    assert "not a compiletrace run" in capsys.readouterr().err
    path.write_text("{not json")
    assert cli.main(["report", str(path)]) == 2
    assert "is not JSON" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["profile"],
        ["bench", "startup"],
        ["run"],
        ["report"],
        ["cache", "save"],
        ["cache", "inspect"],
        ["cache", "load"],
        ["compare"],
        ["doctor"],
        ["env"],
    ],
)
def test_help_is_quoted_in_the_reference(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*argv, "--help"]) == 0
    text = capsys.readouterr().out.strip()
    assert text.startswith("usage: compiletrace")
    reference = (DOCS / "reference.md").read_text()
    assert text in reference, f"docs/reference.md is out of date for `compiletrace {' '.join(argv)} --help`"


def test_a_bare_compiletrace_prints_the_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing was run: the help is the error's text, on stderr
    assert captured.err.startswith("usage: compiletrace")
    assert all(f"    {name}" in captured.err for name in ("profile", "run", "report", "doctor", "env"))
    assert cli.main(["nope"]) == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_every_command_in_the_table_parses_and_names_its_summary() -> None:
    from compiletrace.cli.commands import COMMANDS
    from compiletrace.cli.parsing import build_parser

    parser = build_parser()  # every command's module: each one's options beside its run
    text = parser.format_help()
    for name, info in COMMANDS.items():
        assert f"{name}" in text and info.summary in text
    assert parser.parse_args(["doctor", "r.json", "--fail-on", "recompiles"]).fail_on == "recompiles"


def test_the_exit_statuses_are_the_ones_the_launcher_and_shells_give() -> None:
    from compiletrace.cli import exit_codes

    assert exit_codes.EXIT_COMMAND_NOT_FOUND == 127
    assert (exit_codes.EXIT_INTERRUPTED, exit_codes.EXIT_BROKEN_PIPE) == (128 + 2, 128 + 13)


# -- bench startup with fake children (fast) --------------------------------------------

FAKE_CHILD = textwrap.dedent(
    """
    import json, os, sys
    log = os.environ["CT_TEST_LOG"]
    with open(log, "a") as f:
        f.write(os.environ["TORCHINDUCTOR_CACHE_DIR"] + "\\n")
    n = sum(1 for _ in open(log))
    json.dump({"startup_time": float(n), "compilation_time": n / 10, "encoder_compilation_time": 0.0,
               "encoder_compiled": False, "import_time": 0.5, "cache_hits": n, "cache_misses": 0},
              open(sys.argv[-1], "w"))
    """
)


@pytest.mark.slow
def test_bench_caches_and_json_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "log.txt"
    monkeypatch.setenv("CT_TEST_LOG", str(log))
    opts = BenchOptions(backend="eager", num_iters_cold=2, num_iters_warmup=1, num_iters_warm=2)
    result = run_startup_bench(opts, child_command=[sys.executable, "-c", FAKE_CHILD])
    dirs = log.read_text().splitlines()
    assert len(dirs) == 5
    assert len({dirs[0], dirs[1], dirs[2]}) == 3  # each cold run, and the warm cache, are fresh
    assert dirs[2] == dirs[3] == dirs[4]  # the warm-up iteration fills the cache the warm ones use
    assert not any(Path(d).parent.exists() for d in dirs)  # every temporary cache is removed
    data = result.to_dict()
    assert data["cold_startup_times"] == [1.0, 2.0]  # the warm-up iteration (3) is not timed
    assert data["warm_startup_times"] == [4.0, 5.0]
    assert data["avg_cold_startup_time"] == 1.5
    assert data["cold_startup_percentiles"]["50"] == 1.5
    assert set(data["cold_startup_percentiles"]) == {"10", "25", "50", "75", "90", "99"}
    assert data["avg_warm_compilation_time"] == pytest.approx(0.45)
    assert data["warm_cache_hits"] == [4, 5] and data["cold_cache_misses"] == [0, 0]
    assert not any("encoder" in k for k in data)  # no encoder compiled: no encoder keys


@pytest.mark.slow
def test_bench_failing_child_reports_stderr_tail(tmp_path: Path) -> None:
    script = (
        "import sys; print('line one', file=sys.stderr); print('it broke here', file=sys.stderr); sys.exit(3)"
    )
    with pytest.raises(ChildFailed) as info:
        run_startup_bench(
            BenchOptions(num_iters_cold=1, num_iters_warm=0), child_command=[sys.executable, "-c", script]
        )
    assert info.value.returncode == 3
    assert info.value.stderr_tail.splitlines()[-1] == "it broke here"


@pytest.mark.slow
def test_bench_ctrl_c_ends_the_child_and_removes_the_cache(tmp_path: Path) -> None:
    info = tmp_path / "child.txt"
    script = (
        "import os, sys, time; open(sys.argv[-1] + '.info', 'w').write('');"
        f"open({str(info)!r}, 'w').write(f\"{{os.getpid()}} {{os.environ['TORCHINDUCTOR_CACHE_DIR']}}\");"
        "time.sleep(60)"
    )

    def interrupt() -> None:
        deadline = time.monotonic() + 20
        while not info.exists() or not info.read_text():
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    # A job started in the background (`cmd &` in a script) begins with SIGINT ignored, and
    # Python then installs no KeyboardInterrupt handler: put Python's own back for this test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_startup_bench(
                BenchOptions(num_iters_cold=1, num_iters_warm=0), child_command=[sys.executable, "-c", script]
            )
    finally:
        signal.signal(signal.SIGINT, previous)
    pid, cache = info.read_text().split(" ", 1)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)  # the child was ended (and reaped)
    assert not Path(cache).parent.exists()


def test_progress_draws_only_on_a_terminal() -> None:
    import io

    from compiletrace._app.progress import Progress

    plain = io.StringIO()  # not a terminal: a plain line per stage, nothing redrawn
    with Progress(plain) as p:
        p.set("compiling encoder")
        p.note("compiled encoder 0/0")
    assert plain.getvalue() == "compiling encoder ...\ncompiled encoder 0/0\n"
    quiet = io.StringIO()
    with Progress(quiet, plain=False) as p:
        p.set("compiling encoder")
        p.note("compiled encoder 0/0")
    assert quiet.getvalue() == ""

    shown = io.StringIO()
    with Progress(shown, enabled=True, interval_s=0.01) as p:
        p.set("compiling encoder")
        p.note("compiled encoder 0/0 in 1.00 s")
    text = shown.getvalue()
    assert re.search(r"compiling encoder\s+\d+\.\d s", text)
    assert "compiled encoder 0/0 in 1.00 s\n" in text
    assert text.endswith("\r")  # the progress line is cleared at the end


class _FakeTelemetry:
    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []
        self.shutdowns = 0

    def configure(self, **kwargs: object) -> _FakeTelemetry:
        self.calls.append(kwargs)
        return self

    def shutdown(self) -> bool:
        self.shutdowns += 1
        return True


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            ["--otlp-endpoint", "http://collector:4318"],
            {"exporter": "otlp", "endpoint": "http://collector:4318"},
        ),
        (["--console-spans"], {"exporter": "console"}),
    ],
)
def test_span_options_configure_telemetry_and_flush(
    flags: list[str],
    expected: dict[str, object],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from compiletrace import telemetry

    fake = _FakeTelemetry()
    monkeypatch.setattr(telemetry, "configure", fake.configure)
    assert cli.main(["profile", "--backend", "eager", *flags]) == 0
    assert len(fake.calls) == 1 and expected.items() <= fake.calls[0].items()
    assert fake.shutdowns == 1  # spans flushed before the command returns
    assert "compilation took" in capsys.readouterr().out


def test_bad_otlp_endpoint_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["profile", "--backend", "eager", "--otlp-endpoint", "not a url"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def _wide_run(path: Path) -> Path:
    """A run as a transformers model makes one: long code names, long recompile reasons."""
    from tests.conftest import S, make_record, save_run

    reason = "0/0: tensor 'kwargs['past_key_values'].layers[11].keys' size mismatch at index 2. expected 4"
    code = "capture_outputs.<locals>.wrapper.<locals>.torch_dynamo_resume_in_forward_at_1112"
    records = [
        make_record(f"0/{i}", "multi_modal_projector_and_language_model", start_unix_ns=i * S,
                    frame_ns=1234 * S // 1000, code_name=code, is_recompile=i > 0,
                    recompile_reason=reason if i else None)
        for i in range(3)
    ]  # fmt: skip
    return save_run(path, records)


def test_every_table_fits_the_width_and_keeps_its_figures_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _wide_run(tmp_path / "run.json")
    monkeypatch.delenv("COLUMNS", raising=False)
    for columns, width in ((None, 100), ("300", 300)):  # no terminal: 100
        if columns is not None:
            monkeypatch.setenv("COLUMNS", columns)
        assert cli.main(["report", str(run)]) == 0
        out = capsys.readouterr().out
        table = out[out.index("Per graph") : out.index("compilation took")].splitlines()[1:-1]
        assert table and max(map(len, table)) <= width, (width, max(map(len, table)))
        rows = [line for line in table if line.startswith("0/")]
        assert len(rows) == 3 and all(" 1.234 " in r for r in rows)  # figures whole
        # A long name is cut only where it would not fit.
        assert all(("capture_outputs.<locals>.wrapper" in r) is (width == 300) for r in rows)
