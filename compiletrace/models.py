"""The built-in demo: a small multimodal model that ships with compiletrace.

A patch-embedding vision encoder with a projector, feeding a decoder-only transformer
language model; randomly initialised from a fixed seed (no weights, no downloads). It is
what ``compiletrace profile`` and ``compiletrace bench startup`` run when given no MODEL.

The factory contract
--------------------
A MODEL spec ``package.module:factory`` names a callable. compiletrace imports its module
as ``python -m`` would (the current directory first on the import path), calls it as
``factory(device=DEVICE)`` when it takes a ``device`` parameter, else as ``factory()``, and
reads these attributes of what it returns. :class:`Demo` is the ready-made type that has
them all:

- ``model``: the ``torch.nn.Module`` to run;
- ``example_inputs``: a tuple of positional arguments for one forward;
- ``example_kwargs`` (optional): a mapping of keyword arguments for it (``input_ids=...``,
  ``attention_mask=...``: what a transformers model takes);
- ``components``: a mapping of submodule path (as ``model.get_submodule`` takes it, ``"."``
  for the whole model) to component name; each is compiled as that component;
- ``run`` (optional): a callable taking no arguments that does one request or step through
  ``model`` (``generate``, a training step); without it compiletrace calls
  ``model(*example_inputs, **example_kwargs)`` without autograd. ``Demo(step=...)`` gives
  one: ``step(model)`` is called with the model whose components were compiled in place.

A transformers model, compiled layer stack and all, its ``generate`` as the request:

>>> import transformers  # doctest: +SKIP
>>> def build():  # doctest: +SKIP
...     config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128,
...                                       num_hidden_layers=2, num_attention_heads=4, vocab_size=256)
...     model = transformers.LlamaForCausalLM(config).eval()
...     ids = torch.tensor([[1, 2, 3, 4]])
...     return Demo(model, example_kwargs={"input_ids": ids}, components={"model": "language_model"},
...                 step=lambda m: m.generate(input_ids=ids, max_new_tokens=4, do_sample=False))

The built-in model:

>>> demo = build_demo()
>>> dict(demo.components)
{'vision': 'encoder', 'language_model': 'language_model'}
>>> tuple(demo.run().shape)
(1, 32, 512)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from compiletrace._io.errors import UsageError

__all__ = ["Demo", "DemoConfig", "MultimodalDemo", "build_demo"]


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of the built-in model (the defaults compile cold with CPU inductor in seconds)."""

    image_size: int = 32  # square RGB images
    patch_size: int = 8  # 16 patches per image at the defaults
    vision_dim: int = 64
    vision_layers: int = 0  # transformer blocks after the patch embedding
    text_dim: int = 64
    text_layers: int = 2
    heads: int = 4
    vocab_size: int = 512
    text_len: int = 16  # text tokens after the image tokens
    batch_size: int = 1
    seed: int = 0


class Block(nn.Module):  # type: ignore[misc]
    """A pre-norm transformer block (attention + MLP), causal or not."""

    def __init__(self, dim: int, heads: int, causal: bool) -> None:
        super().__init__()
        self.heads = heads
        self.causal = causal
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        attn = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=self.causal
        )
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class VisionEncoder(nn.Module):  # type: ignore[misc]
    """Patch embedding, transformer blocks, then a projector into the language model's width."""

    def __init__(self, cfg: DemoConfig) -> None:
        super().__init__()
        num_patches = (cfg.image_size // cfg.patch_size) ** 2
        self.patch_embed = nn.Conv2d(3, cfg.vision_dim, kernel_size=cfg.patch_size, stride=cfg.patch_size)
        self.pos = nn.Parameter(torch.randn(1, num_patches, cfg.vision_dim) * 0.02)
        self.blocks = nn.ModuleList(
            Block(cfg.vision_dim, cfg.heads, causal=False) for _ in range(cfg.vision_layers)
        )
        self.norm = nn.LayerNorm(cfg.vision_dim)
        self.projector = nn.Sequential(
            nn.Linear(cfg.vision_dim, cfg.text_dim), nn.GELU(), nn.Linear(cfg.text_dim, cfg.text_dim)
        )

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(pixel_values).flatten(2).transpose(1, 2) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.projector(self.norm(x))  # (batch, patches, text_dim)


class LanguageModel(nn.Module):  # type: ignore[misc]
    """A decoder-only transformer reading image embeddings followed by text tokens."""

    def __init__(self, cfg: DemoConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.text_dim)
        self.blocks = nn.ModuleList(
            Block(cfg.text_dim, cfg.heads, causal=True) for _ in range(cfg.text_layers)
        )
        self.norm = nn.LayerNorm(cfg.text_dim)
        self.head = nn.Linear(cfg.text_dim, cfg.vocab_size, bias=False)

    def forward(self, image_embeds: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        x = torch.cat([image_embeds, self.embed(input_ids)], dim=1)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))  # (batch, image + text tokens, vocab)


class MultimodalDemo(nn.Module):  # type: ignore[misc]
    """``vision`` (the encoder) feeds ``language_model``; returns next-token logits."""

    def __init__(self, cfg: DemoConfig) -> None:
        super().__init__()
        self.vision = VisionEncoder(cfg)
        self.language_model = LanguageModel(cfg)

    def forward(self, pixel_values: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        return self.language_model(self.vision(pixel_values), input_ids)  # type: ignore[no-any-return]


@dataclass
class Demo:
    """What a model factory returns (see the module docstring for the contract).

    >>> demo = Demo(torch.nn.Linear(4, 2), example_kwargs={"input": torch.ones(1, 4)})
    >>> tuple(demo.run().shape)
    (1, 2)
    >>> Demo(torch.nn.Linear(4, 2), step=lambda m: m.out_features).run()
    2
    """

    model: nn.Module  # the module to run; compiled components are swapped into it in place
    example_inputs: tuple[Any, ...] = ()  # positional arguments of one forward
    components: Mapping[str, str] = field(default_factory=dict)  # submodule path -> component name
    example_kwargs: Mapping[str, Any] = field(default_factory=dict)  # keyword arguments of it
    # What run() does instead of one forward without autograd (generate, a training step):
    # called with ``model``, as it is when run() is called (its components compiled).
    step: Callable[[nn.Module], Any] | None = None

    def run(self) -> Any:
        """One request: ``step(model)`` if given, else one forward with the example inputs,
        without autograd."""
        if self.step is not None:
            return self.step(self.model)
        with torch.no_grad():
            return self.model(*self.example_inputs, **self.example_kwargs)


def build_demo(device: str | torch.device = "cpu", config: DemoConfig | None = None) -> Demo:
    """The built-in multimodal model, its example inputs and its components, on ``device``.

    Same seed, same weights and inputs: two calls build identical models.

    >>> a, b = build_demo(), build_demo()
    >>> torch.equal(a.run(), b.run())
    True
    """
    cfg = config or DemoConfig()
    if cfg.image_size % cfg.patch_size or cfg.text_dim % cfg.heads or cfg.vision_dim % cfg.heads:
        raise UsageError("image_size must divide by patch_size, and both widths by heads")
    gen = torch.Generator().manual_seed(cfg.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = MultimodalDemo(cfg).eval()
    pixel_values = torch.randn(cfg.batch_size, 3, cfg.image_size, cfg.image_size, generator=gen)
    input_ids = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.text_len), generator=gen)
    model = model.to(device)
    return Demo(
        model=model,
        example_inputs=(pixel_values.to(device), input_ids.to(device)),
        components={"vision": "encoder", "language_model": "language_model"},
    )
