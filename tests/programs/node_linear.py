"""An unmodified program for a job of several nodes: one Linear compiled with inductor (so
its graph goes through the FX graph cache, keyed by the CPU thread count among the rest),
called once. Started by torchrun it joins the gloo group and all-reduces its output;
started alone (to fill a cache) it just compiles.

    torchrun --nnodes 2 --nproc-per-node 2 --node-rank N ... node_linear.py
"""

import os

import torch

if __name__ == "__main__":
    ranked = "RANK" in os.environ
    if ranked:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        dist.barrier()  # every rank looks in the cache at once: none finds what another just wrote
    model = torch.compile(torch.nn.Linear(4, 4), backend="inductor")
    out = model(torch.randn(2, 4))
    if ranked:
        dist.all_reduce(out)
        dist.destroy_process_group()
    print("out", tuple(out.shape))
