"""The start-up timeline as plain data: phases, and the timeline laid out from them.

A phase is a named stretch of a start-up (loading weights, building the model, warm-up,
the first request): one immutable :class:`PhaseRecord` each, with its thread, rank and
the phase it is nested in. :func:`build_timeline` lays the phases and the graph records
over a window, from the program's own start to now, so that the timeline adds up to the
elapsed wall time:

- whatever no phase covers is an explicit "unattributed" entry, never dropped;
- phases that overlap (on other threads) are merged, so no instant counts twice;
- the compile time inside each entry is given per component (a compile during
  "first request" rather than "warm-up" is a finding in itself).

Recording the phases (the clock, the import marks, ``compiletrace.phase``) is the capture
side's: :mod:`compiletrace._core.recorder` and :mod:`compiletrace._app.timeline`.

>>> S = 1_000_000_000
>>> load = PhaseRecord("load weights", 0, 2 * S, phase_id=1)
>>> warm = PhaseRecord("warm-up", 3 * S, 5 * S, phase_id=2)
>>> tl = build_timeline([load, warm], [], 0, 6 * S)
>>> [(e.name, e.counted_ns // S) for e in tl.top_level()]
[('load weights', 2), ('unattributed', 1), ('warm-up', 2), ('unattributed', 1)]
>>> tl.total_ns == sum(e.counted_ns for e in tl.top_level())
True
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from compiletrace._data.records import NS_PER_S, GraphRecord, ordered_components
from compiletrace._io.envelope import Fields

__all__ = [
    "KINDS",
    "ORIGIN_EXEC",
    "ORIGIN_FORK",
    "ORIGIN_IMPORT",
    "ORIGIN_PROCESS",
    "PHASE",
    "PROCESS",
    "SPAN",
    "UNATTRIBUTED",
    "PhaseRecord",
    "Timeline",
    "TimelineEntry",
    "build_timeline",
]

PROCESS = "process"  # the process's own start: interpreter start, imports
PHASE = "phase"  # compiletrace.phase, warm_up, the steps of compiletrace profile
SPAN = "span"  # a function under compiletrace.instrument
KINDS = (PROCESS, PHASE, SPAN)
UNATTRIBUTED = "unattributed"  # a timeline entry only: time no phase covers

ORIGIN_PROCESS = "process start"  # the window starts when the OS created the process
# ... when the process exec'd this program, having run another first (a shell's commands):
# that time is the timeline's before_exec_ns, outside the window (see _io.exec_time)
ORIGIN_EXEC = "exec"
# ... at the process's creation, where whether it ran another program first cannot be told
ORIGIN_FORK = "fork"
ORIGIN_IMPORT = "import compiletrace"  # ... where that cannot be read: when compiletrace was imported

# -- records ------------------------------------------------------------------------------


class PhaseRecord(NamedTuple):
    """One finished phase of a start-up. Times are Unix-epoch nanoseconds.

    Immutable, and a named tuple rather than a frozen dataclass: a phase must cost a few
    microseconds, and building one is three times faster so.

    >>> rec = PhaseRecord("load weights", 1_000, 3_000, thread="MainThread", phase_id=7)
    >>> rec.duration_ns, PhaseRecord.from_dict(rec.to_dict()) == rec
    (2000, True)
    """

    name: str
    start_unix_ns: int
    end_unix_ns: int
    kind: str = PHASE  # "process", "phase" or "span" (see KINDS)
    thread: str = ""  # the name of the thread it ran on
    thread_id: int = 0
    rank: int = 0  # the process's rank in a distributed job (RANK), 0 otherwise
    phase_id: int = 0  # unique within the process that recorded it
    parent_id: int | None = None  # the phase it is nested in (same thread or task), if any
    status: str = "ok"  # "ok", or "error" when an exception left the phase
    error_type: str | None = None

    @property
    def duration_ns(self) -> int:
        return self.end_unix_ns - self.start_unix_ns

    @property
    def duration_s(self) -> float:
        return self.duration_ns / NS_PER_S

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "start_unix_ns": self.start_unix_ns,
            "end_unix_ns": self.end_unix_ns,
            "kind": self.kind,
            "thread": self.thread,
            "thread_id": self.thread_id,
            "rank": self.rank,
            "phase_id": self.phase_id,
            "parent_id": self.parent_id,
            "status": self.status,
            "error_type": self.error_type,
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "phase", where: str = "") -> PhaseRecord:
        """Read :meth:`to_dict` output, checking every field; raises
        :class:`~compiletrace.RunFileError` naming the first bad one."""
        f = Fields(data, source, where)
        start = f.integer("start_unix_ns", minimum=0)
        end = f.integer("end_unix_ns", minimum=0)
        if end < start:
            raise f.fail("end_unix_ns", f"at least start_unix_ns ({start})", end)
        kind = f.string("kind")
        if kind not in KINDS:
            raise f.fail("kind", f"one of {', '.join(KINDS)}", kind)
        status = f.string("status")
        if status not in ("ok", "error"):
            raise f.fail("status", '"ok" or "error"', status)
        return cls(
            name=f.string("name"),
            start_unix_ns=start,
            end_unix_ns=end,
            kind=kind,
            thread=f.string("thread"),
            thread_id=f.integer("thread_id"),
            rank=f.integer("rank", minimum=0),
            phase_id=f.integer("phase_id"),
            parent_id=f.integer("parent_id", optional=True),
            status=status,
            error_type=f.string("error_type", optional=True),
        )


# -- the timeline ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One row of a timeline: a phase (clipped to the window) or a stretch no phase covers."""

    name: str
    kind: str  # "process", "phase", "span", or "unattributed"
    start_unix_ns: int
    end_unix_ns: int
    depth: int = 0  # 0: top level; a nested phase is one deeper than the phase around it
    # This entry's share of the window: its time that no earlier top-level entry covers
    # (overlapping phases on other threads count once). 0 for nested entries, whose time
    # their parent already holds. The top-level shares add up to the window exactly.
    counted_ns: int = 0
    compile: tuple[tuple[str, int], ...] = ()  # (component, compile ns inside this entry)
    thread: str = ""
    status: str = "ok"
    phase_id: int | None = None

    @property
    def duration_ns(self) -> int:
        return self.end_unix_ns - self.start_unix_ns

    @property
    def compile_ns(self) -> int:
        """Compile time inside this entry, all components together."""
        return sum(ns for _, ns in self.compile)

    @property
    def rest_ns(self) -> int:
        """The entry's time that was not compiling (a warm-up's run of the model, say)."""
        return max(0, self.duration_ns - self.compile_ns)

    @property
    def compile_by_component(self) -> dict[str, int]:
        return dict(self.compile)

    def to_dict(self, origin_unix_ns: int = 0) -> dict[str, Any]:
        """Seconds relative to ``origin_unix_ns`` (the timeline's start), for JSON readers."""
        return {
            "name": self.name,
            "kind": self.kind,
            "start_s": (self.start_unix_ns - origin_unix_ns) / NS_PER_S,
            "duration_s": self.duration_ns / NS_PER_S,
            "counted_s": self.counted_ns / NS_PER_S,
            "depth": self.depth,
            "thread": self.thread,
            "status": self.status,
            "compile_s": {name: ns / NS_PER_S for name, ns in self.compile},
        }


