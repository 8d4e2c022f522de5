"""When a program said it was ready to serve, and what compiled after: plain data.

A process is *ready* at its ready mark (:class:`ReadyMark`): the first return of a function
(``compiletrace run --ready MODULE:FUNCTION``), the end of a phase (``--ready phase:NAME``),
the moment it listens on a port (``--ready port:PORT``: any server), the end of its N-th
optimizer step (``--ready step:N``: any training loop), a call of ``compiletrace.ready()``,
or, with no ``--ready``, the end of its first top-level warm-up phase
(``compiletrace.warm_up``'s ``Warmup (CPU)``, vLLM's ``compile and warm up``).
A compile is *after ready* when it starts at or after the mark and outside every warm-up
phase: a frame, a recompile, a lazy backward, a CUDA-graph recording, a runtime autotune
(:class:`AfterReady`), each with what triggered it and the seconds it added to a request.

Everything here reads records (no torch): a run saved on a GPU server is judged on a laptop.

>>> S = 1_000_000_000
>>> from compiletrace._data.records import GraphRecord
>>> late = GraphRecord("0/1", "lm", "eager", "forward", 3, 5 * S, 6 * S, S, 0, None, is_recompile=True,
...                    recompile_reason="0/0: tensor 'x' size mismatch at index 0. expected 4, actual 5")
>>> [(e.kind, e.trigger) for e in after_ready([late], (), (), ReadyMark(4 * S, 1, "call", "ready()"))]
[('recompile', "tensor 'x' size mismatch at index 0. expected 4, actual 5")]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from compiletrace._data.records import AUTOTUNE, CUDAGRAPH, NS_PER_S, GraphRecord, RuntimeEvent
from compiletrace._data.timeline import PhaseRecord
from compiletrace._data.torch_text import GUARD_ENTRY_PREFIX
from compiletrace._io.envelope import Fields
from compiletrace._io.errors import UsageError
from compiletrace._io.text import ascii_int, printable, shorten

__all__ = [
    "AFTER_READY_MODES",
    "CALL",
    "FUNCTION",
    "PHASE",
    "PORT",
    "READY_ARTIFACT",
    "STEP",
    "WARM_UP",
    "AfterReady",
    "JobAfterReady",
    "ProcessAfterReady",
    "ProcessParts",
    "ReadyMark",
    "ReadySpec",
    "after_ready",
    "default_mark",
    "is_warm_up_phase",
    "job_after_ready",
    "parse_ready",
]

# How a process became ready (ReadyMark.how).
FUNCTION = "function"  # --ready MODULE:FUNCTION returned
PHASE = "phase"  # --ready phase:NAME ended
CALL = "call"  # compiletrace.ready() was called
WARM_UP = "warm-up"  # no --ready: its first top-level warm-up phase ended
PORT = "port"  # --ready port:PORT: a socket of the process listened on PORT
STEP = "step"  # --ready step:N: the process's N-th optimizer step ended
HOWS = (FUNCTION, PHASE, CALL, WARM_UP, PORT, STEP)
MAX_PORT = 65535

AFTER_READY_MODES = ("warn", "error")  # compiletrace run --after-ready
# The artifact compiletrace writes into torch's trace (TORCH_TRACE) at a ready mark.
READY_ARTIFACT = "compiletrace_ready"

# Warm-up phases: compiletrace.warm_up's ("Warmup (CPU)", "Warmup (GPU)", ...) and the engines'
# (compiletrace._app.engine_phases names vLLM's).
WARM_UP_PREFIX = "Warmup ("
ENGINE_WARM_UPS = ("vLLM: compile and warm up",)

# The kinds of compile after ready.
NEW_FRAME = "frame"  # a function compiled for the first time
RECOMPILE = "recompile"  # a compiled function compiled again: a guard failed
LAZY_BACKWARD = "lazy_backward"  # a graph's backward, compiled at its first .backward()
KIND_LABELS = {
    NEW_FRAME: "compiled",
    RECOMPILE: "recompiled",
    LAZY_BACKWARD: "compiled the backward of",
    CUDAGRAPH: "recorded a CUDA graph of",
    AUTOTUNE: "autotuned kernels of",
}

_NAME = r"[A-Za-z_]\w*"
_DOTTED = re.compile(rf"{_NAME}(?:\.{_NAME})*")  # matched whole: no final line break
MAX_LISTED = 100  # events a job file lists (all are counted)


def is_warm_up_phase(name: str) -> bool:
    """Whether a phase of that name is a warm-up (its compiles are what it is for).

    >>> is_warm_up_phase("Warmup (GPU)"), is_warm_up_phase("vLLM: compile and warm up")
    (True, True)
    """
    return name.startswith(WARM_UP_PREFIX) or name in ENGINE_WARM_UPS


class ReadySpec(NamedTuple):
    """What ``compiletrace run --ready WHEN`` asked for (:func:`parse_ready`)."""

    how: str  # FUNCTION, PHASE, PORT or STEP
    module: str = ""  # FUNCTION: the module that defines it ("myserver", "__main__")
    # FUNCTION: the function ("warm_up", "Server.warm_up"); PHASE: the phase's name;
    # PORT: the port's number; STEP: the optimizer step's number (both as digits)
    name: str = ""

    @property
    def text(self) -> str:
        """As the user wrote it."""
        return f"{self.module}:{self.name}" if self.how == FUNCTION else f"{self.how}:{self.name}"

    @property
    def number(self) -> int:
        """PORT's port, STEP's step (0 for the others)."""
        return int(self.name) if self.how in (PORT, STEP) else 0


def _number(kind: str, tail: str, low: int, high: int, example: str) -> str:
    number = ascii_int(tail.strip(), 6)  # isdigit() takes '²', which int() refuses
    if number is None or not low <= number <= high:
        raise UsageError(
            f"--ready {kind}:{printable(shorten(tail, 40))!r}: {kind}:N needs a whole number from {low} "
            f"to {high} in ASCII digits 0-9, e.g. {example}"
        )
    return str(number)


def parse_ready(text: str) -> ReadySpec:
    """``MODULE:FUNCTION`` (``FUNCTION`` may be ``Class.method``), ``phase:NAME``,
    ``port:PORT`` or ``step:N``; raises :class:`~compiletrace.UsageError` for anything else.

    >>> parse_ready("myserver.app:Server.warm_up")
    ReadySpec(how='function', module='myserver.app', name='Server.warm_up')
    >>> parse_ready("phase:vLLM: compile and warm up").name
    'vLLM: compile and warm up'
    >>> parse_ready("port:8000").number, parse_ready("step:5").text
    (8000, 'step:5')
    """
    head, sep, tail = text.partition(":")
    if sep and head == "phase":
        if not tail.strip():
            raise UsageError("--ready phase:NAME needs the phase's name, e.g. 'phase:Warmup (CPU)'")
        return ReadySpec(PHASE, name=tail)
    if sep and head == PORT:
        return ReadySpec(PORT, name=_number(PORT, tail, 1, MAX_PORT, "port:8000"))
    if sep and head == STEP:
        return ReadySpec(STEP, name=_number(STEP, tail, 1, 999_999, "step:5"))
    if not sep or not _DOTTED.fullmatch(head) or not _DOTTED.fullmatch(tail):
        raise UsageError(
            f"--ready {printable(shorten(text, 80))!r}: give MODULE:FUNCTION (ready when that function "
            "first returns, e.g. myserver:warm_up), phase:NAME (when that phase ends), port:PORT (when "
            "the process listens on that port) or step:N (when its N-th optimizer step ends)"
        )
    return ReadySpec(FUNCTION, head, tail)


class ReadyMark(NamedTuple):
    """When one process became ready, and how."""

    unix_ns: int
    pid: int
    how: str  # FUNCTION, PHASE, CALL or WARM_UP
    what: str  # "myserver:warm_up", "phase:NAME", "compiletrace.ready()", the warm-up phase's name

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()

    @classmethod
    def from_dict(cls, data: Any, source: str = "ready mark", where: str = "ready") -> ReadyMark:
        """Read :meth:`to_dict` output, every field checked."""
        f = Fields(data, source, where)
        how = f.string("how")
        if how not in HOWS:
            raise f.fail("how", f"one of {', '.join(HOWS)}", how)
        return cls(f.integer("unix_ns", minimum=0), f.integer("pid", minimum=0), how, f.string("what"))

    @property
    def described(self) -> str:
        """``myserver:warm_up returned``, for a line of text."""
        what = printable(shorten(self.what, 120))
        return {
            FUNCTION: f"{what} returned",
            PHASE: f"{what} ended",
            CALL: f"{what} was called",
            WARM_UP: f"its warm-up ({what}) ended",
            PORT: f"it listened ({what})",
            STEP: f"its optimizer step ended ({what})",
        }.get(self.how, what)


def default_mark(phases: Iterable[PhaseRecord], pid: int = 0) -> ReadyMark | None:
    """The mark a process has without ``--ready``: the end of its first top-level warm-up
    phase (or of its first warm-up phase, when none is top level); None without one.

    >>> S = 1_000_000_000
    >>> default_mark([PhaseRecord("Warmup (CPU)", S, 3 * S, phase_id=1)]).unix_ns == 3 * S
    True
    """
    warm = sorted((p for p in phases if is_warm_up_phase(p.name)), key=lambda p: p.end_unix_ns)
    ids = {p.phase_id for p in phases}
    top = [p for p in warm if p.parent_id is None or p.parent_id not in ids]
    chosen = (top or warm)[:1]
    return ReadyMark(chosen[0].end_unix_ns, pid, WARM_UP, chosen[0].name) if chosen else None


class AfterReady(NamedTuple):
    """One compile after ready: what compiled, what triggered it, and the seconds it added."""

    kind: str  # NEW_FRAME, RECOMPILE, LAZY_BACKWARD, CUDAGRAPH or AUTOTUNE
    compile_id: str
    component: str
    code_name: str
    location: str  # file:line of the compiled code ("" if unknown)
    start_unix_ns: int
    duration_ns: int
    trigger: str  # the guard that failed, the new shape, "first .backward()", the kernels

    @property
    def seconds(self) -> float:
        return self.duration_ns / NS_PER_S

    def describe(self, mark: ReadyMark | None = None) -> str:
        """``recompiled forward 0/1 (model.py:28) 0.28 s, 1.20 s after ready: tensor 'x' ...``"""
        where = f" ({printable(self.location)})" if self.location else ""
        since = f", {(self.start_unix_ns - mark.unix_ns) / NS_PER_S:.2f} s after ready" if mark else ""
        what = printable(self.code_name) or "a graph"
        return (
            f"{KIND_LABELS.get(self.kind, self.kind)} {what} {printable(self.compile_id)}{where}: "
            f"{self.seconds:.2f} s{since}: {printable(shorten(self.trigger, 200))}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {**self._asdict(), "seconds": self.seconds}


def _windows(phases: Iterable[PhaseRecord]) -> list[tuple[int, int]]:
    return [(p.start_unix_ns, p.end_unix_ns) for p in phases if is_warm_up_phase(p.name)]


def _late(start: int, ready: int, windows: Sequence[tuple[int, int]]) -> bool:
    return start >= ready and not any(lo <= start < hi for lo, hi in windows)


def _trigger(r: GraphRecord) -> str:
    reason = GUARD_ENTRY_PREFIX.sub("", r.first_reason_line)
    if reason:
        return reason
    if r.shared_with:
        return f"the first call of this function by {r.component} (compiled for {r.shared_with} before)"
    return "the first call of this function" if not r.is_recompile else "torch gave no reason"


def after_ready(
    records: Iterable[GraphRecord],
    runtime: Iterable[RuntimeEvent],
    phases: Iterable[PhaseRecord],
    mark: ReadyMark | None,
) -> list[AfterReady]:
    """Every compile of one process that started at or after ``mark`` and outside its
    warm-up phases, in the order they started; none without a mark. A frame torch refused
    past its recompile limit compiled nothing (the recompile-limit finding names it)."""
    if mark is None:
        return []
    phases = tuple(phases)
    windows = _windows(phases)
    found: list[AfterReady] = []
    for r in records:
        if not r.recompile_limit_hit and _late(r.start_unix_ns, mark.unix_ns, windows):
            kind = RECOMPILE if r.is_recompile else NEW_FRAME
            found.append(
                AfterReady(
                    kind,
                    r.compile_id,
                    r.component,
                    r.code_name,
                    r.code_location,
                    r.start_unix_ns,
                    r.frame_ns,
                    _trigger(r),
                )
            )
        start = r.backward_start_unix_ns
        if r.backward_ns and start is not None and _late(start, mark.unix_ns, windows):
            found.append(
                AfterReady(
                    LAZY_BACKWARD,
                    r.compile_id,
                    r.component,
                    r.code_name,
                    r.code_location,
                    start,
                    r.backward_ns,
                    "its first .backward() after ready",
                )
            )
    names = {r.compile_id: r for r in records}
    for e in runtime:
        if not _late(e.start_unix_ns, mark.unix_ns, windows):
            continue
        graph = names.get(e.compile_id)
        trigger = (
            f"autotuned {e.detail} at its first call"
            if e.kind == AUTOTUNE
            else "a CUDA-graph tree recorded the graph (its second call, or a new shape)"
        )
        found.append(
            AfterReady(
                e.kind,
                e.compile_id or "?",
                graph.component if graph else "",
                (graph.code_name if graph else "") + (" (backward)" if e.backward else ""),
                graph.code_location if graph else "",
                e.start_unix_ns,
                e.duration_ns,
                trigger,
            )
        )
    return sorted(found, key=lambda a: a.start_unix_ns)


class ProcessAfterReady(NamedTuple):
    """One process's compiles after ready, and the mark they were judged by."""

    label: str  # "pid 41 (main)"
    mark: ReadyMark | None
    own_mark: bool  # the process marked itself (else: the job's earliest mark, or none)
    events: tuple[AfterReady, ...]


