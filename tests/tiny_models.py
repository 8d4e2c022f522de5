"""The test models, in one place: small modules for in-process compiles, and a model factory
for tests that start real processes (far smaller than the built-in model, so an inductor
compile costs seconds, not tens of seconds)."""

from __future__ import annotations

import torch

from compiletrace.models import Demo

DIM = 8  # features in and out of Encoder, features in to LanguageModel


class Encoder(torch.nn.Module):
    """A linear layer and a ReLU: one graph."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.proj(x))


class LanguageModel(torch.nn.Module):
    """Two linear layers around a tanh: one graph, or two frames (a first call compiles
    both) with ``graph_break=True``."""

    def __init__(self, graph_break: bool = False) -> None:
        super().__init__()
        self.graph_break = graph_break
        self.a = torch.nn.Linear(DIM, DIM)
        self.b = torch.nn.Linear(DIM, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.a(x)
        if self.graph_break:
            torch._dynamo.graph_break()
        return self.b(torch.tanh(y))


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.vision = torch.nn.Linear(16, 16)
        self.language_model = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.language_model(torch.relu(self.vision(x)))


def tiny(device: str = "cpu") -> Demo:
    """A two-component model (encoder "vision", language model) of two linear layers
    (MODEL ``tests.tiny_models:tiny``)."""
    torch.manual_seed(0)
    model = _Tiny().to(device).eval()
    return Demo(
        model=model,
        example_inputs=(torch.randn(2, 16, device=device),),
        components={"vision": "encoder", "language_model": "language_model"},
    )
