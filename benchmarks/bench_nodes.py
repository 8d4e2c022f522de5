"""Reading a job of 64 nodes of 8 ranks: the time and memory ``compiletrace report`` takes to
read the nodes' job files as one job and print its report, the doctor's time over the job,
and the report's widest line.

The 64 job files are built from the real ones two "nodes" wrote on this machine
(``tests/inputs/nodes/node_cache_miss/``, made by ``tests/inputs/nodes/two_nodes.py``): node
N is node 0's file (a cold cache) when N is a multiple of 8, else node 1's (a warm one), each
of its two rank processes copied to make 8, renamed to their global rank (``8 * N + i``), a
pid of their own and node N. Everything else (records, cache keys, timelines) is the real
processes' own, so a file is as large, and as slow to check, as a real node's. With
``--lean`` each rank keeps its records and timeline but not its cache keys (most of a real
rank's file): a job of 1,024 nodes of 8 ranks is then 45 MiB, not 0.5 GB, and what grows with
the ranks is the views' work, not the reading of the keys.

Measured in one process, ``--repeats`` times: CPU seconds (``time.process_time``) and wall
seconds of ``compiletrace.load(DIRECTORY)`` plus ``ProfileJob.summary()`` (what ``report``
prints), median and spread; the peak of Python's allocations while doing so (``tracemalloc``,
one extra round: it slows what it traces); the files' size. Apart, once each, on the job
read: the report alone (``summary()``) and the doctor over the whole job (``diagnose()``),
in CPU seconds: linear in the ranks, 4x the nodes costs them about 4x.

    python benchmarks/bench_nodes.py [--nodes 64] [--ranks 8] [--repeats 5] [--lean]
    python benchmarks/bench_nodes.py --nodes 1024 --ranks 8 --repeats 3 --lean
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import compiletrace

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "tests" / "inputs" / "nodes" / "node_cache_miss"


def _node_file(template: dict[str, Any], node: int, ranks: int, lean: bool = False) -> dict[str, Any]:
    """``template`` (a real node's job) as node ``node`` of ``ranks`` ranks (``lean``: without
    their cache keys)."""
    data = copy.deepcopy(template)
    real = data["processes"]
    processes = []
    for i in range(ranks):
        process = copy.deepcopy(real[i % len(real)])
        if lean:
            del process["run"]["meta"]["cache_keys"]
        rank, pid = node * ranks + i, 100_000 + node * ranks + i
        process["process"].update(role=f"rank {rank}", pid=pid, node=str(node))
        process["run"]["meta"].update(role=f"rank {rank}", pid=pid, node=str(node))
        processes.append(process)
    data["processes"] = processes
    return data


def build(directory: Path, nodes: int, ranks: int, lean: bool = False) -> int:
    """Write the nodes' job files; their size in bytes."""
    cold, warm = (json.loads((TEMPLATES / f"node{n}.json").read_text()) for n in (0, 1))
    size = 0
    for node in range(nodes):
        path = directory / f"node{node:04d}.json"
        path.write_text(json.dumps(_node_file(cold if node % 8 == 0 else warm, node, ranks, lean)))
        size += path.stat().st_size
    return size


def _read(directory: Path) -> tuple[float, float, str]:
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    job = compiletrace.load(directory)
    assert isinstance(job, compiletrace.ProfileJob)
    text = job.summary()
    return time.process_time() - cpu, time.perf_counter() - wall, text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lean", action="store_true", help="ranks without their cache keys")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        size = build(directory, args.nodes, args.ranks, args.lean)
        lean = " (lean: no cache keys)" if args.lean else ""
        print(f"{args.nodes} nodes x {args.ranks} ranks: {size / 2**20:.1f} MiB of job files{lean}")
        cpu, wall = [], []
        for _ in range(args.repeats):
            c, w, _ = _read(directory)
            cpu.append(c)
            wall.append(w)
        tracemalloc.start()
        _read(directory)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        job = compiletrace.load(directory)
        assert isinstance(job, compiletrace.ProfileJob)
        start = time.process_time()
        job.summary()
        report_cpu = time.process_time() - start
        start = time.process_time()
        findings = job.diagnose()
        doctor_cpu = time.process_time() - start
    os.environ["COLUMNS"] = "80"  # what the text views wrap to on an 80-column terminal
    text = job.summary()
    summary = text.split("\n\n== ")[0].splitlines()
    widest = max(map(len, text.splitlines()))
    print(
        f"load + report: CPU {statistics.median(cpu):.2f} s (min {min(cpu):.2f}, max {max(cpu):.2f}), wall "
        f"{statistics.median(wall):.2f} s (min {min(wall):.2f}, max {max(wall):.2f}), {args.repeats} rounds"
    )
    print(
        f"peak of Python's allocations while reading: {peak / 2**20:.0f} MiB "
        f"({size / 2**20:.1f} MiB of files)"
    )
    print(f"the report alone, of the job read: CPU {report_cpu:.2f} s")
    print(f"doctor over the whole job: CPU {doctor_cpu:.2f} s, {len(findings)} findings")
    print(
        f"the report at COLUMNS=80: {len(summary)} summary lines, the widest {max(map(len, summary))} "
        f"columns; with the slowest rank's tables, the widest {widest}"
    )
    print("\n".join(summary))


if __name__ == "__main__":
    main()
