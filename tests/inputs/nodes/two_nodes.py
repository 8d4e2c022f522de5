"""A job of two "nodes" of two ranks each, on this machine: two ``compiletrace run --
torchrun --nnodes 2 --nproc-per-node 2 --node-rank N ...`` started side by side (static
rendezvous on loopback), sharing one inductor cache that an earlier run of the same program
filled with ``OMP_NUM_THREADS=2``; node 0 runs with ``OMP_NUM_THREADS=1``, so its FX graph
keys differ (``cpp_runtime_thread_count``) and it misses what node 1 hits.

Used by ``tests/apps/test_nodes.py``; run as a program it writes the doctor's saved job
``node_cache_miss/node0.json`` and ``node1.json`` beside it, each node's job file as its
``compiletrace run`` wrote it (paths under the repository made relative)::

    python tests/inputs/nodes/two_nodes.py
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
PROGRAM = ROOT / "tests" / "programs" / "node_linear.py"
TIMEOUT_S = 400
RUN_ID = "two-nodes"
SAVED = HERE / "node_cache_miss"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(cache: Path, threads: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "COMPILETRACE_"))}
    env.update(TORCHINDUCTOR_CACHE_DIR=str(cache), OMP_NUM_THREADS=str(threads), PYTHONPATH=str(ROOT))
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "compiletrace", "run", *args],
        env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[str], what: str) -> str:
    out, err = proc.communicate(timeout=TIMEOUT_S)
    if proc.returncode != 0:
        raise AssertionError(f"{what} failed with exit status {proc.returncode}:\n{out}\n{err}")
    return err


def run_two_nodes(where: Path, otlp_endpoint: str | None = None) -> tuple[Path, Path]:
    """Fill the cache, then run both nodes side by side; their job files (node0.json,
    node1.json). Each node's ``compiletrace run`` sends its spans to ``otlp_endpoint``."""
    cache = where / "inductor-cache"
    _finish(
        _run(["--json", str(where / "fill.json"), "--", sys.executable, str(PROGRAM)], _env(cache, 2), where),
        "fill",
    )
    port = _free_port()
    procs = []
    for node, threads in ((0, 1), (1, 2)):
        otlp = ["--otlp-endpoint", otlp_endpoint] if otlp_endpoint else []
        torchrun = [
            sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2",
            "--node-rank", str(node), "--master-addr", "127.0.0.1", "--master-port", str(port),
            "--rdzv-id", RUN_ID, str(PROGRAM),
        ]  # fmt: skip
        args = [*otlp, "--json", str(where / f"node{node}.json"), "--", *torchrun]
        procs.append(_run(args, _env(cache, threads), where))
    for node, proc in enumerate(procs):
        _finish(proc, f"node {node}")
    return where / "node0.json", where / "node1.json"


def _relative(data: Any) -> Any:
    prefix = f"{ROOT}{os.sep}"
    if isinstance(data, str):
        return data.replace(prefix, "")
    if isinstance(data, list):
        return [_relative(item) for item in data]
    if isinstance(data, dict):
        return {key: _relative(value) for key, value in data.items()}
    return data


def main() -> None:
    import compiletrace

    with tempfile.TemporaryDirectory() as tmp:
        nodes = run_two_nodes(Path(tmp))
        job = compiletrace.load(list(nodes))
        kinds = {f.kind.value for f in job.diagnose()}  # type: ignore[union-attr]
        if "node_cache_miss" not in kinds:
            raise SystemExit(f"the job holds no node_cache_miss finding (found: {sorted(kinds)}); not saved")
        SAVED.mkdir(exist_ok=True)
        for node in nodes:
            path = SAVED / node.name
            data = _relative(json.loads(node.read_text(encoding="utf-8")))
            # Compact: most of each file is its processes' cache keys.
            path.write_text(json.dumps(data, separators=(",", ":")) + "\n", encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
