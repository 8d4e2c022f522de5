"""Inputs someone else may have made: a device, a pipe, a decompression bomb, an archive of
thousands of logs, numbers of thousands of digits, an output aimed at what is read. Each
is read within its limits or refused on one line (exit 2), never read until memory runs
out, never half read with exit 0.

The inputs are built here, in the test's own directory: torch's trace as its lines look
(``V1202 10:19:06.755000 PID where] {JSON}``, then payload lines that start with a tab).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import compiletrace
from compiletrace import CompilationTimes, ProfileRun, RunFileError, WarmupResult, cli
from compiletrace._data import torch_trace
from compiletrace._io import envelope
from compiletrace._io.inputs import open_input
from tests.conftest import MS, make_record

PID = 4242
T0_US = 1_796_000_000_000_000  # torch's chromium events: microseconds since the epoch


# -- torch's trace, built line by line ---------------------------------------------------------


def entry(meta: dict[str, Any], payload: str | None = None, *, pid: object = PID, prefix: str = "") -> str:
    """One entry of torch's trace: its glog line, then its payload a line a tab."""
    if payload is not None:
        meta = {**meta, "has_payload": "0" * 32}
    text = f"{prefix}V1202 10:19:06.755000 {pid} torch/_dynamo/utils.py:2350] {json.dumps(meta)}\n"
    if payload is not None:
        text += "".join(f"\t{line}\n" for line in payload.split("\n"))
    return text


def ids(frame: int, count: int = 0) -> dict[str, int]:
    return {"frame_id": frame, "frame_compile_id": count, "attempt": 0}


def region(frame: int, name: str, ph: str, ts_us: int, count: int = 0) -> str:
    event = {"name": name, "ts": ts_us, "ph": ph, "args": {"compile_id": f"{frame}/{count}"}}
    return entry({"chromium_event": {}, **ids(frame, count)}, json.dumps(event))


def metrics(frame: int, count: int = 0, **fields: Any) -> str:
    start = T0_US + (frame * 10 + count) * 10_000
    row = {
        "compile_id": f"{frame}/{count}",
        "co_name": "forward",
        "co_filename": "/src/model.py",
        "co_firstlineno": 3,
        "start_time_us": start,
        "duration_us": 5_000,
        "entire_frame_compile_time_s": 0.005,
        "backend_compile_time_s": 0.002,
        "graph_node_count": 7,
        **fields,
    }
    return entry({"compilation_metrics": row, **ids(frame, count)})


def a_compile(frame: int) -> str:
    start = T0_US + frame * 100_000
    return (
        region(frame, "backend_compile", "B", start + 1_000)
        + region(frame, "backend_compile", "E", start + 3_000)
        + metrics(frame)
    )


def graph_break(frame: int, reason: str, count: int = 0) -> str:
    payload = (
        f"Graph break in user code at /src/model.py:9\nGraph Break Reason: {reason}\nUser code traceback:"
    )
    meta = {"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, **ids(frame, count)}
    return entry(meta, payload)


def trace_text(compiles: int) -> str:
    return "".join(a_compile(frame) for frame in range(compiles))


def compile_ids(found: object) -> list[str]:
    assert isinstance(found, ProfileRun)
    return [r.compile_id for r in found.graph_records]


# -- pipes -----------------------------------------------------------------------------------


@contextlib.contextmanager
def piped(data: bytes | Callable[[int], None]) -> Iterator[str]:
    """A pipe that ``data`` is written into from another thread, named as a shell names one
    in ``report <(zcat trace.gz)``: ``/dev/fd/N``. ``data`` may be a function that writes
    to the pipe's descriptor itself (until the reader goes away)."""
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        try:
            if callable(data):
                data(write_fd)
            else:
                with contextlib.suppress(OSError):
                    _write_all(write_fd, data)
        finally:
            os.close(write_fd)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        yield f"/dev/fd/{read_fd}"
    finally:
        os.close(read_fd)  # a writer still writing gets EPIPE and stops
        writer.join(timeout=30)
        assert not writer.is_alive()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Endless:
    """Writes ``chunk`` to a pipe until its reader goes away; counts what it wrote."""

    def __init__(self, chunk: bytes, first: bytes = b"") -> None:
        self.chunk, self.first, self.written = chunk, first, 0

    def __call__(self, fd: int) -> None:
        with contextlib.suppress(OSError):
            if self.first:
                _write_all(fd, self.first)
            while True:
                self.written += os.write(fd, self.chunk)


# -- 8: devices are not files ----------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_refused_before_a_byte_is_read(
    device: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(RunFileError, match="character device"):
        compiletrace.load(device)
    run = tmp_path / "run.json"
    ProfileRun((make_record(),), WarmupResult(False, 1.0, CompilationTimes()), {}).save(run)
    # compare's exit 1 means "regressed": a file it cannot read is exit 2, never 1.
    for argv in (["report", device], ["doctor", device], ["compare", str(run), device]):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"{device} is a character device" in err and err.count("\n") == 1, err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("chunk", [b"\0" * 65536, os.urandom(65536)], ids=["zeros", "random"])
def test_a_pipe_of_what_is_no_file_is_refused_from_its_first_bytes(chunk: bytes) -> None:
    endless = Endless(chunk)
    with piped(endless) as path, pytest.raises(RunFileError, match="is not JSON"):
        compiletrace.load(path)
    # What the reader took: its first bytes and the pipe's own buffer, not the stream.
    assert endless.written < 4 * 1024 * 1024


@pytest.mark.timeout(60)
def test_an_endless_pipe_stops_at_the_cap_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envelope, "MAX_FILE_BYTES", 1 << 20)
    endless = Endless(b" " * 65536, first=b'{"kind": ')
    with piped(endless) as path, pytest.raises(RunFileError, match=r"larger than 1 MiB") as raised:
        compiletrace.load(path)
    assert path in str(raised.value)
    assert endless.written < 8 * (1 << 20)


