"""Compile CPU counts inductor's compile-worker processes (``_core.cpu_clock``): exact on an
injected process reader, then on real processes, then on a real inductor compile whose graph
compiles in torch's subprocess pool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from compiletrace._core.cpu_clock import CompileCpuClock, ProcReader, tree_cpu_ns

ME = 100  # this process, as the fake reader sees it


class FakeProcs:
    """Processes as ``/proc`` would show them: pid -> (parent, CPU ns incl. reaped children)."""

    def __init__(self) -> None:
        self.procs: dict[int, tuple[int, int]] = {}

    def stat(self, pid: int) -> tuple[int, int] | None:
        return self.procs.get(pid)

    def children(self, pid: int) -> list[int]:
        return [p for p, (parent, _) in self.procs.items() if parent == pid]

    def reap(self, pid: int) -> None:
        """``pid`` exits and its parent waits for it: its CPU joins the parent's children's."""
        parent, cpu = self.procs.pop(pid)
        if parent in self.procs:
            grand, own = self.procs[parent]
            self.procs[parent] = (grand, own + cpu)


def _clock(procs: FakeProcs, own: list[int], pools: list[int]) -> CompileCpuClock:
    return CompileCpuClock(own=lambda: own[0], pool_pids=lambda: pools, reader=procs, pid=lambda: ME)


def test_a_compile_counts_its_pools_sidecar_workers_and_their_compilers_exactly() -> None:
    procs, own, pools = FakeProcs(), [1_000], [200]
    procs.procs = {
        200: (ME, 50),
        201: (200, 7_000),
        202: (200, 9_000),
        300: (ME, 4_000),
    }  # 300: a data loader
    clock = _clock(procs, own, pools)
    start = clock()
    assert start == 1_000 + 50 + 7_000 + 9_000  # not the data loader: not a compile pool's

    own[0] += 300  # the compiling thread
    procs.procs[203] = (201, 2_500)  # a worker starts a C++ compiler ...
    procs.procs[201] = (200, 7_000 + 800)
    procs.reap(203)  # ... and waits for it: its 2_500 move into the worker's children
    procs.procs[202] = (200, 9_000 + 1_200)
    procs.procs[300] = (ME, 4_000 + 999_999)  # the data loader's work is not the compile's
    assert clock() - start == 300 + 800 + 2_500 + 1_200

    mid = clock()
    procs.reap(202)  # a worker exits, reaped by the sidecar: its seconds stay counted
    assert clock() == mid
    own[0] += procs.procs[200][1] + procs.procs[201][1]  # the sidecar's tree ends, reaped by us
    del procs.procs[201], procs.procs[200]
    assert clock() == mid


def test_no_pool_reads_no_process_and_a_reused_pid_is_not_a_pool() -> None:
    class Refusing(FakeProcs):
        def stat(self, pid: int) -> tuple[int, int] | None:
            raise AssertionError("read a process with no pool")

    assert _clock(Refusing(), [5], [])() == 5
    procs = FakeProcs()
    procs.procs = {200: (1, 123_456)}  # the pool's pid now belongs to another process's child
    assert _clock(procs, [5], [200])() == 5


def test_workers_that_cannot_be_read_warn_once_and_the_rest_is_still_counted() -> None:
    class Unreadable(FakeProcs):
        def stat(self, pid: int) -> tuple[int, int] | None:
            raise PermissionError(13, "Permission denied", f"/proc/{pid}/stat")

    clock = _clock(Unreadable(), [42], [200])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert clock() == 42
        assert clock() == 42
    (warning,) = caught
    assert "compile-worker processes" in str(warning.message) and "PermissionError" in str(warning.message)


@pytest.mark.slow
def test_the_proc_reader_counts_a_real_child_and_the_compiler_it_waited_for() -> None:
    code = (
        "import subprocess, sys; subprocess.run([sys.executable, '-c', 'sum(range(3_000_000))']); "
        "print('waited', flush=True); input()"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"waited\n"
        reader = ProcReader()
        read = reader.stat(child.pid)
        with open(f"/proc/{child.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        assert read == (
            os.getpid(),
            sum(int(t) for t in fields[11:15]) * 1_000_000_000 // os.sysconf("SC_CLK_TCK"),
        )
        assert int(fields[13]) + int(fields[14]) > 0  # the grandchild's CPU, reaped by the child
        assert tree_cpu_ns([child.pid], reader, parent=os.getpid()) == read[1]
        assert child.pid in reader.children(os.getpid())
    finally:
        child.communicate(b"\n", timeout=30)


PROGRAM = textwrap.dedent(
    """
    import json, os, sys
    import torch
    import compiletrace
    from compiletrace._core.cpu_clock import ProcReader, tree_cpu_ns

    reader = ProcReader()


    def tree_ns():  # this process, its reaped children, and every live descendant
        t = os.times()
        own = round((t.user + t.system + t.children_user + t.children_system) * 1e9)
        return own + tree_cpu_ns(reader.children(os.getpid()), reader)


    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.relu(self.lin(x)) * 2 + 1


    registry = compiletrace.Registry()
    model = compiletrace.compile(Tiny(), backend="inductor", registry=registry)
    x = torch.randn(4, 8)
    before = tree_ns()
    with torch.no_grad():
        model(x)
    after = tree_ns()
    from compiletrace._core import torch_compat as tc

    (record,) = registry.records()
    print(json.dumps({"record": record.cpu_ns, "tree": after - before, "pools": len(tc.compile_pool_pids())}))
    """
)


@pytest.mark.slow
def test_compile_cpu_agrees_with_the_process_tree_under_inductors_subprocess_pool(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
        "TORCHINDUCTOR_COMPILE_THREADS": "2",
        "TORCHINDUCTOR_WORKER_START": "subprocess",
        # On a CPU build inductor uses its process pool for Triton only; this mode compiles
        # each graph (C++ kernels included) in torch's SubprocPool, most of the compile's CPU.
        "TORCHINDUCTOR_FX_COMPILE_MODE": "subprocess",
    }
    program = tmp_path / "tiny.py"
    program.write_text(PROGRAM)
    done = subprocess.run(
        [sys.executable, str(program)], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["pools"] == 1  # the graph compiled in torch's pool, still alive
    assert seen["record"] == pytest.approx(seen["tree"], rel=0.05)
