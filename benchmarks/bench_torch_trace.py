"""What reading torch's trace (``TORCH_TRACE``) costs: seconds and peak memory per 100 MB
of log, at two sizes, so that memory bounded by the entry (not the file) shows as a flat
peak; beside torch's own trace parser (``tlparse``) on the same logs, where it is installed.

1. A real log: ``tests/programs/fixable.py`` (a graph break, recompiles) run with
   ``TORCH_TRACE`` set.
2. Logs of ``--sizes`` MB built from it: its entries repeated, each copy's frame ids moved
   on, so every compile id is a new one (the reader keeps per-compile state; a repeated id
   would not grow it).
3. Each reader in a fresh process, ``--repeats`` times, the readers interleaved: wall
   seconds and the process's peak resident memory (``ru_maxrss``), less the seconds and the
   peak of the same process that reads nothing (the interpreter and compiletrace's imports,
   torch's among them). Medians. This process never holds a log: Linux counts a forked
   child's peak from its parent's memory.
4. ``--logs N`` small logs (the real log's first compile, each its own rank) read as a
   directory and as a ``.zip`` of the same files: an archive must read as fast as the
   directory (opened once, not once per member).
5. ``--bomb-mb M``: a ``.gz`` of one compile's graph breaks, each a 1 MB reason, M MB of
   text in all: the file's size, the reader's seconds and peak, and the characters of
   reasons it keeps (bounded by the compile, not by the log).

    python benchmarks/bench_torch_trace.py [--sizes 100,400] [--repeats 3] [--tlparse PATH]
        [--logs 3000] [--bomb-mb 1000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "programs" / "fixable.py"
MB = 1024 * 1024

READ = "import compiletrace, sys; run = compiletrace.load(sys.argv[1]); print(len(run.graph_records))"
READ_JOB = "import compiletrace, sys; job = compiletrace.load(sys.argv[1]); print(len(job.processes))"
READ_KEPT = (
    "import compiletrace, sys; run = compiletrace.load(sys.argv[1]); "
    "print(sum(len(b.reason) for r in run.graph_records for b in r.graph_breaks))"
)
IMPORT_ONLY = "import compiletrace, sys; print(0)"


def source_log(where: Path) -> str:
    trace = where / "trace"
    env = {**os.environ, "TORCH_TRACE": str(trace)}
    subprocess.run([sys.executable, str(PROGRAM)], env=env, check=True, capture_output=True, timeout=600)
    (log,) = trace.glob("*.log")
    return log.read_text()


def write_grown(text: str, size_mb: int, path: Path) -> int:
    """``text`` repeated into ``path`` to ``size_mb`` MB, each copy's frame ids moved on;
    returns the copies. Written copy by copy: this process never holds the log, so the
    readers it starts (forked from it) do not inherit its memory in their peak."""
    frames = [int(n) for n in re.findall(r'"frame_id": (\d+)', text)] or [0]
    step = max(frames) + 1
    copies = max(1, size_mb * MB // len(text.encode()))
    with open(path, "w") as out:
        for k in range(copies):
            shift = k * step

            def frame(match: re.Match[str], shift: int = shift) -> str:
                return f'"frame_id": {int(match[1]) + shift}'

            def compile_id(match: re.Match[str], shift: int = shift) -> str:
                return f'"compile_id": "{int(match[1]) + shift}/{match[2]}"'

            part = re.sub(r'"frame_id": (\d+)', frame, text)
            out.write(re.sub(r'"compile_id": "(\d+)/(\d+)"', compile_id, part))
    return copies


def measure(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident MB of one fresh process running ``argv``."""
    seconds, peak, _ = measure_output(argv)
    return seconds, peak


def measure_output(argv: list[str]) -> tuple[float, float, str]:
    """:func:`measure`, and what the process printed."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            why = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
            raise SystemExit(f"{argv[0]} failed: {why}")
        out.seek(0)
        return seconds, usage.ru_maxrss / 1024, out.read().decode().strip()  # kB on Linux


def first_compile(text: str) -> str:
    """The log up to the end of its first compile's metrics row: a small log of one compile."""
    row = text.index('{"compilation_metrics"')
    return text[: text.index("\n", row) + 1]


def write_many(text: str, logs: int, where: Path) -> tuple[Path, Path]:
    """``logs`` copies of ``text`` as a TORCH_TRACE directory (a rank each) and a .zip of it."""
    directory = where / "many"
    directory.mkdir()
    zipped = where / "many.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as archive:
        for rank in range(logs):
            name = f"dedicated_log_torch_trace_rank_{rank}_x.log"
            (directory / name).write_text(text)
            archive.write(directory / name, f"trace/{name}")
    return directory, zipped


