"""``compiletrace doctor --verify``: each fix the doctor can apply with no edit is proven by
re-running the program with it (``run --apply``), and judged on what the runs recorded."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import compiletrace
from compiletrace import cli
from compiletrace._app.job import ProfileJob
from compiletrace._app.verify import (
    Trial,
    Verdict,
    _verdict,
    measure_edit,
    verified_findings,
    verify_lines,
    verify_rows,
    verify_table,
)
from compiletrace._core.torch_compat import apply_config_fix
from compiletrace._data.findings import Finding, findings_from_dict
from compiletrace._data.job import JobProcess, ProcessInfo
from compiletrace._data.records import CompilationTimes
from compiletrace._data.run import Run, WarmupResult
from compiletrace._doctor import (
    BROKE,
    COMPILES,
    DID_NOT_HELP,
    GATE_HELD,
    MANUAL,
    PARTLY,
    SLOWER,
    UNCOMPILED,
    VERIFIED,
    Effect,
    judge,
    seconds_effect,
    with_seconds,
)
from tests.conftest import make_record

PROGRAM = str(Path(__file__).parents[1] / "programs" / "fixable.py")


def _trial(
    frames: int, exit_status: int = 0, *, recompiles: int = 0, refused: int = 0, cpu_s: float = 0.0
) -> Trial:
    """A run of ``frames`` frame compiles, ``recompiles`` of them of one function (m.py:3)
    after a size changed, ``refused`` of those past torch's recompile limit; ``cpu_s``: the
    compile CPU seconds of the run, spread evenly over its frames."""
    where = {"code_filename": "m.py", "code_firstlineno": 3}
    cpu = {"cpu_ns": round(cpu_s * 1e9 / frames)} if cpu_s and frames else {}
    records = [make_record(f"{i}/0", "lm", **cpu) for i in range(frames - recompiles)]
    for i in range(recompiles):
        records.append(
            make_record(
                f"9/{i + 1}",
                "lm",
                is_recompile=True,
                recompile_reason=f"tensor 'x' size mismatch at index 0. expected {i + 2}, actual {i + 3}",
                recompile_limit_hit=i >= recompiles - refused,
                recompile_limit=8,
                **where,
                **cpu,
            )
        )
    run = Run(tuple(records), WarmupResult(True, 0.0, CompilationTimes()), {})
    job = ProfileJob(("python", "x.py"), exit_status, (JobProcess(ProcessInfo(1, 0, "main", ()), run),))
    return Trial(None, job, wall_s=1.0)


def test_a_verdict_rests_on_counts_and_findings() -> None:
    before = _trial(4, recompiles=2)
    (finding,) = before.findings
    assert (finding.kind, finding.location) == ("recompiles", "m.py:3")
    assert judge(finding, before, _trial(2)) == VERIFIED
    assert judge(finding, before, _trial(4)) == DID_NOT_HELP  # nothing compiled less
    # Still there, with fewer recompiles and fewer frames: in part; fewer recompiles of the
    # same frames is no help.
    assert judge(finding, before, _trial(3, recompiles=1)) == PARTLY
    assert judge(finding, before, _trial(4, recompiles=1)) == DID_NOT_HELP
    # A run that ends otherwise than the baseline proves nothing, whichever way.
    assert judge(finding, before, _trial(2, exit_status=1)) == BROKE
    assert judge(finding, _trial(4, 1, recompiles=2), _trial(0)) == BROKE


def test_a_raised_recompile_limit_is_verified_by_what_no_longer_runs_eagerly() -> None:
    before = _trial(9, recompiles=9, refused=1)
    (finding,) = [f for f in before.findings if f.kind == "recompile_limit"]
    assert finding.evidence["auto_fix"] == "mark-dynamic=L['x']:0"  # a shape guard: its dimension, first
    limit = Finding("recompile_limit", "lm", 1.0, "t", "f", "elsewhere.py:1")
    assert judge(limit, before, _trial(12, recompiles=11)) == VERIFIED  # more frames, none refused
    assert judge(limit, before, _trial(12, recompiles=11, refused=1)) == DID_NOT_HELP


def test_seconds_decide_on_the_rounds_paired_differences() -> None:
    """Each round's base and fix ran side by side: their differences, not the arms' medians,
    are judged; a saving must beat half their range, 3% of the compile and 0.05 s."""
    saves = seconds_effect([5.0, 5.4, 5.1], [3.9, 4.0, 4.2])  # 1.1, 1.4, 0.9
    assert (saves.effect, saves.rounds) == (Effect.SAVES, 3)
    assert saves.saving == pytest.approx(1.1) and saves.spread == pytest.approx(0.25)
    costs = seconds_effect([5.0, 5.4, 5.1], [6.9, 7.0, 7.2])
    assert costs.effect is Effect.COSTS and costs.saving == pytest.approx(-1.9)
    # Two rounds that disagree: the spread swallows the median.
    noisy = seconds_effect([4.06, 4.22, 4.41], [3.41, 4.09, 5.75])
    assert noisy.effect is Effect.NOISE and noisy.saving == pytest.approx(0.13)
    # The floor: a 0.29 s change of a 20 s compile is nothing (3% is 0.6 s).
    assert seconds_effect([20.0, 20.1, 20.0], [19.7, 19.8, 19.72]).effect is Effect.NOISE
    assert seconds_effect([0.30, 0.31, 0.30], [0.27, 0.28, 0.27]).effect is Effect.NOISE  # under 0.05 s
    # One round: no spread to judge against.
    assert seconds_effect([5.0], [3.0]).effect is Effect.NOT_JUDGED
    # The verdict: counts first, then seconds.
    assert with_seconds(VERIFIED, saves) == VERIFIED
    assert with_seconds(VERIFIED, costs) == SLOWER  # fewer frames, more seconds: slower
    assert with_seconds(PARTLY, saves) == PARTLY and with_seconds(PARTLY, noisy) == DID_NOT_HELP
    assert with_seconds(VERIFIED, noisy) == DID_NOT_HELP
    assert with_seconds(DID_NOT_HELP, costs) == SLOWER and with_seconds(DID_NOT_HELP, saves) == DID_NOT_HELP
    assert with_seconds(BROKE, costs) == BROKE and with_seconds(MANUAL, saves) == MANUAL
    assert with_seconds(VERIFIED, seconds_effect([5.0], [3.0])) == VERIFIED  # counts alone


def test_a_verdict_reads_every_round_and_says_what_the_estimate_was_worth() -> None:
    base = [_trial(4, recompiles=2, cpu_s=s) for s in (5.0, 5.4, 5.1)]
    (finding,) = base[0].findings
    staked = replace(finding, seconds=1.25, evidence={**finding.evidence, "at_stake": {"seconds": 1.25}})
    fixed = [_trial(2, cpu_s=s) for s in (3.9, 4.0, 4.2)]
    verdict = _verdict(staked, "mark-dynamic=L['x']:0", base, fixed, alternative=False)
    assert verdict.verdict == VERIFIED and verdict.cpu is not None
    assert verdict.cpu.saving == pytest.approx(1.1) and verdict.calibration == pytest.approx(1.1 / 1.25)
    measured = verified_findings([verdict])[0].evidence["verify"]
    assert measured["rounds"] == 3 and measured["compile_cpu_s"] == [5.1, 4.0]
    assert measured["saved_cpu_s"] == {"median": 1.1, "spread": 0.25} and measured["calibration"] == 0.88
    assert measured["compile_cpu_s_runs"] == [[5.0, 5.4, 5.1], [3.9, 4.0, 4.2]]
    # Fewer frames and more seconds: made it slower. A round that ended otherwise: broke it.
    slower = _verdict(
        staked, "dynamic-shapes", base, [_trial(2, cpu_s=s) for s in (6.9, 7.0, 7.2)], alternative=True
    )
    assert slower.verdict == SLOWER and slower.alternative
    crashed = [fixed[0], _trial(2, exit_status=1, cpu_s=1.0), fixed[2]]
    assert _verdict(staked, "mark-dynamic=L['x']:0", base, crashed, alternative=False).verdict == BROKE
    rows = verify_rows([verdict, slower])
    assert [r.verdict for r in rows] == [VERIFIED, SLOWER] and rows[1].alternative
    assert rows[0].saved_cpu == pytest.approx((1.1, 0.25)) and rows[0].at_stake_s == 1.25
    assert rows[0].finding == f"recompiles ({finding.component})"
    # A finding of no component (a frame of DDP's that compiled nothing) is its kind alone.
    (unnamed,) = verify_rows([replace(verdict, finding=replace(staked, component=""))])
    assert unnamed.finding == "recompiles"


def test_regional_compilation_is_verified_by_fewer_graph_nodes_when_frames_stay() -> None:
    """A model compiled whole traces its block once per block in one frame; compiled
    regionally, the block's own frame traces it once: the same frame count, fewer nodes."""

    def trial(nodes: int, frames: int = 1, limit_hit: bool = False) -> Trial:
        records = tuple(
            make_record(
                f"0/{i}", "lm", graph_node_count=nodes // frames, recompile_limit_hit=limit_hit and i > 0
            )
            for i in range(frames)
        )
        run = Run(records, WarmupResult(True, 0.0, CompilationTimes()), {})
        job = ProfileJob(("python", "x.py"), 0, (JobProcess(ProcessInfo(1, 0, "main", ()), run),))
        return Trial(None, job, wall_s=1.0)

    costly = Finding("costly_trace", "lm", 1.0, "t", "f", "m.py:3", {"auto_fix": "regional-compile=Block"})
    assert judge(costly, trial(400), trial(50)) == VERIFIED
    assert judge(costly, trial(400), trial(400)) == DID_NOT_HELP
    # Blocks that each recompile (a per-block attribute in the guards): fewer nodes, but
    # more frames and code past torch's recompile limit, running eagerly. No help.
    assert judge(costly, trial(400), trial(300, frames=9)) == DID_NOT_HELP
    assert judge(costly, trial(400, frames=2), trial(50, frames=2, limit_hit=True)) == DID_NOT_HELP
    other = Finding("costly_trace", "lm", 1.0, "t", "f", "m.py:3")  # no regional fix: frames decide
    assert judge(other, trial(400), trial(50)) == DID_NOT_HELP


