"""The warm-start ledger, as data: a frame's time split by torch's regions (innermost wins,
compiletrace's own timing kept beside the line torch's regions give it), a process's start
split into lines that add up to its window exactly, up to its ready mark. Exact figures on
made-up times; a real warm start is tests/capture/test_warm_ledger.py's."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from compiletrace._data.ledger import (
    AOT_CACHE,
    BACKEND_OTHER,
    COMPILE_MISS,
    COMPILETRACE_REGION,
    CUDAGRAPH_LINE,
    FX_CACHE,
    GUARDS,
    HEADER_MARK,
    KERNEL_COMPILE_LINE,
    KERNEL_LOAD,
    LAZY_BACKWARD,
    SETUP,
    STARTUP,
    TRACING,
    UNATTRIBUTED,
    WARM_UP_RUNS,
    frame_lines_of,
    frame_regions,
    ledger,
    split_frame,
)
from compiletrace._data.ready import CALL, ReadyMark
from compiletrace._data.records import CUDAGRAPH, GraphRecord, RuntimeEvent
from compiletrace._data.timeline import PROCESS, PhaseRecord

MS = 1_000_000

# A warm frame as torch times it (the shape of a real one: tests/capture/test_warm_ledger.py).
WARM_FRAME = [
    ("entire_frame_compile", 0, 100 * MS),  # groups the rest: no line of its own
    ("compile_attempt_0", 1 * MS, 95 * MS),
    ("bytecode_tracing", 2 * MS, 12 * MS),
    ("backend_compile", 13 * MS, 90 * MS),
    ("inductor_codecache_torch_key", 14 * MS, 18 * MS),
    ("AOTAutogradCache.inductor_load", 20 * MS, 88 * MS),
    ("PyCodeCache.load_by_key_path", 21 * MS, 80 * MS),
    ("compile_file", 60 * MS, 70 * MS),  # the process's first: its precompiled header
    ("async_compile.wait", 75 * MS, 78 * MS),
    ("build_guards", 91 * MS, 94 * MS),
    ("gc", 96 * MS, 97 * MS),
]


def test_a_warm_frame_splits_by_its_innermost_regions_and_adds_up_exactly() -> None:
    regions, header_seen = frame_regions(WARM_FRAME, header_seen=False)
    assert header_seen and (HEADER_MARK, 60 * MS, 70 * MS) in regions
    lines = split_frame(regions, 0, 100 * MS, aot_hit=True)
    assert sum(ns for *_, ns in lines) == 100 * MS
    assert {line: ns for line, torch_line, ns in lines if line == torch_line} == {
        TRACING: 10 * MS + 1 * MS + (100 - 10 - 77 - 3 - 1) * MS,  # tracing, gc, Dynamo's own rest
        SETUP: 4 * MS + 10 * MS,  # the cache key, the header
        GUARDS: 3 * MS,
        AOT_CACHE: (77 - 4 - 68) * MS,  # the rest of the backend call: the AOTAutograd cache
        FX_CACHE: (68 - 59) * MS,  # the rest of inductor_load: the FX-graph cache
        KERNEL_LOAD: (59 - 10 - 3) * MS,
        KERNEL_COMPILE_LINE: 3 * MS,
    }
    # A later frame's compile_file is a kernel compiled, and a miss's backend rest is its own.
    again, _ = frame_regions(WARM_FRAME, header_seen=True)
    split = {line: ns for line, _, ns in split_frame(again, 0, 100 * MS)}
    assert split[KERNEL_COMPILE_LINE] == 13 * MS and split[SETUP] == 4 * MS
    assert split[BACKEND_OTHER] == 5 * MS and AOT_CACHE not in split


def test_compiletraces_own_timing_keeps_the_line_torchs_regions_give() -> None:
    # An import inside the kernel load: one-time set-up, that torch's trace calls kernel load.
    regions = [*WARM_FRAME, (COMPILETRACE_REGION, 30 * MS, 50 * MS)]
    regions, _ = frame_regions(regions, header_seen=False)
    lines = split_frame(regions, 0, 100 * MS, aot_hit=True)
    assert (SETUP, KERNEL_LOAD, 20 * MS) in lines
    ours = {line: 0 for line, _, _ in lines}
    theirs = {torch_line: 0 for _, torch_line, _ in lines}
    for line, torch_line, ns in lines:
        ours[line] += ns
        theirs[torch_line] += ns
    assert ours[KERNEL_LOAD] == 26 * MS and theirs[KERNEL_LOAD] == 46 * MS
    assert sum(ours.values()) == sum(theirs.values()) == 100 * MS


def test_a_record_without_a_split_is_split_by_its_phases() -> None:
    record = GraphRecord(
        "0/0", "lm", "inductor", "forward", 3, 0, 100 * MS, 30 * MS, 70 * MS, 0,
        phases=(("aot_autograd", 10 * MS), ("cache", 5 * MS), ("inductor", 20 * MS),
                ("kernel_compile", 25 * MS), ("other", 10 * MS)),
    )  # fmt: skip
    assert frame_lines_of(record) == (
        (COMPILE_MISS, COMPILE_MISS, 30 * MS),
        (KERNEL_COMPILE_LINE, KERNEL_COMPILE_LINE, 25 * MS),
        (AOT_CACHE, AOT_CACHE, 5 * MS),
        (BACKEND_OTHER, BACKEND_OTHER, 10 * MS),
        (TRACING, TRACING, 30 * MS),
    )


def test_a_process_ledger_adds_up_to_its_window_up_to_ready() -> None:
    phases = [
        PhaseRecord("interpreter start", 0, 100 * MS, kind=PROCESS, phase_id=1),
        PhaseRecord("import torch", 100 * MS, 400 * MS, kind=PROCESS, phase_id=2),
        PhaseRecord("load weights", 500 * MS, 700 * MS, phase_id=3),
        PhaseRecord("Warmup (GPU)", 800 * MS, 1500 * MS, phase_id=4),
    ]
    frame_lines = ((TRACING, TRACING, 60 * MS), (SETUP, KERNEL_LOAD, 40 * MS))
    record = GraphRecord(
        "0/0", "lm", "inductor", "forward", 3, 900 * MS, 1000 * MS, 60 * MS, 40 * MS, None,
        backward_ns=30 * MS, backward_start_unix_ns=1100 * MS, frame_lines=frame_lines,
    )  # fmt: skip
    runtime = [RuntimeEvent(CUDAGRAPH, "0/0", False, 1200 * MS, 50 * MS, "CUDAGraphNode.record")]
    mark = ReadyMark(1600 * MS, 1, CALL, "compiletrace.ready()")
    book = ledger([record], runtime, phases, start_unix_ns=0, end_unix_ns=2000 * MS, ready=mark)
    assert (book.start_unix_ns, book.end_unix_ns, book.source) == (0, 1600 * MS, "to the ready mark")
    assert book.ns_by_line() == {
        STARTUP: 400 * MS,
        SETUP: 40 * MS,
        TRACING: 60 * MS,
        CUDAGRAPH_LINE: 50 * MS,
        LAZY_BACKWARD: 30 * MS,
        WARM_UP_RUNS: (700 - 100 - 30 - 50) * MS,
        "load weights": 200 * MS,
        UNATTRIBUTED: (100 + 100 + 100) * MS,
    }
    assert sum(line.ns for line in book.lines) == book.total_ns
    assert [line.name for line in book.lines][-1] == UNATTRIBUTED
    assert book.by_torch[KERNEL_LOAD] == 40 * MS and SETUP not in book.by_torch
    assert book.lines[0].share == 0.25 and book.lines[0].fix.startswith("import less")


def test_a_frame_cut_by_the_window_keeps_its_proportions_exactly() -> None:
    lines = ((TRACING, TRACING, 3 * MS), (GUARDS, GUARDS, 1 * MS))
    record = GraphRecord("0/0", "lm", "eager", "f", 1, 0, 4 * MS, 4 * MS, 0, None, frame_lines=lines)
    book = ledger([record], start_unix_ns=0, end_unix_ns=2 * MS + 1)
    assert book.ns_by_line() == {TRACING: 1_500_001, GUARDS: 500_000}


# -- compiles that all overlap: n log n, not n squared ------------------------------------------------

US = 1_000


def _overlapping(n: int) -> list[GraphRecord]:
    """``n`` compiles that all overlap: compile i starts i us after the first, and all end
    together, 1 s after the last has started; each frame split 1/2 tracing, 1/4 guards and
    1/4 AOTAutograd cache (every frame is a multiple of 4 ns: the shares are exact)."""
    end = n * US + 1_000 * MS
    out = []
    for i in range(n):
        frame = end - i * US
        lines = (
            (TRACING, TRACING, frame // 2),
            (GUARDS, GUARDS, frame // 4),
            (AOT_CACHE, AOT_CACHE, frame // 4),
        )
        out.append(GraphRecord(f"{i}/0", "lm", "eager", "f", 1, i * US, end, 0, 0, None, frame_lines=lines))
    return out


class _Counted(list[Any]):
    """A list that counts how often its items are read."""

    reads = 0

    def __getitem__(self, index: Any) -> Any:
        type(self).reads += 1
        return super().__getitem__(index)


def test_the_sweep_reads_each_span_a_bounded_number_of_times_however_many_overlap() -> None:
    """Innermost-wins over n spans that are all open at once: each span is read a few times
    (pushed, dropped, its line named), not once per instant it stays open (n squared)."""
    from compiletrace._data.ledger import _sweep

    for n in (1_000, 4_000):
        spans = _Counted((i * US, n * US + MS, 1, f"line {i % 7}", i % 3 == 0) for i in range(n))
        _Counted.reads = 0
        swept = _sweep(spans, 0, n * US + MS)
        assert sum(swept.values()) == n * US + MS
        assert _Counted.reads <= 8 * n, (n, _Counted.reads)  # was about n * n / 2


_TestSpan = tuple[int, int, int, str, bool]  # as the ledger's: start, end, level, line, own


def _innermost_of(spans: list[_TestSpan], candidates: list[int]) -> int | None:
    return min(candidates, key=lambda i: (-spans[i][2], -spans[i][0], spans[i][1], i), default=None)


def _brute_force(spans: list[_TestSpan], start: int, end: int) -> dict[tuple[str, str, int], int]:
    """The rule the sweep keeps, one nanosecond at a time: the innermost span is the one of
    the highest level, then the latest start, then the shortest, then the first given."""
    out: dict[tuple[str, str, int], int] = {}
    for t in range(start, end):
        covering = [i for i, s in enumerate(spans) if s[0] <= t < s[1]]
        inner = _innermost_of(spans, covering)
        torch_inner = _innermost_of(spans, [i for i in covering if not spans[i][4]])
        key = (
            UNATTRIBUTED if inner is None else spans[inner][3],
            UNATTRIBUTED if torch_inner is None else spans[torch_inner][3],
            -1 if inner is None else inner,
        )
        out[key] = out.get(key, 0) + 1
    return out


def test_the_sweep_gives_each_instant_to_the_innermost_span_as_one_by_one_would() -> None:
    """On spans that nest, overlap, tie and stick out of the window (seeded, so a failure
    repeats), the sweep's split is the one-nanosecond-at-a-time split, exactly."""
    import random

    from compiletrace._data.ledger import _sweep

    rng = random.Random(39)
    for _ in range(200):
        spans = []
        for _ in range(rng.randrange(0, 12)):
            s = rng.randrange(-5, 60)
            spans.append(
                (s, s + rng.randrange(0, 30), rng.randrange(3), rng.choice("abc"), rng.random() < 0.3)
            )
        assert _sweep(spans, 0, 50) == _brute_force(spans, 0, 50), spans


@pytest.mark.slow  # some 2 s: 100,000 records made, then their ledger
def test_the_ledger_of_as_many_overlapping_compiles_as_a_reader_admits_is_exact_and_linear() -> None:
    """MAX_COMPILES compiles that all overlap (the worst case for innermost-wins): the ledger
    is exact, and within a CPU budget a quadratic sweep overruns many times over (it took
    38 s at 8,000; this takes about a second at 100,000)."""
    from compiletrace._data.torch_trace import MAX_COMPILES

    n = MAX_COMPILES
    records = _overlapping(n)
    window = n * US + 1_000 * MS
    with _cpu_budget(60):
        found = ledger(records)
    assert (found.start_unix_ns, found.end_unix_ns) == (0, window)
    assert found.ns_by_line() == {TRACING: window // 2, GUARDS: window // 4, AOT_CACHE: window // 4}


@contextlib.contextmanager
def _cpu_budget(seconds: int) -> Iterator[None]:
    """Fail once this process has used ``seconds`` of CPU time inside the block: CPU time,
    not wall time, so machine load does not move it."""

    def overrun(signum: int, frame: object) -> None:
        raise AssertionError(f"over {seconds} s of CPU time")

    previous = signal.signal(signal.SIGPROF, overrun)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
