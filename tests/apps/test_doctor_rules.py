"""Each rule of the doctor on its saved run (``tests/inputs/runs/``, made by compiletrace from
a tiny real compile: ``regenerate_runs.py``): no compile here, milliseconds a rule. What a
finding must say is read off the run's own records, not written down twice."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest

import compiletrace
from compiletrace import cli
from compiletrace._data.cache_hits import COMPILE_PHASES
from compiletrace._data.files import read
from compiletrace._data.findings import Finding, FindingKind, doctor_dict
from compiletrace._data.fixes import Fix
from compiletrace._data.gather import GatherResult
from compiletrace._data.job import Job
from compiletrace._data.nodes import node_of_process
from compiletrace._data.records import GraphRecord
from compiletrace._data.run import Run
from compiletrace._doctor import (
    RULES,
    Evidence,
    diagnose_evidence,
    fix_of,
    gather_evidence,
    job_evidence,
    rule_for,
)
from compiletrace._doctor.stake import claimable_ns
from compiletrace._doctor.verdicts import MANUAL, why_not_verified

RUNS = Path(__file__).parents[1] / "inputs" / "runs"
NODES = Path(__file__).parents[1] / "inputs" / "nodes"  # jobs of two nodes, made by two_nodes.py


def _evidence(rule: str) -> Evidence:
    if (NODES / rule).is_dir():  # each node's job file: read as one job, the evidence comparing nodes
        job = compiletrace.load(NODES / rule)
        assert isinstance(job, Job)
        return job_evidence(job)[-1]
    paths = [RUNS / f"{rule}.run.json", RUNS / f"{rule}.gather.json"]
    (path,) = [p for p in paths if p.exists()]
    loaded = read(path)
    if isinstance(loaded, GatherResult):
        return gather_evidence(ranks=loaded.ranks)
    assert isinstance(loaded, Run)
    return gather_evidence(loaded)


def _check(rule: str) -> list[Finding]:
    """The findings of one rule alone on its run, each of the rule's kind, naming only the
    fixes the rule says it may name."""
    found = list(rule_for(rule).check(_evidence(rule)))
    for finding in found:
        assert finding.kind is FindingKind(rule)
        fix = finding.evidence.get("auto_fix")
        if fix is not None:
            named = fix_of(finding)
            assert named is not None and named[0] in rule_for(rule).fixes, fix
    return found


def _at(r: GraphRecord) -> str:
    return f"{r.code_filename}:{r.code_firstlineno}"


def _seconds(records: list[GraphRecord]) -> float:
    return sum(r.total_s for r in records)


# -- the rule list itself --------------------------------------------------------------------


def test_every_kind_has_one_rule_and_every_rule_a_saved_run() -> None:
    assert [rule.kind for rule in RULES].count(FindingKind.RECOMPILES) == 1
    assert sorted(rule.kind.value for rule in RULES) == sorted(kind.value for kind in FindingKind)
    for rule in RULES:
        assert rule.kind in {f.kind for f in diagnose_evidence(_evidence(rule.kind.value))}, rule.kind
        # A fix that applies from outside the program is judged when verified; no fix, no judge.
        assert (rule.judge is not None) == bool(rule.fixes), rule.kind


@pytest.mark.parametrize("path", sorted(RUNS.glob("*.json")), ids=lambda p: p.name)
def test_the_doctor_command_and_the_one_entry_point_agree_on_each_saved_run(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "findings.json"
    assert cli.main(["doctor", str(path), "--json", str(out)]) == 0
    capsys.readouterr()
    expected = diagnose_evidence(_evidence(path.name.split(".")[0]))
    assert json.loads(out.read_text()) == json.loads(json.dumps(doctor_dict(expected)))


# -- each rule on its run --------------------------------------------------------------------


def test_recompiles() -> None:
    records = list(_evidence("recompiles").records)
    recompiled = [r for r in records if r.is_recompile]
    (finding,) = _check("recompiles")
    assert (finding.component, finding.location) == ("language_model", _at(records[0]))
    assert finding.seconds == pytest.approx(_seconds(recompiled))
    assert finding.evidence["compile_ids"] == [r.compile_id for r in recompiled]
    n = len(recompiled)
    assert finding.title == f"churn recompiled {n} times: a size changed ({n})"
    (guards,) = finding.evidence["guards"].values()
    assert guards["count"] == len(recompiled) and "size mismatch at index 0" in guards["reasons"][0]
    assert "torch._dynamo.maybe_mark_dynamic(x, 0)" in finding.fix
    # Compiled with dynamic=False, torch kept no automatic-dynamic state: the guard names the
    # dimension, and marking it dynamic would compile one graph for all four sizes.
    assert finding.evidence["auto_fix"] == Fix.MARK_DYNAMIC.spelled("L['x']:0")
    assert finding.evidence["superseded"] == [
        {"static": a.compile_id, "by": b.compile_id} for a, b in itertools.pairwise(records)
    ]
    # At stake: the three static graphs the marked dimension never compiles, less set-up.
    (staked,) = [f for f in diagnose_evidence(_evidence("recompiles")) if f.kind is FindingKind.RECOMPILES]
    statics = records[:-1]
    assert staked.seconds == pytest.approx(sum(claimable_ns(r) for r in statics) / 1e9)
    assert staked.evidence["at_stake"]["unit"] == "cpu"


def test_recompile_limit() -> None:
    records = list(_evidence("recompile_limit").records)
    (refused,) = [r for r in records if r.recompile_limit_hit]
    (finding,) = _check("recompile_limit")
    assert finding.location == _at(records[0]) and finding.seconds == pytest.approx(_seconds(records))
    assert finding.title == "limited hit torch's recompile limit (3) and now runs eagerly, uncompiled"
    assert finding.evidence["frames_refused"] == [f"limited ({_at(refused)})"]
    assert finding.evidence["last_guard"]["kind"] == "tensor shape/stride"
    assert "mark_dynamic(x, 0)" in finding.fix and "raise torch._dynamo.config.recompile_limit" in finding.fix
    # A shape guard: its dimension marked dynamic first, named from the guard in a run with no
    # automatic-dynamic state (dynamic=False).
    assert finding.evidence["auto_fix"] == Fix.MARK_DYNAMIC.spelled("L['x']:0")


def test_graph_break() -> None:
    records = list(_evidence("graph_break").records)
    (finding,) = _check("graph_break")
    (where,) = {b.location for r in records for b in r.graph_breaks}
    assert finding.location == where and finding.seconds == pytest.approx(_seconds(records))
    assert finding.title.startswith("a graph break split printing into 2 graphs: Failed to trace builtin")
    assert "`print`" in finding.title
    assert "reorderable_logging_functions.add(print)" in finding.fix
    assert finding.evidence["auto_fix"] == Fix.REORDERABLE_PRINT.value
    assert finding.evidence["frame_compile_ids"] == [r.compile_id for r in records]


def test_repeated_graph() -> None:
    records = list(_evidence("repeated_graph").records)
    (finding,) = _check("repeated_graph")
    assert finding.seconds == pytest.approx(_seconds(records[1:]))  # every compile after the first
    assert finding.title == (
        "4 structurally identical graphs of 7 nodes compiled in 4 frames (each a call of Block): "
        "a regional-compile candidate"
    )
    assert finding.location == records[0].module_forward  # Unrolled.forward, not a resume function
    assert finding.evidence["block"] == "Block"
    assert finding.evidence["auto_fix"] == Fix.REGIONAL_COMPILE.spelled("Block")


def test_repeated_block() -> None:
    (record,) = _evidence("repeated_block").records
    (finding,) = _check("repeated_block")
    block = record.repeated_block
    assert block is not None and (block.class_name, block.instances) == ("Block", 4)
    assert block.smallest == block.largest == block.nodes // 4
    assert finding.title == (
        f"Block traced 4 times inside one graph ({block.nodes} of its {block.graph_ops} operations): "
        "a regional-compile candidate"
    )
    assert finding.evidence["auto_fix"] == Fix.REGIONAL_COMPILE.spelled("Block")
    # What compiling the block on its own saves: all but one copy of it.
    share = 1 - block.largest / block.graph_ops
    assert finding.evidence["estimated_saving_s"] == pytest.approx(
        claimable_ns(record) * share / 1e9, abs=1e-4
    )
    (staked,) = diagnose_evidence(_evidence("repeated_block"))
    assert staked.seconds == pytest.approx(claimable_ns(record) * share / 1e9)


def test_repeated_blocks_that_update_a_cache_layer_each_are_an_edit_first() -> None:
    """Blocks seen updating a cache layer each would each specialise on it compiled on their
    own: the fix is the call without a cache, then the block on its own (an edit); regional
    compilation as the program is stands as a fix to try, never first."""
    run = read(RUNS / "repeated_block.run.json")
    assert isinstance(run, Run)
    (record,) = run.graph_records
    assert record.repeated_block is not None
    cached = replace(record, repeated_block=record.repeated_block._replace(reads_own_cache=True))
    (finding,) = rule_for("repeated_block").check(gather_evidence(replace(run, graph_records=(cached,))))
    assert "auto_fix" not in finding.evidence and finding.evidence["reads_own_cache"] is True
    regional = Fix.REGIONAL_COMPILE.spelled("Block")
    assert finding.evidence["other_fixes"] == [regional]
    assert (
        "use_cache=False" in finding.fix
        and f"To try as the program is: compiletrace run --apply {regional}" in (finding.fix)
    )


def test_repeated_block_is_not_the_halves_a_break_split() -> None:
    """Four blocks each in a frame of its own (graph breaks between them): one block per
    graph, no block repeated inside one; the across-frames rule speaks of them."""
    records = _evidence("repeated_graph").records
    assert all(r.repeated_block is None for r in records)
    assert not list(rule_for("repeated_block").check(_evidence("repeated_graph")))


def test_nothing_compiled() -> None:
    records = list(_evidence("nothing_compiled").records)
    assert records and all(r.graph_node_count == 0 for r in records)
    (finding,) = _check("nothing_compiled")
    assert finding.title.startswith(
        f"torch.compile(DDP(model)) compiled nothing: {len(records)} frames, no graph"
    )
    assert "DDP(torch.compile(model))" in finding.fix and "auto_fix" not in finding.evidence
    assert finding.evidence["ddp"] is True
    assert finding.evidence["compile_ids"] == [r.compile_id for r in records]
    # Code that ran uncompiled compiles with the fix, which costs seconds: judged by the counts.
    rule = rule_for("nothing_compiled")
    assert finding.evidence["ran_uncompiled"] is True and not rule.seconds_judged(finding)
    beside = replace(finding, evidence={**finding.evidence, "ran_uncompiled": False})
    assert rule.seconds_judged(beside)  # DDP's wrapper traced beside a model that compiled: seconds
    assert any("_inside_ddp_forward" in c["reason"] for c in finding.evidence["causes"])
    # First in the list, and the graph breaks inside DDP fold under it.
    breaks = list(rule_for("graph_break").check(_evidence("nothing_compiled")))
    assert breaks
    found = diagnose_evidence(_evidence("nothing_compiled"))
    assert [f.kind for f in found] == [FindingKind.NOTHING_COMPILED]
    assert found[0].evidence["explains"] == [f"graph_break: {b.title}" for b in breaks]


def test_no_compile_is_claimed_twice_on_any_saved_run() -> None:
    for path in sorted(RUNS.glob("*.run.json")):
        evidence = _evidence(path.name.split(".")[0])
        found = diagnose_evidence(evidence)
        claimed = sum(f.seconds for f in found if "at_stake" in f.evidence)
        assert claimed <= sum(claimable_ns(r) for r in evidence.records) / 1e9 + 1e-6, path.name


def test_cache_miss() -> None:
    (record,) = _evidence("cache_miss").records
    (finding,) = _check("cache_miss")
    assert finding.title == (
        "1 of 1 graphs compiled afresh: the compile cache FX graph missed 1, AOTAutograd missed 1 "
        "(a cold cache)"
    )
    compiling = sum(ns for phase, ns in record.phases if phase in COMPILE_PHASES)
    assert finding.seconds == pytest.approx(compiling / 1e9)
    (graph,) = finding.evidence["graphs"]
    assert graph["keys"] == {c.tier: c.key for c in record.cache_lookups} and len(graph["keys"]) == 2
    assert "the cache was cold" in finding.fix
    # Its fix changes how the program is deployed, not the program: verify says so.
    assert finding.evidence["fix_kind"] == "deployment"
    why = why_not_verified(MANUAL, MANUAL, finding, None, None, None)
    assert why.startswith("the fix is a change to how the program is deployed") and "edit" not in why


CACHE_TRACES = Path(__file__).parents[1] / "inputs" / "traces" / "cache"


def test_cache_miss_against_a_baseline_names_the_part_that_changed() -> None:
    """doctor --baseline: the miss explained as 'compiletrace why' explains it, on the cache
    cases' committed traces (tests/inputs/traces/make_cache_traces.py)."""
    from compiletrace._doctor import baseline_evidence, diagnose_against

    current = read(CACHE_TRACES / "a_config.log.gz")
    base = read(CACHE_TRACES / "base.job.json")
    assert isinstance(current, Run)
    (finding,) = [f for f in diagnose_against(current, baseline_evidence(base)) if f.kind == "cache_miss"]
    assert finding.evidence["changes"] == ["inductor_config[fallback_random]: False -> True"]
    assert finding.title == (
        "against the baseline, the graph: inductor_config[fallback_random]: False -> True "
        f"({finding.seconds:.2f} s)"
    )
    (record,) = current.graph_records
    assert finding.seconds == pytest.approx((record.backend_ns + record.backward_ns) / 1e9)
    assert finding.fix.startswith("pin torch._inductor.config.fallback_random")
    # The same from the command line, and the unchanged re-run has nothing to say.
    rerun = read(CACHE_TRACES / "rerun.log.gz")
    assert isinstance(rerun, Run)
    assert [f for f in diagnose_against(rerun, baseline_evidence(base)) if f.kind == "cache_miss"] == []


