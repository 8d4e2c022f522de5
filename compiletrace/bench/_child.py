"""One start-up benchmark iteration, run in a fresh Python process by ``bench startup``.

Usage: ``python -m compiletrace.bench._child OPTIONS_JSON RESULT_PATH``. Writes its figures
to RESULT_PATH as JSON; any failure exits non-zero with the traceback on stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from compiletrace._app.profile import profile
from compiletrace._data.records import ENCODER, CacheOutcome
from compiletrace._io.files import write_json

# Running as ``-m compiletrace.bench._child`` imports the package (and torch) before this
# line; the parent's spawn time (wall clock) gives interpreter start + imports.
_READY_UNIX_S = time.time()


def run(options: dict[str, Any]) -> dict[str, Any]:
    start = time.perf_counter()
    result = profile(
        options.get("model"),
        backend=options.get("backend", "inductor"),
        mode=options.get("mode"),
        compilation_mode=options.get("compilation_mode", "stock"),
        device=options.get("device", "cpu"),
        components=[tuple(c) for c in options.get("components") or []] or None,
        cache_artifacts=options.get("cache_artifacts"),
        trust=bool(options.get("trust", False)),
    )
    startup = time.perf_counter() - start
    records = result.records()
    by_component = result.by_component()
    encoder = by_component.get(ENCODER, 0.0)
    return {
        "startup_time": startup,
        "compilation_time": sum(v for k, v in by_component.items() if k != ENCODER),
        "encoder_compilation_time": encoder,
        "encoder_compiled": any(r.component == ENCODER for r in records),
        "import_time": _READY_UNIX_S - float(options.get("spawn_unix_s", _READY_UNIX_S)),
        "cache_hits": sum(r.cache_outcome is CacheOutcome.HIT for r in records),
        "cache_misses": sum(r.cache_outcome is CacheOutcome.MISS for r in records),
        "graphs": len(records),
        "by_component": by_component,
        "artifact_load_time": loaded.seconds if (loaded := result.meta.cache_artifacts) is not None else 0.0,
        # Seconds per phase of this process's start-up, from its own start to the end of the
        # run: interpreter start, imports, the phases profile() and the model mark, unattributed.
        "phase_times": result.timeline.seconds_by_phase() if result.timeline is not None else {},
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m compiletrace.bench._child OPTIONS_JSON RESULT_PATH", file=sys.stderr)
        return 2
    figures = run(json.loads(argv[0]))
    figures["done_unix_s"] = time.time()
    write_json(argv[1], figures)
    return 0


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # The figures are written: skip the interpreter's teardown (torch's module destructors
    # take seconds), which is no part of start-up and would only slow the benchmark down.
    os._exit(status)
