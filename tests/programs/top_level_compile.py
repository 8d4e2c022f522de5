"""The usual serving script, for ``--ready __main__:warm_up`` (tests/apps/test_after_ready.py):
the model is compiled at the module's top level, ``warm_up`` is defined below it, and one
request follows. Usage: top_level_compile.py [BATCH [DTYPE [LAYERS [BACKEND]]]]: the
request's batch (the warm-up's is 4), the model's dtype (float32), how many layers it stacks
(1) and the backend (aot_eager): benchmarks/gate_noise.py changes each, the regressions a CI
gate must catch."""

import sys

import torch

dtype = getattr(torch, sys.argv[2]) if len(sys.argv) > 2 else torch.float32
layers = [torch.nn.Linear(8, 8).to(dtype) for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 1)]
backend = sys.argv[4] if len(sys.argv) > 4 else "aot_eager"
model = torch.compile(layers[0] if len(layers) == 1 else torch.nn.Sequential(*layers), backend=backend)


def warm_up() -> None:
    with torch.no_grad():
        model(torch.randn(4, 8, dtype=dtype))


warm_up()
with torch.no_grad():
    model(torch.randn(int(sys.argv[1]) if len(sys.argv) > 1 else 4, 8, dtype=dtype))
print("served")
