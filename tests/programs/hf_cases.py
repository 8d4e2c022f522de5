"""Unmodified transformers programs, one per case the doctor is measured on
(docs/doctor-real-models.md): tiny random configurations, no download, each compiled by the
user's own torch.compile. Nothing in them knows of compiletrace.

    python hf_cases.py CASE

- ``t5-generate``: T5's forward compiled, then generate (a cache flag flips once, its
  self-attention cache grows);
- ``llava``: LLaVA compiled before its first call (transformers installs its hooks inside
  the compile), called twice; ``llava-warm``: called once eagerly first (its image-token
  check's ``.item()`` is left);
- ``item``: a classifier on a ViT that reads a tensor's value with ``.item()``;
- ``disable``: a classifier on a ViT whose forward calls a ``torch.compiler.disable``
  function;
- ``fullgraph``: the ``disable`` classifier compiled with ``fullgraph=True``, which fails
  (the program catches torch's error and says so);
- ``llm-lengths``: a decoder-only LLM (Llama) compiled whole, called on inputs of three
  lengths (its input ids and attention mask change together);
- ``llm-generate``: the same LLM's forward compiled, then ``generate`` on prompts of three
  lengths (a new prompt, the decode step, a growing cache); ``llm-generate-padded``: the
  edit that pads each prompt to 16 tokens (left, masked);
- ``speech``: a speech encoder (wav2vec 2.0) compiled whole, on clips of three lengths;
- ``layers``: a decoder-only LLM of ten identical layers (Qwen2) compiled whole;
- ``gpt2-6``, ``gpt2-12``: GPT-2 of 6 or 12 blocks compiled whole, called on transformers'
  defaults (``use_cache=True``: each block reads its own layer of the cache), three times.
- ``qwen2-vl``: a vision-language model (Qwen2-VL: a vision tower that breaks in its own
  helpers, a language model) compiled whole, called once on an 8x8 image;
- ``mamba``: a state-space language model (a tiny Mamba) compiled whole, called on inputs of
  three lengths.
"""

import sys

import torch
import transformers
from torch import nn


def ids(length: int) -> torch.Tensor:
    return torch.randint(3, 100, (1, length), generator=torch.Generator().manual_seed(length))


def t5() -> None:
    config = transformers.T5Config(
        vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )  # fmt: skip
    model = transformers.T5ForConditionalGeneration(config).eval()
    model.forward = torch.compile(model.forward, backend="aot_eager")
    with torch.no_grad():
        model.generate(ids(5), max_new_tokens=4, min_new_tokens=4, do_sample=False)


IMAGE_TOKEN = 127


def llava_model() -> transformers.LlavaForConditionalGeneration:
    """A tiny LLaVA: a CLIP vision tower (a 16x16 image, four 8x8 patches) and a Llama."""
    torch.manual_seed(0)
    vision = transformers.CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        image_size=16, patch_size=8, projection_dim=32,
    )  # fmt: skip
    text = transformers.LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0,
    )  # fmt: skip
    config = transformers.LlavaConfig(
        vision_config=vision, text_config=text, image_token_index=IMAGE_TOKEN,
        vision_feature_select_strategy="default", image_seq_length=4,
    )  # fmt: skip
    return transformers.LlavaForConditionalGeneration(config).eval()


def llava(warm: bool) -> None:
    model = llava_model()
    inputs = {
        "input_ids": torch.cat([torch.full((1, 4), IMAGE_TOKEN), ids(5)], dim=1),
        "pixel_values": torch.randn(1, 3, 16, 16),
        "use_cache": False,
    }
    with torch.no_grad():
        if warm:
            model(**inputs)
        compiled = torch.compile(model, backend="aot_eager")
        for _ in range(2):
            compiled(**inputs)


@torch.compiler.disable
def log_norm(x: torch.Tensor) -> None:
    sys.stderr.write(f"norm {float(x.norm()):.3f}\n")


class Classifier(nn.Module):
    """A head on transformers' ViT that logs a value it reads from a tensor."""

    def __init__(self, read: str) -> None:
        super().__init__()
        config = transformers.ViTConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
            image_size=32, patch_size=8,
        )  # fmt: skip
        self.backbone = transformers.ViTModel(config)
        self.head = nn.Linear(32, 4)
        self.read = read

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        features = self.backbone(pixel_values=pixels).pooler_output
        if self.read == "item":
            scale = features.abs().max().item()  # a Python float: a graph break
            features = features / (scale + 1.0)
        else:
            log_norm(features)  # a disabled function: a graph break on each side
        return self.head(features)


def classify(read: str, fullgraph: bool = False) -> None:
    model = torch.compile(Classifier(read).eval(), backend="aot_eager", fullgraph=fullgraph)
    with torch.no_grad():
        for _ in range(2):
            try:
                model(torch.randn(1, 3, 32, 32))
            except Exception as exc:  # torch's error for fullgraph=True: the program says so
                print(f"compile failed: {type(exc).__name__}")
                return


def decoder(layers: int = 2, kind: str = "llama") -> transformers.PreTrainedModel:
    """A tiny random decoder-only LLM."""
    torch.manual_seed(0)
    sizes = dict(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, pad_token_id=0,
        eos_token_id=1, bos_token_id=2,
    )  # fmt: skip
    if kind == "qwen2":
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**sizes)).eval()
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**sizes)).eval()


