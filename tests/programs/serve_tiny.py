"""An unmodified vLLM program: build a tiny random Llama (saved as safetensors with an
offline tokenizer), start vLLM's CPU engine on it and generate a few tokens. Nothing in it
knows of compiletrace. Writes torch's own per-compile figures of the process that compiled
(the engine's, in-process) to ORACLE.json. With --requests, it then serves the requests its
start-up did not warm up (serve_tiny_requests.py's) before it writes them.

    VLLM_ENABLE_V1_MULTIPROCESSING=0 python serve_tiny.py MODEL_DIR ORACLE [--requests]
"""

import json
import os
import sys
from typing import Any

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def build(model_dir: str) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    if os.path.exists(os.path.join(model_dir, "config.json")):
        return
    vocab = {f"w{i}": i for i in range(256)}
    vocab.update({"<unk>": 256, "<s>": 257, "</s>": 258})
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    fast.save_pretrained(model_dir)
    config = LlamaConfig(
        vocab_size=259,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,  # head size 32: the CPU attention kernels refuse 16
        num_key_value_heads=4,
        max_position_embeddings=256,
        bos_token_id=257,
        eos_token_id=258,
    )
    LlamaForCausalLM(config).save_pretrained(model_dir, safe_serialization=True)


def untried_requests(llm: Any) -> None:
    """Requests the engine's start-up did not warm up: a prompt of one length, one near the
    model's length, and a batch of mixed lengths; prints each one's generated lengths."""
    from vllm import SamplingParams

    greedy = SamplingParams(max_tokens=4, temperature=0.0)
    words = [f"w{i % 256}" for i in range(300)]
    for prompts in (
        ["w1 w2 w3"],  # short
        [" ".join(words[:200])],  # near the model's length
        [" ".join(words[:n]) for n in (5, 37, 90, 150)],  # a batch of mixed lengths
    ):
        outputs = llm.generate(prompts, greedy)
        print("generated", [len(o.outputs[0].token_ids) for o in outputs], flush=True)


if __name__ == "__main__":
    model_dir, oracle = sys.argv[1], sys.argv[2]
    build(model_dir)
    from vllm import LLM, SamplingParams

    llm = LLM(model=model_dir, dtype="float32", max_model_len=256, enforce_eager=False)
    outputs = llm.generate(["w1 w2 w3"], SamplingParams(max_tokens=4, temperature=0.0))
    print("generated", len(outputs[0].outputs[0].token_ids), "tokens", flush=True)
    if sys.argv[3:] == ["--requests"]:
        untried_requests(llm)
    from torch._dynamo.utils import compilation_time_metrics, get_compilation_metrics

    rows = [
        {"compile_id": str(m.compile_id), "seconds": m.entire_frame_compile_time_s}
        for m in get_compilation_metrics()
        if m.entire_frame_compile_time_s is not None
    ]
    regions = {k: sum(v) for k, v in compilation_time_metrics.items()}
    with open(oracle, "w") as out:
        json.dump({"rows": rows, "regions": regions}, out)
