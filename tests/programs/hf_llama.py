"""An unmodified transformers program: a tiny random Llama (built from a config, no
download), its forward compiled by the user's own torch.compile, then either `generate`
or one training step. Nothing in it knows of compiletrace. Writes torch's own
per-compile figures to ORACLE (forward frames and lazy backwards apart).

    python hf_llama.py generate|train ORACLE
"""

import json
import sys

import torch
from torch._dynamo.utils import get_compilation_metrics
from transformers import LlamaConfig, LlamaForCausalLM

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
model = LlamaForCausalLM(config)
input_ids = torch.randint(0, 64, (1, 6))

if sys.argv[1] == "generate":
    model.eval()
    model.forward = torch.compile(model.forward, backend="aot_eager")
    with torch.no_grad():
        out = model.generate(input_ids, max_new_tokens=3, do_sample=False)
    print("generated", out.shape[1] - input_ids.shape[1], "tokens")
else:
    compiled = torch.compile(model, backend="aot_eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = compiled(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    optimizer.step()
    print("trained one step")

rows = [
    {
        "compile_id": str(m.compile_id),
        "forward": bool(m.is_forward),
        "seconds": m.entire_frame_compile_time_s,
        "backward_seconds": getattr(m, "entire_backward_compile_time_s", None),
    }
    for m in get_compilation_metrics()
]
with open(sys.argv[2], "w") as out_file:
    json.dump(rows, out_file)
