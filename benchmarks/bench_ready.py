"""What the ready mark and its hooks cost a compiled model's call (``compiletrace run --ready``).

Nothing of them runs on a steady call: the ready mark's work is done once, at the mark; the
hooks that see a compiled graph's first-call work (autotuning, CUDA-graph recording) are
tees of torch's event logger, which a steady call never reaches; the frame-region collector
lives inside compiles. This measures it:

1. the compiled model's steady call, in one process: blocks of calls with compiletrace's
   hooks in place (the process tracker's region and first-call tees, passive recording on,
   the ready mark made and heard by a listener, as in a job's process) and with torch's own
   event logger methods put back (off), interleaved, the order alternating; the median of
   the on/off ratios of the thread's CPU time (torch on one thread: its OpenMP workers'
   spinning on a shared machine would be counted otherwise, +-40% between blocks);
2. a function marked ready (``--ready MODULE:FUNCTION``: the bootstrap's wrapper, after its
   mark), against the plain function: nanoseconds per call, interleaved the same way. Only
   the marked function pays it (a warm-up, called once), never the model's call.

    python benchmarks/bench_ready.py [--repeats 41] [--calls 200] [--backend inductor]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import compiletrace
from compiletrace._app import ready_watch
from compiletrace._core import ready as ready_mark
from compiletrace._core.tracker import get_tracker

HOOKED = ("log_event_start", "log_event_end", "log_instant_event")


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(64, 64)
        self.b = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.nn.functional.gelu(self.a(x))) + x


def _block_cpu_ns(fn: Callable[[], Any], calls: int) -> int:
    start = time.thread_time_ns()
    for _ in range(calls):
        fn()
    return time.thread_time_ns() - start


def _interleaved_ratio(
    on: Callable[[], None], off: Callable[[], None], call: Callable[[], Any], repeats: int, calls: int
) -> tuple[float, float, float]:
    """Median on/off ratio of CPU time over ``repeats`` pairs of blocks (order alternating),
    and the median ns per call on and off."""
    ratios, on_ns, off_ns = [], [], []
    for i in range(repeats):
        timed = {}
        for state in ("on", "off") if i % 2 == 0 else ("off", "on"):
            (on if state == "on" else off)()
            timed[state] = _block_cpu_ns(call, calls)
        ratios.append(timed["on"] / timed["off"])
        on_ns.append(timed["on"] / calls)
        off_ns.append(timed["off"] / calls)
    return statistics.median(ratios), statistics.median(on_ns), statistics.median(off_ns)


def bench_model_call(backend: str, repeats: int, calls: int) -> tuple[float, float, float]:
    from torch._dynamo.utils import get_chromium_event_logger

    event_logger = get_chromium_event_logger()
    torch_own = {name: getattr(event_logger, name) for name in HOOKED}
    get_tracker()  # the process tracker: its region, first-call and cache-lookup tees
    observer = compiletrace.observe(registry=compiletrace.Registry())  # passive recording, as a job
    heard: list[object] = []
    ready_mark.on_ready(heard.append)
    torch.manual_seed(0)
    model = torch.compile(Tiny().eval(), backend=backend)
    x = torch.randn(8, 64)
    with torch.no_grad():
        for _ in range(3):
            model(x)  # compiled and warmed up
    compiletrace.ready()
    assert heard, "the ready mark was not heard"
    ours = {name: getattr(event_logger, name) for name in HOOKED}
    assert all(getattr(ours[name], "_compiletrace_patched", False) for name in HOOKED)

    def on() -> None:
        for name, method in ours.items():
            setattr(event_logger, name, method)

    def off() -> None:
        for name, method in torch_own.items():
            setattr(event_logger, name, method)

    def call() -> Any:
        with torch.no_grad():
            return model(x)

    try:
        return _interleaved_ratio(on, off, call, repeats, calls)
    finally:
        on()
        observer.stop()


def _bootstrap() -> Any:
    path = Path(compiletrace.__file__).parent / "_bootstrap" / "sitecustomize.py"
    spec = importlib.util.spec_from_file_location("compiletrace_bootstrap_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # outside a job: it installs nothing
    return module


def bench_marked_function(repeats: int, calls: int) -> tuple[float, float, float]:
    def serve(x: int) -> int:
        return x + 1

    marked = _bootstrap()._ready_when_returned(serve, "bench:serve")
    marked(0)  # the mark, once
    current = [serve]
    return _interleaved_ratio(
        lambda: current.__setitem__(0, marked),
        lambda: current.__setitem__(0, serve),
        lambda: current[0](1),
        repeats,
        calls,
    )


# Another process holding N listening sockets: explicit ports on an address of their own,
# below the ephemeral range, so that no other program's connections run short of ports.
HOLDER = """
import resource, socket, sys
n = int(sys.argv[1])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))
held, port = [], 1024
while len(held) < n and port < 32768:
    s = socket.socket()
    try:
        s.bind(("127.77.0.1", port))
        s.listen()
        held.append(s)
    except OSError:
        s.close()
    port += 1
