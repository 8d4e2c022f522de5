"""The tiny programs ``regenerate_runs.py`` compiles, one or two per doctor rule. They live
apart from the script so that the file:line each saved run records stays put when the
script changes."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

UNROLLED = 600  # iterations Dynamo unrolls in the planted hotspot: most of a frame's tracing


def churn(x: torch.Tensor) -> torch.Tensor:
    """Compiled with static shapes and called with a new size each time: recompiles."""
    return x.sin() + 1


def size_relation(x: torch.Tensor) -> torch.Tensor:
    """A branch on a relation between two sizes that a size change makes dynamic: called on
    a new length, it recompiles dynamic; on one where the relation flips, on the relation."""
    a = torch.nn.functional.avg_pool1d(torch.nn.functional.avg_pool1d(x, 2), 2)
    b = x[..., ::8]
    if a.shape[-1] == 2 * b.shape[-1]:  # a branch on a relation between dynamic sizes
        return a
    return b


def limited(x: torch.Tensor) -> torch.Tensor:
    """The same, past a recompile limit of 3: runs eagerly after."""
    return x.cos() * 3


def printing(x: torch.Tensor) -> torch.Tensor:
    """A print between two operations: a graph break."""
    x = x.sin()
    print("printing: halfway")
    return x.cos()


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).relu() * 2


class Unrolled(nn.Module):
    """Four identical blocks with a graph break between each: four frames, one structure."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList(Block() for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks[0](x)
        torch._dynamo.graph_break()
        x = self.blocks[1](x)
        torch._dynamo.graph_break()
        x = self.blocks[2](x)
        torch._dynamo.graph_break()
        return self.blocks[3](x)


class Stack(nn.Module):
    """Four identical blocks called in a loop, compiled whole: one graph that holds the
    block four times."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList(Block() for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def gelu(x: torch.Tensor) -> torch.Tensor:
    """What inductor compiles in the cache runs: a kernel of its own."""
    return torch.nn.functional.gelu(x) * 2 + 1


def shared_forward(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """Like transformers' forward decorator: every module's forward runs through one code object."""

    @functools.wraps(fn)
    def wrapper(self: nn.Module, *args: Any) -> torch.Tensor:
        return fn(self, *args)

    return wrapper


class Vision(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    @shared_forward
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).relu()


class Text(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    @shared_forward
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).tanh()


def planted_hotspot(x: torch.Tensor) -> torch.Tensor:
    """A Python loop Dynamo unrolls UNROLLED times."""
    for i in range(UNROLLED):
        x = x + i
    return x


class Layers(nn.Module):
    """Ordinary layers around the hotspot."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(planted_hotspot(self.a(x))))


def wrapped_in_ddp() -> nn.Module:
    """A model of torch's own (nn.Sequential) in DistributedDataParallel, in a process group of
    one (gloo): compiled whole, Dynamo traces none of it."""
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    return DistributedDataParallel(nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)))
