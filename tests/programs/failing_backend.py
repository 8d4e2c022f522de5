"""An unmodified program whose compile fails: its backend raises, and with
``suppress_errors`` Dynamo runs the function eagerly and the program goes on. Then it logs
one structured-trace record of a kind no torch writes today, as a newer torch might.

    python failing_backend.py
"""

import torch
from torch._logging import trace_structured


def always_fails(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> None:
    raise RuntimeError("this backend always fails")


if __name__ == "__main__":
    torch._dynamo.config.suppress_errors = True
    step = torch.compile(lambda x: x.sin() + 1, backend=always_fails)
    print("output", step(torch.ones(3)).tolist())
    trace_structured("a_record_kind_from_a_newer_torch", metadata_fn=lambda: {"detail": 1})
