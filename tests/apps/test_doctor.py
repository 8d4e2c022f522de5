"""The doctor: each pathology built for real, its finding checked (kind, component, location,
seconds, fix), and the fix it names applied to show what was at stake falls away."""

from __future__ import annotations

import functools
import inspect
import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import compiletrace
from compiletrace import (
    CacheOutcome,
    CompiletraceBackend,
    GraphRecord,
    ProfileRun,
    Registry,
    RunFileError,
    UnexpectedCompileError,
    cli,
)
from compiletrace._app.warmup import WarmupResult
from compiletrace._core import torch_compat as tc
from compiletrace._core.tracker import Tracker
from compiletrace._data.cache_hits import compile_ns
from compiletrace._data.records import CacheLookup, CompilationTimes, GraphBreak, root_code_name
from compiletrace._data.run_meta import LoadedArtifacts, RunMeta
from compiletrace._doctor import (
    DOCTOR_KIND,
    Finding,
    FindingKind,
    GuardKind,
    classify_guard,
    diagnose_ranks,
    diagnose_records,
    guard_fix,
    guard_text,
)
from compiletrace._doctor.stake import claimable_ns
from compiletrace.distributed import GatherResult, RankTimes
from compiletrace.reports._findings import findings_html, findings_text
from tests.conftest import MS, FakeClock, S, make_record
from tests.inputs.runs.rule_programs import Block, Text, Unrolled, Vision, churn, limited, size_relation


def _where(fn: Callable[..., Any]) -> str:
    """file:line of a function's code, as records and findings give it."""
    code = fn.__code__
    return f"{code.co_filename}:{code.co_firstlineno}"


def _line(fn: Callable[..., Any], text: str) -> str:
    """file:line of the first line of ``fn`` holding ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return f"{fn.__code__.co_filename}:{first + next(i for i, s in enumerate(lines) if text in s)}"


def _only(findings: list[Finding], kind: FindingKind) -> Finding:
    (found,) = [f for f in findings if f.kind == kind.value]
    return found


def _cost(finding: Finding) -> float:
    """What the problem cost, as the rule counted it (wall seconds); the finding's own seconds
    are what its fix can save (at stake), each compile's claimed once."""
    return float(finding.evidence["at_stake"]["cost_wall_s"])


def _kinds(findings: list[Finding]) -> list[str]:
    return [f.kind for f in findings]


def _recompiles(reg: Registry) -> int:
    return sum(r.is_recompile for r in reg.records())


# -- recompiles: shape churn, a changing constant, a backend per block ---------------------


def test_a_relation_between_dynamic_sizes_is_not_at_stake_for_marking_a_dimension_dynamic() -> None:
    """A size changed (the first graph static, the recompile dynamic), then a branch on a
    relation between the now dynamic sizes flipped. The finding's first fix, marking the
    dimension dynamic, saves the static graph and nothing of the relation's recompile (an
    edit removes that): at stake is the static graph alone."""
    reg = Registry()
    f = compiletrace.compile(size_relation, backend="eager", registry=reg)
    for n in (32, 64, 36):  # 32: static; 64: dynamic, the branch holds; 36: it does not
        f(torch.ones(1, 1, n))
    finding = _only(compiletrace.diagnose(reg), FindingKind.RECOMPILES)
    assert set(finding.evidence["guards"]) == {GuardKind.SHAPE.value, GuardKind.SYMBOLIC.value}
    assert str(finding.evidence["auto_fix"]).startswith("mark-dynamic=")
    (static,) = [r for r in reg.records() if not r.is_recompile]
    assert finding.seconds == pytest.approx(claimable_ns(static) / S)
    assert _cost(finding) == pytest.approx(sum(r.total_s for r in reg.records() if r.is_recompile), abs=1e-4)


def test_shape_churn_is_a_recompile_ledger_and_dynamic_shapes_end_it() -> None:
    reg = Registry()
    f = compiletrace.compile(churn, backend="eager", dynamic=False, registry=reg)
    for n in range(2, 7):  # a shape that changes every call
        f(torch.ones(n))
    recompiled = [r for r in reg.records() if r.is_recompile]
    assert len(recompiled) == 4

    finding = _only(compiletrace.diagnose(reg), FindingKind.RECOMPILES)
    assert finding.component == "language_model"
    assert finding.location == _where(churn)
    assert _cost(finding) == pytest.approx(sum(r.total_s for r in recompiled), abs=1e-4)
    # At stake: the static graphs the recompiles replaced (dynamic=False: each of them), CPU.
    statics = [r for r in reg.records() if r.compile_id != recompiled[-1].compile_id]
    assert finding.seconds == pytest.approx(sum(claimable_ns(r) for r in statics) / S)
    assert finding.evidence["compile_ids"] == ["0/1", "0/2", "0/3", "0/4"]
    (kind,) = finding.evidence["guards"]
    assert kind == GuardKind.SHAPE.value and finding.evidence["guards"][kind]["count"] == 4
    assert "size mismatch at index 0" in finding.evidence["guards"][kind]["reasons"][0]
    assert "torch._dynamo.maybe_mark_dynamic(x, 0)" in finding.fix and "dynamic=True" in finding.fix
    assert finding.evidence["auto_fix"] == "mark-dynamic=L['x']:0"
    assert finding.evidence["other_fixes"] == ["dynamic-shapes"]

    # The fix from outside the program: torch's own setting of the inputs to compile dynamic
    # (what run --apply mark-dynamic puts in the environment), even under dynamic=False.
    torch._dynamo.reset()
    sourced = Registry()
    with torch.compiler.config.patch(dynamic_sources="L['x']:0"):
        k = compiletrace.compile(churn, backend="eager", dynamic=False, registry=sourced)
        for n in range(2, 7):
            k(torch.ones(n))
    assert len(sourced.records()) == 1 and compiletrace.diagnose(sourced) == []
    # The ways in code: dynamic=True, and mark_dynamic on the changing dimension.
    torch._dynamo.reset()
    fixed = Registry()
    g = compiletrace.compile(churn, backend="eager", dynamic=True, registry=fixed)
    for n in range(2, 7):
        g(torch.ones(n))
    torch._dynamo.reset()
    marked = Registry()
    h = compiletrace.compile(churn, backend="eager", registry=marked)
    for n in range(2, 7):
        x = torch.ones(n)
        torch._dynamo.mark_dynamic(x, 0)
        h(x)
    assert (_recompiles(fixed), _recompiles(marked)) == (0, 0)  # from 4: all of it
    assert compiletrace.diagnose(fixed) == [] and compiletrace.diagnose(marked) == []


class StepCounter(nn.Module):
    """Counts its calls in a Python int: torch bakes it into the graph as a constant."""

    def __init__(self) -> None:
        super().__init__()
        self.step = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.step += 1
        return x * self.step