@pytest.mark.timeout(60)
def test_an_endless_trace_stops_at_the_log_cap_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_trace, "MAX_LOG_CHARS", 1 << 20)
    endless = Endless(trace_text(50).encode(), first=trace_text(1).encode())
    with piped(endless) as path, pytest.raises(RunFileError, match=r"more than 1 MiB") as raised:
        compiletrace.load(path)
    assert path in str(raised.value)


@pytest.mark.timeout(60)
def test_a_trace_directory_reads_its_own_files_never_a_pipe_or_a_link(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "dedicated_log_torch_trace_a.log").write_text(trace_text(2))
    fifo = trace / "dedicated_log_torch_trace_b.log"
    os.mkfifo(fifo)  # no writer: waited on, it would hang the reader
    elsewhere = tmp_path / "elsewhere.log"
    elsewhere.write_text(trace_text(5))
    link = trace / "dedicated_log_torch_trace_c.log"
    link.symlink_to(elsewhere)
    assert compile_ids(compiletrace.load(trace)) == ["0/0", "1/0"]
    # Opened as a trace directory's log is opened, a file swapped for either is refused.
    with pytest.raises(RunFileError, match="is a pipe"):
        open_input(fifo, pipes=False)
    with pytest.raises(RunFileError, match="is a symbolic link"):
        open_input(link, links=False)


# -- 9: a bomb keeps no more than its compiles need -----------------------------------------------


