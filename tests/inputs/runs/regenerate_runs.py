"""Make the saved runs the doctor's rules are tested on: one ``<rule>.run.json`` per rule
(``rank_divergence.gather.json`` for the rule that compares ranks), each written by
compiletrace from a tiny real compile of ``rule_programs.py``, in a process of its own.

Run it from anywhere when a rule needs other inputs, or to see what another torch records::

    python tests/inputs/runs/regenerate_runs.py            # every file
    python tests/inputs/runs/regenerate_runs.py recompiles # one

Paths under the repository are saved relative to it (``tests/inputs/runs/rule_programs.py``),
so a file is the same wherever it was made; each file's meta names the torch that made it.
Each maker checks that its run holds what its rule looks for, and fails loudly otherwise
(a cache rule's timing, say, on a machine much faster than the one that made these).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def _relative(data: Any) -> Any:
    """``data`` with every path under the repository made relative to it."""
    prefix = f"{ROOT}{os.sep}"
    if isinstance(data, str):
        return data.replace(prefix, "")
    if isinstance(data, list):
        return [_relative(item) for item in data]
    if isinstance(data, dict):
        return {key: _relative(value) for key, value in data.items()}
    return data


def _save(data: dict[str, Any], name: str) -> None:
    path = HERE / name
    path.write_text(json.dumps(_relative(data), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KB)")


# -- in the maker's own process --------------------------------------------------------------


def _meta(program: str, backend: str) -> Any:
    import torch

    from compiletrace._data.run_meta import RunMeta

    # What made it, in keys of the maker's own: every reader keeps them, and none reads them.
    made = {
        "program": f"tests/inputs/runs/rule_programs.py:{program}",
        "made_by": "tests/inputs/runs/regenerate_runs.py",
    }
    return RunMeta(backend=backend, device="cpu", torch_version=str(torch.__version__), extra=made)


def _save_run(rule: str, registry: Any, meta: Any, warmup: Any = None) -> None:
    from dataclasses import replace as with_fields

    from compiletrace._core.ready import current_mark

    meta = with_fields(meta, ready=current_mark())  # the maker's compiletrace.ready(), if it called it
    from compiletrace._app.profile import ProfileRun
    from compiletrace._app.timeline import startup_timeline
    from compiletrace._data.records import CompilationTimes
    from compiletrace._data.run import WarmupResult
    from compiletrace._doctor import diagnose_evidence, gather_evidence

    warmup = warmup if warmup is not None else WarmupResult(True, 0.0, CompilationTimes())
    run = ProfileRun(registry.records(), warmup, meta, startup_timeline(registry), registry.runtime_events())
    kinds = {f.kind.value for f in diagnose_evidence(gather_evidence(run))}
    if rule not in kinds:
        raise SystemExit(f"{rule}: the run holds no {rule} finding (found: {sorted(kinds)}); not saved")
    _save(run.to_dict(), f"{rule}.run.json")


def recompiles() -> None:
    import torch

    import compiletrace
    from tests.inputs.runs import rule_programs as p

    reg = compiletrace.Registry()
    f = compiletrace.compile(p.churn, backend="eager", dynamic=False, registry=reg)
    for n in range(2, 6):
        f(torch.ones(n))
    _save_run("recompiles", reg, _meta("churn", "eager"))


def recompile_limit() -> None:
    import torch

    import compiletrace
    from tests.inputs.runs import rule_programs as p

    reg = compiletrace.Registry()
    f = compiletrace.compile(p.limited, backend="eager", dynamic=False, registry=reg)
    with torch._dynamo.config.patch(recompile_limit=3):
        for n in range(2, 8):
            f(torch.ones(n))
    _save_run("recompile_limit", reg, _meta("limited", "eager"))


def graph_break() -> None:
    import torch

    import compiletrace
    from tests.inputs.runs import rule_programs as p

    reg = compiletrace.Registry()
    compiletrace.compile(p.printing, backend="eager", registry=reg)(torch.ones(2))
    _save_run("graph_break", reg, _meta("printing", "eager"))


def repeated_graph() -> None:
    import torch

    import compiletrace
    from tests.inputs.runs import rule_programs as p

    reg = compiletrace.Registry()
    with torch.no_grad():
        compiletrace.compile(p.Unrolled(), backend="eager", registry=reg)(torch.ones(2, 8))
    _save_run("repeated_graph", reg, _meta("Unrolled", "eager"))


def repeated_block() -> None:
    import torch

    import compiletrace
    from tests.inputs.runs import rule_programs as p

    reg = compiletrace.Registry()
    with torch.no_grad():
        compiletrace.compile(p.Stack(), backend="eager", registry=reg)(torch.ones(2, 8))
    _save_run("repeated_block", reg, _meta("Stack", "eager"))


def nothing_compiled() -> None:
    import tempfile

    import torch
    import torch.distributed as dist

    import compiletrace
    from tests.inputs.runs import rule_programs as p

    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", store=dist.FileStore(f"{folder}/store", 1), rank=0, world_size=1)
        try:
            reg = compiletrace.Registry()
            model = compiletrace.compile(p.wrapped_in_ddp(), backend="eager", registry=reg)
            model(torch.ones(2, 4)).sum().backward()
        finally:
            dist.destroy_process_group()
    _save_run("nothing_compiled", reg, _meta("wrapped_in_ddp", "eager"))


def _inductor_gelu(rule: str) -> None:
    import torch

    import compiletrace
    from tests.inputs.runs import rule_programs as p

    reg = compiletrace.Registry()
    compiletrace.compile(p.gelu, backend="inductor", registry=reg)(torch.randn(64))
    _save_run(rule, reg, _meta("gelu", "inductor"))


def cache_miss() -> None:
    _inductor_gelu("cache_miss")  # in an empty cache directory of its own: a cold cache


def expensive_hit() -> None:
    _inductor_gelu("expensive_hit")  # in a cache that kept the graphs, not the kernels


def fill_cache() -> None:
    """A cold process's compile, to fill the cache directory ``expensive_hit`` starts from."""
    import torch

    import compiletrace
    from tests.inputs.runs import rule_programs as p

    compiletrace.compile(p.gelu, backend="inductor", registry=compiletrace.Registry())(torch.randn(64))