def test_cache_miss_baseline_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    run, base = CACHE_TRACES / "f_ci.log.gz", CACHE_TRACES / "base.log.gz"
    assert cli.main(["doctor", str(run), "--baseline", str(base)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the lines as wrapped for the terminal, joined
    said = "against the baseline, the graph: autograd_config[error_on_custom_op_aliasing]: False -> True"
    assert said in out
    assert cli.main(["doctor", str(run), "--baseline", str(base), "--verify"]) == 2
    assert "give one of them" in capsys.readouterr().err


def test_expensive_hit() -> None:
    (record,) = _evidence("expensive_hit").records
    (finding,) = _check("expensive_hit")
    assert finding.title.startswith("FX graph cache hit, but ") and "s compiling kernels" in finding.title
    assert finding.evidence["dominant_phase"] == "kernel_compile"
    assert finding.evidence["dominant_s"] == pytest.approx(record.phase_ns["kernel_compile"] / 1e9)
    # Made on the CPU: the artifacts never carried the kernels, so the fix is the directory.
    assert "C++ kernels" in finding.fix and "will not remove this" in finding.fix


def test_compile_after_warmup() -> None:
    records = list(_evidence("compile_after_warmup").records)
    (late,) = [r for r in records if r.after_warmup]
    (finding,) = _check("compile_after_warmup")
    assert finding.title == "churn compiled 1 time after warm-up returned: a latency spike while serving"
    assert finding.seconds == pytest.approx(late.total_s)
    assert finding.evidence["compile_ids"] == [late.compile_id]
    assert "mark_dynamic(x, 0)" in finding.fix and "expect_no_compiles()" in finding.fix


def test_shared_frame() -> None:
    records = list(_evidence("shared_frame").records)
    (finding,) = _check("shared_frame")
    assert finding.evidence["components"] == ["encoder", "language_model"]
    assert finding.location == _at(records[0]) and finding.evidence["entries_used"] == 2
    assert finding.seconds == pytest.approx(records[1].total_s)
    assert "compile below the shared wrapper" in finding.fix


def test_costly_trace() -> None:
    (record,) = _evidence("costly_trace").records
    (finding,) = _check("costly_trace")
    (hotspot,) = [n for root in record.trace_cost for n in root.children if n.name == "planted_hotspot"]
    assert finding.evidence["function"] == "planted_hotspot" and finding.location == hotspot.location
    assert finding.seconds == pytest.approx(hotspot.self_ns / 1e9)
    assert "tracing the body of planted_hotspot" in finding.title and "Python loop" in finding.fix


def test_useless_warmup() -> None:
    evidence = _evidence("useless_warmup")
    (phase,) = [p for p in evidence.phases if p.name == "Warmup (CPU)"]
    (finding,) = _check("useless_warmup")
    assert finding.seconds == phase.duration_s and finding.evidence["phase"] == "Warmup (CPU)"
    assert "compiled nothing" in finding.title and "CompilationMode.NONE" in finding.fix


def test_rank_divergence() -> None:
    ranks = _evidence("rank_divergence").ranks
    (finding,) = _check("rank_divergence")
    absent = [key for key in ranks[1].graph_cache if key not in ranks[0].graph_cache]
    assert finding.evidence["ranks"] == [0] and list(finding.evidence["graphs"]) == absent
    assert finding.seconds == pytest.approx(abs(ranks[1].total_s - ranks[0].total_s))
    assert "make every rank compile the same graphs" in finding.fix


def test_node_cache_miss_names_the_node_the_key_part_and_what_it_set() -> None:
    evidence = _evidence("node_cache_miss")
    cold = {p.info.pid for _, ps in evidence.nodes for p in ps if p.info.node == "0"}
    (finding,) = _check("node_cache_miss")
    # Node 0 (OMP_NUM_THREADS=1) missed the FX graph node 1 hit: the thread count, and what set it.
    assert finding.title.startswith("node 0 missed the compile cache on 1 graph that node 1 hit: ")
    assert "cpp_runtime_thread_count: 2 -> 1, set by OMP_NUM_THREADS: '2' -> '1'" in finding.title
    assert finding.evidence["nodes"] == ["0"] and finding.evidence["hit_on"] == "1"
    (change,) = [c for c in finding.evidence["changes"] if c["name"] == "cpp_runtime_thread_count"]
    assert (change["base"], change["current"], change["kind"]) == ("2", "1", "threads")
    assert "pin OMP_NUM_THREADS" in finding.fix
    # Its seconds: the missing rank's compile CPU-seconds less the hitting rank's.
    cpu = {
        p.info.pid: sum(r.cpu_or_wall_ns for r in p.run.graph_records) / 1e9
        for _, ps in evidence.nodes
        for p in ps
    }
    hit = [pid for pid in cpu if pid not in cold]
    assert any(finding.seconds == pytest.approx(max(0.0, cpu[c] - cpu[h])) for c in cold for h in hit)


def test_a_node_whose_cache_held_another_key_is_not_told_its_cache_was_cold() -> None:
    # Node 0's ranks missed what node 1 hit (another thread count in the key): node_cache_miss
    # names the part; no finding calls node 0's cache cold, nor tells it to fill one.
    job = compiletrace.load(NODES / "node_cache_miss")
    assert isinstance(job, Job)
    found = job.diagnose()
    (node,) = [f for f in found if f.kind is FindingKind.NODE_CACHE_MISS]
    assert node.evidence["nodes"] == ["0"]
    assert {rank: node_of_process(p) for rank, p in job.ranks().items()} == {0: "0", 1: "0", 2: "1", 3: "1"}
    cold = [f for f in found if f.kind is FindingKind.CACHE_MISS and "(a cold cache)" in f.title]
    # Node 1's ranks, whose AOTAutograd cache was cold (each node's own), keep theirs.
    assert [f.evidence["process"] for f in cold] == ["ranks 2-3"]


def test_nodes_that_missed_for_one_reason_are_one_finding() -> None:
    evidence = _evidence("node_cache_miss")
    cold, warm = (dict(evidence.nodes)[n] for n in "01")
    many = replace(evidence, nodes=(("0", cold), ("1", warm), ("2", cold), ("3", warm), ("5", cold)))
    (finding,) = rule_for("node_cache_miss").check(many)
    assert finding.title.startswith("nodes 0, 2, 5 missed the compile cache on 1 graph that node 1 hit: ")
    assert finding.evidence["nodes"] == ["0", "2", "5"]


def test_node_cache_miss_finds_nothing_between_nodes_that_hit_alike() -> None:
    evidence = _evidence("node_cache_miss")
    warm = [(node, ps) for node, ps in evidence.nodes if node == "1"]
    twice = replace(evidence, nodes=(warm[0], ("2", warm[0][1])))
    assert list(rule_for("node_cache_miss").check(twice)) == []
    assert list(rule_for("node_cache_miss").check(replace(evidence, nodes=evidence.nodes[:1]))) == []


def test_compile_after_ready() -> None:
    evidence = _evidence("compile_after_ready")
    assert evidence.ready is not None and evidence.ready.how == "call"
    first, late = evidence.records
    found = {f.evidence["kind"]: f for f in _check("compile_after_ready")}
    assert set(found) == {"recompile", "lazy_backward", "runtime_autotune"}
    recompile = found["recompile"]
    assert recompile.title == (
        f"Block.forward ({_at(late)}) recompiled 1 time after ready (compiletrace.ready() was called): "
        "tensor 'x' size mismatch at index 0. expected 4, actual 5"
    )
    assert recompile.seconds == pytest.approx(late.frame_s) and recompile.location == _at(late)
    assert "mark_dynamic(x, 0)" in recompile.fix and "warm up with that shape" in recompile.fix
    assert (recompile.evidence["auto_fix"], recompile.evidence["gate_fix"]) == (
        "eager-after-ready",
        "fail-after-ready",
    )
    backward = found["lazy_backward"]
    assert (
        backward.seconds == pytest.approx(first.backward_s)
        and "one .backward() in the warm-up" in backward.fix
    )
    (event,) = evidence.runtime
    autotune = found["runtime_autotune"]
    assert autotune.seconds == pytest.approx(event.duration_ns / 1e9) and event.detail in autotune.title
    assert "auto_fix" not in backward.evidence and "auto_fix" not in autotune.evidence


def test_a_compile_after_ready_is_named_by_the_models_method_not_a_librarys_wrapper() -> None:
    # transformers wraps LlamaForCausalLM.forward in a decorator (deprecate_kwarg's
    # wrapped_func): torch compiles the wrapper's frame; the finding names the model's forward
    # at its own line, as the recompiles rule does.
    evidence = _evidence("compile_after_ready")
    first, late = evidence.records
    wrapped = replace(
        late,
        code_name="wrapped_func",
        code_filename="/venv/site-packages/transformers/utils/deprecation.py",
        code_firstlineno=168,
        module_class="LlamaForCausalLM",
        module_forward="/venv/site-packages/transformers/models/llama/modeling_llama.py:420",
    )
    found = list(rule_for("compile_after_ready").check(replace(evidence, records=(first, wrapped))))
    (recompile,) = [f for f in found if f.evidence["kind"] == "recompile"]
    where = "/venv/site-packages/transformers/models/llama/modeling_llama.py:420"
    assert recompile.title.startswith(f"LlamaForCausalLM.forward ({where}) recompiled 1 time after ready")
    assert recompile.location == where and "wrapped_func" not in recompile.title + recompile.fix
    (recompiles,) = rule_for("recompiles").check(replace(evidence, records=(first, wrapped)))
    assert "LlamaForCausalLM.forward" in recompiles.title  # both rules name it alike


@pytest.mark.parametrize("path", sorted(RUNS.glob("*.run.json")), ids=lambda p: p.name.split(".")[0])
def test_no_finding_puts_more_at_stake_than_the_problem_cost(path: Path) -> None:
    # Each committed run (made by the repository's programs): a fix saves at most what the
    # problem cost, in one unit (compile_after_warmup's recompile claimed 0.12 s of a 0.08 s cost).
    for finding in compiletrace.load(path).diagnose():
        stake = finding.evidence.get("at_stake")
        if stake is not None:
            assert stake["seconds"] <= stake["cost_s"], (finding.kind, stake)
            assert finding.seconds <= stake["cost_s"] + 1e-4


def test_under_dynamic_false_no_recompile_is_said_to_be_compiled_dynamic() -> None:
    """torch.compile(dynamic=False) on ten sizes: nine static graphs, then the recompile
    limit. The fix (mark the size dynamic) is right, but the doctor no longer says torch
    compiled the input dynamic on the recompile: it did not."""
    import torch

    import compiletrace
    from compiletrace import Registry
    from compiletrace._doctor import diagnose_records

    def step(x: torch.Tensor) -> torch.Tensor:
        return x.sin() + 1

    torch._dynamo.reset()
    reg = Registry()
    with compiletrace.observe(registry=reg):
        compiled = torch.compile(step, backend="eager", dynamic=False)
        for n in range(2, 12):
            compiled(torch.randn(n))
    records = reg.records()
    assert len(records) == 9 and records[-1].recompile_limit_hit
    assert not any(r.dynamic_sources for r in records)  # torch made nothing dynamic
    found = {f.kind: f for f in diagnose_records(records)}
    for kind in ("recompile_limit", "recompiles"):
        assert "under dynamic=False torch compiled a static graph for each size" in found[kind].fix
        assert (
            "dynamic on the recompile" not in found[kind].fix
            and "dynamic on this recompile" not in found[kind].fix
        )
    assert found["recompiles"].evidence["auto_fix"] == "mark-dynamic=L['x']:0"
