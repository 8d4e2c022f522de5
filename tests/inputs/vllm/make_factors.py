"""Make ``cache_key_factors.json`` as vLLM 0.32 writes it beside a compile cache its backend
fills (``VllmBackend.__call__``: ``{"code_hash", "compiler_hash", "config_hash", "env"}``,
keys sorted, indented by 2), for the tiny model of tests/programs/serve_tiny.py, with
vLLM's own functions. vLLM's CPU engine compiles with Dynamo alone (no VllmBackend), so
it never writes the file itself: the code hash is computed as the backend computes it, over
the model's file it would trace. Run it with vLLM installed (``.ci/run vllm``'s venv)::

    python tests/inputs/vllm/make_factors.py MODEL_DIR
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from pathlib import Path

import vllm.envs as envs
from vllm.compilation.backends import CompilerManager
from vllm.engine.arg_utils import EngineArgs
from vllm.model_executor.models import llama

HERE = Path(__file__).resolve().parent


def main(model_dir: str) -> None:
    config = EngineArgs(model=model_dir, dtype="float32", max_model_len=256).create_engine_config()
    traced = [inspect.getsourcefile(llama)]
    content = []
    for path in traced:
        content += [str(path), Path(str(path)).read_text()]
    factors = {
        "env": envs.compile_factors(),
        "config_hash": config.compute_hash(),
        "code_hash": hashlib.sha256("\n".join(content).encode()).hexdigest(),
        "compiler_hash": CompilerManager(config.compilation_config).compute_hash(config),
    }
    with open(HERE / "cache_key_factors.json", "w") as f:
        json.dump(factors, f, indent=2, sort_keys=True)
    print(f"wrote {HERE / 'cache_key_factors.json'}")


if __name__ == "__main__":
    main(sys.argv[1])
