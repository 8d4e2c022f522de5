"""An unmodified distributed program: a few training steps of a small model under
DistributedDataParallel (gloo, CPU), compiled the way its argument says. Run under torchrun:

    torchrun --standalone --nproc-per-node 2 ddp_step.py outer|inner [sequential|net]

- ``outer``: ``torch.compile(DDP(model))``; ``inner``: ``DDP(torch.compile(model))``;
- ``sequential``: the model is torch's own ``nn.Sequential``; ``net``: a class of the program's.
Nothing in it knows of compiletrace.
"""

import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def main(how: str, kind: str) -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    if kind == "net":
        model: nn.Module = Net()
    else:
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    if how == "outer":
        step_model = torch.compile(DistributedDataParallel(model), backend="aot_eager")
    else:
        step_model = DistributedDataParallel(torch.compile(model, backend="aot_eager"))
    optimizer = torch.optim.SGD(step_model.parameters(), lr=0.01)
    for _ in range(3):
        loss = step_model(torch.randn(8, 16)).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "sequential")
