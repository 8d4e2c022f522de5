"""An unmodified transformers program: a tiny random BERT classifier (built from a config,
no download) compiled with the user's own torch.compile and fed four sequence lengths.
Nothing in it knows of compiletrace.

    python hf_bert.py
"""

import torch
from transformers import BertConfig, BertForSequenceClassification

torch.manual_seed(0)
config = BertConfig(
    vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
)
model = torch.compile(BertForSequenceClassification(config).eval(), backend="eager")
with torch.no_grad():
    for length in (8, 12, 16, 20):
        model(input_ids=torch.randint(0, 128, (2, length)))