def test_a_bomb_of_large_payloads_keeps_what_its_compiles_need(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A .gz of one compile's graph breaks, regions, cache lookups, restart reasons and odd
    records, each many times and each large: tens of MB of text from a small file."""
    big = "x" * 50_000
    parts = [graph_break(0, f"Unsupported call {i} {big}") for i in range(300)]
    for i in range(3_000):  # regions opened and closed, and opened and never closed
        parts.append(region(0, "compile_fx_inner", "B", T0_US + 10 * i))
        parts.append(region(0, "compile_fx_inner", "E", T0_US + 10 * i + 5))
        parts.append(region(0, f"open_{i % 7}", "B", T0_US + 10 * i))
    lookup = {"artifact": {"name": "fx_graph_cache_miss", "encoding": "json"}, **ids(0)}
    parts += [entry(lookup, json.dumps({"key": f"k{i}" + "k" * 5_000, "reason": big})) for i in range(2_000)]
    other = {"encoding": "string"}
    parts += [entry({"artifact": {"name": f"kind_{i}_{'n' * 1_000}", **other}}) for i in range(2_000)]
    parts.append(
        metrics(
            0,
            co_name="forward" + big,
            co_filename="/src/" + big + ".py",
            recompile_reason="tensor 'x' size mismatch " + big * 4,
            restart_reasons=[f"restart {i} {big}" for i in range(100)],
            fail_type="Error" + big,
        )
    )
    bomb = tmp_path / "bomb.log.gz"
    bomb.write_bytes(gzip.compress("".join(parts).encode(), 9))
    assert bomb.stat().st_size < 2_000_000  # small on disk, some 120 MB of text

    seen: list[tuple[int, int]] = []  # per compile, its regions and open regions while read
    record = torch_trace._record

    def spy(cid: str, c: Any, *args: Any) -> Any:
        seen.append((len(c.regions), sum(len(s) for s in c.open.values())))
        return record(cid, c, *args)

    monkeypatch.setattr(torch_trace, "_record", spy)
    run = compiletrace.load(bomb)
    assert isinstance(run, ProfileRun)
    (rec,) = run.graph_records
    reasons = [b.reason for b in rec.graph_breaks]
    # Kept: a capped number of each list, each text its head and what was cut.
    assert 0 < len(reasons) <= torch_trace.MAX_BREAKS
    assert sum(map(len, reasons)) <= torch_trace.MAX_BREAKS * (torch_trace.MAX_REASON_CHARS + 100)
    assert "more characters cut; sha256 " in reasons[0] and reasons[0].startswith("Unsupported call 0 ")
    assert len(rec.cache_lookups) <= torch_trace.MAX_LOOKUPS
    assert all(len(c.key) + len(c.detail) <= 2 * (torch_trace.MAX_KEY_CHARS + 100) for c in rec.cache_lookups)
    assert len(rec.restart_reasons) <= torch_trace.MAX_RESTARTS
    assert sum(map(len, rec.restart_reasons)) <= torch_trace.MAX_RESTARTS * (
        torch_trace.MAX_REASON_CHARS + 100
    )
    assert (
        rec.recompile_reason is not None and len(rec.recompile_reason) <= torch_trace.MAX_REASON_CHARS + 100
    )
    for text in (rec.code_name, rec.code_filename, rec.error_type or ""):
        assert len(text) <= torch_trace.MAX_NAME_CHARS + 100
    assert len(rec.component) <= 2 * (torch_trace.MAX_NAME_CHARS + 100)  # "forward (model.py)"
    assert seen and all(
        kept <= torch_trace.MAX_REGIONS and still_open <= torch_trace.MAX_REGIONS for kept, still_open in seen
    )
    trace = run.meta.trace
    assert trace is not None and len(trace.skipped) <= torch_trace.MAX_SKIPPED_KINDS + 1
    assert all(len(kind) <= 200 for kind in trace.skipped)
    assert sum(trace.skipped.values()) == 2_000  # every one counted, if not by its own name
    # What was cut is said, never silently dropped.
    assert trace.cut["graph_breaks"] == 300 - len(reasons)
    assert trace.cut["cache_lookups"] == 2_000 - len(rec.cache_lookups)
    assert trace.cut["regions"] > 0 and trace.cut["texts"] > 0
    # And the kept run is a file compiletrace reads back.
    saved = tmp_path / "kept.json"
    run.save(saved)
    assert compile_ids(compiletrace.load(saved)) == ["0/0"]


def test_too_many_compiles_or_processes_is_refused_naming_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch_trace, "MAX_COMPILES", 30)
    log = tmp_path / "many.log"
    log.write_text(trace_text(31))
    with pytest.raises(RunFileError, match=r"more than 30 compiles") as raised:
        compiletrace.load(log)
    assert str(log) in str(raised.value)
    log.write_text(trace_text(30))
    assert len(compile_ids(compiletrace.load(log))) == 30
    monkeypatch.setattr(torch_trace, "MAX_PROCESSES", 5)
    log.write_text("".join(a_compile(0).replace(f" {PID} ", f" {pid} ") for pid in range(1, 7)))
    with pytest.raises(RunFileError, match=r"more than 5 processes"):
        compiletrace.load(log)


# -- 10: an archive is opened once --------------------------------------------------------------


def test_a_zip_of_many_logs_is_opened_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = 300
    zipped = tmp_path / "trace.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for rank in range(logs):
            text = a_compile(0).replace(f" {PID} ", f" {1000 + rank} ")
            name = f"trace/dedicated_log_torch_trace_rank_{rank}_x.log"
            if rank % 2:
                archive.writestr(name + ".gz", gzip.compress(text.encode()))
            else:
                archive.writestr(name, text)
    opened: list[zipfile.ZipFile] = []

    class Counted(zipfile.ZipFile):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            opened.append(self)

    monkeypatch.setattr(zipfile, "ZipFile", Counted)
    job = compiletrace.load(zipped)
    assert isinstance(job, compiletrace.ProfileJob)
    assert sorted(job.ranks()) == list(range(logs))
    assert all(len(p.run.graph_records) == 1 for p in job.processes)
    assert len(opened) == 1 and opened[0].fp is None  # one archive, read once, closed


# -- 11: numbers with bounds ------------------------------------------------------------------------

HUGE = "9" * 5_000


@pytest.mark.parametrize("where", ["pid", "rank prefix", "member name", "file name"])
def test_a_pid_or_rank_of_thousands_of_digits_is_a_run_file_error(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = trace_text(2)
    if where in ("pid", "rank prefix"):
        path = tmp_path / "trace.log"
        bad = (
            entry({"str": ["a.py", 0]}, pid=HUGE)
            if where == "pid"
            else entry({"str": ["a.py", 0]}, prefix=f"[rank{HUGE}]:")
        )
        path.write_text(good + bad)
        named = [str(path), f"line {good.count(chr(10)) + 1}"]  # the file and the line
    elif where == "member name":
        path = tmp_path / "trace.zip"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr(f"t/dedicated_log_torch_trace_rank_{HUGE}_x.log", good)
        named = [str(path)]
    else:
        path = tmp_path / "trace"
        path.mkdir()
        (path / f"dedicated_log_torch_trace_rank_{HUGE[:200]}_x.log").write_text(good)
        named = [str(path)]
    with pytest.raises(RunFileError, match="digits") as raised:
        compiletrace.load(path)
    for part in named:
        assert part in str(raised.value)
    assert cli.main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert "digits" in err and err.count("\n") == 1 and HUGE not in err


# -- 12: a pipe is read once, through one buffer ------------------------------------------------------


def test_a_trace_through_a_pipe_loses_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = trace_text(200)
    assert len(text) > 100_000  # far past what telling the format reads
    log = tmp_path / "trace.log"
    log.write_text(text)
    expected = compile_ids(compiletrace.load(log))
    assert len(expected) == 200
    for data in (text.encode(), gzip.compress(text.encode())):
        with piped(data) as path:
            assert compile_ids(compiletrace.load(path)) == expected
    with piped(text.encode()) as path:
        assert cli.main(["report", path]) == 0
    assert "cache: none (200 graphs" in capsys.readouterr().out
    # A named pipe (mkfifo) the same, its writer another thread.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as out:
            out.write(text.encode())

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert compile_ids(compiletrace.load(fifo)) == expected
    writer.join(timeout=30)


def test_a_run_file_through_a_pipe_reads_whole(tmp_path: Path) -> None:
    records = tuple(make_record(f"{i}/0", start_unix_ns=i * 20 * MS, code_name="f" * 200) for i in range(300))
    saved = tmp_path / "run.json"
    ProfileRun(records, WarmupResult(False, 1.0, CompilationTimes()), {"model": "m"}).save(saved)
    assert saved.stat().st_size > 100_000
    with piped(saved.read_bytes()) as path:
        run = compiletrace.load(path)
    assert isinstance(run, ProfileRun) and run.graph_records == compiletrace.load(saved).graph_records


def test_a_zip_through_a_pipe_is_refused_with_what_to_do(tmp_path: Path) -> None:
    zipped = tmp_path / "trace.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("t/dedicated_log_torch_trace_a.log", trace_text(2))
    with piped(zipped.read_bytes()) as path, pytest.raises(RunFileError, match=r"give the \.zip file itself"):
        compiletrace.load(path)


# -- 17: an output never lands on what is read ------------------------------------------------------


def test_an_output_on_or_inside_an_input_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace"
    trace.mkdir()
    log = trace / "dedicated_log_torch_trace_a.log"
    log.write_text(trace_text(3))
    before = log.read_bytes()
    for option, path in (
        ("--json", log),  # the trace's own log
        ("--html", trace / "report.html"),  # a new file inside the trace directory
        ("--chrome-trace", trace / ".." / "trace" / "t.json"),  # the same, spelt otherwise
    ):
        assert cli.main(["report", str(trace), option, str(path)]) == 2
        err = capsys.readouterr().err
        assert option in err and str(trace) in err and err.count("\n") == 1, err
        assert "inside the input" in err or "same file as the input" in err
    link = tmp_path / "link.json"
    link.symlink_to(log)
    assert cli.main(["doctor", str(log), "--json", str(link)]) == 2
    assert "same file as the input" in capsys.readouterr().err
    assert log.read_bytes() == before and sorted(p.name for p in trace.iterdir()) == [log.name]
    # Beside the directory is fine.
    assert cli.main(["report", str(trace), "--json", str(tmp_path / "out.json")]) == 0


# -- 13: values are checked whole --------------------------------------------------------------------


def test_a_cache_artifact_name_is_matched_whole(tmp_path: Path) -> None:
    """A lookup artifact is torch's name exactly: one with a final line break (which "$"
    lets through) is an unknown artifact, skipped and counted, never a cache hit."""
    payload = json.dumps({"key": "f" + "a" * 51, "components": [], "cache_state": "hit"})
    for name, hit in (("fx_graph_cache_hit", True), ("fx_graph_cache_hit\n", False)):
        artifact = entry({"artifact": {"name": name, "encoding": "json"}, **ids(0)}, payload)
        path = tmp_path / "trace.log"
        path.write_text(a_compile(0).replace(metrics(0), artifact + metrics(0)))
        found = compiletrace.load(path)
        assert isinstance(found, ProfileRun)
        (record,) = found.graph_records
        assert (record.fx_graph_cache.value == "hit") is hit, name
        assert len(record.cache_lookups) == int(hit), name


# str.isdigit() admits '²', which int() refuses: a number read from a file or the environment
# is ASCII decimal digits, whole, or it is not read as one.


def test_a_module_forwards_line_is_ascii_decimal_digits() -> None:
    from compiletrace._doctor.shared import model_location, module_forward

    forward = make_record(module_class="Tower", module_forward="model.py:12", code_filename="c.py")
    assert module_forward(forward) == ("model.py", 12)
    odd = make_record(module_class="Tower", module_forward="model.py:1\u00b2", code_filename="c.py")
    assert module_forward(odd) is None and model_location(odd) == odd.code_location


def test_a_job_dir_file_names_numbers_are_ascii_decimal_digits() -> None:
    from compiletrace._data.job_dir import parse_key

    assert parse_key("12-34-0123abcd") == (12, 34)
    assert parse_key("1\u00b2-34-0123abcd") is None and parse_key("12-\u0663-0123abcd") is None


# '²' and '³' (isdigit() but not int()), '٣' (Arabic-Indic three, int() takes it), fullwidth 8 and 0
NOT_ASCII_DIGITS = ("\u00b2", "\u00b3", "\u0663", "\uff18\uff10", "8\u00b2")


def test_a_ready_port_or_step_is_ascii_decimal_digits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--ready port:²`` ended in a ValueError traceback (exit 1): now a usage error naming
    the ASCII digits, exit 2, before anything runs; a job file's ``ready`` so is damaged."""
    from compiletrace._data.job import Job
    from compiletrace._data.ready import parse_ready
    from compiletrace._io.errors import UsageError

    assert parse_ready("port:8000").number == 8000 and parse_ready("step:3").number == 3
    marker = tmp_path / "ran"
    for kind in ("port", "step"):
        for digits in NOT_ASCII_DIGITS:
            with pytest.raises(UsageError, match=rf"{kind}:N needs a whole number .* in ASCII digits 0-9"):
                parse_ready(f"{kind}:{digits}")
            assert cli.main(["run", "--ready", f"{kind}:{digits}", "--", "touch", str(marker)]) == 2
            assert "in ASCII digits 0-9" in capsys.readouterr().err and not marker.exists()
    data = Job(("true",), 0, (), cwd=str(tmp_path), ready="port:8000").to_dict()
    data["ready"] = "port:\u00b2"
    with pytest.raises(RunFileError, match="field 'ready' must be a ready mark"):
        Job.from_dict(data)