class TensorStepCounter(nn.Module):
    """The same count held in a tensor: a graph input, not a constant."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("step", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.step += 1
        return x * self.step


def test_a_changing_python_constant_recompiles_until_it_is_a_tensor() -> None:
    reg = Registry()
    model = compiletrace.compile(StepCounter(), is_encoder=True, backend="eager", registry=reg)
    for _ in range(5):
        model(torch.ones(2))
    finding = _only(compiletrace.diagnose(reg), FindingKind.RECOMPILES)
    assert (finding.component, finding.location) == ("encoder", _where(StepCounter.forward))
    assert list(finding.evidence["guards"]) == [GuardKind.VALUE.value]
    assert finding.evidence["guards"][GuardKind.VALUE.value]["count"] == 4
    assert _cost(finding) == pytest.approx(sum(r.total_s for r in reg.records() if r.is_recompile), abs=1e-4)
    assert finding.fix.startswith("self.step changes between calls") and "tensor" in finding.fix

    fixed = Registry()
    tensor_model = compiletrace.compile(TensorStepCounter(), is_encoder=True, backend="eager", registry=fixed)
    for _ in range(5):
        tensor_model(torch.ones(2))
    assert (_recompiles(reg), _recompiles(fixed)) == (4, 0)
    assert tensor_model.step.item() == 5.0  # the count still counts


def test_a_backend_object_per_block_recompiles_one_code_and_one_backend_does_not() -> None:
    torch.manual_seed(0)
    blocks = [Block() for _ in range(4)]
    reg = Registry()
    # A backend object made per block (torch.compile(b, backend=compiletrace.backend(...))).
    each = [torch.compile(b, backend=compiletrace.backend(backend="eager", registry=reg)) for b in blocks]
    x = torch.ones(2, 8)
    with torch.no_grad():
        for b in each:
            x = b(x)
    finding = _only(compiletrace.diagnose(reg), FindingKind.RECOMPILES)
    assert list(finding.evidence["guards"]) == [GuardKind.BACKEND.value]
    assert finding.location == _where(Block.forward) and "create the backend once" in finding.fix
    assert not [f for f in compiletrace.diagnose(reg) if f.kind == FindingKind.REPEATED_GRAPH.value]

    # One backend for every block: the fix, and what compiletrace.compile does by itself.
    def one_backend(fixed: Registry) -> list[Any]:
        be = compiletrace.backend(backend="eager", registry=fixed)
        return [torch.compile(b, backend=be) for b in blocks]

    def compiletrace_compile(fixed: Registry) -> list[Any]:
        return [compiletrace.compile(b, backend="eager", registry=fixed) for b in blocks]

    for compile_blocks in (one_backend, compiletrace_compile):
        torch._dynamo.reset()
        fixed = Registry()
        y = torch.ones(2, 8)
        with torch.no_grad():
            for b in compile_blocks(fixed):
                y = b(y)
        torch.testing.assert_close(x, y)
        assert (_recompiles(reg), _recompiles(fixed), len(fixed.records())) == (3, 0, 1)


# -- the recompile limit ---------------------------------------------------------------------


def test_a_frame_past_the_recompile_limit_is_its_own_loud_finding() -> None:
    reg = Registry()
    f = compiletrace.compile(limited, backend="eager", dynamic=False, registry=reg)
    with torch._dynamo.config.patch(recompile_limit=3):
        for n in range(2, 8):
            torch.testing.assert_close(f(torch.ones(n)), limited(torch.ones(n)))  # eager past the limit
    refused = [r for r in reg.records() if r.recompile_limit_hit]
    assert len(reg.records()) == 4 and [r.compile_id for r in refused] == ["0/3"]  # then no more tries
    assert refused[0].status is compiletrace.CompileStatus.EAGER_FALLBACK and refused[0].dynamo_ns is not None

    findings = compiletrace.diagnose(reg)
    finding = _only(findings, FindingKind.RECOMPILE_LIMIT)
    assert finding.location == _where(limited) and finding.component == "language_model"
    assert _cost(finding) == pytest.approx(sum(r.total_s for r in reg.records()), abs=1e-4)
    assert finding.evidence["recompile_limit"] == 3
    assert finding.evidence["last_guard"]["kind"] == GuardKind.SHAPE.value
    assert "recompile limit (3)" in finding.title and "eagerly" in finding.title
    assert "dynamic=True" in finding.fix and "recompile_limit" in finding.fix
    assert _only(findings, FindingKind.RECOMPILES).evidence["compile_ids"] == ["0/1", "0/2"]

    torch._dynamo.reset()
    fixed = Registry()
    g = compiletrace.compile(limited, backend="eager", dynamic=True, registry=fixed)
    with torch._dynamo.config.patch(recompile_limit=3):
        for n in range(2, 8):
            g(torch.ones(n))
    assert not any(r.recompile_limit_hit for r in fixed.records()) and _recompiles(fixed) == 0


def test_the_tracker_records_a_limit_hit_without_torchs_regions(fake_clock: FakeClock) -> None:
    tracker = Tracker(clock=fake_clock, epoch_offset_ns=0)
    reg = Registry()
    be = CompiletraceBackend("encoder", backend="eager", registry=reg, tracker=tracker)
    frame = tc.CompilingFrame("forward", be, "model.py", 12)
    tracker.on_recompile_limit("0/8", frame, "0/7: tensor 'x' size mismatch at index 0", 8)
    tracker.on_recompile_limit("1/8", tc.CompilingFrame("forward", object()), None, 8)  # not ours
    (rec,) = reg.records()
    assert (rec.compile_id, rec.code_location, rec.recompile_limit_hit) == ("0/8", "model.py:12", True)
    assert rec.recompile_reason == "0/7: tensor 'x' size mismatch at index 0" and rec.graph_node_count == 0


# -- graph breaks ----------------------------------------------------------------------------


def printing(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    print("a print in compiled code")  # a graph break
    return y.cos()


def scalar(x: torch.Tensor) -> torch.Tensor:
    n = x.sum().item()  # a graph break
    return x * n


def test_a_print_breaks_the_graph_and_reorderable_logging_mends_it() -> None:
    reg = Registry()
    compiletrace.compile(printing, backend="eager", registry=reg)(torch.ones(3))
    first, resume = reg.records()
    assert root_code_name(resume.code_name) == "printing"
    finding = _only(compiletrace.diagnose(reg), FindingKind.GRAPH_BREAK)
    assert finding.location == _line(printing, "print(")
    assert finding.component == "language_model"
    assert _cost(finding) == pytest.approx(first.total_s + resume.total_s, abs=1e-4)
    # At stake: half the graph after the break (what merging it saves), not the whole frame.
    assert finding.seconds == pytest.approx(claimable_ns(resume) / 2 / S, abs=1e-9)
    assert finding.evidence["graphs"] == 2 and finding.evidence["frame_compile_ids"] == ["0/0", "1/0"]
    (brk,) = finding.evidence["breaks"]
    assert "`print`" in brk["reason"] and brk["location"] == finding.location and not brk["frame_skipped"]
    assert finding.title.startswith("a graph break split printing into 2 graphs: Failed to trace")
    assert "reorderable_logging_functions" in finding.fix

    torch._dynamo.reset()
    fixed = Registry()
    with torch._dynamo.config.patch(reorderable_logging_functions={print}):
        compiletrace.compile(printing, backend="eager", registry=fixed)(torch.ones(3))
    assert (len(reg.records()), len(fixed.records())) == (2, 1)
    assert not any(r.graph_breaks for r in fixed.records()) and compiletrace.diagnose(fixed) == []


def test_an_item_call_breaks_the_graph_and_captured_scalars_mend_it() -> None:
    reg = Registry()
    compiletrace.compile(scalar, backend="eager", registry=reg)(torch.ones(3))
    finding = _only(compiletrace.diagnose(reg), FindingKind.GRAPH_BREAK)
    assert finding.location == _line(scalar, ".item()")
    assert _cost(finding) == pytest.approx(sum(r.total_s for r in reg.records()), abs=1e-4)
    assert "capture_scalar_outputs = True" in finding.fix

    torch._dynamo.reset()
    fixed = Registry()
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        compiletrace.compile(scalar, backend="eager", registry=fixed)(torch.ones(3))
    breaks = [sum(len(r.graph_breaks) for r in x.records()) for x in (reg, fixed)]
    assert breaks == [1, 0]


class LoopModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
            torch._dynamo.graph_break()  # inside a loop: Dynamo gives up on the whole frame
        return x


def test_a_break_inside_a_loop_skips_the_whole_frame() -> None:
    reg = Registry()
    with torch.no_grad():
        compiletrace.compile(LoopModel(), backend="eager", registry=reg)(torch.ones(2, 8))
    skipped = [
        f for f in compiletrace.diagnose(reg) if any(b["frame_skipped"] for b in f.evidence.get("breaks", ()))
    ]
    (finding,) = skipped
    assert finding.location == _line(LoopModel.forward, "graph_break()")
    assert "runs eagerly" in finding.title and "loop" in finding.fix
    # The skipped frame alone, not the blocks' own frames that Dynamo compiled instead.
    assert finding.evidence["frame_compile_ids"] == ["0/0"] and finding.evidence["graphs"] == 0


# -- repeated graphs -------------------------------------------------------------------------


def test_identical_blocks_compiled_in_separate_frames_are_a_regional_compile_candidate() -> None:
    reg = Registry()
    model = Unrolled()
    x = torch.ones(2, 8)
    with torch.no_grad():
        expected = compiletrace.compile(model, backend="eager", registry=reg)(x)
    assert len({r.structure_hash for r in reg.records()}) == 1
    finding = _only(compiletrace.diagnose(reg), FindingKind.REPEATED_GRAPH)
    assert finding.component == "language_model" and finding.location == _where(Unrolled.forward)
    repeats = reg.records()[1:]
    assert _cost(finding) == pytest.approx(sum(r.total_s for r in repeats), abs=1e-4)
    assert finding.evidence["compile_ids"] == ["0/0", "1/0", "2/0", "3/0"]
    assert finding.evidence["estimated_saving_s"] == pytest.approx(_cost(finding), abs=1e-4)
    assert "4 structurally identical graphs" in finding.title and "torch.compile(block" in finding.fix
    assert "(each a call of Block)" in finding.title and finding.evidence["block"] == "Block"
    assert finding.evidence["auto_fix"] == "regional-compile=Block"  # run --apply, doctor --verify
    assert {r.graph_block for r in reg.records()} == {"Block"}

    # The fix: the block compiled on its own, once, with one backend object.
    torch._dynamo.reset()
    fixed = Registry()
    be = compiletrace.backend(backend="eager", registry=fixed)
    for i, block in enumerate(list(model.blocks)):
        model.blocks[i] = torch.compile(block, backend=be)
    with torch.no_grad():
        torch.testing.assert_close(model(x), expected)
    assert (len(reg.records()), len(fixed.records())) == (4, 1)  # 3 repeats -> 0
    assert FindingKind.REPEATED_GRAPH.value not in _kinds(compiletrace.diagnose(fixed))


class Halves(nn.Module):
    """The same operations on each side of a print: two identical graphs, but no block."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = (x * 2).sin()
        print("halfway")
        return (x * 2).sin()


