"""What the live recording takes for compiles after ready and the warm-start ledger, on real
compiles: each frame's split into ledger lines (adding up to its time exactly), the work
torch times on a compiled graph's first calls (emitted here by torch's own emitters, with
the arguments its GPU code passes: a CPU build never autotunes), the stance a fix sets at the
ready mark, and the process's mark itself."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch

import compiletrace
from compiletrace._core import ready as ready_mark
from compiletrace._core import torch_compat as tc
from compiletrace._data.ledger import split_frame
from compiletrace._data.ready import CALL, FUNCTION, ReadyMark
from compiletrace._data.records import AUTOTUNE, CUDAGRAPH
from compiletrace._data.torch_text import STANCE_REFUSED
from tests.programs.make_gpu_trace import first_calls, runtime_autotune


@pytest.fixture
def registry() -> Iterator[compiletrace.Registry]:
    torch._dynamo.reset()
    yield compiletrace.Registry()
    torch._dynamo.reset()


def _block() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())


def test_each_frame_is_split_into_ledger_lines_that_add_up_to_it(registry: compiletrace.Registry) -> None:
    with compiletrace.observe(registry=registry):
        model = torch.compile(_block(), backend="aot_eager")
        model(torch.ones(4, 8))
        model(torch.ones(5, 8))  # a recompile
    records = registry.records()
    assert [r.compile_id for r in records] == ["0/0", "0/1"]
    for r in records:
        assert sum(ns for *_, ns in r.frame_lines) == r.frame_ns
        lines = {line for line, _, _ in r.frame_lines}
        assert {"Dynamo tracing", "guard building", "compile (cache miss)"} <= lines, lines
    # The split survives the run file.
    assert compiletrace.GraphRecord.from_dict(records[0].to_dict()) == records[0]
    # It is torch's regions read by the same function a trace's are: recomputing it from a
    # record's own lines is the identity.
    first = records[0]
    regions = []
    at = first.start_unix_ns
    for line, _, ns in first.frame_lines:
        if line == "guard building":
            regions.append(("build_guards", at, at + ns))
        at += ns
    assert ("guard building", "guard building", regions[0][2] - regions[0][1]) in split_frame(
        regions, first.start_unix_ns, first.end_unix_ns
    )


def test_first_call_work_is_recorded_with_its_graph_kernel_and_direction(
    registry: compiletrace.Registry,
) -> None:
    compiled = compiletrace.compile(_block(), backend="aot_eager", registry=registry)
    compiled(torch.ones(4, 8))  # graph 0/0: what the work below is done on
    first_calls("0/0")  # torch's emitters, as a GPU's first calls of graph 0/0
    events = registry.runtime_events()
    assert [(e.kind, e.compile_id, e.backward, e.detail) for e in events] == [
        (AUTOTUNE, "0/0", False, "triton_poi_fused_add_0"),
        (AUTOTUNE, "0/0", False, "triton_red_fused_sum_1"),
        (CUDAGRAPH, "0/0", False, "cudagraphify.get_container"),
        (CUDAGRAPH, "0/0", False, "CUDAGraphNode.record"),
        (AUTOTUNE, "0/0", True, "triton_poi_fused_mul_2"),
    ]
    assert all(e.duration_ns >= 1_000_000 for e in events)  # each slept at least a millisecond
    assert [e.start_unix_ns for e in events] == sorted(e.start_unix_ns for e in events)
    assert events[0].start_unix_ns >= registry.records()[0].end_unix_ns


def test_first_call_work_inside_a_compile_is_that_compiles(registry: compiletrace.Registry) -> None:
    def autotune_while_compiling(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> object:
        runtime_autotune("0/0", "triton_poi_fused_add_0", seconds=0.001, end_call=False)
        return gm.forward

    with compiletrace.observe(registry=registry):
        torch.compile(_block(), backend=autotune_while_compiling)(torch.ones(4, 8))
    assert registry.runtime_events() == ()
    (record,) = registry.records()
    assert "autotuning at first calls" in {line for line, _, _ in record.frame_lines}


@pytest.fixture
def default_stance() -> Iterator[None]:
    yield
    torch.compiler.set_stance("default")


def test_the_stance_fixes_refuse_or_run_eagerly(
    registry: compiletrace.Registry, default_stance: None
) -> None:
    assert tc.stance_fixes_available()
    fn = torch.compile(lambda x: x.sin() * 2, backend="eager", dynamic=False)
    fn(torch.ones(2))
    assert tc.apply_stance_fix("fail-after-ready") == "fail_on_recompile"
    with pytest.raises(RuntimeError, match=STANCE_REFUSED):
        fn(torch.ones(3))
    assert tc.apply_stance_fix("eager-after-ready") == "eager_on_recompile"
    assert fn(torch.ones(3)).shape == (3,)  # ran eagerly: no compile, no error


def test_the_first_mark_of_a_process_wins_and_a_forked_child_has_none() -> None:
    ready_mark._reset_for_tests()
    told: list[ReadyMark] = []
    ready_mark.on_ready(told.append)
    try:
        first = ready_mark.mark_ready(FUNCTION, "m:warm_up", unix_ns=5)
        assert first == ReadyMark(5, os.getpid(), FUNCTION, "m:warm_up")
        assert compiletrace.ready() is None  # later: not kept
        assert told == [first] and ready_mark.current_mark() == first
        late: list[ReadyMark] = []
        ready_mark.on_ready(late.append)  # a listener added after the mark hears it at once
        assert late == [first]
        # A forked child inherits the parent's memory, not its mark.
        ready_mark._mark = first._replace(pid=first.pid + 1)
        assert ready_mark.current_mark() is None
        assert ready_mark.mark_ready(CALL, "compiletrace.ready()") is not None
    finally:
        ready_mark._reset_for_tests()
