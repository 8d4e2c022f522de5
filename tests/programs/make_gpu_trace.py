"""Write, on a machine without a GPU, the TORCH_TRACE log a GPU server's start writes: torch's
own emitters, called with the arguments torch's GPU code passes them, so every line is in
the exact format the installed torch writes (the tests read these logs on a CPU: what a
team's CPU-only CI would read from its GPU servers' traces).

    TORCH_TRACE=DIR python tests/programs/make_gpu_trace.py

What the log holds, in order (a model compiled with aot_eager, whose backend call also
does what inductor does on a GPU):

1. the warm-up: the frame compile ``0/0`` of ``forward``, inside which (as
   ``async_compile.py``, ``select_algorithm.py`` and ``scheduler.py`` time them on a GPU)
   two Triton kernels compile (``async_compile.precompile``), a matmul template autotunes
   and precompiles, fused nodes are benchmarked, and the ``triton_kernel_info`` artifact
   says which kernel's autotune cache missed; its ``compilation_metrics`` row carries those
   columns. Then the graph's first calls, as ``CompiledFxGraph.__call__`` ends each with the
   runtime metrics context's ``finish()``: call 1 autotunes the two kernels
   (``CachingAutotuner.benchmark_all_configs``) and makes its CUDA-graph tree's container;
   call 2 records the CUDA graph (``CUDAGraphNode.record``, inside the
   ``CUDAGRAPH_RECORDING`` callbacks); the backward graph's first call runs
   coordinate-descent tuning; one ``compilation_metrics_runtime`` (``bwd_...`` for the
   backward) row per call;
2. compiletrace's ready mark (the ``compiletrace_ready`` artifact, as ``compiletrace run``
   writes it at the ready mark);
3. a request with a batch size the warm-up did not cover: a real recompile, ``0/1``, and
   that graph's own first calls (autotuning, a CUDA-graph recording): compiles after ready.

Only the seconds (short sleeps), the kernels' names and the pid are made up. The functions
are importable (``tests/inputs/runs/regenerate_runs.py`` uses :func:`runtime_autotune`).
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch
import torch._dynamo.utils as dynamo_utils
import torch._inductor.async_compile as async_compile
from torch._dynamo.callback import CallbackTrigger, callback_handler
from torch._guards import CompileId
from torch._inductor.cudagraph_trees import CompilationMode, dynamo_timed_cudagraph

KERNELS = ("triton_poi_fused_add_0", "triton_red_fused_sum_1")


def _compile_id(text: str) -> CompileId:
    frame, _, attempt = text.partition("/")
    return CompileId(frame_id=int(frame), frame_compile_id=int(attempt))


def _finish_call() -> None:
    # What CompiledFxGraph.__call__ does at the end of every call: one runtime row, if any
    # runtime region ran during the call.
    dynamo_utils.get_runtime_metrics_context().finish()


def runtime_autotune(
    compile_id: str, kernel: str, seconds: float = 0.02, backward: bool = False, end_call: bool = True
) -> None:
    """One kernel's autotuning at its graph's first call, as CachingAutotuner.run times it
    (runtime/triton_heuristics.py), and (``end_call``) the end of that call."""
    with dynamo_utils.dynamo_timed(
        "CachingAutotuner.benchmark_all_configs",
        log_pt2_compile_event=True,
        metadata={"kernel_name": kernel},
        dynamo_compile_column_us="runtime_triton_autotune_time_us",
        compile_id=_compile_id(compile_id),
        is_backward=backward,
        log_waitcounter=True,
        waitcounter_name_override="triton_autotuner",
    ):
        time.sleep(seconds)
    if end_call:
        _finish_call()


def _compile_time_gpu_work() -> None:
    """Inside a frame's backend call (its compile context and metrics context are open):
    what inductor times on a GPU while compiling."""
    metrics = dynamo_utils.get_metrics_context()
    async_compile._compile_start()
    infos: dict[str, dict[str, Any]] = {
        KERNELS[0]: {
            "autotune_cache_state": "only 1 config",
            "only_config": (("XBLOCK", 256), ("num_warps", 4), ("num_stages", 1)),
        },
        KERNELS[1]: {"autotune_cache_state": "miss", "num_configs": 4},
    }
    for kernel, info in infos.items():
        with dynamo_utils.dynamo_timed(
            "async_compile.precompile",
            log_pt2_compile_event=True,
            dynamo_compile_column_us="triton_compile_time_us",
            log_waitcounter=True,
            waitcounter_name_override="compile_triton",
        ):
            start = time.time_ns()
            time.sleep(0.01)
            elapsed_us = (time.time_ns() - start) // 1000
            info["compile_time_us"] = elapsed_us
            async_compile._add_triton_kernel_info(kernel, info)
            metrics.add_top_n("triton_kernel_compile_times_us", kernel, elapsed_us)
    shapes = {
        "autotune_strides": "[[16, 1], [16, 1]]",
        "autotune_dtypes": "[torch.float16, torch.float16]",
        "autotune_shape": "[[8, 16], [16, 16]]",
        "autotune_offset": "[0, 0]",
    }
    for name, seconds, metadata in (
        ("mm_template_autotuning", 0.02, shapes),
        ("mm_template_precompiling", 0.005, {}),
        ("benchmark_fused_nodes", 0.005, {}),
    ):
        with dynamo_utils.dynamo_timed(
            name,
            log_pt2_compile_event=True,
            dynamo_compile_column_us="compile_time_autotune_time_us",
            metadata=metadata,
        ):
            time.sleep(seconds)
    async_compile._compile_end()


def gpu_like_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Any:
    """aot_eager, doing inside its call what inductor does on a GPU."""
    _compile_time_gpu_work()
    from torch._dynamo.backends.registry import lookup_backend

    return lookup_backend("aot_eager")(gm, example_inputs)


def first_calls(compile_id: str) -> None:
    """A graph's first calls on a GPU: autotuning and CUDA-graph recording."""
    cid = _compile_id(compile_id)
    for kernel in KERNELS:  # call 1: both kernels autotune; the tree makes its container
        runtime_autotune(compile_id, kernel, end_call=False)
    with dynamo_timed_cudagraph("cudagraphify.get_container", cid, CompilationMode.FORWARD):
        time.sleep(0.001)
    _finish_call()
    # call 2: CUDA-graph trees record on the second call
    with (
        callback_handler.install_callbacks(CallbackTrigger.CUDAGRAPH_RECORDING, str(cid)),
        dynamo_timed_cudagraph("CUDAGraphNode.record", cid, CompilationMode.FORWARD),
    ):
        time.sleep(0.03)
    _finish_call()
    # the backward graph's first call: coordinate-descent tuning of one kernel
    with dynamo_utils.dynamo_timed(
        "CachingAutotuner.coordinate_descent_tuning",
        log_pt2_compile_event=False,
        metadata={"kernel_name": "triton_poi_fused_mul_2"},
        dynamo_compile_column_us="runtime_triton_autotune_time_us",
        compile_id=cid,
        is_backward=True,
        log_waitcounter=True,
        waitcounter_name_override="triton_autotuner",
    ):
        time.sleep(0.01)
    _finish_call()
    _finish_call()  # a call with nothing timed writes nothing


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) * 2


def main() -> None:
    if not os.environ.get("TORCH_TRACE"):
        raise SystemExit("set TORCH_TRACE=DIR: this program writes torch's trace there")
    from compiletrace._core import torch_compat as tc
    from compiletrace._data.ready import CALL, READY_ARTIFACT, ReadyMark

    torch.manual_seed(0)
    model = torch.compile(Model(), backend=gpu_like_backend)
    with torch.no_grad():
        model(torch.randn(8, 16))  # the warm-up: frame 0/0
    first_calls("0/0")
    mark = ReadyMark(time.time_ns(), os.getpid(), CALL, "compiletrace.ready()")
    if not tc.write_trace_artifact(READY_ARTIFACT, mark.to_dict()):
        raise SystemExit("torch wrote no trace artifact")
    with torch.no_grad():
        model(torch.randn(12, 16))  # a batch the warm-up did not cover: 0/1
    first_calls("0/1")
    print(f"torch {torch.__version__}: wrote the trace to {os.environ['TORCH_TRACE']}")


if __name__ == "__main__":
    main()
