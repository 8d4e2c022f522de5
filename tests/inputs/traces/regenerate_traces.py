"""Makes the TORCH_TRACE logs in this directory: the repository's own test programs
(``tests/programs/``) run with ``TORCH_TRACE`` set, each log trimmed, then two archives.

    .venv/bin/python tests/inputs/traces/regenerate_traces.py

The committed logs were made by torch 2.13.0+cpu on Python 3.11 (each log's
``torch_version`` artifact says which): run this with the project venv after a torch
upgrade, and review the diff. ``tests/data/test_torch_trace_inputs.py`` reads them. One
directory per case, as torch writes one:

- ``breaks_and_recompiles/``: ``fixable.py`` (eager): frame compiles and their metrics rows,
  a graph break and the restart it costs, recompiles with their reasons;
- ``inductor_cold/``, ``inductor_warm/``: ``inductor_backward.py`` twice on one private
  inductor cache: a lazy backward, torch's timed regions (backend phases, kernel compile),
  the FX-graph and AOTAutograd caches missed, then hit;
- ``cache_bypass/``: ``frozen_inference.py``: both cache tiers bypassed, with their reasons;
- ``failed_compile/``: ``failing_backend.py``: a compile that failed, and a record kind no
  torch writes today;
- ``ranks/``: ``ranks.py`` under ``torchrun --nproc-per-node 2`` on gloo: a log per rank;
- ``archives/``: ``failed_compile``'s log gzipped, and ``ranks/`` zipped (rank 1's log
  gzipped inside the zip).

Trimmed so that the committed bytes stay small, removing only what the reader
(``compiletrace/_data/torch_trace.py``) never reads: wherever they appear, the values of
``inductor_config``, ``dynamo_config`` and ``functorch_config`` (torch's settings, some
35 kB in each metrics row and 5 kB in a timed region's arguments), ``components`` (the
inductor cache key's parts, some 70 kB in each cache artifact and region) and ``stack``
(torch's own call stack where a symbol was made); and the payload of a record the reader
skips when it is over 1 kB (its header line stays). A changed payload's ``has_payload``
digest is recomputed as torch computes it; an entry left whole is torch's text, byte for
byte. Paths under this checkout read ``/repo/...`` and those in the programs' temporary
directory ``/tmp/work/...``, so no machine's own path is committed.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PROGRAMS = ROOT / "tests" / "programs"
TIMEOUT_S = 600

# Record kinds whose payload the reader reads, and the artifacts among them.
READ_PAYLOADS = {"chromium_event", "artifact"}
READ_ARTIFACTS = re.compile(
    r"^(?:(?:fx_graph|aotautograd|autograd)_cache_(?:hit|miss|bypass)|dynamo_graph_break_reason|torch_version)$"
)
# Keys dropped wherever they appear (none is read): torch's settings snapshots, the inductor
# cache key's parts, torch's own call stack where a symbol was made.
DROPPED = frozenset({"inductor_config", "dynamo_config", "functorch_config", "components", "stack"})
SKIPPED_PAYLOAD_LIMIT = 1024
GLOG = re.compile(r"^((?:\[rank\d+\]:)?[VIWEC]\d{4} [\d:.]+ +\d+ [^\]]*\] )(\{.*)$")


def run(where: Path, command: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(
        command, cwd=where, env={**os.environ, **env}, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    if proc.returncode != 0:
        sys.exit(f"{' '.join(command)} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def _dropped(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _dropped(v) for k, v in value.items() if k not in DROPPED}
    if isinstance(value, list):
        return [_dropped(v) for v in value]
    return value


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _reads_payload(meta: dict[str, Any]) -> bool:
    kind = next(iter(meta))
    if kind not in READ_PAYLOADS:
        return False
    return kind != "artifact" or READ_ARTIFACTS.match(str(meta[kind].get("name"))) is not None


def _neutral(text: str, paths: dict[str, str]) -> str:
    for path, neutral in paths.items():
        text = text.replace(path, neutral)
    return text


def trim_entry(head: str, meta: dict[str, Any], payload: str | None, paths: dict[str, str]) -> str:
    """One entry as log text, trimmed as the module docstring says, each path in ``paths``
    replaced by its neutral name. An entry left whole is torch's text, byte for byte."""
    meta = _dropped(meta)
    if payload is not None:
        if _reads_payload(meta):
            data = _json_or_none(payload)  # a graph break's reason is text
            if data is not None and _dropped(data) != data:
                payload = json.dumps(_dropped(data), indent=0)
        elif len(payload) > SKIPPED_PAYLOAD_LIMIT:
            payload = None
    if payload is not None:
        payload = _neutral(payload, paths)
        digest = hashlib.md5(payload.encode("utf-8"), usedforsecurity=False)
        meta = {**meta, "has_payload": digest.hexdigest()}
    text = head + _neutral(json.dumps(meta), paths)
    if payload is not None:
        text += "".join(f"\n\t{line}" for line in payload.split("\n"))
    return text + "\n"


