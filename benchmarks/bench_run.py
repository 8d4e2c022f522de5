"""What ``compiletrace run`` costs the program it runs.

1. The bootstrap in a process that never compiles: ``python -c pass`` and ``python -c
   'import torch'``, each with and without the bootstrap on ``PYTHONPATH`` (and a job
   directory set, as ``run`` sets it), interleaved, the order alternating; the median of
   the paired differences in wall time.
2. Passive recording on compile time: the built-in model's two components compiled with a
   plain ``torch.compile`` (no compiletrace backend), its first call timed with
   ``compiletrace.observe()`` on and off, interleaved in one process, the order alternating,
   after ``torch._dynamo.reset()`` each time; per backend, the median of the on/off ratios of
   CPU time.
   Ratios this small drown in the machine's noise (one compile varies by +-20% here), so
3. passive recording's own calls are also timed in place, inside the same compiles: naming
   the frame at its start (reading the callers, naming the component) and the tracker's
   work around each backend call (cache counters, regions, the graph's hash), as a share
   of the compile time the records hold;
4. Passive recording on a compiled model's steady-state call: the same model, compiled
   once, called in blocks with recording on and off, interleaved; the median ratio.
5. Timing the imports a compile makes (the one-time set-up, ``_core/compile_imports``): the
   cost per import of a fresh module with the timer on, against none (batches of fresh
   modules, interleaved), and how many modules a process's first compile imports (counted in
   a fresh process per backend), their product as a share of that first compile's time.

    python benchmarks/bench_run.py [--repeats 21] [--backends eager,aot_eager]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

import compiletrace
from compiletrace._app.job import child_environment
from compiletrace._core import torch_compat as tc
from compiletrace._core.compile_imports import ImportTimer
from compiletrace._core.passive import PassiveRecording
from compiletrace._core.tracker import get_tracker
from compiletrace._io.private_dir import PrivateDirectory
from compiletrace.models import DemoConfig, build_demo

CONFIG = DemoConfig(vision_layers=2, text_layers=4)
CALLS_PER_BLOCK = 200


def _paired(off: Callable[[], float], on: Callable[[], float], repeats: int) -> list[tuple[float, float]]:
    """(off, on) measured ``repeats`` times, interleaved, the order alternating: neither side
    always runs first (warmer caches, a quieter moment)."""
    pairs = []
    for i in range(repeats):
        if i % 2 == 0:
            first_off = off()
            pairs.append((first_off, on()))
        else:
            first_on = on()
            pairs.append((off(), first_on))
    return pairs


def _wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    return time.perf_counter() - start


def bootstrap_cost(repeats: int) -> dict[str, tuple[float, float]]:
    """(median seconds without the bootstrap, median paired extra seconds with it)."""
    plain = dict(os.environ)
    with tempfile.TemporaryDirectory() as parent:
        job = PrivateDirectory.create(parent, "job-")
        job_dir = job.path
        booted = child_environment(job, (), False)
        found = {}
        for label, code in (("python -c pass", "pass"), ("python -c 'import torch'", "import torch")):
            cmd = [sys.executable, "-c", code]
            _wall(cmd, plain), _wall(cmd, booted)  # warm the file cache
            pairs = _paired(lambda c=cmd: _wall(c, plain), lambda c=cmd: _wall(c, booted), repeats)
            base = [without for without, _ in pairs]
            extra = [with_ - without for without, with_ in pairs]
            assert os.listdir(job_dir) == [], "a process that never compiled wrote a file"
            found[label] = (statistics.median(base), statistics.median(extra))
    return found


def _model(backend: str) -> Any:
    demo = build_demo(config=CONFIG)
    for path in demo.components:
        setattr(demo.model, path, torch.compile(demo.model.get_submodule(path), backend=backend))
    return demo


def _first_call_cpu_s(backend: str, observed: bool) -> float:
    torch._dynamo.reset()
    demo = _model(backend)
    gc.collect()
    recording = compiletrace.observe(registry=compiletrace.Registry()) if observed else None
    start = time.process_time()
    demo.model(*demo.example_inputs)
    elapsed = time.process_time() - start
    if recording is not None:
        assert len(recording.registry) == len(demo.components)
        recording.stop()
    return elapsed


def compile_ratio(backend: str, repeats: int) -> tuple[float, float]:
    """(median CPU seconds of the first call without recording, median on/off ratio)."""
    _first_call_cpu_s(backend, False)  # imports and first-use costs, on neither side
    pairs = _paired(
        lambda: _first_call_cpu_s(backend, False), lambda: _first_call_cpu_s(backend, True), repeats
    )
    return statistics.median(off for off, _ in pairs), statistics.median(on / off for off, on in pairs)


class _InPlace:
    """Times passive recording's own calls where the tracker makes them."""

    def __init__(self) -> None:
        self.ns = 0

    def timed(self, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                self.ns += time.perf_counter_ns() - start

        return wrapper


def _in_place_once(backend: str) -> float:
    tracker = get_tracker()
    torch._dynamo.reset()
    demo = _model(backend)
    clock = _InPlace()
    original_frame, original_owner = tc.compiling_frame, PassiveRecording.owner_for
    original_graph = tracker.compile_graph

    def compile_graph(owner: Any, inner: Any, *args: Any) -> Any:
        # The tracker's time around the backend: the whole call less the inner backend's.
        start = time.perf_counter_ns()
        inner_ns = 0

        def timed_inner(*inner_args: Any, **kwargs: Any) -> Any:
            nonlocal inner_ns
            t = time.perf_counter_ns()
            try:
                return inner(*inner_args, **kwargs)
            finally:
                inner_ns += time.perf_counter_ns() - t

        try:
            return original_graph(owner, timed_inner, *args)
        finally:
            clock.ns += time.perf_counter_ns() - start - inner_ns

    tc.compiling_frame = clock.timed(original_frame)  # type: ignore[assignment]
    PassiveRecording.owner_for = clock.timed(original_owner)  # type: ignore[method-assign]
    tracker.compile_graph = compile_graph  # type: ignore[method-assign]
    try:
        with compiletrace.observe(registry=compiletrace.Registry()) as recording:
            demo.model(*demo.example_inputs)
    finally:
        tc.compiling_frame = original_frame  # type: ignore[assignment]
        PassiveRecording.owner_for = original_owner  # type: ignore[method-assign]
        del tracker.compile_graph
    return clock.ns / sum(r.total_ns for r in recording.registry.records())


def in_place_share(backend: str, repeats: int) -> tuple[float, float]:
    """(median, max) share of the records' compile time spent in passive recording's own
    calls: the frame naming at its start and the tracker's work around each backend call."""
    shares = [_in_place_once(backend) for _ in range(repeats)]
    return statistics.median(shares), max(shares)


def _block_s(demo: Any) -> float:
    start = time.perf_counter()
    for _ in range(CALLS_PER_BLOCK):
        demo.model(*demo.example_inputs)
    return time.perf_counter() - start


def steady_ratio(repeats: int) -> tuple[float, float]:
    """(median seconds per call without recording, median on/off ratio of blocks of calls)."""
    torch._dynamo.reset()
    demo = _model("eager")
    demo.model(*demo.example_inputs)  # compiled once, before either side is timed
    pairs = _paired(lambda: _block_s(demo), lambda: _observed_block_s(demo), repeats)
    per_call = statistics.median(off / CALLS_PER_BLOCK for off, _ in pairs)
    return per_call, statistics.median(on / off for off, on in pairs)


def _observed_block_s(demo: Any) -> float:
    with compiletrace.observe(registry=compiletrace.Registry()) as recording:
        elapsed = _block_s(demo)
    assert len(recording.registry) == 0  # nothing recompiled: only the call path was timed
    return elapsed


MODULES_PER_BATCH = 200


def _import_batch_s(folder: str, tag: str, timer: ImportTimer | None) -> float:
    names = [f"ct_bench_{tag}_{i}" for i in range(MODULES_PER_BATCH)]
    for name in names:
        with open(os.path.join(folder, f"{name}.py"), "w") as out:
            out.write("X = 1\n")
    importlib.invalidate_caches()
    if timer is not None:
        timer.install()
    try:
        start = time.perf_counter()
        for name in names:
            importlib.import_module(name)
        return (time.perf_counter() - start) / MODULES_PER_BATCH
    finally:
        if timer is not None:
            timer.uninstall()
        for name in names:
            sys.modules.pop(name, None)


def import_timer_cost(repeats: int) -> float:
    """Median extra seconds per import of a fresh module with the timer on."""
    with tempfile.TemporaryDirectory() as folder:
        sys.path.insert(0, folder)
        try:
            timer = ImportTimer(time.perf_counter_ns, active=lambda: True)
            pairs = _paired(
                lambda: _import_batch_s(folder, f"off{len(os.listdir(folder))}", None),
                lambda: _import_batch_s(folder, f"on{len(os.listdir(folder))}", timer),
                repeats,
            )
        finally:
            sys.path.remove(folder)
    return statistics.median(on - off for off, on in pairs)


FIRST_COMPILE = """
import sys, time, torch, torch._dynamo
from compiletrace.models import DemoConfig, build_demo
demo = build_demo(config=DemoConfig(vision_layers=2, text_layers=4))
model = torch.compile(demo.model, backend=sys.argv[1])
before = len(sys.modules)
start = time.perf_counter()
with torch.no_grad():
    model(*demo.example_inputs)
print(len(sys.modules) - before, time.perf_counter() - start)
"""


def first_compile_imports(backend: str) -> tuple[int, float]:
    """(modules a fresh process's first compile imports, that compile's seconds)."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        out = subprocess.run(
            [sys.executable, "-c", FIRST_COMPILE, backend],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    count, seconds = out.stdout.split()[-2:]
    return int(count), float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--backends", default="eager,aot_eager")
    parser.add_argument("--imports-only", action="store_true", help="section 5 alone")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, {args.repeats} repeats, medians")
    if args.imports_only:
        return _imports_section(args)
    print("\n1. the bootstrap in a process that never compiles (wall time)")
    for label, (base, extra) in bootstrap_cost(args.repeats).items():
        print(f"  {label:26} {base * 1000:8.1f} ms, with the bootstrap {extra * 1000:+6.2f} ms")
    print("\n2. passive recording on compile time (first call, CPU time; on/off)")
    for backend in args.backends.split(","):
        off, ratio = compile_ratio(backend, args.repeats)
        print(f"  {backend:10} {off:7.3f} s without, ratio {ratio:.4f} ({(ratio - 1) * 100:+.2f}%)")
    print("\n3. passive recording's own calls, timed in place (share of the records' compile time)")
    for backend in args.backends.split(","):
        median, worst = in_place_share(backend, args.repeats)
        print(f"  {backend:10} {median * 100:.2f}% (max {worst * 100:.2f}%)")
    per_call, ratio = steady_ratio(args.repeats)
    print("\n4. passive recording on a compiled model's steady-state call (eager backend)")
    print(f"  {per_call * 1e6:7.1f} us a call without, ratio {ratio:.4f} ({(ratio - 1) * 100:+.2f}%)")
    _imports_section(args)


def _imports_section(args: argparse.Namespace) -> None:
    per_import = import_timer_cost(args.repeats)
    print("\n5. timing a compile's imports (the one-time set-up)")
    print(f"  {per_import * 1e6:+.1f} us per fresh import with the timer on")
    for backend in [*args.backends.split(","), "inductor"]:
        count, seconds = first_compile_imports(backend)
        share = count * max(per_import, 0.0) / seconds
        print(f"  {backend:10} first compile imports {count} modules in {seconds:.2f} s:", end=" ")
        print(f"{share * 100:.3f}% of it")


if __name__ == "__main__":
    main()
