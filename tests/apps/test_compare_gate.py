"""compare as a CI gate: the total and each component fail a check by default; phases and
graphs are shown and fail it only when asked (``--gate``); the thresholds are printed.

Runs are built from records with exact figures (``make_record``) and saved as
``compiletrace profile --json`` saves them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from compiletrace import GraphRecord, UsageError, cli
from compiletrace._app.compare import DEFAULT_GATES, GATES, compare_files, parse_gates
from tests.conftest import MS, S, make_record, save_run


def slow_run() -> list[GraphRecord]:
    """20 s of compiling: each component 10 s, the encoder's cache phase 0.14 s."""
    return [
        make_record("0/0", "encoder", frame_ns=10 * S, phases={"inductor": 8860 * MS, "cache": 140 * MS}),
        make_record("1/0", "language_model", start_unix_ns=10 * S, frame_ns=10 * S,
                    phases={"inductor": 9 * S}),
    ]  # fmt: skip


def fast_run() -> list[GraphRecord]:
    """1.6 s of compiling (92% less), but the encoder's cache phase grew to 1.27 s."""
    return [
        make_record("0/0", "encoder", frame_ns=1400 * MS, phases={"inductor": 0, "cache": 1270 * MS}),
        make_record("1/0", "language_model", start_unix_ns=2 * S, frame_ns=200 * MS,
                    phases={"inductor": 100 * MS}),
    ]  # fmt: skip


def row(out: str, scope: str, name: str) -> list[str]:
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[:2] == [scope, name]:
            return cells
    raise AssertionError(f"no {scope} row {name!r} in:\n{out}")


def test_a_much_faster_run_passes_although_one_phase_grew(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = (
        str(save_run(tmp_path / "base.json", slow_run())),
        str(save_run(tmp_path / "new.json", fast_run())),
    )
    assert cli.main(["compare", base, new]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[:2] == [
        "gate: total, component; shown, not gated: phase, graph",
        "a gated figure regresses when it grows by more than 10% and 0.05 s",
    ]
    first_row = re.split(r"\s{2,}", lines[5].strip())  # the gate, its limits, a blank, the header, its rule
    assert first_row == ["total", "compile time", "20.000", "1.600", "-18.400", "-92.0%", "ok"]
    assert row(out, "phase", "backend.cache")[2:] == [
        "0.140",
        "1.270",
        "+1.130",
        "+807.1%",
        "slower (not gated)",
    ]
    assert lines[-1] == "no regression beyond 10% and 0.05 s; 1 slower figure(s) not gated (phase)"

    # Asked to gate phases, the same comparison fails, on that phase alone.
    assert cli.main(["compare", base, new, "--gate", "phase"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "gate: phase; shown, not gated: total, component, graph"
    assert row(out, "phase", "backend.cache")[-1] == "REGRESSED"
    assert row(out, "total", "compile time")[-1] == "ok"
    assert out.splitlines()[-1] == "1 regression(s) beyond 10% and 0.05 s"
    result = compare_files(base, new, gates=["total,component", "phase"])
    assert [(c.scope, c.name) for c in result.regressions] == [("phase", "backend.cache")]


def test_the_total_catches_what_no_component_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A new component has no base to grow from; the total grows by all of it.
    lm = make_record("0/0", "language_model", frame_ns=S)
    base = str(save_run(tmp_path / "base.json", [lm]))
    new = str(
        save_run(tmp_path / "new.json", [lm, make_record("1/0", "audio", start_unix_ns=S, frame_ns=2 * S)])
    )
    assert cli.main(["compare", base, new]) == 1
    out = capsys.readouterr().out
    assert row(out, "total", "compile time")[-1] == "REGRESSED"
    assert row(out, "component", "audio")[-1] == "new"


def test_a_new_graph_fails_only_the_graph_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A graph break splits the language model's 0.5 s in two: same totals, one graph more.
    enc = make_record("0/0", "encoder", code_name="enc", frame_ns=S // 4)
    base = str(
        save_run(
            tmp_path / "base.json",
            [enc, make_record("1/0", "language_model", code_name="lm", frame_ns=S // 2)],
        )
    )
    new = str(save_run(
        tmp_path / "new.json",
        [enc, make_record("1/0", "language_model", code_name="lm", frame_ns=S // 4),
         make_record("2/0", "language_model", code_name="lm_tail", frame_ns=S // 4)],
    ))  # fmt: skip
    assert cli.main(["compare", base, new]) == 0
    out = capsys.readouterr().out
    assert row(out, "graph", "language_model:lm_tail#0 [2/0]")[-1] == "new graph (not gated)"
    assert cli.main(["compare", base, new, "--gate", "total", "--gate", "graph"]) == 1
    out = capsys.readouterr().out
    assert row(out, "graph", "language_model:lm_tail#0 [2/0]")[-1] == "NEW GRAPH"
    assert out.splitlines()[1].endswith("0.05 s (a new graph regresses too)")


def test_bench_metrics_are_always_gated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = {"avg_cold_startup_time": 10.0, "avg_warm_startup_time": 2.0}
    (tmp_path / "a.json").write_text(json.dumps(base))
    (tmp_path / "b.json").write_text(json.dumps({**base, "avg_warm_startup_time": 3.0}))
    assert cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--gate", "phase"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == [
        "gate: every metric",
        "a gated figure regresses when it grows by more than 10% and 0.05 s",
    ]
    assert row(out, "metric", "avg_warm_startup_time")[-1] == "REGRESSED"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--gate", "phases"], "unknown gate phases; choose from total, component, phase, graph, function"),
        (["--gate", ","], "no gate given"),
        (["--threshold", "nan"], "threshold must be a finite number >= 0"),
        (["--min-seconds", "inf"], "min-seconds must be a finite number >= 0"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = str(save_run(tmp_path / "base.json", slow_run()))
    assert cli.main(["compare", base, base, *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_parse_gates() -> None:
    assert parse_gates(None) == DEFAULT_GATES == ("total", "component")
    assert parse_gates(["graph", "Phase, total"]) == ("total", "phase", "graph")
    assert parse_gates("component,graph,phase,total,function") == GATES
    with pytest.raises(UsageError, match="unknown gate bogus"):
        parse_gates(["total", "bogus"])
