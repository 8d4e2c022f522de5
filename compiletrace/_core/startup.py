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
from compiletrace._io.state import STATE, Slot

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
# (name, start, end) of each import timed: compiletrace's own (by the front door) and
# torch's (when it happens: see _core.import_timing). Appended to once per name, with no
# lock: a list's append is atomic under the GIL.
_MARKS: Slot[list[tuple[str, int, int]]] = STATE.slot("import marks", [])


def mark_import(name: str, start_unix_ns: int | None = None, end_unix_ns: int | None = None) -> None:
    """Note that the import ``name`` (``"import torch"``, ``"import compiletrace"``) ended at
    ``end_unix_ns`` (default: now); it began at ``start_unix_ns``, by default where the
    previous mark ended (or, for the first, when ``import compiletrace`` began)."""
    end = unix_now_ns() if end_unix_ns is None else end_unix_ns
    if start_unix_ns is None:
        start_unix_ns = _MARKS.value[-1][2] if _MARKS.value else _IMPORT_BEGAN_NS
    _MARKS.value.append((name, start_unix_ns, end))


def import_marks() -> tuple[int, bool, tuple[tuple[str, int, int], ...]]:
    """(when ``import compiletrace`` began, whether torch was imported before it, the marks:
    (name, start, end) of each import timed)."""
    return _IMPORT_BEGAN_NS, _TORCH_LOADED_BEFORE, tuple(_MARKS.value)


def exec_probe() -> exec_time.ExecProbe | None:
    """What the kernel said when ``import compiletrace`` began, to date this program's exec
    (see :func:`compiletrace._io.exec_time.exec_start`)."""
    return _EXEC_PROBE


def process_records(
    process_start_unix_ns: int | None,
    *,
    thread: str = "MainThread",
    rank: int = 0,
    marks: tuple[int, bool, Sequence[tuple[str, int, int]]] | None = None,
) -> tuple[PhaseRecord, ...]:
    """The timeline's first entries, kind "process": "interpreter start" (from the program's
    start, ``process_start_unix_ns``: its exec, or the process's creation, to ``import
    compiletrace``), then each import timed, in the order they happened: compiletrace's,
    and torch's wherever the program (or compiletrace's core, at its first use) imported it.
    Where torch was imported before compiletrace, the first entry holds that import and is
    named so.

    >>> S = 1_000_000_000
    >>> marks = (S, False, [("import compiletrace", S, 2 * S), ("import torch", 3 * S, 6 * S)])
    >>> [(r.name, r.start_unix_ns // S, r.duration_ns // S) for r in process_records(0, marks=marks)]
    [('interpreter start', 0, 1), ('import compiletrace', 1, 1), ('import torch', 3, 3)]
    >>> inside = (S, False, [("import compiletrace", S, 5 * S), ("import torch", 2 * S, 4 * S)])
    >>> [(r.name, r.start_unix_ns // S, r.duration_ns // S) for r in process_records(0, marks=inside)]
    [('interpreter start', 0, 1), ('import torch', 2, 2), ('import compiletrace', 4, 1)]
    """
    began, torch_before, found = marks if marks is not None else import_marks()
    bounds: list[tuple[str, int, int]] = []
    if process_start_unix_ns is not None:
        first = "interpreter start + earlier imports" if torch_before else "interpreter start"
        bounds.append((first, min(process_start_unix_ns, began), began))
    previous_end = began
    for name, start, end in sorted(found, key=lambda mark: mark[2]):
        # torch imported before compiletrace: a mark for it holds no import of its own.
        if torch_before and name == "import torch":
            continue
        # One import inside another (torch's while compiletrace's ran): the outer one's
        # entry holds what it did after the inner one ended, as contiguous entries.
        start = max(start, previous_end)
        bounds.append((name, start, max(end, start)))
        previous_end = max(end, start)
    return tuple(
        PhaseRecord(name, s, e, kind=PROCESS, thread=thread, rank=rank, phase_id=-(i + 1))
        for i, (name, s, e) in enumerate(bounds)
    )