@dataclass(frozen=True)
class Timeline:
    """A start-up from ``start_unix_ns`` (the process's start, by default) to
    ``end_unix_ns``: its entries in tree order (each top-level entry, then the phases nested
    in it), the phases it was built from, and where its start came from (``origin``).

    ``before_exec_ns``: how long the process ran another program before exec'ing this one
    (a shell's earlier commands), outside the window, which starts at the exec (origin
    "exec"); 0 when nothing ran before it; None when not known (origin "fork").

    The top-level entries' ``counted_ns`` add up to :attr:`total_ns` exactly:
    ``covered_ns + unattributed_ns == total_ns``.
    """

    start_unix_ns: int
    end_unix_ns: int
    entries: tuple[TimelineEntry, ...]
    phases: tuple[PhaseRecord, ...] = ()
    origin: str = ORIGIN_PROCESS
    before_exec_ns: int | None = None

    @property
    def total_ns(self) -> int:
        """The elapsed wall time of the window."""
        return self.end_unix_ns - self.start_unix_ns

    @property
    def total_s(self) -> float:
        return self.total_ns / NS_PER_S

    @property
    def unattributed_ns(self) -> int:
        return sum(e.duration_ns for e in self.entries if e.kind == UNATTRIBUTED)

    @property
    def covered_ns(self) -> int:
        """Time some phase covers, overlaps counted once."""
        return self.total_ns - self.unattributed_ns

    def top_level(self) -> tuple[TimelineEntry, ...]:
        """The entries that share out the window (phases and the unattributed stretches)."""
        return tuple(e for e in self.entries if e.depth == 0)

    def seconds_by_phase(self) -> dict[str, float]:
        """Seconds per entry name, in timeline order: each phase's duration (entries of one
        name summed; a nested phase under its own name), and "unattributed" for the time no
        phase covers."""
        out: dict[str, float] = {}
        for e in self.entries:
            out[e.name] = out.get(e.name, 0.0) + e.duration_ns / NS_PER_S
        return out

    def compile_by_phase(self) -> dict[str, dict[str, float]]:
        """Compile seconds per entry name, then per component: what compiled in "warm-up"
        and what in "first request" (entries of one name summed; "unattributed" holds the
        compiles outside every phase). Entries without compiles are left out.

        >>> from compiletrace._data.records import GraphRecord
        >>> S = 1_000_000_000
        >>> g = GraphRecord("0/0", "encoder", "eager", "forward", 3, 2 * S, 3 * S, 0, S, None)
        >>> tl = build_timeline([PhaseRecord("warm-up", S, 4 * S, phase_id=1)], [g], 0, 5 * S)
        >>> tl.compile_by_phase()
        {'warm-up': {'encoder': 1.0}}
        """
        out: dict[str, dict[str, float]] = {}
        for e in self.entries:
            for comp, ns in e.compile:
                by = out.setdefault(e.name, {})
                by[comp] = by.get(comp, 0.0) + ns / NS_PER_S
        return out

    def to_dict(self) -> dict[str, Any]:
        """The timeline for JSON readers: the window, the totals, and every entry (seconds
        from the start)."""
        return {
            "start_unix_ns": self.start_unix_ns,
            "end_unix_ns": self.end_unix_ns,
            "origin": self.origin,
            "before_exec_s": None if self.before_exec_ns is None else self.before_exec_ns / NS_PER_S,
            "total_s": self.total_s,
            "covered_s": self.covered_ns / NS_PER_S,
            "unattributed_s": self.unattributed_ns / NS_PER_S,
            "entries": [e.to_dict(self.start_unix_ns) for e in self.entries],
        }

    def window_dict(self) -> dict[str, Any]:
        """What a saved run keeps to rebuild this timeline (its phases are saved with the
        registry): the window, its origin, and the time before the exec when it is known."""
        out: dict[str, Any] = {
            "start_unix_ns": self.start_unix_ns,
            "end_unix_ns": self.end_unix_ns,
            "origin": self.origin,
        }
        if self.before_exec_ns is not None:
            out["before_exec_ns"] = self.before_exec_ns
        return out

    @staticmethod
    def read_window(
        data: Any, source: str = "timeline", where: str = "timeline"
    ) -> tuple[int, int, str, int | None]:
        """(start, end, origin, before_exec_ns) from :meth:`window_dict` output, every field
        checked; ``before_exec_ns`` is None where it was not known (and not saved)."""
        f = Fields(data, source, where)
        start = f.integer("start_unix_ns", minimum=0)
        end = f.integer("end_unix_ns", minimum=0)
        if end < start:
            raise f.fail("end_unix_ns", f"at least start_unix_ns ({start})", end)
        origin = f.string("origin")
        return start, end, origin, f.integer("before_exec_ns", None, minimum=0, optional=True)


