"""A tiny model server's parts, as a module of its own: what ``compiletrace run --ready
tiny_server:warm_up`` names (tests/apps/test_after_ready.py). The program that serves is
serve_after_ready.py, which binds ``warm_up`` with ``from tiny_server import warm_up``
before it ever compiles."""

from __future__ import annotations

import torch


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) * 2


def build() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.compile(Model(), backend="aot_eager")  # type: ignore[return-value]


def warm_up(model: torch.nn.Module, batches: tuple[int, ...] = (4,), grad: bool = False) -> torch.Tensor:
    """Call the model once per batch size: under no_grad for serving, with grad for a
    training step (whose backward then compiles at its first .backward())."""
    out = torch.zeros(())
    for batch in batches:
        with torch.set_grad_enabled(grad):
            out = model(torch.randn(batch, 8))
    return out


def helper(x: torch.Tensor) -> torch.Tensor:
    return x.sin() + 1