def test_a_fix_reaches_every_thread_of_the_process() -> None:
    # A plain assignment to torch's config is a context variable: the assigning thread's alone.
    entries = torch._dynamo.config._config
    saved = {
        name: entries[name].default for name in ("assume_static_by_default", "reorderable_logging_functions")
    }
    try:
        apply_config_fix("dynamic-shapes")
        apply_config_fix("reorderable-print")
        seen: list[tuple[bool, bool]] = []
        config = torch._dynamo.config
        worker = threading.Thread(
            target=lambda: seen.append(
                (config.assume_static_by_default, print in config.reorderable_logging_functions)
            )
        )
        worker.start()
        worker.join()
        assert seen == [(False, True)]
    finally:
        for name, value in saved.items():
            entries[name].default = value
    assert torch._dynamo.config.assume_static_by_default is True


@pytest.mark.slow
def test_doctor_verify_reruns_the_program_once_per_fix_and_measures_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the table's rows whole
    job = tmp_path / "job.json"
    assert cli.main(["run", "--json", str(job), "--", sys.executable, PROGRAM]) == 0
    capsys.readouterr()

    # --json -: the findings alone on stdout (the program's own output goes to stderr), the
    # same verdicts as a table in the HTML page; a --fail-on kind present: exit 1. Two rounds,
    # base and fixes interleaved.
    page = tmp_path / "verified.html"
    command = [
        "doctor",
        "--verify",
        "--trust",
        str(job),
        "--rounds",
        "2",
        "--json",
        "-",
        "--html",
        str(page),
        "--fail-on",
        "graph_break",
    ]
    assert cli.main(command) == 1
    printed = capsys.readouterr()
    found = {f.kind.value: f for f in findings_from_dict(json.loads(printed.out))}
    verified = {kind: f.evidence["verify"] for kind, f in found.items()}
    # The print: moved out of the graph, one graph per call instead of two.
    assert verified["graph_break"]["fix"] == "reorderable-print"
    assert verified["graph_break"]["frame_compiles"] == [4, 2]
    # The batch size: dynamic from the first call, no recompile (the print still splits it).
    # Marked from outside, the dimensions torch made dynamic (the forward's and the resume
    # function's), nothing else.
    fix = verified["recompiles"]["fix"]
    assert fix.startswith("mark-dynamic=") and "L['x']:0" in fix
    assert verified["recompiles"]["frame_compiles"] == [4, 2]
    ran = [line.partition("running ")[2] for line in printed.err.splitlines() if "running " in line]
    fixes = [f"with --apply {f}" for f in (fix, "reorderable-print")]
    assert [line.split(" (round")[0] for line in ran] == [
        "the baseline: " + " ".join([sys.executable, PROGRAM]),
        *fixes,
        "the baseline",
        *fixes,
        # With both fixes verified, the plan: two more rounds, each paired with the baseline.
        *[line.split(" (round")[0] for line in ran[6:]],
    ]
    plan = json.loads(printed.out).get("plan")
    plan_runs = [line.split(" (round")[0] for line in ran[6:]]
    if plan is not None and len(plan["fixes"]) > 1:  # one fix: its own rounds are the plan's
        both = "the plan: " + ", ".join(plan["fixes"])
        assert plan_runs == ["the baseline beside the plan", both] * 2 and plan["rounds"] == 2
    else:
        assert plan_runs == []
    for kind, measured in verified.items():
        # The seconds, as the two rounds measured them: the verdict is the counts' (verified:
        # one frame fewer per call) read with them, whatever the machine's load did.
        assert measured["rounds"] == 2 and len(measured["compile_cpu_s_runs"][1]) == 2
        effect = seconds_effect(*measured["compile_cpu_s_runs"])
        assert measured["seconds"] == effect.effect.value
        assert measured["verdict"] == with_seconds(VERIFIED, effect), kind
        assert measured["at_stake_s"] == found[kind].evidence["at_stake"]["seconds"]

    # The same table in the HTML page, under the findings (each with what was measured).
    html = page.read_text()
    assert 'data-table="verify"' in html and "<td>recompiles (Model)</td><td>mark-dynamic=" in html
    assert "<td>4 -&gt; 2</td>" in html  # the frame compiles, before -> after
    verdicts = {str(m["verdict"]).partition(":")[0] for m in verified.values()}
    assert all(f"verdict: {v}" in html for v in verdicts), html
    # Without --verify: the findings alone.
    plain = tmp_path / "findings.html"
    assert cli.main(["doctor", str(job), "--html", str(plain)]) == 0
    assert "ct-findings" in plain.read_text() and 'data-table="verify"' not in plain.read_text()


