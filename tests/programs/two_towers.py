"""An unmodified program, as a user has one: two torch.compile calls (a vision tower and a
language model) and a multiprocessing child that compiles too. Nothing in it knows of
compiletrace. Each process writes torch's own per-compile figures to ORACLE.<role>.json,
for the tests to check compiletrace's against.

    python two_towers.py ORACLE [EXIT_STATUS] [START_METHOD]
"""

import json
import multiprocessing
import sys

import torch
from torch._dynamo.utils import get_compilation_metrics


class VisionTower(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).relu()


class LanguageModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x).softmax(-1)


class Multimodal(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.vision_tower = torch.compile(VisionTower(), backend="aot_eager")
        self.language_model = torch.compile(LanguageModel(), backend="aot_eager")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.language_model(self.vision_tower(x))


def write_oracle(path: str, after: int = 0) -> None:
    rows = [
        {"compile_id": str(m.compile_id), "seconds": m.entire_frame_compile_time_s}
        for m in list(get_compilation_metrics())[after:]
        if m.entire_frame_compile_time_s is not None
    ]
    with open(path, "w") as out:
        json.dump(rows, out)


def child(oracle: str) -> None:
    inherited = len(get_compilation_metrics())  # a forked child starts with its parent's rows

    @torch.compile(backend="eager")
    def postprocess(x: torch.Tensor) -> torch.Tensor:
        return x.cos() + 1

    postprocess(torch.ones(3))
    write_oracle(oracle + ".child.json", after=inherited)


if __name__ == "__main__":
    oracle = sys.argv[1]
    status = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    method = sys.argv[3] if len(sys.argv) > 3 else "spawn"
    model = Multimodal()
    print("output", tuple(model(torch.randn(2, 8)).shape))
    process = multiprocessing.get_context(method).Process(target=child, args=(oracle,))
    process.start()
    process.join()
    write_oracle(oracle + ".main.json")
    sys.exit(status)