def write_bomb(path: Path, megabytes: int) -> None:
    """A .gz of one compile: ``megabytes`` graph breaks of a 1 MB reason each, then its row."""
    head = "V1202 10:19:06.755000 4242 torch/_dynamo/symbolic_convert.py:5098] "
    artifact = {"name": "dynamo_graph_break_reason", "encoding": "string"}
    meta = {"artifact": artifact, "frame_id": 0, "frame_compile_id": 0, "attempt": 0, "has_payload": "0" * 32}
    reason = "x" * MB
    row: dict[str, object] = {"compile_id": "0/0", "co_name": "forward", "co_filename": "/src/model.py"}
    row |= {"start_time_us": 1_796_000_000_000_000, "duration_us": 5_000}
    with gzip.open(path, "wt", compresslevel=9) as out:
        for i in range(megabytes):
            out.write(f"{head}{json.dumps(meta)}\n\tGraph break in user code at /src/model.py:9\n")
            out.write(f"\tGraph Break Reason: Unsupported call {i} {reason}\n\tUser code traceback:\n")
        out.write(f"{head}{json.dumps({'compilation_metrics': row})}\n")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100,400", help="log sizes in MB (default: 100,400)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--tlparse", default=shutil.which("tlparse"), help="torch's trace parser, if installed"
    )
    parser.add_argument("--logs", type=int, default=3000, help="small logs: a directory and a .zip (0: none)")
    parser.add_argument("--bomb-mb", type=int, default=1000, help="MB of graph-break text in a .gz (0: none)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        text = source_log(where)
        per_copy = len(set(re.findall(r'\{"compilation_metrics": \{"compile_id": "([^"]+)"', text)))
        print(f"source log: {len(text.encode()) / MB:.2f} MB, {per_copy} compiles ({PROGRAM.name})")
        empty = [measure([sys.executable, "-c", IMPORT_ONLY]) for _ in range(args.repeats)]
        base_s, base = statistics.median(s for s, _ in empty), statistics.median(m for _, m in empty)
        print(
            f"a process that imports compiletrace and reads nothing: {base_s:.2f} s, peak {base:.0f} MB "
            "(both subtracted)"
        )
        rows = []
        for size in sizes:
            log = where / f"dedicated_log_torch_trace_{size}mb.log"
            copies = write_grown(text, size, log)
            actual = log.stat().st_size / MB
            ours: list[tuple[float, float]] = []
            theirs: list[tuple[float, float]] = []
            for i in range(args.repeats):
                order = [0, 1] if i % 2 == 0 else [1, 0]  # neither reader always first
                for which in order:
                    if which == 0:
                        ours.append(measure([sys.executable, "-c", READ, str(log)]))
                    elif args.tlparse:
                        out = where / "tl_out"
                        theirs.append(
                            measure([args.tlparse, str(log), "-o", str(out), "--overwrite", "--no-browser"])
                        )
            per100 = 100 / actual
            row = {
                "size": actual,
                "copies": copies,
                "ours_s": (statistics.median(s for s, _ in ours) - base_s) * per100,
                "ours_mb": statistics.median(m for _, m in ours) - base,
            }
            if theirs:
                row["theirs_s"] = statistics.median(s for s, _ in theirs) * per100
                row["theirs_mb"] = statistics.median(m for _, m in theirs)
            rows.append(row)
            log.unlink()
        print()
        head = f"{'log MB':>8}  {'compiles':>8}  {'compiletrace s/100MB':>20}  {'peak MB':>8}"
        if args.tlparse:
            head += f"  {'tlparse s/100MB':>15}  {'peak MB':>8}  {'ratio s':>7}"
        print(head)
        for row in rows:
            compiles = row["copies"] * per_copy
            line = f"{row['size']:>8.0f}  {compiles:>8}  {row['ours_s']:>20.2f}  {row['ours_mb']:>8.0f}"
            if "theirs_s" in row:
                ratio = row["ours_s"] / row["theirs_s"]
                line += f"  {row['theirs_s']:>15.2f}  {row['theirs_mb']:>8.0f}  {ratio:>7.1f}"
            print(line)
        print(f"\nmedians of {args.repeats} runs each; seconds scaled to 100 MB of log")
        if args.logs:
            many(first_compile(text), args.logs, where, args.repeats)
        if args.bomb_mb:
            bomb(args.bomb_mb, where, base)


def many(text: str, logs: int, where: Path, repeats: int) -> None:
    directory, zipped = write_many(text, logs, where)
    seconds: dict[Path, list[float]] = {directory: [], zipped: []}
    for _ in range(repeats):
        for path in seconds:
            seconds[path].append(measure([sys.executable, "-c", READ_JOB, str(path)])[0])
    dir_s, zip_s = (statistics.median(seconds[path]) for path in (directory, zipped))
    print(
        f"\n{logs} logs of one compile ({len(text.encode()) / 1024:.0f} kB each): "
        f"as a directory {dir_s:.1f} s, as a .zip ({zipped.stat().st_size / MB:.1f} MB) {zip_s:.1f} s "
        f"(medians of {repeats}; the interpreter's start and imports included)"
    )


def bomb(megabytes: int, where: Path, base_mb: float) -> None:
    path = where / "bomb.log.gz"
    write_bomb(path, megabytes)
    seconds, peak, kept = measure_output([sys.executable, "-c", READ_KEPT, str(path)])
    print(
        f"\na .gz of {path.stat().st_size / MB:.2f} MB ({megabytes} MB of graph-break text, one compile): "
        f"read in {seconds:.1f} s, peak {peak - base_mb:.0f} MB above the empty process, "
        f"{int(kept):,} characters of reasons kept"
    )


if __name__ == "__main__":
    main()
