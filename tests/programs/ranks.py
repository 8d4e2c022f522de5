"""An unmodified torchrun program: each rank joins a gloo group, compiles a small model and
all-reduces its output. Each rank writes torch's own per-compile figures to
ORACLE.rank<N>.json.

    torchrun --nproc-per-node 2 ranks.py ORACLE
"""

import json
import sys

import torch
import torch.distributed as dist
from torch._dynamo.utils import get_compilation_metrics


class Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).relu()


if __name__ == "__main__":
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = torch.compile(Layer(), backend="aot_eager")
    out = model(torch.randn(4, 8))
    dist.all_reduce(out)
    rows = [
        {"compile_id": str(m.compile_id), "seconds": m.entire_frame_compile_time_s}
        for m in get_compilation_metrics()
        if m.entire_frame_compile_time_s is not None
    ]
    with open(f"{sys.argv[1]}.rank{rank}.json", "w") as oracle:
        json.dump(rows, oracle)
    dist.destroy_process_group()
