"""Child process for tests/apps/test_portable_cache.py: compile one function through compiletrace
with inductor, optionally loading or saving cache artifacts, and print the registry as JSON."""

from __future__ import annotations

import json
import sys

import torch

import compiletrace
from compiletrace._app.cache import load_cache_artifacts, save_cache_artifacts


def fn(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * 2 + torch.sin(x)


def main(action: str, artifacts: str) -> None:
    if action == "load":
        load_cache_artifacts(artifacts)
    reg = compiletrace.Registry()
    compiletrace.compile(fn, registry=reg)(torch.randn(32))
    if action == "save":
        save_cache_artifacts(artifacts)
    print(json.dumps(reg.to_dict()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
