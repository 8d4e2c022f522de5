"""The cache cases of ``compiletrace why``, shared by their tests (tests/apps/test_why_cases.py,
real compiles) and the script that makes the committed traces of the same cases
(tests/inputs/traces/make_cache_traces.py).

Each case is one run of tests/programs/cache_case.py (a user's program: torch.compile of
one Linear layer) recorded by ``compiletrace run --json`` with TORCH_TRACE on, with one
change from BASE, the run that filled the cache, as it would differ between two machines.
Each CURRENT runs on a copy of BASE's cache (or where the case says).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROGRAM = Path(__file__).resolve().parent / "programs" / "cache_case.py"
TIMEOUT_S = 600  # generous: the suite must pass beside four CPU-bound processes
# What a case's environment replaces: the cache's place and the case's own knobs.
_OWN = ("CASE_", "TORCHINDUCTOR_", "TORCH_TRACE", "TORCH_LOGS", "OMP_NUM_THREADS", "CI")


@dataclass(frozen=True)
class Recorded:
    """One recorded run: its job file, its trace directory, the cache it used."""

    job: Path
    trace: Path
    cache: Path


@dataclass(frozen=True)
class Case:
    """A CURRENT run: its environment, and how its cache is prepared from BASE's."""

    env: Mapping[str, str] = field(default_factory=dict)
    default_dir: bool = False  # no TORCHINDUCTOR_CACHE_DIR: torch's default (TMPDIR + user)
    spoil: Callable[[Path], None] | None = None  # done to the copy of BASE's cache first


def _evict_fx_entries(cache: Path) -> None:
    shutil.rmtree(cache / "fxgraph")


def _damage_aot_entries(cache: Path) -> None:
    for entry in (cache / "aotautograd").glob("*/*"):
        entry.write_bytes(entry.read_bytes()[:100])


# Every case, by name. BASE's thread count is torch's default, the machine's cores; torch
# caps the count there, so f_threads asks for one (a machine of one core has no other).
CASES: dict[str, Case] = {
    "rerun": Case(),
    "a_config": Case({"CASE_FLIP": "fallback_random=true"}),
    "b_user": Case({"USER": "ctbob", "LOGNAME": "ctbob"}, default_dir=True),
    "b_home": Case({"HOME": "/nonexistent/ct-other-home"}),
    "c_dynamic": Case({"CASE_DYNAMIC": "1"}),
    "c_mode": Case({"CASE_MODE": "reduce-overhead"}),
    "e_dtype": Case({"CASE_DTYPE": "float64"}),
    "e_shape": Case({"CASE_BATCH": "8"}),
    "f_env": Case({"TORCHINDUCTOR_SIZE_ASSERTS": "0"}),
    "f_threads": Case({"OMP_NUM_THREADS": "1"}),
    "f_ci": Case({"CI": "1"}),
    "g_copied": Case(),  # its copy of the cache lies elsewhere, like every case's
    "h_evicted": Case(spoil=_evict_fx_entries),
    "i_unreadable": Case(spoil=_damage_aot_entries),
}


def record(
    where: Path,
    name: str,
    cache: Path,
    env: Mapping[str, str] = {},
    *,
    default_dir: bool = False,
    ranks: int = 0,
    program: Path = PROGRAM,
) -> Recorded:
    """Run the program once as ``name`` under ``compiletrace run``, TORCH_TRACE on, with
        ``cache`` as TORCHINDUCTOR_CACHE_DIR (or, ``default_dir``, torch's default with TMPDIR
        at ``cache``'s parent); with ``ranks``, as that many ranks of a torchrun job; ``program``
    instead of the cases' own."""
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(_OWN)}
    run_env = {**base_env, **env, "TORCH_TRACE": str(where / f"{name}.trace")}
    if default_dir:
        run_env["TMPDIR"] = str(cache.parent)
    else:
        run_env["TORCHINDUCTOR_CACHE_DIR"] = str(cache)
    job = where / f"{name}.job.json"
    torchrun = Path(sys.executable).with_name("torchrun")
    launcher = [str(torchrun), "--standalone", "--nproc-per-node", str(ranks)] if ranks else [sys.executable]
    done = subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", "--json", str(job), "--", *launcher, str(program)],
        capture_output=True, text=True, timeout=TIMEOUT_S, cwd=where, env=run_env,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == "compiled\n" * max(ranks, 1), done.stderr[-3000:]
    return Recorded(job, where / f"{name}.trace", cache)


def record_case(where: Path, base: Recorded, name: str, case: Case) -> Recorded:
    """CURRENT of one case: BASE's cache copied (to where the case looks for it), spoiled
    as the case says, then the run."""
    if case.default_dir:
        # BASE's cache where another user's default is: this user's default is another place.
        scratch = where / f"{name}.tmp"
        shutil.copytree(base.cache, scratch / "torchinductor_ctalice")
        cache = scratch / f"torchinductor_{case.env['USER']}"
    else:
        cache = where / f"{name}.cache"
        shutil.copytree(base.cache, cache)
    if case.spoil is not None:
        case.spoil(cache)
    return record(where, name, cache, case.env, default_dir=case.default_dir)


def causes(report: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(part, BASE's value, CURRENT's value) of every cause a ``why --json`` report names."""
    return [
        (c["name"], c["base"], c["current"])
        for g in report["groups"]
        for c in g["reason"]["changes"]
        if not c["consequence"]
    ]