def test_a_number_option_is_ascii_decimal_digits(capsys: pytest.CaptureFixture[str]) -> None:
    """``type=int`` and ``type=float`` took '٣' (and refused '²' in argparse's words): each
    number option reads ASCII digits, or says so, exit 2."""
    for argv in (
        ["bench", "startup", "--num-iters-cold", "\u0663", "--", "true"],
        ["bench", "startup", "--grace", "\u0663.\u0665", "--", "true"],
        ["doctor", "x.json", "--verify", "--rounds", "\u00b3"],
        ["doctor", "x.json", "--verify", "--ready-timeout", "\uff19"],
        ["compare", "a.json", "b.json", "--threshold", "\u0661\u0660"],
        ["profile", "--steady-calls", "\u0663"],
    ):
        assert cli.main(argv) == 2, argv
        assert "in ASCII digits 0-9" in capsys.readouterr().err, argv


def test_a_rank_from_the_environment_is_ascii_decimal_digits(monkeypatch: pytest.MonkeyPatch) -> None:
    from compiletrace._app.job_process import process_role
    from compiletrace._core import recorder

    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("RANK", "\u00b2")
    assert "\u00b2" not in process_role()
    monkeypatch.setattr(recorder, "_rank", None)
    for rank, read in (("\u0663", 0), ("\u00b2", 0), ("3", 3)):
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setattr(recorder, "_rank", None)
        assert recorder.rank() == read


def test_columns_is_ascii_decimal_digits(monkeypatch: pytest.MonkeyPatch) -> None:
    from compiletrace._io.text import PIPE_WIDTH, text_width

    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    monkeypatch.setenv("COLUMNS", "2\u00b2")
    assert text_width() == PIPE_WIDTH
    monkeypatch.setenv("COLUMNS", "90")
    assert text_width() == 90