@pytest.mark.slow
def test_run_apply_makes_the_setting_in_every_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "job.json"
    assert (
        cli.main(["run", "--apply", "dynamic-shapes", "--json", str(job), "--", sys.executable, PROGRAM]) == 0
    )
    loaded = compiletrace.load(job)
    assert isinstance(loaded, ProfileJob)
    (process,) = loaded.processes
    assert process.run.meta.applied_fixes == ("dynamic-shapes",)
    assert len(process.run.graph_records) == 2 and not any(r.is_recompile for r in process.run.graph_records)


@pytest.mark.slow
def test_bad_input_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    assert cli.main(["run", "--apply", "no-such-fix", "--", *command]) == 2
    assert "unknown fix 'no-such-fix'; the fixes that apply with no edit: capture-scalar-outputs" in (
        capsys.readouterr().err
    )
    assert not marker.exists()

    # A job file names the command --verify would run: only with --trust.
    job = tmp_path / "job.json"
    assert cli.main(["run", "--json", str(job), "--", *command]) == 0
    marker.unlink()
    capsys.readouterr()
    assert cli.main(["doctor", "--verify", str(job)]) == 2
    err = capsys.readouterr().err
    assert "--verify would run what this file names (" in err and "give --trust" in err
    assert not marker.exists()
    assert cli.main(["doctor", "--trust", str(job)]) == 2
    assert "--trust is for --verify" in capsys.readouterr().err

    # A job a signal ended (a server stopped by hand) would not end when re-run; a job whose
    # directory is gone would run elsewhere.
    for changed, message in (
        ({"exit_status": 143}, "the job ended by a signal"),
        ({"cwd": str(tmp_path / "gone")}, "is gone"),
    ):
        data = json.loads(job.read_text())
        data.update(changed)
        bad = tmp_path / "bad-job.json"
        bad.write_text(json.dumps(data))
        assert cli.main(["doctor", "--verify", "--trust", str(bad)]) == 2
        assert message in capsys.readouterr().err
        assert not marker.exists()