def compile_after_warmup() -> None:
    import torch

    import compiletrace
    from tests.inputs.runs import rule_programs as p

    reg = compiletrace.Registry()
    f = compiletrace.compile(p.churn, backend="eager", dynamic=False, registry=reg)
    result = compiletrace.warm_up(lambda: f(torch.ones(2)), compilation_mode="stock", registry=reg)
    f(torch.ones(3))  # a size the warm-up never saw
    _save_run("compile_after_warmup", reg, _meta("churn", "eager"), result)


def compile_after_ready() -> None:
    import torch

    import compiletrace
    from tests.inputs.runs import rule_programs as p

    reg = compiletrace.Registry()
    f = compiletrace.compile(p.Block(), backend="aot_eager", registry=reg)
    out = f(torch.ones(4, 8))  # the warm-up: batch 4, with grad
    compiletrace.ready()
    f(torch.ones(5, 8))  # a size the warm-up never saw: a recompile
    out.sum().backward()  # the first backward: compiled now
    # The first call's autotuning of a kernel of graph 0/0, as a GPU run times it (torch's own
    # emitter, with the arguments its Triton autotuner passes; a CPU build never autotunes).
    from tests.programs.make_gpu_trace import runtime_autotune

    runtime_autotune("0/0", "triton_poi_fused_add_0", seconds=0.02)
    _save_run("compile_after_ready", reg, _meta("Block", "aot_eager"))


