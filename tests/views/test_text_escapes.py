"""Names from a run file or the user's model reach a terminal escaped: every text view shows
them through one function, ``compiletrace._io.text.printable``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from compiletrace import CompilationTimes, ProfileJob, ProfileRun, WarmupResult, cli
from compiletrace._data.job import JobProcess, ProcessInfo
from compiletrace._data.records import TRACE_OTHER, GraphBreak, TraceNode
from compiletrace._data.run_meta import CompilationMode, LoadedArtifacts, RunMeta
from compiletrace._data.timeline import PhaseRecord, build_timeline
from compiletrace._io import artifacts
from compiletrace._io.text import printable
from compiletrace.reports import collapsed_stacks, findings_text, timeline_text
from compiletrace.reports._job import job_summary_lines
from tests.conftest import MS, S, make_record

# What a crafted run file puts in its names: clear the screen, retitle the window (ended by
# BEL), ring the bell, a C1 CSI, a right-to-left override (shows "exe.txt" as "txt.exe").
CLEAR, TITLE, BEL, CSI, RLO, SURROGATE = "\x1b[2J", "\x1b]0;title\x07", "\x07", "\x9b", "\u202e", "\ud800"
EVIL = CLEAR + TITLE + BEL + CSI + RLO
SHOWN = ("\\x1b[2J", "\\x1b]0;title\\x07", "\\x07", "\\x9b", "\\u202e")
# A lone surrogate no encoding can write (printing it raw fails): a run file holding one is
# refused as damaged, but names built in memory can hold one.
WORSE = EVIL + SURROGATE
# Any text, surrogates included (hypothesis leaves them out by default), with the characters
# that matter here drawn often.
TEXT = st.text(
    st.characters()
    | st.characters(categories=("Cs", "Cc", "Cf"))
    | st.sampled_from(WORSE + "\\\n\t\r\x00\x7f\u2028\u2066")
)


def _raw(text: str) -> list[str]:
    """The characters of ``text`` a terminal must not receive raw (a newline is fine)."""
    return sorted({c for c in text if c != "\n" and not c.isprintable()})


def _evil_run(evil: str = EVIL) -> ProfileRun:
    component = f"enc{evil}"
    helper = TraceNode(f"helper{evil}", f"m{evil}.py", 9, 60 * MS, 3)
    root = TraceNode(f"Model.forward{evil}", f"m{evil}.py", 1, 90 * MS, 1, (helper,))
    first = make_record(
        "0/0",
        component,
        frame_ns=100 * MS,
        code_name=f"forward{evil}",
        code_filename=f"m{evil}.py",
        code_firstlineno=1,
        graph_breaks=(GraphBreak(f"Unsupported call{evil}", f"m{evil}.py", 3),) * 3,
        trace_cost=(root, TraceNode(TRACE_OTHER, "", 0, 10 * MS, 1)),
    )
    recompiles = [
        make_record(
            f"0/{n}",
            component,
            start_unix_ns=n * 200 * MS,
            frame_ns=150 * MS,
            code_name=f"forward{evil}",
            code_filename=f"m{evil}.py",
            code_firstlineno=1,
            is_recompile=True,
            frame_attempt=n,
            recompile_reason=f"tensor 'x{evil}' size mismatch at index 0. expected {n}, actual {n + 1}",
        )
        for n in range(1, 5)
    ]
    records = (first, *recompiles)
    phases = [
        PhaseRecord(f"load weights{evil}", 0, S // 2, thread=f"loader{evil}", phase_id=1),
        PhaseRecord(f"warm up{evil}", S // 2, 2 * S, phase_id=2),
    ]
    # Built in memory, unchecked (a file's meta is checked when read: see the surrogate's test).
    # Its compilation mode is one of two values: no text of a file's reaches the header there.
    artifacts = LoadedArtifacts(
        f"demo{evil}.cache", 0, {f"inductor{evil}": 2}, 0.0, "0" * 64, f"verified{evil}", None, True, "", None
    )
    meta = RunMeta(
        model=f"pkg.mod:make{evil}",
        device=f"cpu{evil}",
        backend=f"eager{evil}",
        mode=f"default{evil}",
        compilation_mode=CompilationMode.NONE,
        torch_version=f"2.13{evil}",
        compiletrace_version=f"0.1{evil}",
        cache_artifacts=artifacts,
    )
    warmup = WarmupResult(False, 2.0, CompilationTimes(), {component: 0.5})
    return ProfileRun(records, warmup, meta, build_timeline(phases, records, 0, 3 * S))


@pytest.fixture(autouse=True)
def wide_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every name whole, for the escapes to be checked (tables fit 100 columns otherwise).
    monkeypatch.setenv("COLUMNS", "1000")


@pytest.fixture
def evil_path(tmp_path: Path) -> Path:
    path = tmp_path / "run.json"
    _evil_run().save(path)
    return path


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    status = cli.main(argv)
    out, err = capsys.readouterr()
    assert status == 0, err
    assert _raw(out) == [] and _raw(err) == []
    return out


def test_report_shows_every_name_of_a_crafted_run_escaped(
    evil_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _run_cli(["report", str(evil_path)], capsys)
    for shown in SHOWN:
        assert shown in out
    # Each kind of name, escaped where its section shows it.
    assert f"model pkg.mod:make{printable(EVIL)} on cpu{printable(EVIL)}" in out
    assert f"mode default{printable(EVIL)}, compilation mode none" in out
    assert f"loaded demo{printable(EVIL)}.cache (0.00 MB; 2 inductor{printable(EVIL)}; checked)" in out
    assert f"forward{printable(EVIL)}" in out  # the graph's code name
    assert f"tensor 'x{printable(EVIL)}' size mismatch" in out  # the recompile reason
    assert f"load weights{printable(EVIL)} [loader{printable(EVIL)}]" in out  # a phase and its thread
    tracing = out[out.index("Dynamo tracing per function") :]
    assert f"  enc{printable(EVIL)}: 0.100 s of Dynamo time" in tracing
    assert f"helper{printable(EVIL)} (m{printable(EVIL)}.py:9) x3" in tracing
    assert f"Model.forward{printable(EVIL)} (m{printable(EVIL)}.py:1) x1" in tracing
    assert f"(enc{printable(EVIL)}: 0.70 s)" in out  # the summary line


def test_report_of_a_trace_cost_run_escapes_its_function_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = TraceNode(f"step{TITLE}", f"/src/{RLO}cod.py", 4, 8 * MS, 2)
    rec = make_record(component=f"lm{CLEAR}", trace_cost=(node,), frame_ns=8 * MS)
    path = tmp_path / "trace.json"
    ProfileRun((rec,), WarmupResult(False, 1.0, CompilationTimes()), {"model": "m"}).save(path)
    out = _run_cli(["report", str(path)], capsys)
    assert "  lm\\x1b[2J: 0.008 s of Dynamo time" in out
    assert "step\\x1b]0;title\\x07 (/src/\\u202ecod.py:4) x2" in out


def test_doctor_shows_every_finding_of_a_crafted_run_escaped(
    evil_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _run_cli(["doctor", str(evil_path)], capsys)
    assert out.startswith("Findings, what did not compile first, then most seconds at stake")
    for shown in SHOWN:
        assert shown in out
    assert f"enc{printable(EVIL)}" in out


def test_a_run_file_with_a_lone_surrogate_is_refused_in_a_clean_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.json"
    _evil_run(WORSE).save(path)
    for command in ("report", "doctor"):
        assert cli.main([command, str(path)]) == 2
        out, err = capsys.readouterr()
        assert _raw(out) == [] and _raw(err) == []
        assert "lone surrogate" in err


def test_the_views_of_a_run_in_memory_escape_a_lone_surrogate() -> None:
    run = _evil_run(WORSE)
    assert run.timeline is not None
    text = "\n".join([run.summary(), timeline_text(run.timeline), findings_text(run.diagnose())])
    assert _raw(text) == []
    assert f"  enc{printable(WORSE)}: 0.100 s of Dynamo time" in text
    assert f"load weights{printable(WORSE)} [loader{printable(WORSE)}]" in text
    assert f"[graph_break] enc{printable(WORSE)}" in text


def test_collapsed_stacks_keep_one_stack_a_line() -> None:
    node = TraceNode("a\nfake;stack 99", "m.py", 1, 5 * MS, 1)
    text = collapsed_stacks([make_record(component=f"enc{WORSE}", trace_cost=(node,))])
    assert _raw(text) == []
    component = printable(WORSE).replace(";", ",")  # the title sequence's ";" too
    assert text == f"enc{component};a\\nfake,stack 99 (m.py:1) 5000\n"


def test_an_error_line_is_escaped_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / f"no{CLEAR}such.json"
    assert cli.main(["report", str(missing)]) == 2
    err = capsys.readouterr().err
    assert _raw(err) == [] and "\\x1b[2J" in err


# -- the escape itself -------------------------------------------------------------------------


@given(TEXT)
@example(WORSE)
@example("C:\\models\\x1b")
def test_printable_leaves_nothing_a_terminal_acts_on(text: str) -> None:
    shown = printable(text)
    assert shown.isprintable()  # no control character, no newline, no surrogate, no bidi override
    shown.encode("utf-8")  # so it can always be written out
    assert shown == text or not (text.isprintable() and "\\" not in text)


@given(TEXT, TEXT)
@example("\x1b", "\\x1b")
@example("\x1b", "\\\x1b")
@example("\ud83d\ude00", "\\ud83d\\ude00")
def test_distinct_texts_stay_distinct(a: str, b: str) -> None:
    assert (printable(a) == printable(b)) == (a == b)


@given(TEXT)
def test_the_escape_reads_back_as_the_text(text: str) -> None:
    # The escapes are Python's string-literal escapes: the original is always recoverable.
    assert ast.literal_eval('"' + printable(text).replace('"', '\\"') + '"') == text


def test_the_cache_reader_escapes_with_the_same_function() -> None:
    assert artifacts.printable is printable


# -- a job file: every string of it, in every text view ----------------------------------------

# A carriage return overprints the line so far with a line of the file's choosing.
OVERPRINT = "\rcompiletrace: compilation: 0.00 s, nothing to see\x1b[K"


def _evil_job(evil: str = EVIL + OVERPRINT) -> ProfileJob:
    run = _evil_run(evil)
    idle = ProfileRun((), WarmupResult(False, 0.0, CompilationTimes()), {"model": f"m{evil}"})
    processes = (
        JobProcess(ProcessInfo(41, 40, f"main{evil}", (f"python{evil}", f"train{evil}.py")), run),
        JobProcess(ProcessInfo(42, 41, f"rank 1{evil}", (f"worker{evil}", f"--flag={evil}")), run),
        JobProcess(ProcessInfo(43, 41, f"loader{evil}", (f"loader{evil}",)), idle),
    )
    missing = (ProcessInfo(44, 41, f"killed{evil}", (f"gone{evil}", f"--x{evil}")),)
    return ProfileJob((f"python{evil}", f"train{evil}.py"), 0, processes, missing, cwd=f"/src{evil}")


def test_every_text_view_of_a_crafted_job_shows_every_string_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = EVIL + OVERPRINT
    job = _evil_job(evil)
    path = tmp_path / "job.json"
    job.save(path)
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    _evil_run(evil).save(base)
    _evil_run(evil).save(new)
    views = {
        "report": _run_cli(["report", str(path)], capsys),
        "doctor": _run_cli(["doctor", str(path)], capsys),
        "compare": _run_cli(["compare", str(base), str(new)], capsys),
        "run's summary": "\n".join(job_summary_lines(job)),
        "summary": job.summary(),
    }
    # The verify refusal names the command and its directory, from the file too.
    assert cli.main(["doctor", str(path), "--verify"]) == 2
    out, err = capsys.readouterr()
    views["doctor --verify"] = out + err
    for name, text in views.items():
        assert _raw(text) == [], name
        assert "\r" not in text and "\x1b" not in text, name
    shown = printable(evil)
    assert f"pid 41 (main{shown})" in views["report"] and f"pid 42 (rank 1{shown})" in views["summary"]
    assert f"pid 44 (killed{shown}) left no run" in views["run's summary"]
    assert f"gone{shown} --x{shown}" in views["run's summary"]
    assert f"python{shown}"[:50] in views["run's summary"]  # argv, cut to its first 60 characters
    assert "--verify would run" in views["doctor --verify"] and " in /src" in views["doctor --verify"]
    assert f"enc{shown}" in views["doctor"] and f"enc{shown}" in views["compare"]
