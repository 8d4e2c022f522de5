"""The ready marks a program needs no edit for, on real sockets and a real optimizer: a
process is ready once one of its own sockets listens on the port (bound is not enough), or
once an optimizer of it ends its N-th step."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from compiletrace._app.ready_watch import (
    LISTEN,
    DescriptorsUnasked,
    listening_inodes,
    listening_port,
    own_listening_ports,
    own_socket_inodes,
    watch_port,
    watch_steps,
)
from compiletrace._core import ready as ready_mark
from compiletrace._data.job_dir import READY_SUFFIX
from compiletrace._data.ready import PORT, STEP, ReadyMark, parse_ready

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads Linux's TCP tables")

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
FOREIGN = 2_000  # listening sockets another process holds
# Another process: FOREIGN sockets listening on ports of their own, held until its stdin closes.
HOLDER = """
import resource, socket, sys
n = int(sys.argv[1])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))
held = [socket.create_server(("127.0.0.1", 0)) for _ in range(n)]
print("listening", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def foreign_sockets() -> Iterator[int]:
    """FOREIGN listening sockets held by another process, all in the machine's tables."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(FOREIGN)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "listening"
        with open("/proc/net/tcp") as f:
            listed = sum(1 for line in f if line.split()[3:4] == [LISTEN])
        assert listed >= FOREIGN  # the machine's table holds them: what the table scan read
        yield listed
    finally:
        holder.kill()
        holder.wait()


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
    assert watch_port(parse_ready("port:8000"), tables=["/no/such/table"], fd_dir="/no/such/fd") is None
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


@pytest.mark.slow
def test_a_look_asks_this_processs_descriptors_and_not_the_machines_sockets(
    marks: list[ReadyMark], foreign_sockets: int, recwarn: pytest.WarningsRecorder
) -> None:
    """The work of a look is this process's descriptors, however many sockets others hold:
    of the 2,000 listening in another process none is asked, and no table is read (the
    scan read every line of the machine's table, one per socket, every 50 ms)."""
    asked: list[int] = []

    def probe(fd: int) -> int | None:
        asked.append(fd)
        return listening_port(fd)

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        held = {int(n) for n in os.listdir("/proc/self/fd")}
        # A table that would say no: were it read, the port would not be found.
        thread = watch_port(parse_ready(f"port:{port}"), tables=["/no/such/table"], probe=probe)
        assert thread is not None
        thread.join(30)
        assert not thread.is_alive()
    (mark,) = marks
    assert (mark.how, mark.what) == (PORT, f"port:{port}")
    # One look: each of this process's descriptors once (the listing's own among them).
    assert len(asked) == len(set(asked)) <= len(held) + 2 < foreign_sockets
    assert len(held - set(asked)) <= 2  # the descriptors held throughout were all asked
    assert not recwarn.list  # no fallback, nothing said


def test_a_descriptor_is_asked_whether_it_listens_on_tcp_and_nothing_else() -> None:
    with socket.socket() as bound, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        bound.bind(("127.0.0.1", 0))
        udp.bind(("127.0.0.1", 0))
        assert listening_port(bound.fileno()) is None  # bound is not listening
        assert listening_port(udp.fileno()) is None  # no UDP socket listens
        bound.listen()
        assert listening_port(bound.fileno()) == bound.getsockname()[1]
        assert bound.getsockname()[1] in own_listening_ports()
    with open(__file__) as f:
        assert listening_port(f.fileno()) is None
    r, w = os.pipe()
    os.close(w)
    os.close(r)
    assert listening_port(r) is None  # closed since it was listed


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6")
def test_an_ipv6_socket_listening_is_found_as_well() -> None:
    with socket.socket(socket.AF_INET6) as six:
        try:
            six.bind(("::1", 0))
        except OSError:
            pytest.skip("no IPv6 loopback here")
        six.listen()
        assert listening_port(six.fileno()) == six.getsockname()[1] in own_listening_ports()


def test_a_descriptor_left_unasked_falls_back_to_the_tables_said_once(
    marks: list[ReadyMark], recwarn: pytest.WarningsRecorder
) -> None:
    """Where a descriptor cannot be asked (no SO_ACCEPTCONN), the watch reads the kernel's
    tables, as before, matched by inode: said once, and the port still found."""

    def unasked(fd: int) -> int | None:
        raise DescriptorsUnasked("no getsockopt(SO_ACCEPTCONN) on this system")

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        thread = watch_port(parse_ready(f"port:{port}"), probe=unasked)
        assert thread is not None
        thread.join(30)
        assert not thread.is_alive()
    (mark,) = marks
    assert mark.what == f"port:{port}"
    (said,) = [str(w.message) for w in recwarn.list]
    assert "reading the kernel's TCP tables instead" in said and "SO_ACCEPTCONN" in said


@pytest.mark.slow
def test_a_real_server_is_ready_when_it_listens_beside_another_processs_sockets(
    tmp_path: Path, foreign_sockets: int
) -> None:
    """``compiletrace run --ready port:PORT`` on a real server (a compiled model behind
    ``http.server``), while another process holds 2,000 listening sockets: the server's own
    socket is its mark."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    job, job_dir = tmp_path / "job.json", tmp_path / "job-dir"
    with open(tmp_path / "run.err", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "compiletrace", "run", "--json", str(job), "--ready", f"port:{port}",
             "--job-dir", str(job_dir), "--", sys.executable, str(PROGRAMS / "serve_forever.py"), str(port)],
            stdout=err, stderr=err, start_new_session=True, cwd=tmp_path,
        )  # fmt: skip
        try:
            end = time.monotonic() + 300
            while not any(job_dir.glob(f"*{READY_SUFFIX}")):
                assert proc.poll() is None, (tmp_path / "run.err").read_text()
                assert time.monotonic() < end, "never ready"
                time.sleep(0.2)
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    after = json.loads(job.read_text())["after_ready"]
    (mark,) = after["ready"]
    assert (mark["how"], mark["what"]) == (PORT, f"port:{port}")
