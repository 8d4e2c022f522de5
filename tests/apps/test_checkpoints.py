"""When a running process writes its run (its checkpoints): decided on an injected clock,
so every figure here is exact."""

from __future__ import annotations

import itertools
from collections.abc import Hashable

from compiletrace._app.checkpoints import QUIET_S, STALE_S, Checkpoints, Debounce


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _writes(states: list[tuple[float, Hashable]], write_ok: bool = True) -> list[float]:
    """The instants at which a write is made, given the records' state at each poll."""
    clock = Clock()
    debounce = Debounce(clock=clock)
    written: list[float] = []

    def write() -> bool:
        written.append(clock.now)
        return write_ok

    current: list[Hashable] = [None]
    checkpoints = Checkpoints(lambda: current[0], write, debounce=debounce)
    for clock.now, current[0] in states:
        checkpoints.step()
    return written


def test_nothing_recorded_is_never_written() -> None:
    assert _writes([(t * 0.5, None) for t in range(40)]) == []


def test_a_burst_of_compiles_is_written_once_it_is_quiet() -> None:
    # Compiles at 0.0, 0.5, 1.0 (each poll sees a new count), then nothing changes.
    polls = [(0.0, 1), (0.5, 2), (1.0, 3), (1.5, 3), (2.0, 3), (2.5, 3)]
    assert _writes(polls) == [1.0 + QUIET_S]


def test_records_that_keep_changing_are_written_at_least_every_stale_s() -> None:
    polls = [(t * 0.5, t) for t in range(1, 31)]  # a new record at every poll, for 15 s
    written = _writes(polls)
    assert written == [0.5 + STALE_S, 0.5 + STALE_S + 0.5 + STALE_S]
    assert all(b - a <= STALE_S + 0.5 for a, b in itertools.pairwise(written))


def test_a_later_change_is_written_again_and_an_unchanged_state_never() -> None:
    polls = [(0.0, 1), (0.5, 1), (1.0, 1), (5.0, 1), (5.5, 2), (6.0, 2), (9.0, 2)]
    assert _writes(polls) == [0.5, 6.0]


def test_a_write_that_did_not_happen_is_tried_again_at_the_next_poll() -> None:
    # The recording's lock was busy (its final write, a fork): nothing was written, so the
    # same state is still due.
    assert _writes([(0.0, 1), (0.5, 1), (1.0, 1)], write_ok=False) == [0.5, 1.0]


def test_the_thread_stops_when_told() -> None:
    seen: list[int] = []
    checkpoints = Checkpoints(lambda: seen.append(1) or None, lambda: True, poll_s=0.001).start()
    checkpoints.stop()
    checkpoints._thread.join(timeout=60)
    assert not checkpoints._thread.is_alive()
