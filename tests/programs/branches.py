"""An unmodified program with two data-dependent branches (``if`` on a tensor): two graph-break
sites, each met again when a second shape recompiles the function (four breaks in all).

    python branches.py
"""

import torch


def clamp_twice(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    if y.sum() > 0:  # the first site
        y = y.cos()
    z = y * 2
    if z.mean() > 0:  # the second site
        z = z - 1
    return z


if __name__ == "__main__":
    step = torch.compile(clamp_twice, backend="eager", dynamic=False)
    for n in (4, 5):  # a second shape: every frame compiles again
        step(torch.ones(n))
    print("done")
