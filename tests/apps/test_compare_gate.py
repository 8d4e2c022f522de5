"""compare as a CI gate: the total and each component fail a check by default; phases and
graphs are shown and fail it only when asked (``--gate``); the thresholds are printed.

Runs are built from records with exact figures (``make_record``) and saved as
``compiletrace profile --json`` saves them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

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
    # The runs were saved without CPU seconds: wall seconds, and the line says why.
    clock = " ".join(line.strip() for line in lines[2 : lines.index("")])
    assert clock == f"judged in wall seconds ({base} and {new} have no CPU seconds)"
    header = lines.index("") + 1
    first_row = re.split(r"\s{2,}", lines[header + 2].strip())  # below the header and its rule
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
    assert out.splitlines()[:3] == [
        "gate: every metric",
        "a gated figure regresses when it grows by more than 10% and 0.05 s",
        "judged in wall seconds (the runs' averages)",
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


def busy_pair(tmp_path: Path) -> tuple[str, str]:
    """Two starts of one program, the second on a busy machine: its wall seconds grew by
    half, the CPU seconds the compile work used by 5%."""
    base = [
        make_record("0/0", "encoder", frame_ns=2 * S, cpu_ns=1900 * MS),
        make_record("1/0", "language_model", start_unix_ns=2 * S, frame_ns=S, cpu_ns=950 * MS),
    ]
    new = [
        make_record("0/0", "encoder", frame_ns=3 * S, cpu_ns=1995 * MS),
        make_record("1/0", "language_model", start_unix_ns=3 * S, frame_ns=1500 * MS, cpu_ns=997 * MS),
    ]
    return str(save_run(tmp_path / "base.json", base)), str(save_run(tmp_path / "new.json", new))


def test_the_gate_judges_cpu_seconds_where_both_runs_have_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = busy_pair(tmp_path)
    assert cli.main(["compare", base, new]) == 0
    out = capsys.readouterr().out
    clock = "judged in CPU seconds (both runs have them; --clock wall for wall seconds); phases in wall"
    assert clock + " seconds" in " ".join(out.split())
    assert row(out, "total", "compile time")[2:] == ["2.850", "2.992", "+0.142", "+5.0%", "ok"]
    assert row(out, "component", "encoder")[2:4] == ["1.900", "1.995"]
    assert row(out, "graph", "encoder:forward#0 [0/0]")[2:4] == ["1.900", "1.995"]
    result = compare_files(base, new)
    assert (result.clock, result.regressions) == ("cpu", ())

    # Asked for wall seconds, the same runs regress by half.
    assert cli.main(["compare", base, new, "--clock", "wall"]) == 1
    out = capsys.readouterr().out
    assert "judged in wall seconds (asked for)" in out
    assert row(out, "total", "compile time")[2:] == ["3.000", "4.500", "+1.500", "+50.0%", "REGRESSED"]


def test_cpu_seconds_asked_of_a_run_without_them_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, _ = busy_pair(tmp_path)
    old = str(save_run(tmp_path / "old.json", [make_record("0/0", "encoder", frame_ns=2 * S)]))
    assert cli.main(["compare", base, old, "--clock", "cpu"]) == 2
    err = capsys.readouterr().err
    assert f"--clock cpu: {old} has no CPU seconds for every graph" in err and "--clock wall" in err
    # By default the gate falls back to wall seconds, and says why.
    assert cli.main(["compare", base, old]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"judged in wall seconds ({old} has no CPU seconds)" in out


@pytest.mark.slow
def test_two_real_starts_beside_four_busy_processes_are_judged_in_cpu_seconds(tmp_path: Path) -> None:
    # One program (aot_eager: seconds) started twice under `run` beside four CPU-bound
    # processes: its wall seconds move with the load, the compile work's CPU seconds far
    # less, and the gate judges those.
    program = Path(__file__).resolve().parent.parent / "programs" / "top_level_compile.py"

    def start(name: str) -> dict[str, Any]:
        job = tmp_path / name
        subprocess.run(
            [sys.executable, "-m", "compiletrace", "run", "--json", str(job), "--",
             sys.executable, str(program)],
            check=True, capture_output=True, timeout=600, cwd=tmp_path,
        )  # fmt: skip
        return cast(dict[str, Any], json.loads(job.read_text()))

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(4)]
    try:
        base, new = start("base.json"), start("new.json")
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()

    def seconds(job: dict[str, Any], key: str) -> float:
        records = [r for p in job["processes"] for r in p["run"]["registry"]["records"]]
        assert records and all(r["cpu_ns"] is not None for r in records)
        if key == "cpu_ns":
            return sum(r["cpu_ns"] for r in records) / S
        return sum(r["end_unix_ns"] - r["start_unix_ns"] + r["backward_ns"] for r in records) / S

    done = subprocess.run(
        [sys.executable, "-m", "compiletrace", "compare", "base.json", "new.json"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    out = done.stdout
    judged = "judged in CPU seconds (both runs have them; --clock wall for wall seconds)"
    assert judged in " ".join(out.split())
    cpu = (seconds(base, "cpu_ns"), seconds(new, "cpu_ns"))
    total = row(out, "total", "compile time")
    assert (float(total[2]), float(total[3])) == pytest.approx(cpu, abs=0.0006)  # as printed, to the ms
    grew = cpu[1] - cpu[0] > max(0.05, cpu[0] * 0.10)
    assert done.returncode == (1 if grew else 0), out
    assert total[-1] == ("REGRESSED" if grew else "ok")

    walled = subprocess.run(
        [sys.executable, "-m", "compiletrace", "compare", "base.json", "new.json", "--clock", "wall"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    wall = row(walled.stdout, "total", "compile time")
    assert (float(wall[2]), float(wall[3])) == pytest.approx(
        (seconds(base, "wall"), seconds(new, "wall")), abs=0.0006
    )
    print(f"wall {wall[2]} -> {wall[3]} s ({wall[-1]}); CPU {total[2]} -> {total[3]} s ({total[-1]})")
