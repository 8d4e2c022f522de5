"""Make the committed TORCH_TRACE logs of the cache cases ``compiletrace why`` is tested on
without compiling (tests/apps/test_why_traces.py): BASE fills a private cache, then each
case of ``tests/cache_cases.py`` runs tests/programs/cache_case.py on a copy of it, as the
real-compile tests do, under ``compiletrace run`` with TORCH_TRACE on.

Each log keeps the entries the trace reader reads (the metrics rows, the timed regions,
the cache-lookup and torch_version artifacts, the generated code's file name); the rest
(graph dumps, tensor descriptions, the generated code itself, the copies of each key's
parts in torch's chromium events) is left out, whole entries at a time, to keep the files
small. BASE's job, as compiletrace recorded it live, is kept too (``base.job.json``): the
test of another torch release compares a run of that release with it.

With ``graphs``, only the pair of tests/programs/cache_graphs.py instead (three graphs at
batch 2, then 3: each graph's inputs changed its own way), as ``graphs_base.log.gz`` and
``graphs_batch3.log.gz``.

    python tests/inputs/traces/make_cache_traces.py [graphs]
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
OUT = HERE / "cache"
# The cases committed: one of each kind of reason 'why' gives.
COMMITTED = ("rerun", "a_config", "b_user", "c_dynamic", "f_ci", "h_evicted")
_READ_ARTIFACTS = ("fx_graph_cache_", "aotautograd_cache_", "torch_version", "dynamo_graph_break_reason")


def _kept(entry: str) -> bool:
    """Whether the trace reader reads this entry (its first line)."""
    meta = json.loads(entry[entry.index("{") :])
    kind = next(iter(meta))
    if kind in ("compilation_metrics", "bwd_compilation_metrics", "inductor_output_code"):
        return True
    if kind == "artifact":
        return str(meta[kind].get("name", "")).startswith(_READ_ARTIFACTS)
    return kind == "chromium_event"


def trim(log: Path, out: Path) -> None:
    """The entries of ``log`` the reader reads, gzipped to ``out``; an instant event of a
    cache lookup (the key's parts again) and inductor_output_code's code are left out."""
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    kept: list[str] = []
    i = 0
    while i < len(lines):
        j = i + 1
        while j < len(lines) and lines[j].startswith("\t"):
            j += 1
        entry, payload = lines[i], lines[i + 1 : j]
        if _kept(entry):
            if '{"inductor_output_code": ' in entry:
                payload = []  # the reader takes the file's name, not the code
            elif '"chromium_event"' in entry and any('"components"' in p for p in payload):
                payload, entry = [], ""  # an event carrying the key's parts again: the artifact has them
            kept += [entry, *payload]
        i = j
    with gzip.open(out, "wt", encoding="utf-8") as f:
        f.writelines(kept)


def graphs() -> None:
    """The pair of tests/programs/cache_graphs.py: BASE at batch 2 fills a cache, CURRENT at
    batch 3 misses it on each graph, each with its own inputs."""
    sys.path.insert(0, str(ROOT))
    from tests.cache_cases import record

    program = ROOT / "tests" / "programs" / "cache_graphs.py"
    with tempfile.TemporaryDirectory(prefix="ct-cache-traces-") as scratch:
        where = Path(scratch)
        base = record(where, "graphs_base", where / "graphs.cache", program=program)
        current = record(where, "graphs_batch3", base.cache, {"CASE_BATCH": "3"}, program=program)
        for name, run in (("graphs_base", base), ("graphs_batch3", current)):
            (log,) = run.trace.glob("*.log")
            trim(log, OUT / f"{name}.log.gz")
            print(f"wrote {(OUT / f'{name}.log.gz').relative_to(ROOT)}")


def main() -> None:
    if sys.argv[1:] == ["graphs"]:
        graphs()
        return
    sys.path.insert(0, str(ROOT))
    from tests.cache_cases import CASES, record, record_case

    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ct-cache-traces-") as scratch:
        where = Path(scratch)
        base = record(where, "base", where / "base.cache")
        runs = {"base": base, **{name: record_case(where, base, name, CASES[name]) for name in COMMITTED}}
        for name, run in runs.items():
            (log,) = run.trace.glob("*.log")
            trim(log, OUT / f"{name}.log.gz")
            written = OUT / f"{name}.log.gz"
            print(f"wrote {written.relative_to(ROOT)} ({written.stat().st_size // 1024} KB)")
        job = json.loads(base.job.read_text(encoding="utf-8"))
        (OUT / "base.job.json").write_text(json.dumps(job, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {(OUT / 'base.job.json').relative_to(ROOT)}")


if __name__ == "__main__":
    main()