@dataclass(frozen=True)
class JobAfterReady:
    """A job's compiles after ready (``compiletrace run --after-ready``), process by process."""

    spec: str  # what --ready asked for ("" for the default: the end of a warm-up)
    processes: tuple[ProcessAfterReady, ...]

    @property
    def fired(self) -> bool:
        """Whether any process became ready."""
        return any(p.own_mark for p in self.processes)

    @property
    def count(self) -> int:
        return sum(len(p.events) for p in self.processes)

    @property
    def seconds(self) -> float:
        return sum(e.seconds for p in self.processes for e in p.events)

    def lines(self) -> list[str]:
        """What ``--after-ready warn|error`` prints: whether ready fired, then one line per
        compile after it."""
        marks = [p for p in self.processes if p.own_mark and p.mark is not None]
        if not marks:
            why = (
                f"--ready {printable(self.spec)} was never reached"
                if self.spec
                else "no warm-up phase was seen, and no --ready was given"
            )
            return [
                f"compiletrace: ready never fired ({why}): nothing can be said of compiles after "
                "ready; give --ready MODULE:FUNCTION, phase:NAME, port:PORT or step:N, or call "
                "compiletrace.ready()"
            ]
        first = min(marks, key=lambda p: p.mark.unix_ns if p.mark else 0)
        assert first.mark is not None
        head = (
            f"compiletrace: {self.count} compile{'s' if self.count != 1 else ''} after ready "
            f"({self.seconds:.2f} s); ready when {first.mark.described} in {first.label}"
        )
        out = [head]
        for p in self.processes:
            for e in p.events:
                out.append(f"  {p.label}: {e.describe(p.mark)}")
        return out

    def to_dict(self) -> dict[str, Any]:
        """What the job file carries: the count and seconds (what CI holds at zero), each
        process's mark, and the compiles (the first :data:`MAX_LISTED`)."""
        events = [{"process": p.label, **e.to_dict()} for p in self.processes for e in p.events][:MAX_LISTED]
        return {
            "spec": self.spec,
            "fired": self.fired,
            "count": self.count,
            "seconds": self.seconds,
            "ready": [
                {"process": p.label, **p.mark.to_dict()} for p in self.processes if p.own_mark and p.mark
            ],
            "compiles": events,
        }


