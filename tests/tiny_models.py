"""Model factories for tests that start real processes: far smaller than the built-in model,
so an inductor compile costs seconds, not tens of seconds."""

from __future__ import annotations

import torch

from compiletrace.models import Demo


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.vision = torch.nn.Linear(16, 16)
        self.language_model = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.language_model(torch.relu(self.vision(x)))


def tiny(device: str = "cpu") -> Demo:
    """A two-component model (encoder "vision", language model) of two linear layers."""
    torch.manual_seed(0)
    model = _Tiny().to(device).eval()
    return Demo(
        model=model,
        example_inputs=(torch.randn(2, 16, device=device),),
        components={"vision": "encoder", "language_model": "language_model"},
    )