def _run_then_verify(tmp_path: Path, program: str, *args: str) -> list[Finding]:
    """``compiletrace run`` a program of tests/programs, then ``doctor --verify`` its job, one
    round (the counts: the seconds are judged on three, and benchmarks/verify_cases.py runs
    those): the findings, each with what was measured (``evidence["verify"]``)."""
    pytest.importorskip("transformers")
    job = tmp_path / "job.json"
    command = [sys.executable, str(Path(PROGRAM).with_name(program)), *args]
    assert cli.main(["run", "--json", str(job), "--", *command]) == 0
    out = tmp_path / "verified.json"
    assert cli.main(["doctor", "--verify", "--trust", str(job), "--rounds", "1", "--json", str(out)]) == 0
    return findings_from_dict(json.loads(out.read_text()))


@pytest.mark.real_model
def test_a_real_models_recompile_is_verified_fixed_by_marking_the_length_dynamic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (finding,) = _run_then_verify(tmp_path, "hf_bert.py")
    # torch's automatic dynamic shapes recompiled once, on the second length: the length,
    # marked dynamic from outside with torch's own name for it, compiles one graph.
    assert finding.title.startswith("BertForSequenceClassification.forward recompiled 1 time")
    assert "L['kwargs']['input_ids']:1" in finding.evidence["dynamic_sources"]
    measured = finding.evidence["verify"]
    assert (measured["fix"], measured["frame_compiles"], measured["verdict"]) == (
        finding.evidence["auto_fix"],
        [2, 1],
        VERIFIED,
    )


@pytest.mark.real_model
def test_a_repeated_llama_layer_is_verified_fixed_by_regional_compilation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Four transformers decoder layers, a print between each, compiled whole by the
    program: the layer's graph compiled in four frames. Regional compilation, applied from
    outside (the program calls torch.compile on the whole model), compiles it once."""
    found = {f.kind.value: f for f in _run_then_verify(tmp_path, "unrolled_llama.py")}
    repeated = found["repeated_graph"]
    assert repeated.evidence["block"] == "LlamaDecoderLayer"
    measured = repeated.evidence["verify"]
    assert measured["fix"] == "regional-compile=LlamaDecoderLayer" and measured["verdict"] == VERIFIED
    assert measured["frame_compiles"] == [4, 1]
    before_nodes, after_nodes = measured["graph_nodes"]
    assert after_nodes * 4 < before_nodes  # one layer's graph, not four and the rest
    assert measured["exit_status"] == [0, 0]
    # The prints: moved out of the graph, one graph for the whole forward.
    assert found["graph_break"].evidence["verify"]["frame_compiles"] == [4, 1]


@pytest.mark.real_model
def test_a_growing_generation_cache_is_verified_helped_by_marking_it_dynamic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Llama generate with its forward compiled: the dynamic cache grows every step. Its
    dimension marked dynamic from the first call removes that recompile; the decode step's
    size 1 is torch's specialisation, so one is left: helped in part."""
    (finding,) = _run_then_verify(tmp_path, "hf_llama.py", "generate", str(tmp_path / "oracle.json"))
    assert finding.kind.value == "recompiles" and "static-cache" in finding.evidence["other_fixes"]
    measured = finding.evidence["verify"]
    assert measured["fix"].startswith("mark-dynamic=") and "keys:2" in measured["fix"]
    assert (measured["frame_compiles"], measured["verdict"]) == ([3, 2], PARTLY)


