"""An unmodified training step compiled with inductor: a forward at the first call and its
backward compiled lazily at the first .backward(). Nothing in it knows of compiletrace.

    python inductor_backward.py [linear]

With ``linear``, the compiled module is a bare ``Linear``: its forward is one matrix call
(no C++ kernel), so the process's first C++ compile lands in the lazy backward.
"""

import sys

import torch


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).relu().sum()


if __name__ == "__main__":
    if sys.argv[1:] == ["linear"]:
        linear = torch.compile(torch.nn.Linear(8, 8))
        linear(torch.randn(4, 8, requires_grad=True)).sum().backward()
    else:
        model = torch.compile(Model())
        model(torch.randn(4, 8, requires_grad=True)).backward()