def trim_log(source: Path, target: Path, paths: dict[str, str]) -> None:
    out: list[str] = []
    entries: list[tuple[str, dict[str, Any], list[str]]] = []
    for line in source.read_text(encoding="utf-8").splitlines():
        if line.startswith("\t"):
            entries[-1][2].append(line[1:])
            continue
        found = GLOG.match(line)
        if found is None:
            sys.exit(f"{source}: not a trace entry: {line[:200]!r}")
        entries.append((found[1], json.loads(found[2]), []))
    for head, meta, lines in entries:
        payload = "\n".join(lines) if "has_payload" in meta else None
        out.append(trim_entry(head, meta, payload, paths))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(out), encoding="utf-8")


def collect(trace: Path, case: str, paths: dict[str, str]) -> list[Path]:
    """The logs torch wrote into ``trace``, trimmed into ``HERE/case`` (emptied first)."""
    logs = sorted(trace.glob("*.log"))
    if not logs:
        sys.exit(f"{case}: torch wrote no log into {trace}")
    shutil.rmtree(HERE / case, ignore_errors=True)
    for log in logs:
        trim_log(log, HERE / case / log.name, paths)
    return sorted((HERE / case).glob("*.log"))


def main() -> None:
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="compiletrace-traces-") as tmp:
        work = Path(tmp)
        cache = {"TORCHINDUCTOR_CACHE_DIR": str(work / "inductor-cache")}
        paths = {str(ROOT): "/repo", str(work): "/tmp/work"}

        def traced(case: str, program: str, *args: str, launcher: tuple[str, ...] = (python,)) -> list[Path]:
            command = [*launcher, str(PROGRAMS / program), *args]
            run(work, command, {"TORCH_TRACE": str(work / case), **cache})
            return collect(work / case, case, paths)

        traced("breaks_and_recompiles", "fixable.py")
        traced("inductor_cold", "inductor_backward.py")
        traced("inductor_warm", "inductor_backward.py")  # the same program, on the cache it filled
        traced("cache_bypass", "frozen_inference.py")
        (failed,) = traced("failed_compile", "failing_backend.py")
        torchrun = (str(Path(python).with_name("torchrun")), "--standalone", "--nproc-per-node", "2")
        rank_logs = traced("ranks", "ranks.py", str(work / "oracle"), launcher=torchrun)

    archives = HERE / "archives"
    shutil.rmtree(archives, ignore_errors=True)
    archives.mkdir()
    # mtime 0 and a fixed date: the same logs give the same archive bytes.
    with (
        open(archives / f"{failed.name}.gz", "wb") as out,
        gzip.GzipFile(filename=failed.name, fileobj=out, mode="wb", mtime=0) as gz,
    ):
        gz.write(failed.read_bytes())
    with zipfile.ZipFile(archives / "ranks.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        for i, log in enumerate(rank_logs):
            data, name = log.read_bytes(), f"ranks/{log.name}"
            if i:  # rank 1's gzipped inside the zip
                data, name = gzip.compress(data, mtime=0), name + ".gz"
            member = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            member.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(member, data)

    total = 0
    for path in sorted(HERE.rglob("*")):
        if path.is_file() and path.suffix != ".py":
            total += path.stat().st_size
            print(f"{path.stat().st_size:>8}  {path.relative_to(HERE)}")
    print(f"{total:>8}  in all")


if __name__ == "__main__":
    main()
