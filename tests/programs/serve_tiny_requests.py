"""vLLM's CPU engine on serve_tiny.py's tiny Llama, then requests its start-up did not
warm up: a prompt of one length, one near the model's length, and a batch of mixed lengths.
Nothing in it knows of compiletrace: run it under ``compiletrace run --after-ready warn`` to
see what vLLM compiles after its compile-and-warm-up phase (tests/apps/test_run_vllm.py).

    python serve_tiny_requests.py MODEL_DIR
"""

import os
import sys

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from serve_tiny import build  # beside this program, on its path

if __name__ == "__main__":
    model_dir = sys.argv[1]
    build(model_dir)
    from vllm import LLM, SamplingParams

    llm = LLM(model=model_dir, dtype="float32", max_model_len=256, enforce_eager=False)
    greedy = SamplingParams(max_tokens=4, temperature=0.0)
    words = [f"w{i % 256}" for i in range(300)]
    for prompts in (
        ["w1 w2 w3"],  # short
        [" ".join(words[:200])],  # near the model's length
        [" ".join(words[:n]) for n in (5, 37, 90, 150)],  # a batch of mixed lengths
    ):
        outputs = llm.generate(prompts, greedy)
        print("generated", [len(o.outputs[0].token_ids) for o in outputs], flush=True)
