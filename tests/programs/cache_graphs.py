"""Three graphs of a user's model compiled with inductor (a convolution, then two Linear
layers, split by graph breaks: extern kernels only, no C++ kernel to build), for the tests
of ``compiletrace why`` (tests/apps/test_why_cases.py). The batch size comes from the
environment, as it would differ between two deployments:

    CASE_BATCH=3   the batch (default 2)

    python cache_graphs.py
"""

import os

import torch


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 3, 1)
        self.first = torch.nn.Linear(16, 16)
        self.second = torch.nn.Linear(16, 16)

    def forward(self, image: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seen = self.conv(image)
        torch._dynamo.graph_break()
        x = self.first(x)
        torch._dynamo.graph_break()
        return seen, self.second(x)


torch.manual_seed(0)
batch = int(os.environ.get("CASE_BATCH", "2"))
compiled = torch.compile(Model().eval())
with torch.no_grad():
    compiled(torch.randn(batch, 3, 8, 8), torch.randn(batch, 16))
print("compiled")