FACTORY = """
import torch
from compiletrace.models import Demo


class Sizes(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).relu() * 2


def build():
    def step(model: torch.nn.Module) -> None:
        with torch.no_grad():
            for batch in (4, 5, 6, 7):
                model(torch.randn(batch, 8))

    return Demo(Sizes(), components={".": "language_model"}, step=step)
"""


@pytest.mark.slow
def test_a_profile_run_is_verified_by_re_running_its_model_with_its_steady_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run saved by 'compiletrace profile' names a MODEL, not a command: --verify re-runs
    the model through 'compiletrace profile' with each fix, and times its steady-state call."""
    (tmp_path / "sizes_model.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run.json"
    assert cli.main(["profile", "sizes_model:build", "--backend", "eager", "--json", str(run)]) == 0
    capsys.readouterr()
    assert cli.main(["doctor", "--verify", str(run)]) == 2  # the file names code to import
    err = capsys.readouterr().err
    assert "the model sizes_model:build, imported from" in err and "give --trust" in err

    out = tmp_path / "verified.json"
    assert cli.main(["doctor", "--verify", "--trust", str(run), "--rounds", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    (finding,) = [f for f in findings_from_dict(json.loads(out.read_text())) if f.kind == "recompiles"]
    measured = finding.evidence["verify"]
    # Static shapes: the first size, then torch's automatic dynamic recompile; the batch
    # marked dynamic from the first call: one.
    assert (measured["fix"], measured["frame_compiles"], measured["verdict"]) == (
        finding.evidence["auto_fix"],
        [2, 1],
        VERIFIED,
    )
    assert measured["fix"].startswith("mark-dynamic=")
    before, after = measured["steady_call_s"]
    assert before > 0 and after > 0  # both trials timed their steady state
    joined = " ".join(printed.split())  # the notes, as wrapped for the width, joined
    assert "call ms" in printed and "the median of 20 calls after the warm-up" in joined


def test_a_run_whose_options_profile_did_not_write_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {"model": "m:build", "backend": "eager", "compilation_mode": "stock", "device": "cpu"}
    for changed, message in (
        ({"backend": "--help"}, "the run's 'backend' is '--help': not one 'compiletrace profile' wrote"),
        ({"components": {"--html": "x"}}, "the run's component '--html' is not a submodule path"),
        ({"components": {"a=b": "x"}}, "the run's component 'a=b' is not a submodule path"),
    ):
        run = Run(
            (make_record("0/0", "lm"),), WarmupResult(True, 0.0, CompilationTimes()), {**good, **changed}
        )
        path = tmp_path / "run.json"
        compiletrace.ProfileRun.of(run).save(path)
        assert cli.main(["doctor", "--verify", "--trust", str(path)]) == 2
        assert message in capsys.readouterr().err


def test_a_fix_that_slows_the_compiled_model_says_so_and_a_small_change_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the table's rows whole
    before = replace(_trial(4, recompiles=2), steady_call_s=0.010)
    (finding,) = before.findings
    # 30% slower beyond the calls' spread; 5% slower; 30% slower within a spread of 4 ms.
    for after_s, spread_s, said in ((0.013, 0.001, True), (0.0105, 0.0, False), (0.013, 0.004, False)):
        after = replace(_trial(2), fix="dynamic-shapes", steady_call_s=after_s, steady_spread_s=spread_s)
        verdict = Verdict(finding, "dynamic-shapes", before, after, judge(finding, before, after))
        lines = verify_lines([verdict])
        assert ("with dynamic-shapes, the compiled model is 30% slower per call" in lines) is said
        assert any(f"10.00 -> {after_s * 1000:.2f}" in line for line in lines)  # call ms, both trials
        measured = verified_findings([verdict])[0].evidence["verify"]
        assert measured["steady_call_s"] == [0.010, after_s]
        assert measured["slower_per_call"] == round(after_s / 0.010 - 1, 4)


SERVE = str(Path(__file__).parents[1] / "programs" / "serve_after_ready.py")


@pytest.mark.slow
def test_the_stances_at_ready_run_the_late_call_uncompiled_and_hold_a_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request of a size the warm-up did not cover: eager-after-ready removes the
    recompile, and that call runs eagerly ("runs uncompiled", never verified);
    fail-after-ready stops the program at it ("gate held")."""
    monkeypatch.chdir(Path(SERVE).parent)  # where the program's module imports from
    job = tmp_path / "job.json"
    argv = ["run", "--ready", "tiny_server:warm_up", "--json", str(job), "--", sys.executable, SERVE, "shape"]
    assert cli.main(argv) == 0
    capsys.readouterr()
    # A grace far past the late request: the program ends by itself right after it, so each
    # trial still ends then, however loaded the machine.
    assert cli.main(["doctor", "--verify", "--trust", str(job), "--grace", "120", "--json", "-"]) == 0
    printed = capsys.readouterr()
    (late,) = [f for f in findings_from_dict(json.loads(printed.out)) if f.kind == "compile_after_ready"]
    fix, gate = late.evidence["verify"], late.evidence["verify_gate"]
    assert (fix["fix"], fix["verdict"], fix["frame_compiles"], fix["exit_status"]) == (
        "eager-after-ready",
        UNCOMPILED,
        [2, 1],
        [0, 0],
    )
    # The gate's verdict rests on the run's record of the compile torch refused: the trial
    # re-ran the job with its ready mark, and the stance was set there.
    assert (gate["fix"], gate["verdict"], gate["exit_status"]) == ("fail-after-ready", GATE_HELD, [0, 1])
    assert "calibration" not in gate and "a gate, not a fix" in gate["why"]
    assert "running with --apply fail-after-ready" in printed.err


