"""The usual serving script, for ``--ready __main__:warm_up`` (tests/apps/test_after_ready.py):
the model is compiled at the module's top level, ``warm_up`` is defined below it, and one
request follows. Usage: top_level_compile.py [BATCH] (the request's batch; the warm-up's is 4)."""

import sys

import torch

model = torch.compile(torch.nn.Linear(8, 8), backend="aot_eager")


def warm_up() -> None:
    with torch.no_grad():
        model(torch.randn(4, 8))


warm_up()
with torch.no_grad():
    model(torch.randn(int(sys.argv[1]) if len(sys.argv) > 1 else 4, 8))
print("served")
