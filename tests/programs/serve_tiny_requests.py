"""vLLM's CPU engine on serve_tiny.py's tiny Llama, then requests its start-up did not
warm up: a prompt of one length, one near the model's length, and a batch of mixed lengths.
Nothing in it knows of compiletrace: run it under ``compiletrace run --after-ready warn`` to
see what vLLM compiles after its compile-and-warm-up phase (tests/apps/test_run_vllm.py).

    python serve_tiny_requests.py MODEL_DIR
"""

import os
import sys

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from serve_tiny import build, untried_requests  # beside this program, on its path

if __name__ == "__main__":
    model_dir = sys.argv[1]
    build(model_dir)
    from vllm import LLM

    llm = LLM(model=model_dir, dtype="float32", max_model_len=256, enforce_eager=False)
    untried_requests(llm)
