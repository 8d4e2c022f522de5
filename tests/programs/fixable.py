"""An unmodified program with two things the doctor can fix with no edit to it: a print in
the compiled forward (a graph break), and a batch size that changes every call under static
shapes (a recompile per size). Nothing in it knows of compiletrace.

    python fixable.py
"""

import torch


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x).relu()
        print("step")
        return y * 2


if __name__ == "__main__":
    model = torch.compile(Model(), backend="eager")
    with torch.no_grad():
        for batch in (4, 5, 6, 7):
            model(torch.randn(batch, 8))
