"""The warm-start ledger: what a start whose compile caches hit still paid, line by line.

A warm start still re-traces with Dynamo, builds guards, looks its graphs up and loads them
from each cache tier, loads (or compiles) kernels, autotunes, records CUDA graphs, pays the
process's one-time set-up, and runs the engine's own start-up (memory profiling, warm-up
runs). The ledger splits one process's start, from its own start to its ready mark
(:mod:`compiletrace._data.ready`; without one, to the end of its timeline), into those
lines, each with its seconds, its share and the known fix that removes it. Every instant
goes to the innermost interval that covers it (a region inside a compile inside a phase),
so lines never overlap, and with "unattributed" taking the rest they add up to the window
exactly.

Inside a frame compile, the split is torch's own timed regions (``frame_lines`` on each
record, :func:`split_frame`): the same function reads the regions the live recording
collected and the regions of a TORCH_TRACE log, so the two agree. The live recording also
times what torch does not (the imports and CPU probe of the process's first compiles): each
frame's split keeps, beside the line it gives an instant, the line torch's regions alone
give it, so :attr:`Ledger.by_torch` is what a trace of the same run says.

>>> S = 1_000_000_000
>>> regions = [("bytecode_tracing", 0, 2 * S), ("build_guards", 3 * S, 4 * S)]
>>> split_frame(regions, 0, 5 * S)
(('Dynamo tracing', 'Dynamo tracing', 4000000000), ('guard building', 'guard building', 1000000000))
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiletrace._data.phases import AOT_AUTOGRAD, CACHE, INDUCTOR, KERNEL_COMPILE, phase_of
from compiletrace._data.ready import ReadyMark, default_mark, is_warm_up_phase
from compiletrace._data.records import AUTOTUNE, NS_PER_S, GraphRecord, RuntimeEvent
from compiletrace._data.run import Run
from compiletrace._data.timeline import PROCESS, PhaseRecord
from compiletrace._data.torch_text import (
    BACKEND_REGION,
    COMPILE_AUTOTUNE_REGIONS,
    CUDAGRAPH_REGIONS,
    FX_LOAD_REGIONS,
    GUARD_REGIONS,
    HEADER_REGION,
    KERNEL_LOAD_REGIONS,
    ONE_TIME_REGIONS,
    REMOTE_CACHE_REGIONS,
    RUNTIME_AUTOTUNE_REGIONS,
    TRACING_REGIONS,
)
from compiletrace._io.text import printable

__all__ = [
    "COMPILETRACE_REGION",
    "FIXES",
    "HEADER_MARK",
    "LINES",
    "Ledger",
    "LedgerLine",
    "frame_lines_of",
    "ledger",
    "line_of",
    "run_ledger",
    "split_frame",
]

# The ledger's lines, in the order a table shows them.
STARTUP = "interpreter start and imports"
SETUP = "one-time set-up"
TRACING = "Dynamo tracing"
GUARDS = "guard building"
AOT_CACHE = "cache lookup and load: AOTAutograd"
FX_CACHE = "cache lookup and load: FX graph"
REMOTE_CACHE = "cache lookup: remote and PGO state"
BACKEND_OTHER = "backend: other"
KERNEL_LOAD = "kernel load"
KERNEL_COMPILE_LINE = "kernel compile"
COMPILE_MISS = "compile (cache miss)"
AUTOTUNE_COMPILE = "autotuning at compile"
AUTOTUNE_CALLS = "autotuning at first calls"
CUDAGRAPH_LINE = "CUDA-graph recording"
LAZY_BACKWARD = "lazy backward"
WARM_UP_RUNS = "model runs in warm-up"
UNATTRIBUTED = "unattributed"
LINES = (
    STARTUP,
    SETUP,
    TRACING,
    GUARDS,
    AOT_CACHE,
    FX_CACHE,
    REMOTE_CACHE,
    BACKEND_OTHER,
    KERNEL_LOAD,
    KERNEL_COMPILE_LINE,
    COMPILE_MISS,
    AUTOTUNE_COMPILE,
    AUTOTUNE_CALLS,
    CUDAGRAPH_LINE,
    LAZY_BACKWARD,
    WARM_UP_RUNS,
)  # then the program's and the engine's own phases, by name, then UNATTRIBUTED

# The known fix for each line (the phases' lines have none of their own).
FIXES: dict[str, str] = {
    STARTUP: "import less before the first compile (lazy imports); a long-lived process pays it once",
    SETUP: "paid once per process (compiler imports, cache keys, the CPU probe, the C++ header): "
    "keep one long-lived process, or start workers by fork after it",
    TRACING: "torch's precompile (torch.compile(..., caching_precompile) or aot_compile + "
    "save_compiled_function) skips re-tracing; regional compilation traces a block once",
    GUARDS: "precompile saves the guards; fewer guards with dynamic shapes where sizes vary",
    AOT_CACHE: "torch's mega-cache (torch.compiler.save_cache_artifacts) loads every tier at once",
    FX_CACHE: "torch's mega-cache (torch.compiler.save_cache_artifacts) loads every tier at once",
    REMOTE_CACHE: "a local cache in front of the remote one; PGO's state is read once per frame",
    BACKEND_OTHER: "",
    KERNEL_LOAD: "keep the whole TORCHINDUCTOR_CACHE_DIR (compiled kernels, not only the artifacts)",
    KERNEL_COMPILE_LINE: "keep the whole TORCHINDUCTOR_CACHE_DIR (and TRITON_CACHE_DIR): kernels were "
    "compiled again",
    COMPILE_MISS: "a cache missed: 'compiletrace doctor' names the graph and why",
    AUTOTUNE_COMPILE: "keep the autotune cache (inductor's autotune_local_cache), or fewer "
    "max-autotune choices",
    AUTOTUNE_CALLS: "keep the autotune cache (inductor's autotune_local_cache; ship it with the "
    "mega-cache), or warm each shape",
    CUDAGRAPH_LINE: "fewer capture sizes (vLLM's cudagraph_capture_sizes); call each reduce-overhead "
    "graph twice per shape in warm-up",
    LAZY_BACKWARD: "run one .backward() in warm-up, or keep the AOTAutograd cache (it loads the "
    "backward with the forward)",
    WARM_UP_RUNS: "fewer warm-up shapes, or warm-up runs that are the serving shapes",
    UNATTRIBUTED: "mark the program's own steps with compiletrace.phase to name them",
}

# The interval compiletrace itself timed inside a compile (imports, the CPU probe): torch
# has no region for it (compiletrace._core.compile_imports).
COMPILETRACE_REGION = "(compiletrace: imports and one-time set-up)"
# What split_frame calls the first C++ compile of a process: its precompiled header.
HEADER_MARK = "(the process's precompiled header)"
_SETUP_REGIONS = (*ONE_TIME_REGIONS, "inductor_import")
_KERNEL_COMPILE_REGIONS = ("CachingAutotuner.slow_precompile_config", "cpp_wrapper_compile")

_Span = tuple[int, int, int, str, bool]  # start, end, level, line, compiletrace's own (not torch's)


def line_of(name: str, *, aot_hit: bool = False, fx_hit: bool = False) -> str | None:
    """The ledger line a region of torch's (by name) gives its time to; None for a region
    that only groups others (``entire_frame_compile``, ``compile_attempt_0``). ``aot_hit``,
    ``fx_hit``: the frame's AOTAutograd or FX-graph cache hit, so the regions that wrap those
    lookups (the backend call; inductor's ``compile_fx_inner``, where a backend calls
    inductor itself) were a cache's lookup and load, not a compile.

    >>> line_of("PyCodeCache.load_by_key_path"), line_of("backend_compile", aot_hit=True)
    ('kernel load', 'cache lookup and load: AOTAutograd')
    >>> line_of("compile_fx_inner"), line_of("compile_fx_inner", fx_hit=True)
    ('compile (cache miss)', 'cache lookup and load: FX graph')
    >>> line_of("compile_attempt_0") is None
    True
    """
    if name in (COMPILETRACE_REGION, HEADER_MARK) or name.startswith(_SETUP_REGIONS):
        return SETUP
    if COMPILE_AUTOTUNE_REGIONS.search(name):
        return AUTOTUNE_COMPILE
    if name in RUNTIME_AUTOTUNE_REGIONS:
        return AUTOTUNE_CALLS
    if name in CUDAGRAPH_REGIONS:
        return CUDAGRAPH_LINE
    if name.startswith(KERNEL_LOAD_REGIONS):
        return KERNEL_LOAD
    if name.startswith(_KERNEL_COMPILE_REGIONS) or phase_of(name) == KERNEL_COMPILE:
        return KERNEL_COMPILE_LINE
    if name.startswith(FX_LOAD_REGIONS):
        return FX_CACHE
    if name.startswith(REMOTE_CACHE_REGIONS):
        return REMOTE_CACHE
    phase = phase_of(name)
    if phase == INDUCTOR and fx_hit:
        return FX_CACHE
    if phase in (AOT_AUTOGRAD, INDUCTOR):
        return COMPILE_MISS
    if phase == CACHE:
        return AOT_CACHE
    if name.startswith(TRACING_REGIONS) or name == "gc":
        return TRACING
    if name.startswith(GUARD_REGIONS):
        return GUARDS
    if name == BACKEND_REGION:
        return AOT_CACHE if aot_hit else BACKEND_OTHER
    return None


# A span waiting in a sweep's heap, the innermost first: the highest level, then the latest
# start, then the shortest, then the first given; its clipped end says when it has left.
_Waiting = tuple[int, int, int, int, int]  # -level, -start, end, index in spans, clipped end


def _innermost(heap: list[_Waiting], lo: int) -> int | None:
    """The index of the innermost span of ``heap`` still open at ``lo``, those that ended
    before it dropped on the way (each is dropped once: a span that has ended never opens
    again)."""
    while heap and heap[0][4] <= lo:
        heapq.heappop(heap)
    return heap[0][3] if heap else None


def _sweep(spans: Sequence[_Span], start: int, end: int) -> dict[tuple[str, str, int], int]:
    """Nanoseconds of ``[start, end]`` per (innermost span's line, innermost torch span's
    line, the innermost span's index in ``spans``, or -1 for none), each instant counted
    once: innermost is the span of the highest level, then the latest start, then the
    shortest (then the first given). The spans open at an instant wait in two heaps (every
    span; torch's alone), so spans that all overlap cost n log n, not n squared."""
    clipped = sorted(
        (max(s[0], start), min(s[1], end), i)
        for i, s in enumerate(spans)
        if min(s[1], end) > max(s[0], start)
    )
    bounds = sorted({start, end, *(s for s, _, _ in clipped), *(e for _, e, _ in clipped)})
    out: dict[tuple[str, str, int], int] = {}
    every: list[_Waiting] = []
    torch_only: list[_Waiting] = []
    nxt = 0
    for lo, hi in itertools.pairwise(bounds):
        while nxt < len(clipped) and clipped[nxt][0] <= lo:
            _, clipped_end, i = clipped[nxt]
            begin, finish, level, _, own = spans[i]
            waiting = (-level, -begin, finish, i, clipped_end)
            heapq.heappush(every, waiting)
            if not own:
                heapq.heappush(torch_only, waiting)
            nxt += 1
        inner = _innermost(every, lo)
        torch_inner = _innermost(torch_only, lo)
        key = (
            spans[inner][3] if inner is not None else UNATTRIBUTED,
            spans[torch_inner][3] if torch_inner is not None else UNATTRIBUTED,
            -1 if inner is None else inner,
        )
        out[key] = out.get(key, 0) + hi - lo
    return out


def split_frame(
    regions: Iterable[tuple[str, int, int]],
    start_ns: int,
    end_ns: int,
    *,
    aot_hit: bool = False,
    fx_hit: bool = False,
) -> tuple[tuple[str, str, int], ...]:
    """One frame compile's time, ``[start_ns, end_ns]``, per ledger line: ``(line, the line
    torch's regions alone give, ns)``, adding up to ``end_ns - start_ns``. Time no region
    with a line covers is Dynamo's own (tracing and bookkeeping). ``aot_hit``, ``fx_hit``:
    the frame's caches hit (see :func:`line_of`).
    A region named :data:`COMPILETRACE_REGION` is compiletrace's own timing; one named
    :data:`HEADER_MARK` is the process's precompiled header (see :func:`frame_regions`)."""
    spans: list[_Span] = []
    for name, s, e in regions:
        line = line_of(name, aot_hit=aot_hit, fx_hit=fx_hit)
        if line is not None:
            spans.append((s, e, 0, line, name == COMPILETRACE_REGION))
    swept = _sweep(spans, start_ns, end_ns)
    totals: dict[tuple[str, str], int] = {}
    for (line, torch_line, _), ns in swept.items():
        line = TRACING if line == UNATTRIBUTED else line
        torch_line = TRACING if torch_line == UNATTRIBUTED else torch_line
        totals[(line, torch_line)] = totals.get((line, torch_line), 0) + ns
    return tuple((a, b, ns) for (a, b), ns in sorted(totals.items(), key=_line_order) if ns > 0)


def _line_order(item: tuple[tuple[str, str], int]) -> tuple[int, int, str, str]:
    (a, b), _ = item
    return (_rank(a), _rank(b), a, b)


def _rank(line: str) -> int:
    return LINES.index(line) if line in LINES else len(LINES) + (line == UNATTRIBUTED)


def frame_regions(
    regions: Iterable[tuple[str, int, int]], header_seen: bool
) -> tuple[list[tuple[str, int, int]], bool]:
    """A frame's regions with the process's first C++ compile (its precompiled header,
    built once per process whatever the cache holds) renamed :data:`HEADER_MARK`, and
    whether the process has built it by the end of this frame."""
    out = []
    for name, s, e in sorted(regions, key=lambda r: r[1]):
        if name == HEADER_REGION and not header_seen:
            header_seen = True
            name = HEADER_MARK
        out.append((name, s, e))
    return out, header_seen


def frame_lines_of(record: GraphRecord) -> tuple[tuple[str, str, int], ...]:
    """A record's split of its frame time (``frame_lines``), or, for a record made without
    one (an older file, a torch without timed regions), the split its phases give."""
    if record.frame_lines:
        return record.frame_lines
    parts: dict[str, int] = {}

    def add(line: str, ns: int) -> None:
        if ns > 0:
            parts[line] = parts.get(line, 0) + ns

    phases = record.phase_ns
    add(COMPILE_MISS, phases.get(AOT_AUTOGRAD, 0) + phases.get(INDUCTOR, 0))
    add(KERNEL_COMPILE_LINE, phases.get(KERNEL_COMPILE, 0))
    add(AOT_CACHE, phases.get(CACHE, 0))
    add(BACKEND_OTHER, record.backend_ns - sum(phases.values()) + phases.get("other", 0))
    add(TRACING, record.frame_ns - sum(parts.values()))
    return tuple((line, line, ns) for line, ns in parts.items())


@dataclass(frozen=True)
class LedgerLine:
    """One line of the ledger."""

    name: str
    ns: int
    share: float  # of the ledger's whole window
    fix: str

    @property
    def seconds(self) -> float:
        return self.ns / NS_PER_S


@dataclass(frozen=True)
class Ledger:
    """One process's warm start, ``[start_unix_ns, end_unix_ns]``, split into lines that add
    up to it exactly (:attr:`lines`); :attr:`by_torch` is the same split as torch's trace
    gives it (compiletrace's own timing inside compiles left in the line torch's regions
    give it)."""

    start_unix_ns: int
    end_unix_ns: int
    lines: tuple[LedgerLine, ...]
    by_torch: Mapping[str, int]
    ready: ReadyMark | None = None
    source: str = ""  # what the window is: "from the process's start to ready", ...

    @property
    def total_ns(self) -> int:
        return self.end_unix_ns - self.start_unix_ns

    def ns_by_line(self) -> dict[str, int]:
        return {line.name: line.ns for line in self.lines}

    def to_dict(self) -> dict[str, Any]:
        return {
            "start_unix_ns": self.start_unix_ns,
            "end_unix_ns": self.end_unix_ns,
            "total_s": self.total_ns / NS_PER_S,
            "window": self.source,
            "ready": None if self.ready is None else self.ready.to_dict(),
            "lines": [
                {"line": ln.name, "seconds": ln.seconds, "share": ln.share, "fix": ln.fix}
                for ln in self.lines
            ],
            "as_torch_trace_gives_it_s": {k: v / NS_PER_S for k, v in self.by_torch.items()},
        }


def _phase_line(p: PhaseRecord) -> str:
    if p.kind == PROCESS:
        return STARTUP
    if is_warm_up_phase(p.name):
        return WARM_UP_RUNS
    return printable(p.name)


def ledger(
    records: Iterable[GraphRecord],
    runtime: Iterable[RuntimeEvent] = (),
    phases: Iterable[PhaseRecord] = (),
    *,
    start_unix_ns: int | None = None,
    end_unix_ns: int | None = None,
    ready: ReadyMark | None = None,
) -> Ledger:
    """The ledger of one process: its phases (the process's own start, the program's and
    the engine's phases, warm-ups), its compiles (each frame split by its ``frame_lines``),
    lazy backwards and runtime events, from ``start_unix_ns`` (default: the first of them)
    to its ready mark (else ``end_unix_ns``, else the last of them). Compiles are inner to
    phases; within each, the innermost interval takes an instant."""
    records = tuple(records)
    runtime = tuple(runtime)
    phases = tuple(phases)
    spans: list[_Span] = []
    splits: dict[int, tuple[tuple[str, str, int], ...]] = {}
    for p in phases:
        spans.append((p.start_unix_ns, p.end_unix_ns, 0, _phase_line(p), False))
    for r in records:
        splits[len(spans)] = frame_lines_of(r)
        spans.append((r.start_unix_ns, r.end_unix_ns, 1, "", False))
        if r.backward_ns and r.backward_start_unix_ns is not None:
            spans.append(
                (r.backward_start_unix_ns, r.backward_start_unix_ns + r.backward_ns, 1, LAZY_BACKWARD, False)
            )
    for e in runtime:
        spans.append(
            (
                e.start_unix_ns,
                e.end_unix_ns,
                2,
                AUTOTUNE_CALLS if e.kind == AUTOTUNE else CUDAGRAPH_LINE,
                False,
            )
        )
    start = start_unix_ns if start_unix_ns is not None else min((s[0] for s in spans), default=0)
    if ready is not None:
        end, source = ready.unix_ns, "to the ready mark"
    elif end_unix_ns is not None:
        end, source = end_unix_ns, "to the end of the recording (no ready mark)"
    else:
        end, source = max((s[1] for s in spans), default=start), "to the last compile (no ready mark)"
    end = max(end, start)
    lines: dict[str, int] = {}
    torch_lines: dict[str, int] = {}
    for (line, _, ident), ns in _sweep(spans, start, end).items():
        split = splits.get(ident)
        if split is None:
            lines[line] = lines.get(line, 0) + ns
            torch_lines[line] = torch_lines.get(line, 0) + ns
            continue
        for name, torch_name, part in _share(split, ns):
            lines[name] = lines.get(name, 0) + part
            torch_lines[torch_name] = torch_lines.get(torch_name, 0) + part
    total = end - start
    ordered_lines = sorted(lines.items(), key=lambda kv: (_rank(kv[0]), kv[0]))
    return Ledger(
        start,
        end,
        tuple(
            LedgerLine(name, ns, ns / total if total else 0.0, FIXES.get(name, ""))
            for name, ns in ordered_lines
            if ns > 0
        ),
        {k: v for k, v in sorted(torch_lines.items(), key=lambda kv: (_rank(kv[0]), kv[0])) if v > 0},
        ready,
        source,
    )


def _share(split: Sequence[tuple[str, str, int]], ns: int) -> list[tuple[str, str, int]]:
    """``ns`` shared out by the proportions of ``split`` (exactly, the rest to the largest)."""
    whole = sum(part for *_, part in split)
    if whole <= 0:
        return [(TRACING, TRACING, ns)]
    if whole == ns:
        return list(split)
    out = [(a, b, part * ns // whole) for a, b, part in split]
    rest = ns - sum(part for *_, part in out)
    biggest = max(range(len(out)), key=lambda i: out[i][2])
    a, b, part = out[biggest]
    out[biggest] = (a, b, part + rest)
    return out


def run_ledger(run: Run, mark: ReadyMark | None = None) -> Ledger:
    """The ledger of one process's run: from its timeline's start (the process's own start)
    to ``mark`` (default: the run's own ready mark, else the end of its first warm-up
    phase, else the end of its timeline). A run read from torch's trace has no timeline:
    its window is its compiles and first-call work, up to its ready mark when the trace
    carries one."""
    timeline = run.timeline
    phases = timeline.phases if timeline is not None else ()
    if mark is None:
        mark = run.meta.ready or default_mark(phases)
    return ledger(
        run.graph_records,
        run.runtime_events,
        phases,
        start_unix_ns=timeline.start_unix_ns if timeline is not None else None,
        end_unix_ns=timeline.end_unix_ns if timeline is not None else None,
        ready=mark,
    )