print(len(held), flush=True)
sys.stdin.read()
"""


def _tcp_lines() -> int:
    total = 0
    for table in ready_watch.TCP_TABLES:
        try:
            with open(table) as f:
                total += sum(1 for _ in f)
        except FileNotFoundError:
            continue
    return total


def bench_port_watch(foreign: int, own: int, repeats: int, looks: int) -> tuple[int, int, float, float]:
    """With ``foreign`` sockets listening in another process, and ``own`` more sockets open
    in this one: the lines of the machine's TCP tables, this process's descriptors, and the
    median thread CPU microseconds of one look, the tables scanned (before) and the
    descriptors asked (after)."""
    mine = [socket.socket() for _ in range(own)]
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(foreign)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        held = int(holder.stdout.readline())
        assert held == foreign, f"another process could hold {held} listening sockets of {foreign}"
        with socket.socket() as sock:  # this process's port: bound, not yet listening, as a
            sock.bind(("127.0.0.1", 0))  # server is before its engine is set up
            port = sock.getsockname()[1]

            def before() -> bool:  # the kernel's tables, matched by inode (the fallback)
                return ready_watch._listens(port, ready_watch.TCP_TABLES)

            def after() -> bool:  # this process's own descriptors
                return port in ready_watch.own_listening_ports()

            assert before() is after() is False
            timed: dict[str, list[float]] = {"before": [], "after": []}
            for i in range(repeats):
                for name in ("before", "after") if i % 2 == 0 else ("after", "before"):
                    look = before if name == "before" else after
                    start = time.thread_time_ns()
                    for _ in range(looks):
                        look()
                    timed[name].append((time.thread_time_ns() - start) / looks / 1000)
            sock.listen()
            assert before() is after() is True
            fds = len(os.listdir("/proc/self/fd"))
            return _tcp_lines(), fds, statistics.median(timed["before"]), statistics.median(timed["after"])
    finally:
        holder.kill()
        holder.wait()
        for sock in mine:
            sock.close()


def main_port_watch(foreign: list[int], own: list[int], repeats: int, looks: int) -> None:
    print(f"--ready port:PORT, one look ({repeats} interleaved blocks of {looks} looks, thread CPU time):")

    # The watch looks, then sleeps POLL_S: its share of a core is look / (look + POLL_S).
    def share(us: float) -> float:
        return 100 * us / (us + ready_watch.POLL_S * 1e6)

    for n, extra in [(n, 0) for n in foreign] + [(0, m) for m in own]:
        lines, fds, before_us, after_us = bench_port_watch(n, extra, repeats, looks)
        print(
            f"  {n:>6,} sockets listening in another process ({lines:,} table lines, {fds} descriptors "
            "here): "
            f"tables {before_us:,.0f} us ({share(before_us):.1f}% of a core), "
            f"own descriptors {after_us:,.0f} us ({share(after_us):.2f}%)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=41)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--port-watch-only", action="store_true", help="only the port watch's look")
    parser.add_argument("--foreign", default="0,2000,19000", help="sockets another process holds, per row")
    parser.add_argument("--own", default="1000", help="more sockets this process holds, per row")
    parser.add_argument("--looks", type=int, default=10, help="looks per block of the port watch")
    args = parser.parse_args()
    foreign = [int(n) for n in args.foreign.split(",") if n]
    own = [int(n) for n in args.own.split(",") if n]
    if args.port_watch_only:
        main_port_watch(foreign, own, args.repeats, args.looks)
        return
    torch.set_num_threads(1)
    ratio, on_ns, off_ns = bench_model_call(args.backend, args.repeats, args.calls)
    print(f"compiled model's steady call ({args.backend}), {args.repeats} x {args.calls} calls, CPU time:")
    per_call = f"hooks on {on_ns / 1000:.1f} us, off {off_ns / 1000:.1f} us per call"
    print(f"  {per_call}; median ratio on/off {ratio:.3f}")
    ratio, on_ns, off_ns = bench_marked_function(args.repeats, args.calls * 50)
    print(f"a function marked ready (after its mark), {args.repeats} x {args.calls * 50} calls, CPU time:")
    print(f"  marked {on_ns:.0f} ns, plain {off_ns:.0f} ns per call: {on_ns - off_ns:.0f} ns more")
    main_port_watch(foreign, own, args.repeats, args.looks)


if __name__ == "__main__":
    main()
