"""One compile of a tiny model (one Linear layer: inductor compiles it in a few seconds, no
C++ kernel to build), as a user's program compiles it, for the cache cases of
``compiletrace why`` (tests/apps/test_why_cases.py). What changes between two runs comes
from the environment, as it would between two machines:

    CASE_FLIP=name=json   an inductor config set before compiling (fallback_random=true)
    CASE_DYNAMIC=1        torch.compile(dynamic=True)
    CASE_MODE=mode        torch.compile(mode=...)
    CASE_DTYPE=float64    the model and its input in another dtype
    CASE_BATCH=8          another batch size
    CASE_CACHE_PER_RANK=1 a torchrun rank looks in TORCHINDUCTOR_CACHE_DIR.rank<LOCAL_RANK>

    python cache_case.py
"""

import json
import os

if os.environ.get("CASE_CACHE_PER_RANK"):
    # Each rank its own copy of the cache: each looks up what BASE filled, never what the
    # other rank wrote a moment before.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] += f".rank{os.environ['LOCAL_RANK']}"

import torch

flip = os.environ.get("CASE_FLIP")
if flip:
    name, value = flip.split("=", 1)
    setattr(torch._inductor.config, name, json.loads(value))
dtype = getattr(torch, os.environ.get("CASE_DTYPE", "float32"))
torch.manual_seed(0)
model = torch.nn.Linear(16, 8).to(dtype).eval()
compiled = torch.compile(
    model, dynamic=True if os.environ.get("CASE_DYNAMIC") else None, mode=os.environ.get("CASE_MODE") or None
)
with torch.no_grad():
    compiled(torch.randn(int(os.environ.get("CASE_BATCH", "4")), 16, dtype=dtype))
print("compiled")