def test_two_halves_of_one_forward_cut_by_a_break_are_no_regional_compile_candidate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reg = Registry()
    compiletrace.compile(Halves(), backend="eager", registry=reg)(torch.ones(2, 8))
    records = reg.records()
    assert len({r.structure_hash for r in records}) == 1 and len(records) == 2
    assert {r.graph_block for r in records} == {""}
    kinds = _kinds(compiletrace.diagnose(reg))
    assert FindingKind.GRAPH_BREAK.value in kinds and FindingKind.REPEATED_GRAPH.value not in kinds


class LinearHalves(nn.Module):
    """A forward split by a print into two halves, each one call of torch's own Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.a(x)
        print("halfway")
        return self.b(x)


def test_halves_that_are_each_one_of_torchs_own_modules_are_no_block_either(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reg = Registry()
    compiletrace.compile(LinearHalves(), backend="eager", registry=reg)(torch.ones(2, 8))
    records = reg.records()
    assert len({r.structure_hash for r in records}) == 1 and {r.graph_block for r in records} == {""}
    kinds = _kinds(compiletrace.diagnose(reg))
    assert FindingKind.GRAPH_BREAK.value in kinds and FindingKind.REPEATED_GRAPH.value not in kinds


def test_a_break_that_leaves_one_graph_says_on_which_side_of_it() -> None:
    def breaks_first(x: torch.Tensor) -> torch.Tensor:
        torch._dynamo.graph_break()
        return x.sin().cos() + 1

    reg = Registry()
    compiletrace.compile(breaks_first, backend="eager", registry=reg)(torch.ones(3))
    assert [r.graph_node_count > 0 for r in reg.records()] == [False, True]  # the resume's graph
    (finding,) = compiletrace.diagnose(reg)
    assert "left it one graph, none before the break" in finding.title


def test_a_backends_error_after_a_break_is_no_fullgraph_failure() -> None:
    def prints(x: torch.Tensor) -> torch.Tensor:
        x = x.sin() * 2
        print("halfway")
        return x.cos() + 1

    def fails_on_cos(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> Any:
        if "cos" in str(gm.graph):
            raise RuntimeError("a backend's own error")
        return gm.forward

    reg = Registry()
    with pytest.raises(Exception, match="a backend's own error"):
        compiletrace.compile(prints, backend=fails_on_cos, registry=reg)(torch.ones(3))
    assert [r.status for r in reg.records()][-1] is compiletrace.CompileStatus.ERROR
    (finding,) = [f for f in compiletrace.diagnose(reg) if f.kind == FindingKind.GRAPH_BREAK.value]
    assert "failed to compile" not in finding.title and "fullgraph" not in finding.fix
    assert "split prints into 2 graphs" in finding.title


# -- compiles after warm-up ------------------------------------------------------------------


class Server(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).tanh()


def test_a_compile_after_warm_up_is_marked_warned_and_caught() -> None:
    reg = Registry()
    model = compiletrace.compile(Server(), is_encoder=True, backend="eager", dynamic=False, registry=reg)
    with torch.no_grad():
        compiletrace.warm_up(lambda: model(torch.ones(1, 8)), compilation_mode="stock", registry=reg)
        assert not any(r.after_warmup for r in reg.records())  # compiles inside the warm-up are its job
        with pytest.warns(RuntimeWarning, match="after its warm-up returned") as caught:
            model(torch.ones(3, 8))  # a batch size the warm-up never saw
            model(torch.ones(4, 8))  # the same frame again: warned once
    assert len([w for w in caught if "after its warm-up" in str(w.message)]) == 1
    late = [r for r in reg.records() if r.after_warmup]
    assert len(late) == 2

    finding = _only(compiletrace.diagnose(reg), FindingKind.COMPILE_AFTER_WARMUP)
    assert (finding.component, finding.location) == ("encoder", _where(Server.forward))
    assert _cost(finding) == pytest.approx(sum(r.total_s for r in late), abs=1e-4)
    assert list(finding.evidence["guards"]) == [GuardKind.SHAPE.value]
    assert "dynamic=True" in finding.fix and "warm up with every shape" in finding.fix

    with torch.no_grad():
        with (
            pytest.raises(
                UnexpectedCompileError, match=r"(?s)1 compile inside .*encoder compiled forward"
            ) as err,
            compiletrace.expect_no_compiles(),
        ):
            model(torch.ones(5, 8))
        assert len(err.value.records) == 1 and isinstance(err.value, compiletrace.CompiletraceError)
        with compiletrace.expect_no_compiles(raise_on_compile=False) as seen:
            model(torch.ones(6, 8))
        assert [r.after_warmup for r in seen.records] == [True]

    # The fix: warm up with the shapes serving sees; then nothing compiles after it.
    torch._dynamo.reset()
    fixed = Registry()
    served = compiletrace.compile(Server(), is_encoder=True, backend="eager", dynamic=False, registry=fixed)
    with torch.no_grad():
        compiletrace.warm_up(
            lambda: [served(torch.ones(b, 8)) for b in (1, 3, 4)], compilation_mode="stock", registry=fixed
        )
        with compiletrace.expect_no_compiles():
            served(torch.ones(3, 8))
            served(torch.ones(4, 8))
    assert not any(r.after_warmup for r in fixed.records())


def test_a_compile_after_warm_up_is_a_span_event_and_counted(tel: Any) -> None:
    reg = Registry()
    model = compiletrace.compile(Server(), backend="eager", dynamic=False, registry=reg)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiletrace.warm_up(lambda: model(torch.ones(1, 8)), compilation_mode="stock", registry=reg)
        model(torch.ones(2, 8))
    warm, late = [s for s in tel.spans() if s.name == "Compile graph"]
    assert "compiletrace.after_warmup" not in (warm.attributes or {}) and not warm.events
    assert (late.attributes or {})["compiletrace.after_warmup"] is True
    assert [e.name for e in late.events] == ["compile after warm-up"]
    data = tel.metrics()
    points = [
        p
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "compiletrace.compile.graphs"
        for p in m.data.data_points
    ]
    assert sorted((dict(p.attributes).get("compiletrace.after_warmup", False), p.value) for p in points) == [
        (False, 1),
        (True, 1),
    ]


def test_expect_no_compiles_sees_lazy_backwards_and_checks_its_argument() -> None:
    reg = Registry()
    model = compiletrace.compile(Server(), backend="aot_eager", registry=reg)
    with compiletrace.expect_no_compiles(raise_on_compile=False) as seen:
        model(torch.ones(2, 8)).sum().backward()
    assert (len(seen.records), len(seen.backwards), len(seen)) == (1, 1, 2)
    assert "the lazy backward of forward" in seen.describe()
    with (
        pytest.raises(compiletrace.ArgumentTypeError),
        compiletrace.expect_no_compiles(raise_on_compile="no"),
    ):  # type: ignore[arg-type]
        pass


# -- frames shared by components -------------------------------------------------------------


def test_a_frame_shared_by_components_names_both_and_the_limit_they_share() -> None:
    reg = Registry()
    vision, text = Vision(), Text()
    enc = compiletrace.compile(vision, is_encoder=True, backend="eager", registry=reg)
    lm = compiletrace.compile(text, backend="eager", registry=reg)
    with torch.no_grad():
        out = lm(enc(torch.ones(1, 4)))
    finding = _only(compiletrace.diagnose(reg), FindingKind.SHARED_FRAME)
    wrapper_code = Vision.forward.__code__  # the wrapper's code: the frame both compile
    assert wrapper_code is Text.forward.__code__
    assert finding.location == f"{wrapper_code.co_filename}:{wrapper_code.co_firstlineno}"
    assert finding.evidence["components"] == ["encoder", "language_model"]
    assert finding.evidence["entries_used"] == 2
    assert finding.evidence["recompile_limit"] == torch._dynamo.config.recompile_limit
    assert _cost(finding) == pytest.approx(reg.records()[1].total_s, abs=1e-4)
    assert finding.seconds == 0  # a limit they share: compiling below the wrapper saves no time
    assert "compile below the shared wrapper" in finding.fix

    # The fix: compile below the wrapper, each component's own forward.
    torch._dynamo.reset()
    fixed = Registry()
    enc_inner = compiletrace.compile(
        Vision.forward.__wrapped__, is_encoder=True, backend="eager", registry=fixed
    )  # type: ignore[attr-defined]
    lm_inner = compiletrace.compile(Text.forward.__wrapped__, backend="eager", registry=fixed)  # type: ignore[attr-defined]
    with torch.no_grad():
        torch.testing.assert_close(lm_inner(text, enc_inner(vision, torch.ones(1, 4))), out)
    assert [r.frame_attempt for r in fixed.records()] == [0, 0] and not any(
        r.shared_with for r in fixed.records()
    )
    assert FindingKind.SHARED_FRAME.value not in _kinds(compiletrace.diagnose(fixed))


# -- ranks -----------------------------------------------------------------------------------


def _rank(rank: int, outcome: str, seconds: float, extra: bool = False) -> RankTimes:
    graphs = {f"language_model/forward#{i}": outcome for i in range(3)}
    if extra:
        graphs["language_model/torch_dynamo_resume_in_forward_at_9#0"] = outcome
    return RankTimes(rank, {"language_model": seconds}, graphs=len(graphs), graph_cache=graphs)


def test_a_rank_on_a_cold_cache_diverges_from_its_warm_peers() -> None:
    result = GatherResult.of([_rank(0, "hit", 0.5), _rank(1, "miss", 9.5), _rank(2, "hit", 0.6)])
    (finding,) = result.diagnose()
    assert (finding.kind, finding.component) == ("rank_divergence", "language_model")
    assert finding.evidence["ranks"] == [1] and finding.seconds == pytest.approx(9.0)
    assert finding.evidence["graphs"]["language_model/forward#0"] == {"0": "hit", "1": "miss", "2": "hit"}
    assert "same warm cache" in finding.fix and finding.title.startswith("rank 1 diverges")
    # Two ranks, one warm: the one that missed is the odd one out.
    (two,) = diagnose_ranks([_rank(0, "miss", 9.0), _rank(1, "hit", 1.0)])
    assert two.evidence["ranks"] == [0]
    # A rank that compiles a graph the others do not.
    (extra,) = diagnose_ranks([_rank(0, "hit", 1.0), _rank(1, "hit", 1.5, extra=True), _rank(2, "hit", 1.0)])
    assert extra.evidence["ranks"] == [1] and "same graphs" in extra.fix
    # The fix: every rank on the same warm cache.
    assert diagnose_ranks([_rank(0, "hit", 0.5), _rank(1, "hit", 0.5), _rank(2, "hit", 0.6)]) == []


def test_rank_figures_carry_each_graphs_outcome() -> None:
    reg = Registry()
    reg.add(make_record("0/0", "language_model", fx_graph_cache=CacheOutcome.MISS))
    reg.add(make_record("0/1", "language_model", fx_graph_cache=CacheOutcome.HIT))
    reg.add(make_record("1/0", "encoder"))
    ranks = RankTimes.of(reg, 3)
    assert ranks.graph_cache == {
        "language_model/forward#0": "miss",
        "language_model/forward#1": "hit",
        "encoder/forward#0": "none",
    }
    assert ranks.cache == {"miss": 1, "hit": 1, "none": 1}
    assert RankTimes.from_dict(json.loads(json.dumps(ranks.to_dict()))) == ranks
    # Every version of a gather file holds them: one without is not one compiletrace wrote.
    lacking = {k: v for k, v in ranks.to_dict().items() if k not in ("cache", "graph_cache")}
    with pytest.raises(RunFileError, match=r"^ranks.json: field 'graph_cache' is missing$"):
        RankTimes.from_dict(lacking, "ranks.json")
    # Figures without outcomes (made in memory): graph counts are all there is to compare.
    (counted,) = diagnose_ranks(
        [
            RankTimes(0, {"lm": 1.0}, graphs=2),
            RankTimes(1, {"lm": 3.0}, graphs=5),
            RankTimes(2, {"lm": 1.0}, graphs=2),
        ]
    )
    assert counted.evidence["ranks"] == [1] and counted.seconds == pytest.approx(2.0)


# -- cache forensics -------------------------------------------------------------------------


def _gelu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * 2 + 1


@pytest.mark.inductor
def test_a_cold_cache_miss_names_its_keys_and_a_warm_cache_ends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    cold = Registry()
    compiletrace.compile(_gelu, is_encoder=True, registry=cold)(torch.randn(16))
    (rec,) = cold.records()
    tiers = {c.tier: c for c in rec.cache_lookups}
    assert tiers["fx_graph"].outcome == "miss" and tiers["aot_autograd"].outcome == "miss"
    assert all(len(c.key) > 20 for c in tiers.values())
    finding = _only(compiletrace.diagnose(cold), FindingKind.CACHE_MISS)
    assert (finding.component, finding.location) == ("encoder", _where(_gelu))
    (graph,) = finding.evidence["graphs"]
    assert graph["keys"] == {"aot_autograd": tiers["aot_autograd"].key, "fx_graph": tiers["fx_graph"].key}
    assert _cost(finding) == pytest.approx(compile_ns(rec) / S, abs=1e-4)
    assert "cold" in finding.title and "compiletrace cache save" in finding.fix

    torch._dynamo.reset()  # the fix: start from the filled cache
    warm = Registry()
    compiletrace.compile(_gelu, is_encoder=True, registry=warm)(torch.randn(16))
    assert warm.records()[0].cache_outcome is CacheOutcome.HIT
    assert {c.outcome for c in warm.records()[0].cache_lookups} == {"hit"}
    assert FindingKind.CACHE_MISS.value not in _kinds(compiletrace.diagnose(warm))


class _Frozen(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).relu()


@pytest.mark.inductor
def test_freezing_is_a_finding_of_its_own_on_every_start_not_a_cold_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TORCHINDUCTOR_FREEZING=1: torch bypasses its caches on every start, warm or not. The
    doctor names the variable and the seconds each start pays, and never says "a cold cache:
    fill it once" (it said so on the second start too); why's fix names it as well."""
    from compiletrace._data.why import Side, explain

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    starts = []
    for _ in range(2):  # a first start and a second on the same cache directory
        torch._dynamo.reset()
        reg = Registry()
        model = compiletrace.compile(_Frozen().eval(), is_encoder=True, registry=reg)
        # torch's own patch, which puts the setting back as it was (monkeypatch's undo deleted
        # it from torch's config module, and every later compile failed on its absence).
        with torch.no_grad(), torch._inductor.config.patch(freezing=True):
            model(torch.randn(4, 8))
        starts.append(reg)
        findings = [f for f in compiletrace.diagnose(reg) if f.kind == FindingKind.CACHE_MISS]
        (frozen,) = findings
        assert "TORCHINDUCTOR_FREEZING=1" in frozen.title and "on every start" in frozen.title
        assert "cold" not in frozen.title and "fill it once" not in frozen.fix
        assert (
            "unset TORCHINDUCTOR_FREEZING" in frozen.fix
            and frozen.evidence["setting"] == "TORCHINDUCTOR_FREEZING"
        )
        (rec,) = reg.records()
        assert _cost(frozen) == pytest.approx(compile_ns(rec) / S, abs=1e-4)
    report = explain(Side("first", tuple(starts[0].records())), Side("second", tuple(starts[1].records())))
    (group,) = report.groups
    assert "TORCHINDUCTOR_FREEZING=1" in group.reason.fix and "compiled region" not in group.reason.fix


