"""An unmodified program: a stack of layers that stops early when the activations die out,
reading the test's value with ``.item()`` inside the compiled forward (an early-exit loop).
Nothing in it knows of compiletrace.

    python early_exit.py [whole|body]

``whole``: the model compiled whole; ``body``: the edit that compiles one layer's step on its
own and keeps the loop and its exit check in Python.
"""

import sys

import torch
from torch import nn


class EarlyExit(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(32, 32) for _ in range(6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
            if x.abs().mean().item() < 0.01:  # nothing left to refine: stop
                break
        return x


def step(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """One layer's step: what the edit compiles on its own (every layer's weights an input)."""
    return torch.tanh(nn.functional.linear(x, weight, bias))


class EarlyExitByStep(nn.Module):
    """The edit: the step compiled, the loop and its exit check in Python."""

    def __init__(self, model: EarlyExit) -> None:
        super().__init__()
        self.layers = model.layers
        self.step = torch.compile(step, backend="aot_eager")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = self.step(x, layer.weight, layer.bias)
            if x.abs().mean().item() < 0.01:
                break
        return x


if __name__ == "__main__":
    torch.manual_seed(0)
    whole = (sys.argv[1] if len(sys.argv) > 1 else "whole") == "whole"
    model = (
        torch.compile(EarlyExit().eval(), backend="aot_eager")
        if whole
        else EarlyExitByStep(EarlyExit().eval())
    )
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(4, 32))
    print("done")
