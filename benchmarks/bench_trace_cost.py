"""What ``trace_cost`` costs a compile: the bar is 5% of compile time on, nothing off.

Run: .venv/bin/python benchmarks/bench_trace_cost.py [--runs R] [--blocks B]

One model (B blocks of two linear layers, a GELU, a layer norm and a small helper, so
Dynamo inlines a few hundred calls) is compiled with the "eager" backend (Dynamo's share
dominates, which is where the hooks sit), ``torch._dynamo.reset()`` before each compile, in
three variants interleaved in every run so that they share the machine's speed of the
moment:

1. today: the hooks not installed (torch's own ``inline_call`` and ``run``);
2. off: the hooks installed, ``trace_cost`` off (one attribute check per inlined call);
3. on: ``trace_cost=True`` (the tree recorded).

Each figure is the median over R runs of one first call's CPU time (the compile; the
process's CPU time, as the machine is shared), after a ``gc.collect()``.
Switching between 1 and 2 swaps torch's two attributes back and forth: a benchmark's
liberty, never the package's.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import torch

import compiletrace
from compiletrace._core import torch_compat as tc


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.b(torch.nn.functional.gelu(self.a(scale(x)))))


def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 0.5 + 1.0


class Model(torch.nn.Module):
    def __init__(self, blocks: int) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def _compile_s(model: torch.nn.Module, trace_cost: bool) -> float:
    torch._dynamo.reset()
    reg = compiletrace.Registry()
    compiled = compiletrace.compile(model, backend="eager", registry=reg, trace_cost=trace_cost)
    gc.collect()  # no variant pays for another's garbage
    start = time.process_time()  # CPU time: on a shared machine, less noisy than wall time
    compiled(torch.randn(2, 16))
    took = time.process_time() - start
    (record,) = reg.records()
    assert bool(record.trace_cost) == trace_cost
    return took


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--blocks", type=int, default=24)
    args = parser.parse_args()
    from torch._dynamo.symbolic_convert import InliningInstructionTranslator, InstructionTranslator

    model = Model(args.blocks)
    today = (InliningInstructionTranslator.__dict__["inline_call"], InstructionTranslator.__dict__.get("run"))
    assert tc.install_trace_cost_hook()
    hooked = (InliningInstructionTranslator.__dict__["inline_call"], InstructionTranslator.__dict__["run"])

    def put(state: tuple[object, object]) -> None:
        InliningInstructionTranslator.inline_call = state[0]  # type: ignore[method-assign,assignment]
        if state[1] is None:
            del InstructionTranslator.run  # back to the inherited one
        else:
            InstructionTranslator.run = state[1]  # type: ignore[method-assign,assignment]

    _compile_s(model, True)  # warm the imports and caches once
    figures: dict[str, list[float]] = {"today": [], "off": [], "on": []}
    variants = {"today": (today, False), "off": (hooked, False), "on": (hooked, True)}
    order = list(variants)
    for run in range(args.runs):
        for name in order[run % 3 :] + order[: run % 3]:  # rotated: no variant always goes first
            state, on = variants[name]
            put(state)
            figures[name].append(_compile_s(model, on))
    put(hooked)
    base = statistics.median(figures["today"])
    print(f"{args.blocks} blocks, backend eager, medians of {args.runs} interleaved runs")
    for name, values in figures.items():
        med = statistics.median(values)
        print(f"{name:>6}: {med * 1000:8.1f} ms  ({(med / base - 1) * 100:+.1f}% vs today)")
    paired = statistics.median(on / off for on, off in zip(figures["on"], figures["off"], strict=True))
    print(f"on / off, median of the runs' ratios: {(paired - 1) * 100:+.1f}%")


if __name__ == "__main__":
    main()