def shared_frame() -> None:
    import torch

    import compiletrace
    from tests.inputs.runs import rule_programs as p

    reg = compiletrace.Registry()
    enc = compiletrace.compile(p.Vision(), is_encoder=True, backend="eager", registry=reg)
    lm = compiletrace.compile(p.Text(), backend="eager", registry=reg)
    with torch.no_grad():
        lm(enc(torch.ones(1, 4)))
    _save_run("shared_frame", reg, _meta("Vision, Text", "eager"))


def costly_trace() -> None:
    import torch

    import compiletrace
    from tests.inputs.runs import rule_programs as p

    reg = compiletrace.Registry()
    model = compiletrace.compile(
        p.Layers(), component="encoder", backend="eager", registry=reg, trace_cost=True
    )
    model(torch.randn(2, 4))
    _save_run("costly_trace", reg, _meta("Layers", "eager"))


def useless_warmup() -> None:
    import torch

    import compiletrace

    reg = compiletrace.Registry()
    model = torch.nn.Linear(8, 8)  # never compiled: its warm-up compiles nothing
    result = compiletrace.warm_up(lambda: model(torch.ones(2, 8)), compilation_mode="stock", registry=reg)
    _save_run("useless_warmup", reg, _meta("torch.nn.Linear", "eager"), result)


def rank_divergence() -> None:
    """Two ranks of one job, as their gathered figures: rank 1 saw a second size."""
    import torch

    import compiletrace
    from compiletrace._data.gather import GatherResult, RankTimes
    from compiletrace._doctor import diagnose_evidence, gather_evidence
    from tests.inputs.runs import rule_programs as p

    ranks = []
    for rank, sizes in ((0, (2,)), (1, (2, 3))):
        torch._dynamo.reset()
        reg = compiletrace.Registry()
        f = compiletrace.compile(p.churn, backend="eager", dynamic=False, registry=reg)
        for n in sizes:
            f(torch.ones(n))
        ranks.append(replace(RankTimes.of(reg, rank), host="", pid=0))
    found = {f.kind.value for f in diagnose_evidence(gather_evidence(ranks=ranks))}
    if found != {"rank_divergence"}:
        raise SystemExit(f"rank_divergence: found {sorted(found)}; not saved")
    _save(GatherResult.of(ranks).to_dict(), "rank_divergence.gather.json")


MAKERS: dict[str, Callable[[], None]] = {
    maker.__name__: maker
    for maker in (
        nothing_compiled,
        recompiles,
        recompile_limit,
        graph_break,
        repeated_block,
        repeated_graph,
        cache_miss,
        expensive_hit,
        compile_after_warmup,
        compile_after_ready,
        shared_frame,
        costly_trace,
        useless_warmup,
        rank_divergence,
    )
}


# -- the driver: each maker in a fresh process ----------------------------------------------------


def _run_maker(name: str, cache_dir: str) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, __file__, "--maker", name], env=env, check=True, cwd=ROOT)


def _make(name: str) -> None:
    with tempfile.TemporaryDirectory(prefix="compiletrace-inputs-") as cache_dir:
        if name == "expensive_hit":
            # A cold process fills the cache; then only the graph caches are kept, so the next
            # process hits them and compiles the kernels again.
            _run_maker("fill_cache", cache_dir)
            for entry in Path(cache_dir).iterdir():
                if entry.name not in ("fxgraph", "aotautograd"):
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        _run_maker(name, cache_dir)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "rules", nargs="*", help=f"the rules to make runs for (default: all): {', '.join(MAKERS)}"
    )
    parser.add_argument("--maker", help=argparse.SUPPRESS)  # in the fresh process: run one maker
    args = parser.parse_args(argv)
    if args.maker:
        {**MAKERS, "fill_cache": fill_cache}[args.maker]()
        return
    unknown = sorted(set(args.rules) - set(MAKERS))
    if unknown:
        parser.error(f"no such rule: {', '.join(unknown)}")
    for name in args.rules or MAKERS:
        _make(name)


if __name__ == "__main__":
    main()