def llm_lengths() -> None:
    compiled = torch.compile(decoder(), backend="aot_eager")
    with torch.no_grad():
        for n in (4, 8, 12):
            compiled(input_ids=ids(n), attention_mask=torch.ones(1, n, dtype=torch.long), use_cache=False)


def llm_generate(pad_to: int = 0) -> None:
    model = decoder()
    model.forward = torch.compile(model.forward, backend="aot_eager")
    with torch.no_grad():
        for n in (5, 9, 13):
            prompt, mask = ids(n), torch.ones(1, n, dtype=torch.long)
            if pad_to:  # left padding, masked out: one prompt length for every prompt
                prompt = torch.cat([torch.zeros(1, pad_to - n, dtype=torch.long), prompt], dim=1)
                mask = torch.cat([torch.zeros(1, pad_to - n, dtype=torch.long), mask], dim=1)
            model.generate(
                prompt, attention_mask=mask, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                pad_token_id=0,
            )  # fmt: skip


def speech() -> None:
    torch.manual_seed(0)
    config = transformers.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16), conv_kernel=(10, 3), conv_stride=(5, 2), num_feat_extract_layers=2,
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
    )  # fmt: skip
    compiled = torch.compile(transformers.Wav2Vec2Model(config).eval(), backend="aot_eager")
    with torch.no_grad():
        for samples in (1600, 2400, 3200):  # clips of 0.1, 0.15 and 0.2 s at 16 kHz
            compiled(torch.randn(1, samples, generator=torch.Generator().manual_seed(samples)))


def layers() -> None:
    compiled = torch.compile(decoder(layers=10, kind="qwen2"), backend="aot_eager")
    with torch.no_grad():
        for _ in range(2):
            compiled(input_ids=ids(8), use_cache=False)


def gpt2(blocks: int) -> None:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=128, n_positions=64, n_embd=32, n_layer=blocks, n_head=2, bos_token_id=2,
        eos_token_id=1, pad_token_id=0,
    )  # fmt: skip
    compiled = torch.compile(transformers.GPT2LMHeadModel(config).eval(), backend="aot_eager")
    with torch.no_grad():
        for _ in range(3):
            compiled(input_ids=ids(8))


QWEN_IMAGE_TOKEN = 150


def qwen2_vl_model() -> transformers.Qwen2VLForConditionalGeneration:
    """A tiny Qwen2-VL: a one-block vision tower (4x4 patches, 2x2 merged) and a two-layer LM."""
    torch.manual_seed(0)
    vision = dict(
        depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, in_channels=3, patch_size=4,
        spatial_merge_size=2, temporal_patch_size=2,
    )  # fmt: skip
    text = dict(
        vocab_size=160, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=128, bos_token_id=0, eos_token_id=1,
        rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
    )  # fmt: skip
    config = transformers.Qwen2VLConfig(
        vision_config=vision, text_config=text, image_token_id=QWEN_IMAGE_TOKEN, video_token_id=151,
        vision_start_token_id=152, vision_end_token_id=153,
    )  # fmt: skip
    return transformers.Qwen2VLForConditionalGeneration(config).eval()


def qwen2_vl_inputs() -> dict[str, torch.Tensor | bool]:
    """One 8x8 image (four 4x4 patches, one token once merged) inside a short text."""
    input_ids = torch.tensor([[1, 2, 152, QWEN_IMAGE_TOKEN, 153, 5, 6, 7]])
    return {
        "input_ids": input_ids,
        "pixel_values": torch.randn(4, 3 * 2 * 4 * 4, generator=torch.Generator().manual_seed(0)),
        "image_grid_thw": torch.tensor([[1, 2, 2]]),
        "mm_token_type_ids": (input_ids == QWEN_IMAGE_TOKEN).int(),
        "use_cache": False,
    }


def qwen2_vl() -> None:
    compiled = torch.compile(qwen2_vl_model(), backend="eager")
    with torch.no_grad():
        compiled(**qwen2_vl_inputs())


def mamba() -> None:
    torch.manual_seed(0)
    config = transformers.MambaConfig(
        vocab_size=128, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4,
        use_cache=False, pad_token_id=0, eos_token_id=1, bos_token_id=2,
    )  # fmt: skip
    compiled = torch.compile(transformers.MambaForCausalLM(config).eval(), backend="aot_eager")
    with torch.no_grad():
        for n in (4, 8, 12):
            compiled(input_ids=ids(n), use_cache=False)


def main(case: str) -> None:
    torch.manual_seed(0)
    if case == "t5-generate":
        t5()
    elif case in ("llava", "llava-warm"):
        llava(warm=case == "llava-warm")
    elif case in ("item", "disable"):
        classify(case)
    elif case == "fullgraph":
        classify("disable", fullgraph=True)
    elif case == "llm-lengths":
        llm_lengths()
    elif case == "llm-generate":
        llm_generate()
    elif case == "llm-generate-padded":
        llm_generate(pad_to=16)
    elif case == "speech":
        speech()
    elif case == "layers":
        layers()
    elif case in ("gpt2-6", "gpt2-12"):
        gpt2(int(case.split("-")[1]))
    elif case == "qwen2-vl":
        qwen2_vl()
    elif case == "mamba":
        mamba()
    else:
        sys.exit(f"unknown case {case!r}")
    print("done", case)


if __name__ == "__main__":
    main(sys.argv[1])
