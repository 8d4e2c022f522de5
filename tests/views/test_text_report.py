"""The text report as people read it: a header saying how the run was made, tables costliest
first with shares, no empty columns, the parts in reading order, progress that fits a log.

Most tests use records with exact figures (``make_record``); a few run the built-in model
with the eager backend, as ``compiletrace profile --backend eager`` does.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import compiletrace
from compiletrace import CacheOutcome, CompilationTimes, ProfileRun, WarmupResult, cli
from compiletrace._app.progress import Progress, process_start_unix_s, wall_time_s
from compiletrace._data.run_meta import CompilationMode, LoadedArtifacts, RunMeta
from compiletrace.bench.startup import BenchOptions, format_results, run_startup_bench
from compiletrace.cli.commands.profile import print_profile
from compiletrace.reports import summary_table
from compiletrace.reports._table import by_cost, component_order
from compiletrace.reports._text import cache_line, cache_state, header_lines, warmup_lines
from tests.conftest import MS, S, make_record

META = RunMeta(
    model="tests:build",
    backend="inductor",
    mode="max-autotune",
    compilation_mode=CompilationMode.STOCK_TORCH_COMPILE,
    device="cpu",
    torch_version="2.13.0",
    compiletrace_version="0.1.0",
)


def encoder_heavy() -> list[Any]:
    """The encoder compiles first and takes 85% of the time; the language model 15%."""
    return [
        make_record("0/0", "encoder", frame_ns=850 * MS, backend_ns=800 * MS),
        make_record("1/0", "language_model", start_unix_ns=850 * MS, frame_ns=150 * MS, backend_ns=100 * MS),
    ]


def table_rows(text: str, title: str) -> list[list[str]]:
    """The rows of the table under ``title`` (after its header and rule), split on runs of
    two or more spaces: the lines up to the first that is not a row of as many columns (a
    note under the table, a blank line)."""
    lines = text.splitlines()
    width = len(table_header(text, title))
    rows = []
    for line in lines[lines.index(title) + 3 :]:
        row = re.split(r"\s{2,}", line.strip())
        if not line.strip() or len(row) != width:
            break
        rows.append(row)
    return rows


def table_header(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    return re.split(r"\s{2,}", lines[lines.index(title) + 1].strip())


# -- order and shares ---------------------------------------------------------------------


def test_components_and_graphs_are_listed_costliest_first_with_their_share() -> None:
    text = summary_table(encoder_heavy())
    components = table_rows(text, "Per component")
    assert [row[0] for row in components] == ["encoder", "language_model"]
    head = table_header(text, "Per component")
    assert head[head.index("total s") + 1] == "share"
    assert [row[head.index("share")] for row in components] == ["85%", "15%"]
    graphs = table_rows(text, "Per graph")
    ghead = table_header(text, "Per graph")
    assert [row[0] for row in graphs] == ["0/0", "1/0"]
    assert [row[ghead.index("share")] for row in graphs] == ["85%", "15%"]
    # The one-line summary keeps its fixed form (serving engines log it; tests grep it).
    assert text.splitlines()[-1] == "compilation took 1.00 s (language_model: 0.15 s, encoder: 0.85 s)"


def test_ties_keep_compile_order() -> None:
    records = [
        make_record("0/0", "encoder", frame_ns=100 * MS),
        make_record("1/0", "language_model", start_unix_ns=100 * MS, frame_ns=100 * MS),
        make_record("2/0", "vision", start_unix_ns=200 * MS, frame_ns=300 * MS),
    ]
    assert component_order(records) == ["vision", "encoder", "language_model"]
    assert [r.compile_id for r in by_cost(records)] == ["2/0", "0/0", "1/0"]
    text = summary_table(records)
    assert [row[0] for row in table_rows(text, "Per component")] == ["vision", "encoder", "language_model"]
    assert [row[-1] for row in table_rows(text, "Per component")] == ["60%", "20%", "20%"]


def test_columns_that_carry_nothing_are_left_out_of_the_text_but_not_the_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # wide enough for the reason column (else it goes under)
    inference = encoder_heavy()
    text = summary_table(inference)
    for column in ("backward s", "recompile reason"):
        assert column not in text
    assert "Backend phases" not in text  # no graph has phases
    assert all("backward_ns" in r.to_dict() for r in inference)  # JSON keeps every field

    training = [
        *inference,
        make_record(
            "0/1", "encoder", start_unix_ns=S, frame_ns=100 * MS, backward_ns=20 * MS,
            is_recompile=True, recompile_reason="tensor 'x' size mismatch at index 0",
            phases={"inductor": 30 * MS, "kernel_compile": 0},
        ),
    ]  # fmt: skip
    text = summary_table(training)
    assert "backward s" in table_header(text, "Per component")
    assert "recompile reason" in table_header(text, "Per graph")
    phase_head = table_header(text, "Backend phases per graph (seconds)")
    assert "inductor" in phase_head and "kernel_compile" not in phase_head  # all zero: left out


# -- the header ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcomes", "state", "line"),
    [
        ([], "none", "cache: none (no graph compiled)"),
        ([CacheOutcome.NONE] * 2, "none", "cache: none (2 graphs, none consulted a compile cache)"),
        ([CacheOutcome.MISS] * 2, "cold", "cache: cold (2 graphs, every one a miss)"),
        ([CacheOutcome.HIT], "warm", "cache: warm (1 graph, every one a hit)"),
        (
            [CacheOutcome.HIT, CacheOutcome.MISS, CacheOutcome.NONE],
            "mixed",
            "cache: mixed (1 hit, 1 miss, 1 none)",
        ),
        ([CacheOutcome.MISS, CacheOutcome.BYPASS], "mixed", "cache: mixed (1 miss, 1 bypass)"),
    ],
)
def test_cache_state(outcomes: list[CacheOutcome], state: str, line: str) -> None:
    records = [make_record(f"{i}/0", fx_graph_cache=o) for i, o in enumerate(outcomes)]
    assert cache_state(records) == state
    assert cache_line(records) == line


def test_header_names_the_run_and_its_cache() -> None:
    records = [make_record(fx_graph_cache=CacheOutcome.HIT, aot_autograd_cache=CacheOutcome.HIT)]
    assert header_lines(records, META) == [
        "model tests:build on cpu: backend inductor, mode max-autotune",
        "torch 2.13.0, compiletrace 0.1.0; cache: warm (1 graph, every one a hit)",
    ]
    assert header_lines(records, replace(META, mode=None))[0].endswith("backend inductor, mode default")
    assert header_lines(records, replace(META, backend="eager", mode=None))[0].endswith(": backend eager")
    artifacts = LoadedArtifacts("/tmp/a.bin", 1_500_000, {"inductor": 2}, 0.42, "0" * 64, "verified", None,
                                True, "unsigned", None)  # fmt: skip
    assert header_lines(records, replace(META, cache_artifacts=artifacts))[2] == (
        "cache artifacts: loaded /tmp/a.bin (1.50 MB; 2 inductor; checked) in 0.42 s, before compiling"
    )
    # A registry has no meta: the cache line alone, then the tables, the summary line last.
    lines = summary_table(records).splitlines()
    assert lines[0] == "cache: warm (1 graph, every one a hit)" and lines[1] == ""
    assert lines[-1].startswith("compilation took ")


def test_a_saved_run_reports_its_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    warmup = WarmupResult(False, 1.25, CompilationTimes(), {"encoder": 1.0})
    path = tmp_path / "run.json"
    ProfileRun(tuple(encoder_heavy()), warmup, META).save(path)
    assert ProfileRun.load(path).summary().splitlines()[0].startswith("model tests:build on cpu")
    assert cli.main(["report", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == header_lines(encoder_heavy(), META)
    assert warmup_lines(warmup.to_dict()) == ["warm-up took 1.25 s (1.00 s of it compiling)"]


# -- compilation mode none: the eager baseline ---------------------------------------------


def test_compilation_mode_none_runs_the_model_once_for_a_baseline() -> None:
    run = compiletrace.profile(backend="eager", compilation_mode="none")
    assert run.records() == () and run.warmup.skipped
    assert run.meta.eager_run_s is not None and run.meta.eager_run_s > 0
    text = run.summary()
    assert "compilation mode none" in text.splitlines()[0]
    assert "eager run (the baseline): " in text
    assert "compilation took" not in text and "Per graph" not in text
    skipped = warmup_lines(run.warmup.to_dict())
    assert skipped[0].startswith("warm-up skipped (compilation mode none)")
    assert "unknown without a compiled run" in skipped[1]
    assert "about 9.50 s of compiling" in warmup_lines(run.warmup.to_dict(), compile_s=9.5)[1]


# -- the command's output -------------------------------------------------------------------


def test_profile_output_reads_in_order_and_fits_100_columns(capsys: pytest.CaptureFixture[str]) -> None:
    started = time.time()
    assert cli.main(["profile", "--backend", "eager"]) == 0
    took = time.time() - started
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert max(len(line) for line in lines) <= 100, "\n".join(lines)
    demo = "model compiletrace.models:build_demo on cpu"
    assert lines[0] == f"{demo}: backend eager, dynamic=None, fullgraph=False"  # as each compile used
    assert lines[1].startswith("torch ") and lines[1].endswith(
        "cache: none (2 graphs, none consulted a compile cache)"
    )

    def at(prefix: str) -> int:
        return next(i for i, line in enumerate(lines) if line.startswith(prefix))

    assert 2 < at("Per component") < at("Per graph") < at("compilation took") < at("warm-up took")
    assert at("wall time: ") == len(lines) - 1
    assert "backward s" not in captured.out and "recompile reason" not in captured.out
    totals = [float(row[-2]) for row in table_rows(captured.out, "Per component")]
    assert totals == sorted(totals, reverse=True)
    m = re.fullmatch(r"wall time: (\d+\.\d\d) s since the process started \(imports, .*\)", lines[-1])
    assert m is not None, lines[-1]
    assert float(m.group(1)) >= took - 0.01  # the whole process, this command included
    assert captured.err == ""  # not a terminal: profile keeps stderr for errors


def test_expensive_hits_come_after_the_warm_up(capsys: pytest.CaptureFixture[str]) -> None:
    hit = make_record(
        backend="inductor", frame_ns=3 * S, phases={"kernel_compile": 2 * S},
        fx_graph_cache=CacheOutcome.HIT, aot_autograd_cache=CacheOutcome.HIT,
    )  # fmt: skip
    run = ProfileRun((hit,), WarmupResult(False, 3.5, CompilationTimes()), META)
    print_profile(run)
    out = capsys.readouterr().out
    assert out.index("compilation took") < out.index("warm-up took") < out.index("Expensive cache hits")


def test_console_spans_go_to_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from compiletrace import telemetry

    real = telemetry.configure
    monkeypatch.setattr(telemetry, "configure", lambda **kw: real(**{**kw, "set_global": False}))
    assert cli.main(["profile", "--backend", "eager", "--console-spans"]) == 0
    captured = capsys.readouterr()
    assert '"trace_id"' in captured.err  # the spans, as the console exporter prints them
    assert '"trace_id"' not in captured.out and "{" not in captured.out
    assert captured.out.splitlines()[0].startswith("model compiletrace.models:build_demo")
    with pytest.raises(compiletrace.UsageError, match="out applies to exporter='console' only"):
        real(exporter="memory", set_global=False, out=sys.stderr)


# -- progress -------------------------------------------------------------------------------


class _Ticks(Progress):
    """Progress that counts its draws (each redraw of the thread, and each ``set``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.draws = 0
        self.drawn = threading.Condition()

    def _draw(self) -> None:
        super()._draw()
        with self.drawn:
            self.draws += 1
            self.drawn.notify_all()

    def wait_for_draws(self, n: int) -> None:
        """Until ``n`` more draws have ended, however slow the machine (a minute: a hang)."""
        with self.drawn:
            target = self.draws + n
            assert self.drawn.wait_for(lambda: self.draws >= target, timeout=60), "no redraws"


def test_a_finished_stage_is_not_redrawn() -> None:
    clock = [0.0]  # seconds, moved by hand: the figures shown are exact
    shown = io.StringIO()
    with _Ticks(shown, enabled=True, interval_s=0.001, clock=lambda: clock[0]) as p:
        p.set("compiling encoder")
        clock[0] = 2.0
        p.wait_for_draws(2)  # the thread redraws the running stage with its elapsed time
        assert re.search(r"compiling encoder\s+2\.0 s", shown.getvalue())
        p.note("compiled encoder 0/0 in 1.00 s")
        clock[0] = 3.0
        # A draw under way when the note came may end after it: four ended, three began after.
        p.wait_for_draws(4)
    after = shown.getvalue().split("compiled encoder 0/0 in 1.00 s\n", 1)[1]
    assert "compiling encoder" not in after and "3.0 s" not in after


FAKE_CHILD = textwrap.dedent(
    """
    import json, sys
    json.dump({"startup_time": 2.0, "compilation_time": 1.5, "encoder_compilation_time": 0.0,
               "encoder_compiled": False, "import_time": 0.5, "cache_hits": 0, "cache_misses": 2},
              open(sys.argv[-1], "w"))
    """
)


@pytest.mark.slow
def test_bench_progress_without_a_terminal_is_a_line_per_stage() -> None:
    log = io.StringIO()
    opts = BenchOptions(backend="eager", num_iters_cold=1, num_iters_warmup=1, num_iters_warm=2)
    with Progress(log) as progress:
        run_startup_bench(opts, progress=progress, child_command=[sys.executable, "-c", FAKE_CHILD])
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert [line.split(" finished")[0] for line in lines] == [
        "cold 1/1 ...", "cold 1/1",
        "warm-up 1/1 (untimed) ...", "warm-up 1/1 (untimed)",
        "warm 1/2 ...", "warm 1/2",
        "warm 2/2 ...", "warm 2/2",
    ]  # fmt: skip
    assert re.fullmatch(
        r"cold 1/1 finished in \d+\.\d\d s \(start-up 2\.00 s; cache 0 hit, 2 miss\)", lines[1]
    )


def test_bench_tables_say_what_they_hold() -> None:
    def stats(values: list[float]) -> dict[str, Any]:
        return {"times": values, "percentiles": {str(p): values[0] for p in (10, 25, 50, 75, 90, 99)}}

    data: dict[str, Any] = {"cold_cache_hits": [0], "cold_cache_misses": [2]}
    data |= {"warm_cache_hits": [2, 2], "warm_cache_misses": [0, 0]}
    for prefix, values in (("cold", [3.0]), ("warm", [1.0, 1.0])):
        for metric, scale in (("startup", 1.0), ("compilation", 1 / 3)):
            s = stats([v * scale for v in values])
            data[f"avg_{prefix}_{metric}_time"] = s["times"][0]
            data[f"{prefix}_{metric}_times"] = s["times"]
            data[f"{prefix}_{metric}_percentiles"] = s["percentiles"]
    text = format_results(json.loads(json.dumps(data)))
    cold, warm = text.split("\n\n")
    assert cold.splitlines()[0] == "COLD (1 iteration)"
    assert re.split(r"\s{2,}", cold.splitlines()[1]) == ["metric (s)", "value"]
    assert "non-encoder compilation time  1.000" in cold  # not a bare "compilation time"
    assert "p50" not in cold  # one iteration: its value, not six identical percentiles
    assert warm.splitlines()[0] == "WARM (2 iterations)" and "p50" in warm.splitlines()[1]


# -- wall time ------------------------------------------------------------------------------


@pytest.mark.slow
def test_process_start_time_is_read_to_the_hundredth() -> None:
    # The start is read before "now": a pause between the two only makes the figure larger,
    # and the child's life lies inside what the parent saw (to the hundredths /proc gives).
    probe = (
        "import time; from compiletrace._app.progress import process_start_unix_s as s; "
        "time.sleep(0.3); started = s(); print(time.time() - started)"
    )
    before = time.time()
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    parent_saw = time.time() - before
    child_says = float(out.stdout)
    assert 0.3 <= child_says <= parent_saw + 0.02  # within the process's life, not a second off
    started = process_start_unix_s()
    assert started is not None and started <= time.time()


def test_wall_time_is_since_the_process_start_or_else_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    # The start as read (above) is fixed here, so the figure is bounded by readings of the
    # same clock taken around the call: no tolerance, however long the call takes.
    from compiletrace._app import progress

    started = time.time() - 100.0
    monkeypatch.setattr(progress, "process_start_unix_s", lambda: started)
    before = time.time()
    seconds, since_process_start = wall_time_s(before - 5.0)
    after = time.time()
    assert since_process_start and before - started <= seconds <= after - started
    monkeypatch.setattr(progress, "process_start_unix_s", lambda: None)
    fallback = time.time() - 5.0
    before = time.time()
    seconds, since_process_start = wall_time_s(fallback)
    after = time.time()
    assert not since_process_start and before - fallback <= seconds <= after - fallback
    assert wall_time_s(time.time() + 60) == (0.0, False)  # a start in the future: never negative