CHURN = """
import sys
import torch

def churn(x):
    return x.sin() + 1

f = torch.compile(churn, backend="eager", dynamic=sys.argv[1] == "dynamic")
for n in (2, 3, 4, 5):
    f(torch.ones(n))
"""


@pytest.mark.slow
def test_a_fix_that_needs_an_edit_is_measured_as_the_program_edited_interleaved(tmp_path: Path) -> None:
    program = tmp_path / "churn.py"
    program.write_text(CHURN)
    said: list[str] = []
    verdict = measure_edit(
        [sys.executable, str(program), "static"],
        [sys.executable, str(program), "dynamic"],
        "recompiles",
        change="edit: dynamic=True",
        rounds=2,
        progress=said.append,
    )
    assert verdict is not None and verdict.fix == "edit: dynamic=True"
    assert [line.split(" (round")[0] for line in said] == ["the baseline", "edited: edit: dynamic=True"] * 2
    assert (verdict.before.frame_compiles, verdict.after.frame_compiles) == (4, 1)
    assert len(verdict.base_runs) == len(verdict.fix_runs) == 2 and verdict.cpu is not None
    assert verdict.verdict == with_seconds(VERIFIED, verdict.cpu)  # the counts, read with the seconds
    # The edited program shows no such finding to judge: nothing to measure.
    assert measure_edit([sys.executable, str(program), "dynamic"], [sys.executable, "-c", "pass"],
                        "recompiles", change="-", rounds=1) is None  # fmt: skip


EARLY_EXIT = str(Path(__file__).parents[1] / "programs" / "early_exit.py")


@pytest.mark.slow
def test_a_fix_that_makes_code_compile_says_it_compiles_now_never_verified() -> None:
    """The model compiled whole runs uncompiled (its exit check reads ``.item()``): the edit
    that compiles its step costs compile seconds by design, so no calibration and no
    "verified" (a promise of seconds saved) is said of it."""
    verdict = measure_edit(
        [sys.executable, EARLY_EXIT, "whole"],
        [sys.executable, EARLY_EXIT, "body"],
        "nothing_compiled",
        change="edit: compile the step",
        rounds=2,
    )
    assert verdict is not None and not verdict.seconds_judged
    assert (verdict.before.frame_compiles, verdict.before.graph_nodes) == (1, 0)  # traced, no graph
    assert verdict.after is not None and verdict.after.graph_nodes > 0
    assert verdict.verdict == COMPILES and verdict.calibration is None
    (finding,) = verified_findings([verdict])
    measured = finding.evidence["verify"]
    assert measured["verdict"] == COMPILES and "calibration" not in measured


def _blocks_trial(blocks: int, *, limit: int = 8, cpu_s: float = 1.0, whole: bool = False) -> Trial:
    """A model of ``blocks`` GPT2Block compiled whole (one frame, every block inside it), or
    regionally with a frame per block, each specialised on its own cache layer: one shared
    frame, so the blocks past torch's recompile ``limit`` are refused (one record) and the
    rest run no compiled graph."""
    shared = {"code_filename": "modeling_layers.py", "code_firstlineno": 89, "code_name": "wrapper"}
    if whole:
        records = [make_record("0/0", "lm", graph_node_count=blocks * 46 + 13, cpu_ns=round(cpu_s * 1e9))]
    else:
        records = [
            make_record(
                f"0/{i}",
                f"h.{i}",
                graph_node_count=0 if i >= limit else 46,
                module_class="GPT2Block",
                module_path=f"transformer.h.{i}",
                recompile_limit=limit,
                recompile_limit_hit=i >= limit,
                cpu_ns=round(cpu_s * 1e9 / blocks),
                **shared,
            )
            for i in range(min(blocks, limit + 1))
        ]
    run = Run(tuple(records), WarmupResult(True, 0.0, CompilationTimes()), {})
    job = ProfileJob(("python", "x.py"), 0, (JobProcess(ProcessInfo(1, 0, "main", ()), run),))
    return Trial(None, job, wall_s=1.0)


REGIONAL = Finding(
    "repeated_block",
    "lm",
    2.0,
    "GPT2Block traced 12 times inside one graph",
    "f",
    "modeling_gpt2.py:647",
    {"compile_ids": ["0/0"], "block": "GPT2Block", "instances": 12, "auto_fix": "regional-compile=GPT2Block"},
)


