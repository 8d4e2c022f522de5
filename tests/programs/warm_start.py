"""A tiny random Llama (transformers, built from a config: no download) compiled with
inductor and warmed up, for the warm-start ledger's test (tests/capture/test_warm_ledger.py):
run it once on an empty TORCHINDUCTOR_CACHE_DIR (cold), then again (warm). It marks its
own steps as phases, warms up through compiletrace.warm_up (the default ready mark is the
end of that phase), and prints, as one JSON line, when its warm-up's call returned and when
its process started, measured here on its own (the process's start time as the kernel
keeps it, /proc/self/stat)."""

from __future__ import annotations

import json
import os
import time

import compiletrace


def process_start_ns() -> int:
    """When this process started: its start in clock ticks since boot, and the boot time."""
    with open("/proc/self/stat") as stat:
        ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as uptime:
        up_s = float(uptime.read().split()[0])
    return int((time.time() - up_s + ticks / os.sysconf("SC_CLK_TCK")) * 1e9)


with compiletrace.phase("import transformers"):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

with compiletrace.phase("build the model"):
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    compiled = torch.compile(model)
    input_ids = torch.randint(0, 64, (1, 6))


warmed_ns = 0


def warm() -> None:
    global warmed_ns
    with torch.no_grad():
        compiled(input_ids=input_ids)
    warmed_ns = time.time_ns()  # the warm-up phase (the ready mark) ends right after this


compiletrace.warm_up(warm, compilation_mode="stock")
print(json.dumps({"warmed_ns": warmed_ns, "process_start_ns": process_start_ns()}), flush=True)
