"""An unmodified inference step compiled with inductor under freezing: torch's FX-graph
and AOTAutograd caches both bypass it (a frozen graph's weights are constants in the
graph, which neither cache keys). Nothing in it knows of compiletrace.

    python frozen_inference.py
"""

import torch


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).relu()


if __name__ == "__main__":
    torch._inductor.config.freezing = True
    model = torch.compile(Model().eval())
    with torch.no_grad():
        model(torch.randn(4, 8))