# A compile interval: (start, end, component).
_Interval = tuple[int, int, str]


def _compile_intervals(records: Iterable[GraphRecord]) -> list[_Interval]:
    out: list[_Interval] = []
    for r in records:
        out.append((r.start_unix_ns, r.end_unix_ns, r.component))
        if r.backward_ns and r.backward_start_unix_ns is not None:
            out.append((r.backward_start_unix_ns, r.backward_start_unix_ns + r.backward_ns, r.component))
    out.sort()
    return out


class _CompileIndex:
    """Compile time inside any interval, per component, without scanning every record."""

    def __init__(self, records: Iterable[GraphRecord]) -> None:
        self._intervals = _compile_intervals(records)
        self._starts = [s for s, _, _ in self._intervals]
        self._longest = max((e - s for s, e, _ in self._intervals), default=0)

    def inside(self, start: int, end: int) -> tuple[tuple[str, int], ...]:
        lo = bisect.bisect_left(self._starts, start - self._longest)
        hi = bisect.bisect_left(self._starts, end)
        totals: dict[str, int] = {}
        for s, e, comp in self._intervals[lo:hi]:
            ns = min(e, end) - max(s, start)
            if ns > 0:
                totals[comp] = totals.get(comp, 0) + ns
        return tuple((name, totals[name]) for name in ordered_components(totals))