# One process of a job, as job_after_ready reads it: its label, records, runtime events,
# phases, and its own mark.
ProcessParts = tuple[
    str, Iterable[GraphRecord], Iterable[RuntimeEvent], Iterable[PhaseRecord], "ReadyMark | None"
]


def job_after_ready(spec: str, processes: Iterable[ProcessParts]) -> JobAfterReady:
    """The compiles after ready of each process of a job: ``(label, records, runtime events,
    phases, its own mark)`` each. A process without a mark of its own is judged by the
    job's earliest one (a worker started by a server that became ready); with no ``spec``,
    a process's first top-level warm-up phase is its mark."""
    rows = []
    for label, records, runtime, phases, mark in processes:
        phases = tuple(phases)
        if mark is None and not spec:
            mark = default_mark(phases)
        rows.append((label, tuple(records), tuple(runtime), phases, mark))
    marks = [m for *_, m in rows if m is not None]
    earliest = min(marks, key=lambda m: m.unix_ns) if marks else None
    out = []
    for label, records, runtime, phases, mark in rows:
        judged = mark if mark is not None else earliest
        events = tuple(after_ready(records, runtime, phases, judged))
        out.append(ProcessAfterReady(label, judged, mark is not None, events))
    return JobAfterReady(spec, tuple(out))
