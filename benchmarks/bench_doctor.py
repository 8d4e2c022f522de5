"""What the doctor costs: capturing its inputs during compiles, and diagnosing a run.

Measures
1. compile time of the built-in model (its two components) with the doctor's capture on and
   off (``Tracker.diagnosis_capture_enabled``: the graph's structural hash, torch's
   graph-break records, cache keys, frame failures), interleaved in one process, the order
   alternating, after ``torch._dynamo.reset()`` each time; per backend, the median of the
   on/off ratios of CPU time. "eager" is the worst case (the fastest compile, so the
   largest share);
2. the capture's own time inside those compiles: every capture call the tracker makes
   (hash, graph-break and failure reads, the cache-lookup collector, the limit read) timed
   in place during real compiles, as a share of the records' compile time. The ratios of
   (1) cannot resolve a cost this small on a shared machine (compiles vary by +-20%); this
   share can. And the pieces timed directly on the model's graphs (per graph, per node);
3. diagnosing 10,000 synthetic records (median of repeats).

    python benchmarks/bench_doctor.py [--repeats 15] [--backends eager,aot_eager]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import warnings
from typing import Any

import torch

import compiletrace
from compiletrace import CacheOutcome, GraphRecord, Registry
from compiletrace._core import torch_compat as tc
from compiletrace._core.tracker import get_tracker
from compiletrace._data.records import GraphBreak
from compiletrace._doctor import diagnose_records
from compiletrace.models import DemoConfig, build_demo

MS = 1_000_000
CONFIG = DemoConfig(vision_layers=2, text_layers=4)  # a few hundred FX nodes per component


def _first_call_s(backend: str, capture: bool) -> float:
    """Build the model, compile both components, time the first call (the compiles): CPU
    seconds of this process, which other jobs on a shared machine disturb far less than
    wall time (a compile runs on the calling thread)."""
    torch._dynamo.reset()
    get_tracker().diagnosis_capture_enabled = capture
    demo = build_demo(config=CONFIG)
    reg = Registry()
    for path, name in demo.components.items():
        setattr(
            demo.model,
            path,
            compiletrace.compile(
                demo.model.get_submodule(path), component=name, backend=backend, registry=reg
            ),
        )
    gc.collect()  # a collection inside the timed call lands on whichever variant triggers it
    start = time.process_time()
    with torch.no_grad():
        demo.run()
    elapsed = time.process_time() - start
    assert len(reg.records()) == 2 and all(bool(r.structure_hash) == capture for r in reg.records())
    return elapsed


def bench_capture(backend: str, repeats: int) -> dict[str, float]:
    _first_call_s(backend, True)  # the process's first compile pays for imports: not timed
    ratios, on_s, off_s = [], [], []
    for i in range(repeats):
        order = (True, False) if i % 2 == 0 else (False, True)
        times = {capture: _first_call_s(backend, capture) for capture in order}
        ratios.append(times[True] / times[False])
        on_s.append(times[True])
        off_s.append(times[False])
    get_tracker().diagnosis_capture_enabled = True
    return {
        "ratio_median": statistics.median(ratios),
        "on_s_median": statistics.median(on_s),
        "off_s_median": statistics.median(off_s),
    }


CAPTURE_CALLS = (
    "graph_structure_hash",
    "graph_break_mark",
    "graph_breaks_since",
    "frame_failure",
    "collect_cache_lookups",
    "recompile_limit",
)


def bench_capture_share(backend: str, repeats: int) -> dict[str, float]:
    """The capture calls timed where the tracker makes them, over ``repeats`` compiles."""
    spent = [0]
    originals = {name: getattr(tc, name) for name in CAPTURE_CALLS}

    def timed(fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter_ns() - start

        return call

    class TimedContext:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __enter__(self) -> Any:
            start = time.perf_counter_ns()
            value = self.inner.__enter__()
            spent[0] += time.perf_counter_ns() - start
            return value

        def __exit__(self, *exc: Any) -> Any:
            start = time.perf_counter_ns()
            result = self.inner.__exit__(*exc)
            spent[0] += time.perf_counter_ns() - start
            return result

    shares = []
    try:
        for name in CAPTURE_CALLS:
            setattr(tc, name, timed(originals[name]))
        tc.collect_cache_lookups = lambda: TimedContext(originals["collect_cache_lookups"]())  # type: ignore[assignment]
        for _ in range(repeats):
            torch._dynamo.reset()
            spent[0] = 0
            demo = build_demo(config=CONFIG)
            reg = Registry()
            for path, name in demo.components.items():
                compiled = compiletrace.compile(
                    demo.model.get_submodule(path), component=name, backend=backend, registry=reg
                )
                setattr(demo.model, path, compiled)
            with torch.no_grad():
                demo.run()
            shares.append(spent[0] / sum(r.total_ns for r in reg.records()))
    finally:
        for name, fn in originals.items():
            setattr(tc, name, fn)
    return {"share_median": statistics.median(shares), "share_max": max(shares)}


def bench_capture_parts(repeats: int = 200) -> dict[str, float]:
    """The capture's pieces, timed directly on the model's own FX graphs."""
    graphs: list[Any] = []

    def keep(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    demo = build_demo(config=CONFIG)
    for path in demo.components:
        setattr(demo.model, path, torch.compile(demo.model.get_submodule(path), backend=keep))
    with torch.no_grad():
        demo.run()
    nodes = sum(len(gm.graph.nodes) for gm in graphs)
    hash_s = []
    for _ in range(repeats):
        start = time.perf_counter()
        for gm in graphs:
            tc.graph_structure_hash(gm)
        hash_s.append(time.perf_counter() - start)
    reads_s = []
    for _ in range(repeats):
        start = time.perf_counter()
        tc.graph_breaks_since(tc.graph_break_mark())
        tc.frame_failure()
        reads_s.append(time.perf_counter() - start)
    hashed = statistics.median(hash_s)
    return {
        "graphs": len(graphs),
        "nodes": nodes,
        "hash_us_per_graph": 1e6 * hashed / len(graphs),
        "hash_us_per_node": 1e6 * hashed / nodes,
        "reads_us_per_frame": 1e6 * statistics.median(reads_s),
    }


def synthetic_records(n: int = 10_000) -> list[GraphRecord]:
    """A run of ``n`` records with every kind of finding in it: 500 frames recompiling,
    graph breaks, repeated structures, cache misses, compiles after warm-up."""
    records = []
    for i in range(n):
        frame = i % 500
        records.append(
            GraphRecord(
                compile_id=f"{frame}/{i // 500}",
                component=("encoder", "language_model")[i % 2],
                backend="inductor",
                code_name=f"fn{frame}",
                graph_node_count=40,
                start_unix_ns=i * 10 * MS,
                end_unix_ns=i * 10 * MS + 8 * MS,
                dynamo_ns=3 * MS,
                backend_ns=5 * MS,
                backend_start_unix_ns=i * 10 * MS + 3 * MS,
                is_recompile=i >= 500,
                recompile_reason=None
                if i < 500
                else "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3",
                fx_graph_cache=(CacheOutcome.MISS, CacheOutcome.HIT)[i % 2],
                phases=(("inductor", 5 * MS),),
                code_filename="model.py",
                code_firstlineno=frame,
                graph_breaks=(GraphBreak("Failed to trace builtin operator `print`", "model.py", frame + 1),)
                if i % 7 == 0
                else (),
                structure_hash=f"h{i % 50}",
                after_warmup=i > 9_000,
            )
        )
    return records


def bench_diagnose(repeats: int) -> dict[str, float]:
    records = synthetic_records()
    times, findings = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        findings = len(diagnose_records(records))
        times.append(time.perf_counter() - start)
    return {"diagnose_10k_s_median": statistics.median(times), "findings": findings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--backends", default="eager,aot_eager")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # torch's own, on every reset

    parts = bench_capture_parts()
    print(
        f"capture pieces on the built-in model ({parts['graphs']:.0f} graphs, {parts['nodes']:.0f} nodes): "
        f"structural hash {parts['hash_us_per_graph']:.0f} us per graph ({parts['hash_us_per_node']:.2f} us "
        f"per node); graph-break and failure reads {parts['reads_us_per_frame']:.1f} us per frame"
    )
    for backend in args.backends.split(","):
        share = bench_capture_share(backend, args.repeats)
        print(
            f"capture calls timed in place, {backend}: {100 * share['share_median']:.3f}% of compile time "
            f"(median of {args.repeats} compiles; max {100 * share['share_max']:.3f}%)"
        )
        res = bench_capture(backend, args.repeats)
        print(
            f"compile with capture / without, {backend}: ratio median {res['ratio_median']:.4f} "
            f"(on {res['on_s_median']:.3f} s, off {res['off_s_median']:.3f} s; "
            f"{args.repeats} interleaved pairs)"
        )
    diag = bench_diagnose(max(args.repeats, 5))
    print(
        f"diagnose 10,000 synthetic records: {diag['diagnose_10k_s_median'] * 1000:.0f} ms median "
        f"({diag['findings']:.0f} findings)"
    )


if __name__ == "__main__":
    main()
