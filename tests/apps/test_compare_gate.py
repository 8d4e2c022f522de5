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

from compiletrace import CacheOutcome, GraphRecord, UsageError, cli
from compiletrace._app.compare import COUNTS, DEFAULT_GATES, GATES, ONE_RUN_BOUNDS, compare_files, parse_gates
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


def count_row(out: str, name: str) -> list[str]:
    """A row of the counts' table: base, new, status (and each run's, with several)."""
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] == name:
            return cells[1:]
    raise AssertionError(f"no count {name!r} in:\n{out}")


def verdict(out: str) -> str:
    """The last line, however the terminal's width wrapped it."""
    lines = out.rstrip("\n").splitlines()
    return " ".join(line.strip() for line in lines[len(lines) - lines[::-1].index("") :])


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
    assert lines[0] == "gate: total, component; shown, not gated: phase, graph"
    # The runs were saved without CPU seconds: wall seconds, and the line says why; one run
    # per side: the bound measured for wall seconds.
    rule = " ".join(line.strip() for line in lines[1 : lines.index("")])
    assert rule == (
        "a count that rises fails; a gated figure regresses when it grows by more than 150% and 0.25 s "
        "(one run per side: the bound identical warm starts stayed within beside 4 busy processes) "
        f"judged in wall seconds ({base} and {new} have no CPU seconds)"
    )
    assert count_row(out, "graphs compiled") == ["2", "2", "ok"]
    total_line = next(line for line in lines if line.startswith("total "))
    first_row = re.split(r"\s{2,}", total_line.strip())
    assert first_row == ["total", "compile time", "20.000", "1.600", "-18.400", "-92.0%", "ok"]
    assert row(out, "phase", "backend.cache")[2:] == [
        "0.140",
        "1.270",
        "+1.130",
        "+807.1%",
        "slower (not gated)",
    ]
    assert verdict(out) == (
        "passed: no count rose (graphs compiled 2, frames 2, recompiles 0, ...); no regression beyond 150% "
        "and 0.25 s; 1 slower figure(s) not gated (phase)"
    )

    # Asked to gate phases, the same comparison fails, on that phase alone.
    assert cli.main(["compare", base, new, "--gate", "phase"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "gate: phase; shown, not gated: total, component, graph"
    assert row(out, "phase", "backend.cache")[-1] == "REGRESSED"
    assert row(out, "total", "compile time")[-1] == "ok"
    assert verdict(out) == (
        "FAILED: phase backend.cache 0.140 -> 1.270 s (+1.130 s, +807.1%), beyond 0.250 s (150% and 0.25 s)"
    )
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


def test_a_new_graph_fails_by_its_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A graph break splits the language model's 0.5 s in two: same totals, one graph (and
    # one frame) more, which fails the gate whatever the seconds.
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
    assert cli.main(["compare", base, new]) == 1
    out = capsys.readouterr().out
    assert row(out, "graph", "language_model:lm_tail#0 [2/0]")[-1] == "new graph (not gated)"
    assert row(out, "total", "compile time")[-1] == "ok"
    assert count_row(out, "graphs compiled") == ["2", "3", "ROSE"]
    assert verdict(out) == "FAILED: graphs compiled rose 2 -> 3; frames rose 2 -> 3"
    assert cli.main(["compare", base, new, "--gate", "total", "--gate", "graph"]) == 1
    out = capsys.readouterr().out
    assert row(out, "graph", "language_model:lm_tail#0 [2/0]")[-1] == "NEW GRAPH"
    assert " ".join(out.split()).split(" judged in ")[0].endswith("(a new graph regresses too)")


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

    # Asked for wall seconds, the same runs grew by half: within the bound measured for wall
    # seconds, beyond a 10% threshold.
    assert cli.main(["compare", base, new, "--clock", "wall"]) == 0
    out = capsys.readouterr().out
    assert "judged in wall seconds (asked for)" in out
    assert row(out, "total", "compile time")[2:] == ["3.000", "4.500", "+1.500", "+50.0%", "ok"]
    assert cli.main(["compare", base, new, "--clock", "wall", "--threshold", "10"]) == 1
    out = capsys.readouterr().out
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
def test_two_real_starts_are_judged_in_cpu_seconds(tmp_path: Path) -> None:
    # One program (aot_eager: seconds) started twice under `run`: the gate judges the compile
    # work's CPU seconds, which load moves far less than wall seconds (how far, beside four
    # CPU-bound processes: benchmarks/gate_noise.py, whose figures set the bound).
    program = Path(__file__).resolve().parent.parent / "programs" / "top_level_compile.py"

    def start(name: str) -> dict[str, Any]:
        job = tmp_path / name
        subprocess.run(
            [sys.executable, "-m", "compiletrace", "run", "--json", str(job), "--",
             sys.executable, str(program)],
            check=True, capture_output=True, timeout=600, cwd=tmp_path,
        )  # fmt: skip
        return cast(dict[str, Any], json.loads(job.read_text()))

    base, new = start("base.json"), start("new.json")

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
    pct, floor = ONE_RUN_BOUNDS["cpu"]
    grew = cpu[1] - cpu[0] > max(floor, cpu[0] * pct / 100)
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


def cpu_run(path: Path, cpu_ns: int, *extra: GraphRecord) -> str:
    """A run of one graph whose compile took ``cpu_ns`` CPU nanoseconds (and twice that in
    wall time: a busy machine), with ``extra`` graphs."""
    first = make_record("0/0", "encoder", frame_ns=2 * cpu_ns, cpu_ns=cpu_ns)
    return str(save_run(path, [first, *extra]))


def test_identical_counts_pass_with_seconds_within_the_bound_and_fail_beyond_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pct, floor = ONE_RUN_BOUNDS["cpu"]
    base = cpu_run(tmp_path / "base.json", S)
    bound_ns = int(max(floor, pct / 100) * S)  # of a 1 s compile
    within = cpu_run(tmp_path / "within.json", S + bound_ns - MS)
    beyond = cpu_run(tmp_path / "beyond.json", S + bound_ns + MS)
    assert cli.main(["compare", base, within]) == 0
    out = capsys.readouterr().out
    assert all(count_row(out, name)[2] == "ok" for name in COUNTS)
    assert verdict(out) == (
        "passed: no count rose (graphs compiled 1, frames 1, recompiles 0, ...); no regression beyond "
        f"{pct:g}% and {floor:g} s"
    )
    assert cli.main(["compare", base, beyond]) == 1
    new_s = (S + bound_ns + MS) / S
    grew = f"+{new_s - 1:.3f} s, {100 * (new_s - 1):+.1f}%"
    assert verdict(capsys.readouterr().out).startswith(
        f"FAILED: total compile time 1.000 -> {new_s:.3f} s ({grew}), beyond {bound_ns / S:.3f} s "
        f"({pct:g}% and {floor:g} s); component encoder"
    )


@pytest.mark.parametrize(
    ("extra", "rose"),
    [
        ({"compile_id": "1/0", "code_name": "tail"}, "graphs compiled rose 1 -> 2; frames rose 1 -> 2"),
        (
            {"compile_id": "0/1", "is_recompile": True, "recompile_reason": "tensor 'x' size mismatch"},
            "graphs compiled rose 1 -> 2; recompiles rose 0 -> 1",
        ),
        ({"fx_graph_cache": CacheOutcome.MISS}, "fx_graph cache misses rose 0 -> 1"),
        ({"aot_autograd_cache": CacheOutcome.MISS}, "aot_autograd cache misses rose 0 -> 1"),
    ],
)
def test_a_count_that_rises_fails_named_whatever_the_seconds(
    extra: dict[str, Any], rose: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same CPU seconds in all: the count alone fails it.
    base = cpu_run(tmp_path / "base.json", S)
    if "compile_id" in extra:  # one more graph, its seconds taken from the first
        first = make_record("0/0", "encoder", frame_ns=S, cpu_ns=S // 2)
        more = make_record(component="encoder", start_unix_ns=S, frame_ns=S, cpu_ns=S // 2, **extra)
        new = str(save_run(tmp_path / "new.json", [first, more]))
    else:  # the one graph missed a cache tier it hit
        hit = {key: CacheOutcome.HIT for key in extra}
        base = str(save_run(tmp_path / "base.json", [make_record(frame_ns=2 * S, cpu_ns=S, **hit)]))
        new = str(save_run(tmp_path / "new.json", [make_record(frame_ns=2 * S, cpu_ns=S, **extra)]))
    assert cli.main(["compare", base, new]) == 1
    out = capsys.readouterr().out
    assert verdict(out) == f"FAILED: {rose}"
    assert row(out, "total", "compile time")[-1] == "ok"
    # The other way round, the count fell: no failure.
    assert cli.main(["compare", new, base]) == 0
    assert "fewer" in capsys.readouterr().out


def test_compiles_after_ready_rising_fails(capsys: pytest.CaptureFixture[str]) -> None:
    runs = Path(__file__).resolve().parent.parent / "inputs" / "runs"
    warmup, ready = str(runs / "compile_after_warmup.run.json"), str(runs / "compile_after_ready.run.json")
    assert cli.main(["compare", warmup, ready]) == 1
    assert verdict(capsys.readouterr().out).startswith("FAILED: compiles after ready rose 1 -> 3")


def test_several_runs_per_side_are_read_as_median_and_spread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eighth = S // 8
    bases = [cpu_run(tmp_path / f"base{i}.json", n * eighth) for i, n in enumerate((8, 9, 7))]
    # Medians 1.0 -> 1.25 s; the base moved by half its range, 0.125 s: beyond it.
    tight = [cpu_run(tmp_path / f"tight{i}.json", n * eighth) for i, n in enumerate((10, 11, 10))]
    result = compare_files(bases, tight)
    total = result.changes[0]
    assert (total.base, total.new, total.base_runs, total.new_runs) == (
        1.0,
        1.25,
        (1.0, 1.125, 0.875),
        (1.25, 1.375, 1.25),
    )
    assert total.noise == 0.125 and total.regressed and result.failed
    assert cli.main(["compare", *bases, "--", *tight]) == 1
    out = capsys.readouterr().out
    assert "3 base run(s), 3 new run(s): each side's median" in " ".join(out.split())
    assert row(out, "total", "compile time")[2:] == [
        "1.000",
        "1.250",
        "+0.250",
        "+25.0%",
        "0.125",
        "REGRESSED",
    ]
    assert count_row(out, "graphs compiled") == ["1", "1", "ok", "1, 1, 1", "1, 1, 1"]
    assert verdict(out).startswith(
        "FAILED: total compile time 1.000 -> 1.250 s (+0.250 s, +25.0%), beyond 0.125 s "
        "(the runs' spread, 3% and 0.05 s)"
    )
    # The same medians, but the new runs moved by 0.25 s among themselves: within noise.
    loose = [cpu_run(tmp_path / f"loose{i}.json", n * eighth) for i, n in enumerate((8, 12, 10))]
    result = compare_files(bases, loose)
    assert (result.changes[0].new, result.changes[0].noise) == (1.25, 0.25)
    assert not result.failed
    # A count is each side's median too: one run of three with a graph more is no rise.
    odd = str(save_run(tmp_path / "odd.json", [
        make_record("0/0", "encoder", frame_ns=2 * S, cpu_ns=S // 2),
        make_record("1/0", "encoder", code_name="tail", start_unix_ns=2 * S, frame_ns=S, cpu_ns=S // 2),
    ]))  # fmt: skip
    counted = compare_files(bases, [bases[0], odd, bases[1]])
    graphs = counted.counts[0]
    assert (graphs.name, graphs.base, graphs.new, graphs.new_runs) == ("graphs compiled", 1, 1, (1, 2, 1))
    assert not counted.count_rises


@pytest.mark.slow
def test_several_runs_per_side_from_the_command_line_exit_status(tmp_path: Path) -> None:
    # A real subprocess: compare A B -- C D.
    a, b = cpu_run(tmp_path / "a.json", S), cpu_run(tmp_path / "b.json", S + S // 16)
    c, d = cpu_run(tmp_path / "c.json", S), cpu_run(tmp_path / "d.json", S + S // 32)
    slow_c, slow_d = cpu_run(tmp_path / "e.json", 2 * S), cpu_run(tmp_path / "f.json", 2 * S + S // 32)
    recompiled = str(save_run(tmp_path / "g.json", [
        make_record("0/0", "encoder", frame_ns=2 * S, cpu_ns=S),
        make_record("0/1", "encoder", start_unix_ns=2 * S, frame_ns=MS, cpu_ns=MS, is_recompile=True),
    ]))  # fmt: skip

    def compare(*words: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "compiletrace", "compare", *words],
            capture_output=True, text=True, timeout=600, cwd=tmp_path,
        )  # fmt: skip

    same = compare(a, b, "--", c, d)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "2 base run(s), 2 new run(s)" in " ".join(same.stdout.split())
    slower = compare(a, b, "--", slow_c, slow_d)
    assert slower.returncode == 1 and "FAILED: total compile time" in " ".join(slower.stdout.split())
    counted = compare(a, b, "--gate", "phase", "--", c, recompiled)
    assert (
        counted.returncode == 1
        and "FAILED: graphs compiled rose 1 -> 1.5; recompiles rose 0 -> 0.5"
        in " ".join(counted.stdout.split())
    )
    for words, said in (
        ((a, b, c), "compare takes BASE NEW, got 3 run(s)"),
        ((a, b, "--"), "no run after --"),
        ((a, "--", c, "--threshold", "5"), "--threshold after --"),
    ):
        bad = compare(*words)
        assert bad.returncode == 2 and said in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