def test_partial_misses_and_expensive_hits_from_saved_records() -> None:
    lookups = (CacheLookup("fx_graph", "miss", "fkey1"), CacheLookup("aot_autograd", "miss", "akey1"))
    records = [
        make_record(
            "0/0",
            "language_model",
            frame_ns=3 * S + MS,
            phases={"inductor": 3 * S},
            fx_graph_cache=CacheOutcome.MISS,
            aot_autograd_cache=CacheOutcome.MISS,
            cache_lookups=lookups,
        ),
        make_record(
            "1/0",
            "language_model",
            code_name="head",
            phases={"cache": 1 * MS},
            fx_graph_cache=CacheOutcome.HIT,
            aot_autograd_cache=CacheOutcome.HIT,
        ),
        make_record(
            "2/0",
            "encoder",
            frame_ns=2 * S + 20 * MS,
            phases={"kernel_compile": 2 * S, "cache": 10 * MS},
            fx_graph_cache=CacheOutcome.HIT,
        ),
    ]
    findings = diagnose_records(records)
    assert _kinds(findings) == ["cache_miss", "expensive_hit"]  # 3 s, then 2 s
    miss, hit = findings
    assert _cost(miss) == pytest.approx(3.0) and "keys changed" in miss.fix and "cold" not in miss.title
    assert miss.evidence["graphs"][0]["keys"] == {"fx_graph": "fkey1", "aot_autograd": "akey1"}
    assert (hit.component, _cost(hit)) == ("encoder", pytest.approx(2.0))
    assert "kernels compiled again" in hit.fix and "compiling kernels" in hit.title
    # A record from before cache keys were saved says so.
    (old,) = diagnose_records([make_record(fx_graph_cache=CacheOutcome.MISS, phases={"inductor": S})])
    assert "no cache key" in old.evidence["graphs"][0]["keys"]["note"]