def test_a_fix_that_leaves_blocks_uncompiled_runs_uncompiled_whatever_it_saved() -> None:
    """GPT-2's blocks compiled regionally on transformers' default cache: each specialises on
    its own cache layer, they share one frame, and from block 8 on torch's recompile limit
    refuses them. A clear CPU saving is then no saving: "runs uncompiled", with the frame and
    the blocks it touched, never verified."""
    base = [_blocks_trial(12, whole=True, cpu_s=s) for s in (9.0, 9.2, 9.1)]
    fixed = [_blocks_trial(12, cpu_s=s) for s in (3.0, 3.1, 3.0)]
    v = _verdict(REGIONAL, "regional-compile=GPT2Block", base, fixed, alternative=False)
    assert v.verdict == UNCOMPILED and v.calibration is None
    assert "wrapper at transformer.h.8 (GPT2Block) hit torch's recompile limit (8)" in v.why
    assert "4 of the 12 GPT2Block blocks run no compiled graph" in v.why
    (row,) = verify_rows([v])
    assert (row.verdict, row.why) == (UNCOMPILED, v.why)
    # Under the table, the why in full.
    text = " ".join(" ".join(verify_lines([v])).split())
    assert (
        "repeated_block (lm): with the fix, code that compiled as it is runs uncompiled: wrapper at" in text
    )
    assert "4 of the 12 GPT2Block blocks run no compiled graph" in text
    assert verified_findings([v])[0].evidence["verify"]["why"] == v.why


def test_regional_compilation_is_judged_by_its_own_counts_a_frame_per_specialised_block() -> None:
    """Every block compiled, each its own frame (1 -> 6): regional compilation raises the
    frame count by design; with fewer graph nodes and a saving far beyond the spread it is
    verified (it was "did not help", by a frame count meant for other fixes)."""
    finding = replace(REGIONAL, evidence={**REGIONAL.evidence, "instances": 6})
    base = [_blocks_trial(6, whole=True, cpu_s=s) for s in (20.6, 21.0, 20.1)]
    fixed = [_blocks_trial(6, cpu_s=s) for s in (15.1, 14.8, 15.3)]
    assert judge(finding, base[0], fixed[0]) == VERIFIED
    v = _verdict(finding, "regional-compile=GPT2Block", base, fixed, alternative=False)
    assert (v.verdict, v.why) == (VERIFIED, "")
    # More frames than one per block is not what the fix does.
    assert judge(finding, base[0], _blocks_trial(12, limit=16)) == DID_NOT_HELP
    # A saving within the spread did not help, and says so under the table.
    noisy = _verdict(
        finding, "regional-compile=GPT2Block", base, [_blocks_trial(6, cpu_s=s) for s in (19.0, 22.5, 20.0)],
        alternative=False,
    )  # fmt: skip
    assert noisy.verdict == DID_NOT_HELP and noisy.why.startswith("saved 0.10 ± 1.55 CPU s: within")
    assert "within the rounds' spread" in " ".join(" ".join(verify_lines([noisy])).split())


def test_every_verdict_but_verified_says_why() -> None:
    before = _trial(4, recompiles=2, cpu_s=4.0)
    (finding,) = before.findings
    base = [before, _trial(4, recompiles=2, cpu_s=4.1), _trial(4, recompiles=2, cpu_s=4.2)]
    same = [_trial(4, recompiles=2, cpu_s=s) for s in (2.0, 2.1, 2.2)]
    assert _verdict(finding, "mark-dynamic=L['x']:0", base, same, alternative=False).why == (
        "the finding is still there with the fix"
    )
    slower = _verdict(
        finding, "dynamic-shapes", base, [_trial(2, cpu_s=s) for s in (6.0, 6.1, 6.2)], alternative=True
    )
    assert slower.verdict == SLOWER and slower.why == "the compile cost 2.00 ± 0.00 CPU s more with the fix"
    broke = _verdict(finding, "dynamic-shapes", base, [_trial(2, exit_status=1)] * 3, alternative=True)
    assert broke.verdict == BROKE and broke.why == "a run with the fix ended with exit status 1 (as it is: 0)"
    for v in (slower, broke):
        assert v.verdict in verify_lines([v])[2] and v.why.split(":")[0] in "\n".join(verify_lines([v]))


def test_a_gate_that_held_is_shown_apart_from_the_fixes() -> None:
    """fail-after-ready stops the program at a compile after ready: "gate held", after the
    fixes, marked a gate, with no seconds saved or calibration (it was a verified row with a
    calibration of 1.23)."""
    late = Finding(
        "compile_after_ready", "lm", 1.0, "forward recompiled 1 time after ready", "f", "m.py:3",
        {"compile_ids": ["9/1"], "auto_fix": "eager-after-ready", "gate_fix": "fail-after-ready"},
    )  # fmt: skip
    base = [_trial(4, recompiles=1, cpu_s=s) for s in (4.0, 4.1, 4.2)]

    def refused(cpu_s: float) -> Trial:
        t = _trial(3, exit_status=1, cpu_s=cpu_s)
        process = t.job.processes[0]
        meta = replace(process.run.meta, refused_after_ready="torch refused to recompile forward")
        run = replace(process.run, meta=meta)
        return replace(t, fix="fail-after-ready", job=replace(t.job, processes=(replace(process, run=run),)))

    gate = _verdict(late, "fail-after-ready", base, [refused(s) for s in (2.8, 2.9, 3.0)], alternative=False)
    fix = _verdict(
        late, "eager-after-ready", base, [_trial(3, cpu_s=s) for s in (3.0, 3.0, 3.1)], alternative=False
    )
    assert (gate.verdict, gate.calibration) == (GATE_HELD, None)
    assert "a gate, not a fix" in gate.why
    rows = verify_rows([gate, fix])
    assert [r.gate for r in rows] == [True, False]
    table = verify_table([gate, fix])
    assert [row[1] for row in table.rows] == ["eager-after-ready", "fail-after-ready (gate)"]
    saved = table.header.index("saved CPU s")
    assert table.rows[1][saved : saved + 3] == ["-", "-", "-"]  # saved CPU, saved wall, calibration
    assert table.rows[1][-1].startswith("gate held: the program stopped at the compile after ready")
    assert any("gate held" in note for note in table.notes)
    # The fix that lets the late call run eagerly does so uncompiled: never verified.
    assert (fix.verdict, fix.calibration) == (UNCOMPILED, None)
    assert fix.why.startswith("with the fix, the calls that would have compiled run uncompiled")


