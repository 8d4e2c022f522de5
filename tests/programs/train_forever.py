"""A training loop that would run for SECONDS (600 by default: ten minutes) of steps, its
batch size changing at its second step (a recompile: the doctor's finding). Nothing in it
knows of compiletrace; ``--ready step:N`` says when its start-up is over.

    python train_forever.py [SECONDS] [PID_FILE]
"""

import os
import sys
import time

import torch


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).relu().sum()


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 600.0
    if len(sys.argv) > 2:
        with open(sys.argv[2], "a") as f:
            f.write(f"{os.getpid()}\n")
    torch.manual_seed(0)
    model = Model()
    compiled = torch.compile(model, backend="aot_eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    end = time.monotonic() + seconds
    step = 0
    while time.monotonic() < end:
        batch = 4 if step == 0 else 5  # the second step recompiles
        optimizer.zero_grad()
        compiled(torch.randn(batch, 8)).backward()
        optimizer.step()
        step += 1
        time.sleep(0.05)  # a data loader's wait
    print(f"trained {step} steps", flush=True)