def test_cache_advice_is_never_what_the_run_already_did() -> None:
    """A portable start (artifacts loaded into an empty cache directory, on the CPU) hits every
    cache and still compiles its kernels (tests/apps/test_portable_cache.py measures it): the
    fix is not to save and load the artifacts again, which is what the run did."""
    from compiletrace._doctor import RunContext

    hit = make_record("0/0", "encoder", phases={"kernel_compile": 3 * S, "cache": 10 * MS},
                      fx_graph_cache=CacheOutcome.HIT, aot_autograd_cache=CacheOutcome.HIT)  # fmt: skip
    miss = make_record("1/0", "language_model", code_name="head", phases={"inductor": 2 * S},
                       fx_graph_cache=CacheOutcome.MISS, aot_autograd_cache=CacheOutcome.MISS)  # fmt: skip
    portable = RunContext(loaded_artifacts=True, device="cpu")
    (expensive,) = [f for f in diagnose_records([hit], portable) if f.kind == "expensive_hit"]
    assert "C++ kernels" in expensive.fix and "TORCHINDUCTOR_CACHE_DIR" in expensive.fix
    assert "--cache-artifacts" not in expensive.fix and "will not remove this" in expensive.fix
    (missed,) = [f for f in diagnose_records([miss], portable) if f.kind == "cache_miss"]
    assert "artifacts were loaded" in missed.fix and "--cache-artifacts where it starts" not in missed.fix
    # Without artifacts, a cold cache is still told to fill one, artifacts included.
    (cold,) = [f for f in diagnose_records([miss]) if f.kind == "cache_miss"]
    assert "--cache-artifacts where it starts" in cold.fix
    # The run's meta is the context: a saved portable run is diagnosed the same way.
    loaded = LoadedArtifacts(
        "a.bin", 10, {"inductor": 1}, 0.5, "0" * 64, "verified", None, True, "yours", None
    )
    run = compiletrace.ProfileRun([hit], None, RunMeta(device="cpu", cache_artifacts=loaded))
    assert "C++ kernels" in next(f for f in run.diagnose() if f.kind == "expensive_hit").fix


