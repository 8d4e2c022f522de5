"""The process's own start, as the start-up timeline needs it: the one clock phases are timed
on (Unix nanoseconds that never go back), phase ids, the marks the front door leaves while
it imports (torch's import timed on its own), what the kernel says of this program's exec,
and the timeline's first entries built from them. Imported first of all by ``import
compiletrace`` (see :mod:`compiletrace._core.import_timing`), so its own import time is
when that import began. The timeline's data is :mod:`compiletrace._data.timeline`.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable, Sequence

from compiletrace._data.timeline import PROCESS, PhaseRecord
from compiletrace._io import exec_time

__all__ = [
    "PHASE_IDS",
    "UnixClock",
    "exec_probe",
    "import_marks",
    "mark_import",
    "next_phase_id",
    "process_records",
    "unix_now_ns",
]

UnixClock = Callable[[], int]  # Unix-epoch nanoseconds

# perf_counter shifted to the epoch once: Unix nanoseconds that never go back (time.time_ns
# can, when the system clock is set), on the same footing as the tracker's record times.
_EPOCH_OFFSET_NS = time.time_ns() - time.perf_counter_ns()


def unix_now_ns() -> int:
    """Now, in Unix nanoseconds, on a monotonic clock: what phases are timed with.

    >>> abs(unix_now_ns() - time.time_ns()) < 60 * 1_000_000_000
    True
    """
    return time.perf_counter_ns() + _EPOCH_OFFSET_NS


# Phase ids, unique in this process: ``next`` on a counter is atomic under the GIL.
PHASE_IDS = itertools.count(1)


def next_phase_id() -> int:
    """A phase id unique in this process."""
    return next(PHASE_IDS)


# -- the front door's import marks ----------------------------------------------------------

# This module is the first thing ``import compiletrace`` imports (see _core.import_timing):
# its own import time is when that import began.
_IMPORT_BEGAN_NS = unix_now_ns()
# Read now, before anything of compiletrace's runs: when this program began (its exec).
_EXEC_PROBE = exec_time.probe(_IMPORT_BEGAN_NS)
_TORCH_LOADED_BEFORE = "torch" in sys.modules
# Filled while the front door imports, before anything else of compiletrace exists; read-only after.
_MARKS: list[tuple[str, int]] = []


def mark_import(name: str) -> None:
    """Note that the import ``name`` (``"import torch"``, ``"import compiletrace"``) ended
    now; it began where the previous mark ended."""
    _MARKS.append((name, unix_now_ns()))


def import_marks() -> tuple[int, bool, tuple[tuple[str, int], ...]]:
    """(when ``import compiletrace`` began, whether torch was imported before it, the marks)."""
    return _IMPORT_BEGAN_NS, _TORCH_LOADED_BEFORE, tuple(_MARKS)


def exec_probe() -> exec_time.ExecProbe | None:
    """What the kernel said when ``import compiletrace`` began, to date this program's exec
    (see :func:`compiletrace._io.exec_time.exec_start`)."""
    return _EXEC_PROBE


def process_records(
    process_start_unix_ns: int | None,
    *,
    thread: str = "MainThread",
    rank: int = 0,
    marks: tuple[int, bool, Sequence[tuple[str, int]]] | None = None,
) -> tuple[PhaseRecord, ...]:
    """The timeline's first entries, kind "process": "interpreter start" (from the program's
    start, ``process_start_unix_ns``: its exec, or the process's creation, to ``import
    compiletrace``), then each import the front door timed. Where torch
    was imported before compiletrace, the first entry holds that import and is named so.

    >>> S = 1_000_000_000
    >>> recs = process_records(0, marks=(S, False, [("import torch", 4 * S), ("import compiletrace", 5 * S)]))
    >>> [(r.name, r.duration_ns // S) for r in recs]
    [('interpreter start', 1), ('import torch', 3), ('import compiletrace', 1)]
    """
    began, torch_before, found = marks if marks is not None else import_marks()
    bounds: list[tuple[str, int, int]] = []
    if process_start_unix_ns is not None:
        first = "interpreter start + earlier imports" if torch_before else "interpreter start"
        bounds.append((first, min(process_start_unix_ns, began), began))
    start = began
    for name, end in found:
        # torch imported before compiletrace: its mark here holds no import of its own.
        if not (torch_before and name == "import torch"):
            bounds.append((name, start, max(end, start)))
        start = max(end, start)
    return tuple(
        PhaseRecord(name, s, e, kind=PROCESS, thread=thread, rank=rank, phase_id=-(i + 1))
        for i, (name, s, e) in enumerate(bounds)
    )
