"""An unmodified program: four transformers Llama decoder layers, called one by one from the
user's own forward with a log line between them, compiled whole by the user's own
torch.compile. Each print cuts the forward, so Dynamo compiles each layer's call in a frame
of its own: four identical graphs (the doctor's repeated_graph). Nothing in it knows of
compiletrace.

    python unrolled_llama.py
"""

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

config = LlamaConfig(
    attn_implementation="eager",
    hidden_size=32,
    intermediate_size=64,
    num_attention_heads=2,
    num_key_value_heads=2,
    max_position_embeddings=64,
)


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rotary = LlamaRotaryEmbedding(config)
        self.layers = nn.ModuleList(LlamaDecoderLayer(config, i) for i in range(4))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        positions = self.rotary(hidden, torch.arange(hidden.shape[1])[None])
        hidden = self.layers[0](hidden, position_embeddings=positions)
        print("layer 0 done")
        hidden = self.layers[1](hidden, position_embeddings=positions)
        print("layer 1 done")
        hidden = self.layers[2](hidden, position_embeddings=positions)
        print("layer 2 done")
        return self.layers[3](hidden, position_embeddings=positions)


torch.manual_seed(0)
model = torch.compile(Stack().eval(), backend="aot_eager")
with torch.no_grad():
    for _ in range(2):
        out = model(torch.randn(1, 6, 32))
print("output", tuple(out.shape))