# -- a healthy run, saved runs, the CLI, the views -----------------------------------------------


def test_a_healthy_run_cries_no_wolf() -> None:
    torch._dynamo.reset()
    run = compiletrace.profile(backend="eager")
    total = sum(r.total_s for r in run.records())
    assert [f for f in run.diagnose() if f.seconds > 0.05 * total] == []


def _pathological_run() -> ProfileRun:
    reg = Registry()
    f = compiletrace.compile(churn, backend="eager", dynamic=False, registry=reg)
    for n in range(2, 5):
        f(torch.ones(n))
    compiletrace.compile(printing, is_encoder=True, backend="eager", registry=reg)(torch.ones(2))
    warmup = WarmupResult(False, 1.0, CompilationTimes())
    return ProfileRun(reg.records(), warmup, {"model": "test"})


def test_a_saved_run_is_diagnosed_elsewhere_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _pathological_run()
    path = tmp_path / "run.json"
    run.save(path)
    loaded = ProfileRun.load(path)
    assert loaded.records() == run.records()
    assert loaded.diagnose() == run.diagnose()

    capsys.readouterr()  # the print the run's graph break made
    out = tmp_path / "findings.json"
    assert cli.main(["doctor", str(path), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("Findings, what did not compile first, then most seconds at stake (2):")
    assert "[recompiles] language_model" in text and "[graph_break] encoder" in text
    assert " ".join(f"fix: {run.diagnose()[0].fix}".split()) in " ".join(text.split())  # wrapped
    doc = json.loads(out.read_text())
    assert (doc["kind"], doc["schema_version"]) == (DOCTOR_KIND, 1)
    assert [f["kind"] for f in doc["findings"]] == _kinds(run.diagnose())
    seconds = [f["seconds"] for f in doc["findings"]]
    assert seconds == sorted(seconds, reverse=True)
    assert set(doc["findings"][0]) == {"kind", "component", "seconds", "title", "location", "evidence", "fix"}

    assert cli.main(["doctor", str(path), "--fail-on", "graph_break,recompiles"]) == 1
    assert cli.main(["doctor", str(path), "--fail-on", "shared_frame"]) == 0
    capsys.readouterr()
    assert cli.main(["doctor", str(path), "--json", "-"]) == 0  # JSON alone on stdout
    assert json.loads(capsys.readouterr().out)["kind"] == DOCTOR_KIND


def test_diagnose_and_the_doctor_command_give_the_same_findings_on_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """compiletrace.diagnose(registry) and 'compiletrace doctor RUN.json' run one list of
    rules: a warm-up that compiled nothing (a phase in the registry, the timeline in the
    file) is found by both, beside the recompiles."""
    from compiletrace._app.timeline import startup_timeline
    from compiletrace._data.findings import doctor_dict

    reg = Registry()
    f = compiletrace.compile(churn, backend="eager", dynamic=False, registry=reg)
    for n in range(2, 5):
        f(torch.ones(n))
    model = torch.nn.Linear(8, 8)  # never compiled: its warm-up compiles nothing
    result = compiletrace.warm_up(lambda: model(torch.ones(2, 8)), compilation_mode="stock", registry=reg)
    path = tmp_path / "run.json"
    ProfileRun(reg.records(), result, {}, startup_timeline(reg)).save(path)
    out = tmp_path / "findings.json"
    assert cli.main(["doctor", str(path), "--json", str(out)]) == 0
    capsys.readouterr()

    live = compiletrace.diagnose(reg)
    assert sorted(f.kind.value for f in live) == ["recompiles", "useless_warmup"]
    assert json.loads(out.read_text()) == json.loads(json.dumps(doctor_dict(live)))


def test_the_doctor_command_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run.json"
    ProfileRun((), WarmupResult(True, 0.0, CompilationTimes())).save(run)
    assert cli.main(["doctor", str(run)]) == 0
    assert "No findings" in capsys.readouterr().out
    assert cli.main(["doctor", str(run), "--fail-on", "recompiles,nonsense"]) == 2
    assert "unknown finding kind nonsense" in capsys.readouterr().err
    assert cli.main(["doctor", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "other.json").write_text('{"kind": "something else"}')
    assert cli.main(["doctor", str(tmp_path / "other.json")]) == 2
    assert cli.main(["doctor", str(run), "--json", str(run)]) == 2  # would overwrite its input


def test_the_doctor_command_reads_a_gathered_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gathered.json"
    path.write_text(json.dumps(GatherResult.of([_rank(0, "hit", 1.0), _rank(1, "miss", 4.0)]).to_dict()))
    assert cli.main(["doctor", str(path), "--fail-on", "rank_divergence"]) == 1
    assert "[rank_divergence] language_model 3.00 s: rank 1 diverges" in capsys.readouterr().out


def test_the_views_render_findings_most_first_and_escaped() -> None:
    findings = [
        Finding(
            "graph_break",
            "lm",
            2.0,
            "break <here>",
            "fix it",
            "m.py:3",
            {"ids": ["0/0", "1/0", "2/0", "3/0"]},
        ),
        Finding("recompiles", "enc", 1.0, "recompiled", "dynamic=True"),
    ]
    text = findings_text(findings, limit=1)
    assert text.splitlines() == [
        "Findings, what did not compile first, then most seconds at stake (2):",
        "1. [graph_break] lm 2.00 s: break <here>",
        "   at m.py:3",
        "   ids: 0/0; 1/0; 2/0 (+1 more)",
        "   fix: fix it",
        "... and 1 more finding ('compiletrace doctor RUN.json')",
    ]
    page = findings_html(findings)
    assert "break &lt;here&gt;" in page and "<here>" not in page and page.count("<tr>") == 3


# -- the guard classifier, on torch 2.13's own reason texts ----------------------------------


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3", GuardKind.SHAPE),
        ("0/1: tensor 'x' stride mismatch at index 0. expected 1, actual 2", GuardKind.SHAPE),
        # A size already dynamic: a relation torch guards on, which no dynamic setting removes.
        ("0/0: L['x'].size()[0] <= 8", GuardKind.SYMBOLIC),
        (
            "0/1: (x.size()[2] // 4) == (2*((7 + x.size()[2]) // 8))  # if a.shape[-1] == 2 * b.shape[-1]:",
            GuardKind.SYMBOLIC,
        ),
        # A decorator's own arguments: the function it wraps, how its caller passed them.
        ("0/0: ___check_obj_id(func.__code__, 140638084139648), type=<class 'code'>", GuardKind.WRAPPER),
        ("0/1: len(args) == 1      # return func(*args, **kwargs)  # m.py:5 in wrapper", GuardKind.WRAPPER),
        ("0/0: tensor 'x' dtype mismatch. expected Float, actual Double", GuardKind.DTYPE_DEVICE),
        ("0/0: self.step == 0  # self.step += 1  # t.py:27 in forward (HINT: ...)", GuardKind.VALUE),
        ("0/0: c == 0.5  # def h(x, c): return x * c", GuardKind.VALUE),
        ("0/0: len(lst) == 2  # def k(x, lst): ...", GuardKind.VALUE),
        ("0/0: ___check_type_id(mod, 94385470496576), type=<class 'ReLU'>", GuardKind.IDENTITY),
        ("0/0: ___check_obj_id(L['fn'], 140000)", GuardKind.IDENTITY),
        ("0/0: GLOBAL_STATE changed: grad_mode", GuardKind.GRAD_MODE),
        ("1/0: tensor 'x' requires_grad mismatch. expected requires_grad=0", GuardKind.GRAD_MODE),
        (
            "0/0: BACKEND_MATCH failure: torch.compile detected different backend callables.",
            GuardKind.BACKEND,
        ),
        ("Unable to find recompilation reasons", GuardKind.OTHER),
        (None, GuardKind.OTHER),
        # transformers' generation caches, as torch words them on T5 and Llama generate
        (
            "0/0: kwargs['cache'].is_updated[0] == False    # if is_updated:  # t5.py:321 in forward",
            GuardKind.CACHE_STATE,
        ),
        (
            "0/1: tensor 'kwargs['cache'].layers[0].keys' size mismatch at index 2. expected 5, actual 6",
            GuardKind.CACHE_STATE,
        ),
        (
            "0/0: tensor 'kwargs['cache_position']' size mismatch at index 0. expected 5, actual 1",
            GuardKind.SHAPE,
        ),
    ],
)
def test_failed_guards_are_classified(reason: str | None, kind: GuardKind) -> None:
    assert classify_guard(reason) is kind


@pytest.mark.parametrize(
    ("reason", "wanted", "unwanted"),
    [
        # A size torch always specialises: dynamic shapes cannot remove the recompile.
        (
            "0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 5, actual 1",
            "input_ids changed from size 5 to 1 in dimension 1, and torch specialises sizes 0 and 1",
            "compile with dynamic=True",
        ),
        (
            "0/0: tensor 'L['x']' size mismatch at index 0. expected 16, actual 17",
            "torch._dynamo.maybe_mark_dynamic(x, 0)",
            "specialises",
        ),
        # generate's next prompt, checked against the decode step's graph: a new length, whose
        # fix is marking it dynamic (not the size-1 specialisation it looks like).
        (
            "0/3: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 1, actual 9",
            "a new length (in generate, the next prompt's prefill",
            "no setting removes",
        ),
        ("0/2: (x.size()[2] // 4) == (2*((7 + x.size()[2]) // 8))", "the size is dynamic already", "mark"),
        # A string is never "held in a tensor".
        ("0/0: L['mode'] == 'default'  # if mode == 'default':", "mode is a string", "tensor"),
        ("0/0: len(kwargs) == 6   # if name in kwargs:", "another set of keyword arguments", "tensor"),
        ("0/0: self.step == 0  # self.step += 1  # t.py:27", "self.step changes", "string"),
        # The cache: its growth has a fix, its flag flips once.
        (
            "0/1: tensor 'kwargs['cache'].layers[0].keys' size mismatch at index 2. expected 5, actual 6",
            "cache.layers[0].keys grows by a step every call (a dynamic cache): torch compiles it dynamic",
            "hold it in a tensor",
        ),
        (
            "0/0: kwargs['cache'].is_updated[0] == False    # if is_updated:  # t5.py:321 in forward",
            "a flag of the cache flips once",
            "hold it in a tensor",
        ),
    ],
)
def test_each_guard_gets_a_fix_that_applies_to_it(reason: str, wanted: str, unwanted: str) -> None:
    fix = guard_fix(classify_guard(reason), reason)
    assert wanted in fix and unwanted not in fix


def test_a_guard_is_quoted_without_the_source_line_torch_pads_it_with() -> None:
    assert guard_text("0/0: self.step == 0                # self.step += 1  # t.py:27 in forward") == (
        "self.step == 0"
    )


def test_diagnosing_ten_thousand_records_takes_under_a_second() -> None:
    records: list[GraphRecord] = []
    for i in range(10_000):
        frame = i % 500
        records.append(
            make_record(
                f"{frame}/{i // 500}",
                ("encoder", "language_model")[i % 2],
                start_unix_ns=i * 10 * MS,
                code_name=f"fn{frame}",
                code_filename="model.py",
                code_firstlineno=frame,
                is_recompile=i >= 500,
                recompile_reason=None
                if i < 500
                else "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3",
                structure_hash=f"h{i % 50}",
                graph_breaks=(GraphBreak("Failed to trace builtin operator `print`", "model.py", frame + 1),)
                if i % 7 == 0
                else (),
                fx_graph_cache=(CacheOutcome.MISS, CacheOutcome.HIT)[i % 2],
                phases={"inductor": 5 * MS},
                after_warmup=i > 9_000,
            )
        )
    # This thread's CPU time: what the diagnosis costs, not how busy the machine is.
    start = time.thread_time()
    findings = diagnose_records(records)
    elapsed = time.thread_time() - start
    assert elapsed < 5.0  # generous: the benchmark's figure is far below a second
    assert {f.kind for f in findings} >= {"recompiles", "graph_break", "repeated_graph", "cache_miss"}


# -- warm-ups that compiled nothing --------------------------------------------------------


def test_a_warm_up_that_compiled_nothing_is_its_seconds_and_the_guard_is_the_fix() -> None:
    from compiletrace import ProfileRun
    from compiletrace._app.timeline import startup_timeline

    for compiles in (False, True):
        reg = Registry()
        model = torch.nn.Linear(8, 8)
        if compiles:
            model = compiletrace.compile(model, backend="eager", registry=reg)
        result = compiletrace.warm_up(
            lambda m=model: m(torch.ones(2, 8)), compilation_mode="stock", registry=reg
        )
        run = ProfileRun(reg.records(), result, {}, startup_timeline(reg))
        found = [f for f in run.diagnose() if f.kind == FindingKind.USELESS_WARMUP]
        assert len(found) == (0 if compiles else 1)
        if found:
            assert run.timeline is not None
            (phase,) = [p for p in run.timeline.phases if p.name == "Warmup (CPU)"]
            assert found[0].seconds == phase.duration_ns / 1e9
            assert "compiled nothing" in found[0].title and "CompilationMode.NONE" in found[0].fix


def test_an_engines_warm_up_phases_are_judged_by_the_compiles_inside_them() -> None:
    from compiletrace._data.timeline import PhaseRecord, build_timeline
    from compiletrace._doctor import diagnose_run

    inside = make_record("0/0", "model", start_unix_ns=2 * S, frame_ns=S)
    phases = [
        PhaseRecord("profile_run", 1 * S, 5 * S),  # vLLM's memory profiling: it compiled
        PhaseRecord("dummy run", 6 * S, 9 * S),  # compiled nothing: 3 s for nothing
        PhaseRecord("load weights", 9 * S, 10 * S),  # not a warm-up
    ]
    timeline = build_timeline(phases, [inside], 0, 11 * S)
    (finding,) = [f for f in diagnose_run([inside], None, timeline) if f.kind == FindingKind.USELESS_WARMUP]
    assert finding.seconds == 3.0 and finding.evidence["phase"] == "dummy run"


# -- the user's names in advice ---------------------------------------------------------------


def _decorated(f: Callable[..., Any]) -> Callable[..., Any]:
    """A library's decorator around a forward: torch compiles it, guarding ``args[0]``."""

    @functools.wraps(f)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        return f(self, *args, **kwargs)

    return wrapper


class DecoratedTower(nn.Module):
    @_decorated
    def forward(self, pixel_values: torch.Tensor, scale: float = 2.0) -> torch.Tensor:
        return pixel_values.sin() * scale


def test_mark_dynamic_advice_names_the_users_parameter_behind_a_decorator() -> None:
    torch._dynamo.reset()
    with compiletrace.observe(registry=Registry()) as observed:
        tower = torch.compile(DecoratedTower(), backend="eager")
        for rows in (4, 8):
            tower(torch.ones(rows, 3))
    records = observed.registry.records()
    recompile = records[-1]
    assert "'args[0]'" in (recompile.recompile_reason or "")  # torch names the wrapper's *args
    assert recompile.arg_names == ("pixel_values", "scale")  # kept in the record...
    again = GraphRecord.from_dict(json.loads(json.dumps(recompile.to_dict())))
    assert again.arg_names == recompile.arg_names  # ... and in its file
    (finding,) = [f for f in diagnose_records(records) if f.kind == FindingKind.RECOMPILES]
    assert "maybe_mark_dynamic(pixel_values, 0)" in finding.fix and "(args, 0)" not in finding.fix
    assert "--apply \"mark-dynamic=L['args'][0]:0\"" in finding.fix  # torch's own name, for torch
    # A name from a file is checked.
    with pytest.raises(RunFileError, match="arg_names"):
        GraphRecord.from_dict({**recompile.to_dict(), "arg_names": ["pixel_values); import os"]})