def build_timeline(
    phases: Iterable[PhaseRecord],
    records: Iterable[GraphRecord],
    start_unix_ns: int,
    end_unix_ns: int,
    *,
    origin: str = ORIGIN_PROCESS,
    before_exec_ns: int | None = None,
) -> Timeline:
    """Lay ``phases`` and the compiles of ``records`` over ``[start_unix_ns, end_unix_ns]``
    (``origin`` and ``before_exec_ns`` say where the start came from; see :class:`Timeline`).

    Phases are clipped to the window (those wholly outside it are left out). A phase nests
    under its ``parent_id`` when that phase is in the timeline, else it is top level. The
    top-level entries share out the window: each counts its time that no earlier top-level
    entry covers, and every stretch no phase covers becomes an "unattributed" entry; so
    the shares add up to the window exactly, overlapping phases (threads) counted once.
    """
    end_unix_ns = max(end_unix_ns, start_unix_ns)
    kept = [
        p
        for p in phases
        if (p.end_unix_ns > start_unix_ns and p.start_unix_ns < end_unix_ns)
        # a zero-length phase (a skipped warm-up) still shows where it happened
        or (p.start_unix_ns == p.end_unix_ns and start_unix_ns <= p.start_unix_ns <= end_unix_ns)
    ]
    ids = {p.phase_id for p in kept}
    children: dict[int | None, list[PhaseRecord]] = {}
    for p in kept:
        parent = p.parent_id if p.parent_id in ids and p.parent_id != p.phase_id else None
        children.setdefault(parent, []).append(p)
    for siblings in children.values():
        siblings.sort(key=lambda p: (p.start_unix_ns, -p.end_unix_ns, p.phase_id))

    index = _CompileIndex(records)

    def entry(p: PhaseRecord, depth: int, counted: int) -> TimelineEntry:
        start = max(p.start_unix_ns, start_unix_ns)
        end = min(p.end_unix_ns, end_unix_ns)
        return TimelineEntry(
            p.name,
            p.kind,
            start,
            end,
            depth,
            counted,
            index.inside(start, end),
            p.thread,
            p.status,
            p.phase_id,
        )

    def gap(start: int, end: int) -> TimelineEntry:
        return TimelineEntry(UNATTRIBUTED, UNATTRIBUTED, start, end, 0, end - start, index.inside(start, end))

    entries: list[TimelineEntry] = []
    seen: set[int] = set()

    def nested(parent: PhaseRecord, depth: int) -> None:
        for child in children.get(parent.phase_id, ()):
            if child.phase_id in seen:  # a parent loop in a hand-made file: shown once
                continue
            seen.add(child.phase_id)
            entries.append(entry(child, depth, 0))
            nested(child, depth + 1)

    covered_until = start_unix_ns
    for p in children.get(None, ()):
        start = max(p.start_unix_ns, start_unix_ns)
        end = min(p.end_unix_ns, end_unix_ns)
        if start > covered_until:
            entries.append(gap(covered_until, start))
            covered_until = start
        counted = max(0, end - max(start, covered_until))
        covered_until = max(covered_until, end)
        seen.add(p.phase_id)
        entries.append(entry(p, 0, counted))
        nested(p, 1)
    if end_unix_ns > covered_until:
        entries.append(gap(covered_until, end_unix_ns))
    return Timeline(start_unix_ns, end_unix_ns, tuple(entries), tuple(kept), origin, before_exec_ns)
