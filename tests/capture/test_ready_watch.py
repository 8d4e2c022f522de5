"""The ready marks a program needs no edit for, on real sockets and a real optimizer: a
process is ready once one of its own sockets listens on the port (bound is not enough), or
once an optimizer of it ends its N-th step."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from compiletrace._app.ready_watch import listening_inodes, own_socket_inodes, watch_port, watch_steps
from compiletrace._core import ready as ready_mark
from compiletrace._data.ready import PORT, STEP, ReadyMark, parse_ready

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads Linux's TCP tables")


@pytest.fixture
def marks() -> Iterator[list[ReadyMark]]:
    ready_mark._reset_for_tests()
    told: list[ReadyMark] = []
    ready_mark.on_ready(told.append)
    yield told
    ready_mark._reset_for_tests()


def _sleeps(event: threading.Event, polled: list[float]) -> object:
    def sleep(seconds: float) -> None:
        polled.append(seconds)
        event.set()  # the test acts between two looks, never on a timer

    return sleep


def test_a_bound_port_is_not_ready_and_a_listening_one_is(marks: list[ReadyMark]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        looked = threading.Event()
        polled: list[float] = []
        thread = watch_port(parse_ready(f"port:{port}"), sleep=_sleeps(looked, polled))  # type: ignore[arg-type]
        assert thread is not None
        assert looked.wait(30)  # it looked at a bound socket ...
        assert marks == [] and ready_mark.current_mark() is None  # ... and said nothing
        sock.listen()
        thread.join(30)
        assert not thread.is_alive()  # the watch ends at the mark: nothing polls a server that serves
    (mark,) = marks
    assert (mark.how, mark.what, mark.pid) == (PORT, f"port:{port}", os.getpid())


def test_another_processs_listening_socket_is_not_this_ones(tmp_path: Path, marks: list[ReadyMark]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with open("/proc/net/tcp") as f:
            inodes = listening_inodes(port, f)
        assert len(inodes) == 1 and inodes <= own_socket_inodes()
    # Closed: the table no longer lists it.
    with open("/proc/net/tcp") as f:
        assert listening_inodes(port, f) == set()
    # A table that lists a socket listening on the port, held by no descriptor of this
    # process: another program's server is not this one's ready mark.
    table = tmp_path / "tcp"
    table.write_text(f"   0: 0100007F:{port:04X} 00000000:0000 0A 0 0 0 0 0 0 {max(inodes) + 10**9} 1\n")
    looked = threading.Event()
    polled: list[float] = []
    thread = watch_port(parse_ready(f"port:{port}"), tables=[str(table)], sleep=_sleeps(looked, polled))  # type: ignore[arg-type]
    assert thread is not None and looked.wait(30)
    assert marks == []
    ready_mark.mark_ready(STEP, "step:1")  # another mark ends the watch
    thread.join(30)
    assert not thread.is_alive() and [m.how for m in marks] == [STEP]


def test_a_system_without_the_tables_says_so_and_never_marks(
    marks: list[ReadyMark], capsys: pytest.CaptureFixture[str], recwarn: pytest.WarningsRecorder
) -> None:
    assert watch_port(parse_ready("port:8000"), tables=["/no/such/table"]) is None
    assert "reads the kernel's TCP tables" in str(recwarn.pop().message)
    assert marks == []


def test_the_nth_optimizer_step_marks_ready_once(marks: list[ReadyMark]) -> None:
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    handle = watch_steps(parse_ready("step:3"))
    try:
        for step in range(1, 6):
            optimizer.zero_grad()
            model(torch.ones(1, 2)).sum().backward()
            optimizer.step()
            assert (len(marks), step) in ((0, 1), (0, 2), (1, 3), (1, 4), (1, 5))
    finally:
        handle.remove()
    (mark,) = marks
    assert (mark.how, mark.what) == (STEP, "step:3")
