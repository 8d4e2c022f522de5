"""What the bounded reading of a cache entry costs: the budgeted unpickler (Python's own,
each opcode counted, so it can stop part-way) against the C unpickler it replaced, with the
same inert stand-ins, on real entries of a compile cache and on a crafted one.

Both read each entry in turn, interleaved, ``--repeats`` times; the figures are each one's
median CPU time per entry and the ratio of the medians. The crafted entry (4 MiB of one
one-byte opcode, a new empty set each) is read once by each, in a fresh process, for its
CPU time and peak memory: the C unpickler builds all of it.

    python benchmarks/bench_unpickle.py --cache-dir DIR   # an inductor cache directory
    python benchmarks/bench_unpickle.py                    # fills one first: the built-in model, inductor
"""

from __future__ import annotations

import argparse
import io
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from compiletrace._io.artifacts import ANY_GLOBAL, PickleBudget, RestrictedUnpickler


class _Unbounded(pickle.Unpickler):
    """The C unpickler, every global an inert stand-in: how entries were read before."""

    def find_class(self, module: str, name: str) -> Any:
        return RestrictedUnpickler(b"", ANY_GLOBAL, "").find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("persistent id")


def _bounded(data: bytes) -> int:
    budget = PickleBudget()
    RestrictedUnpickler(data, ANY_GLOBAL, "entry", budget=budget).load()
    return budget.limit - budget.left


def _unbounded(data: bytes) -> None:
    _Unbounded(io.BytesIO(data)).load()


def _entries(cache_dir: str) -> list[bytes]:
    found = []
    for sub in ("fxgraph", "aotautograd"):
        for root, _, names in os.walk(os.path.join(cache_dir, sub)):
            for name in names:
                with open(os.path.join(root, name), "rb") as f:
                    found.append(f.read())
    return found


def _fill(cache_dir: str) -> None:
    code = (
        "import torch; from compiletrace.models import build_demo; d = build_demo(); "
        "d.model = torch.compile(d.model); d.run()"
    )
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def _crafted(which: str) -> None:
    data = b"\x80\x04" + b"\x8f" * (4 << 20)
    start = time.process_time()
    try:
        _bounded(data) if which == "bounded" else _unbounded(data)
        outcome = "read whole"
    except Exception as exc:
        outcome = type(exc).__name__
    cpu = time.process_time() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"crafted entry, {which:>9}: {cpu:5.2f} CPU s, peak {peak:5.0f} MiB ({outcome})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", help="an inductor cache directory (default: fill one)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--crafted", choices=("bounded", "unbounded"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.crafted:
        _crafted(args.crafted)
        return
    with tempfile.TemporaryDirectory() as scratch:
        cache_dir = args.cache_dir or scratch
        if not args.cache_dir:
            _fill(cache_dir)
        entries = _entries(cache_dir)
        ops = [_bounded(e) for e in entries]
        times: dict[str, list[float]] = {"bounded": [], "unbounded": []}
        for i in range(args.repeats):
            order = ("bounded", "unbounded") if i % 2 == 0 else ("unbounded", "bounded")
            for which in order:
                read = _bounded if which == "bounded" else _unbounded
                for data in entries:
                    start = time.process_time()
                    read(data)
                    times[which].append(time.process_time() - start)
    print(
        f"{len(entries)} entries, {min(ops):,} to {max(ops):,} opcodes, "
        f"{min(map(len, entries)):,} to {max(map(len, entries)):,} bytes; {args.repeats} rounds, interleaved"
    )
    b, u = statistics.median(times["bounded"]), statistics.median(times["unbounded"])
    print(
        f"median CPU per entry: bounded {b * 1e3:.2f} ms, unbounded (C) {u * 1e3:.2f} ms, ratio {b / u:.1f}x"
    )
    for which in ("bounded", "unbounded"):
        subprocess.run([sys.executable, __file__, "--crafted", which], check=True)


if __name__ == "__main__":
    main()