def test_a_calibration_above_one_is_explained_under_the_table() -> None:
    """A fix that saved more than its findings put at stake (a finding whose first fix is
    another claimed the compiles it shares first) says why its calibration is above 1."""
    before = _trial(4, recompiles=2, cpu_s=4.0)
    (finding,) = before.findings
    staked = replace(finding, evidence={**finding.evidence, "at_stake": {"seconds": 0.5}})
    base = [before, _trial(4, recompiles=2, cpu_s=4.1), _trial(4, recompiles=2, cpu_s=4.2)]
    fixed = [_trial(2, cpu_s=s) for s in (2.0, 2.1, 2.1)]
    v = _verdict(staked, "mark-dynamic=L['x']:0", base, fixed, alternative=False)
    assert v.verdict == VERIFIED and v.calibration == pytest.approx(4.0)
    (note,) = [n for n in verify_table([v]).notes if n.startswith("A calibration above 1")]
    assert "recompiles (lm)" in note and "a finding it does not answer first put at stake" in note
    under = [
        v for v in (replace(v, cpu=seconds_effect([4.0, 4.1], [3.9, 3.95])),) if v.calibration is not None
    ]
    assert not [n for n in verify_table(under).notes if n.startswith("A calibration above 1")]


def test_a_fix_that_answers_two_findings_is_one_row_on_their_stakes_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two findings whose first fix is the same: the same runs answer both, so the fix is one
    row naming both, its stake theirs added, one calibration; an alternative keeps its own."""
    from compiletrace._app.verify import group_by_fix, verify_fixes

    base = [_trial(4, recompiles=2, cpu_s=s) for s in (5.0, 5.4, 5.1)]
    (finding,) = base[0].findings
    fix = finding.evidence["auto_fix"]
    lm = replace(finding, seconds=0.5, evidence={**finding.evidence, "at_stake": {"seconds": 0.5}})
    vision = replace(lm, component="vision", evidence={**lm.evidence, "at_stake": {"seconds": 0.75}})
    fixed = [_trial(2, cpu_s=s) for s in (3.9, 4.0, 4.2)]
    other = [_trial(2, cpu_s=s) for s in (6.9, 7.0, 7.2)]
    verdicts = group_by_fix(
        [
            _verdict(lm, fix, base, fixed, alternative=False),
            _verdict(vision, fix, base, fixed, alternative=False),
            _verdict(lm, "dynamic-shapes", base, other, alternative=True),
        ]
    )
    assert [v.answers for v in verdicts] == [(vision,), (lm,), ()]
    assert verdicts[0].fix_stake_s == pytest.approx(1.25)
    assert verdicts[0].calibration == verdicts[1].calibration == pytest.approx(1.1 / 1.25)
    # One row for the fix, both findings named; the alternative's own row, on its finding's stake.
    rows = verify_rows(verdicts)
    assert [r.finding for r in rows] == ["recompiles (lm) + recompiles (vision)", "recompiles (lm)"]
    assert rows[0].at_stake_s == pytest.approx(1.25) and rows[0].calibration == pytest.approx(0.88)
    assert rows[1].alternative and rows[1].at_stake_s == pytest.approx(0.5)
    # The JSON: each finding says what else its fix answers and the fix's stake; one entry per fix.
    measured = [f.evidence["verify"] for f in verified_findings(verdicts)]
    assert measured[0]["answers"] == ["recompiles (vision)"] and measured[1]["answers"] == ["recompiles (lm)"]
    assert measured[0]["fix_at_stake_s"] == 1.25 and measured[0]["calibration"] == 0.88
    (first, alternative) = verify_fixes(verdicts)
    assert first["fix"] == fix and first["answers"] == ["recompiles (lm)", "recompiles (vision)"]
    assert (first["at_stake_s"], first["calibration"]) == (1.25, 0.88)
    assert alternative["answers"] == ["recompiles (lm)"] and alternative["alternative"] is True
    # The text table: one row for the fix.
    monkeypatch.setenv("COLUMNS", "200")
    text = "\n".join(verify_lines(verdicts))
    assert text.count("recompiles (lm) + recompiles (vision)") == 1, text
