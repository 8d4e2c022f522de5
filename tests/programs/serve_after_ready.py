"""A program that warms a compiled model up and then serves one request, for the tests of
compiles after ready (tests/apps/test_after_ready.py). Usage: serve_after_ready.py REQUEST
[WARM_UP]

REQUEST (what the one request after ready does):
  same      the warmed-up shape again: nothing compiles
  shape     a batch size the warm-up did not cover: a recompile
  backward  the first .backward() of the warm-up's output: a lazy backward compile
  newframe  a function compiled for the first time
  train     a training step (forward with grad, then .backward()) after a no-grad warm-up:
            a recompile for the grad mode and a lazy backward compile
WARM_UP (how the program says it is ready; default: plain, the module's warm_up):
  plain     tiny_server.warm_up, at batch 4 (compiletrace run --ready tiny_server:warm_up)
  both      tiny_server.warm_up at batches 4 and 5 (the shape request is warmed up)
  call      then compiletrace.ready()
  phase     inside compiletrace.phase("serving warm-up") (--ready 'phase:serving warm-up')
  warm_up   through compiletrace.warm_up (the default ready mark: its Warmup (CPU) phase)
  main      through main_warm_up, defined here (--ready __main__:main_warm_up)
"""

from __future__ import annotations

import sys

import torch
from tiny_server import build, helper, warm_up  # bound before anything compiles


def main_warm_up(model: torch.nn.Module) -> torch.Tensor:
    return warm_up(model)


def main() -> None:
    request = sys.argv[1]
    how = sys.argv[2] if len(sys.argv) > 2 else "plain"
    model = build()
    grad = request == "backward"
    if how == "both":
        out = warm_up(model, (4, 5), grad=grad)
    elif how == "main":
        out = main_warm_up(model)
    elif how == "phase":
        import compiletrace

        with compiletrace.phase("serving warm-up"):
            out = warm_up(model, grad=grad)
    elif how == "warm_up":
        import compiletrace

        out = torch.zeros(())

        def run() -> None:
            nonlocal out
            out = warm_up(model, grad=grad)

        compiletrace.warm_up(run, compilation_mode="stock")
    else:
        out = warm_up(model, grad=grad)
    if how == "call":
        import compiletrace

        compiletrace.ready()
    if request == "same":
        with torch.no_grad():
            model(torch.randn(4, 8))
    elif request == "shape":
        with torch.no_grad():
            model(torch.randn(5, 8))
    elif request == "backward":
        out.sum().backward()
    elif request == "train":
        model(torch.randn(4, 8)).sum().backward()
    elif request == "newframe":
        torch.compile(helper, backend="aot_eager")(torch.randn(4, 8))
    print(f"served {request}")


if __name__ == "__main__":
    main()
