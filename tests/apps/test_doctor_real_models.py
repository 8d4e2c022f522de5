"""The doctor on real models (transformers' tiny random configurations): every finding names
the model's own module, its class and where it sits, at the model's own code, never the
decorators a library wraps around each forward."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import compiletrace
from compiletrace import Registry
from compiletrace._doctor import Finding, FindingKind, diagnose_records

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.real_model


def _llama(layers: int = 2) -> Any:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config).eval()


def _forward_def(cls: type) -> str:
    """file:line of a class's own forward, behind every decorator around it."""
    code = inspect.unwrap(cls.forward).__code__
    return f"{code.co_filename}:{code.co_firstlineno}"


def _only(findings: list[Finding], kind: FindingKind) -> Finding:
    (found,) = [f for f in findings if f.kind == kind]
    return found


def _ids(length: int) -> torch.Tensor:
    return torch.randint(0, 128, (1, length), generator=torch.Generator().manual_seed(length))


def test_a_recompiled_decorated_forward_is_named_by_its_class_and_path_not_the_decorator() -> None:
    torch._dynamo.reset()
    model = _llama()
    reg = Registry()
    with compiletrace.observe(registry=reg):
        model.model = torch.compile(model.model, backend="eager")
        with torch.no_grad():
            for length in (4, 6):
                model(_ids(length))
    records = reg.records()
    # torch compiles transformers' decorators around LlamaModel.forward, not forward itself.
    assert records[0].code_filename.startswith(str(Path(transformers.__file__).parent / "utils"))
    assert {(r.module_class, r.module_path) for r in records} == {("LlamaModel", "model")}
    finding = _only(diagnose_records(records), FindingKind.RECOMPILES)
    assert finding.title.startswith("LlamaModel.forward at model recompiled 1 time: a size changed")
    assert finding.location == _forward_def(transformers.LlamaModel)
    assert finding.evidence["modules"] == ["LlamaModel at model"]
    assert "mark_dynamic" in finding.fix


def test_layers_compiled_one_by_one_are_named_by_their_paths() -> None:
    torch._dynamo.reset()
    model = _llama(layers=3)
    reg = Registry()
    for i, layer in enumerate(model.model.layers):
        model.model.layers[i] = compiletrace.compile(layer, backend="eager", registry=reg)
    with torch.no_grad():
        for length in (4, 6):
            model(_ids(length), use_cache=False)
    records = reg.records()
    assert {r.module_class for r in records} == {"LlamaDecoderLayer"}
    assert {r.module_path for r in records} <= {f"model.layers.{i}" for i in range(3)}
    finding = _only(diagnose_records(records), FindingKind.RECOMPILES)
    assert finding.title.startswith("LlamaDecoderLayer.forward at model.layers.")
    assert finding.location == _forward_def(transformers.models.llama.modeling_llama.LlamaDecoderLayer)
    assert all(m.startswith("LlamaDecoderLayer at model.layers.") for m in finding.evidence["modules"])


class Classifier(nn.Module):
    """A user's head on a real vision tower, with a print in its forward."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        config = transformers.ViTConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
            image_size=32, patch_size=8,
        )  # fmt: skip
        self.backbone = transformers.ViTModel(config)
        self.head = nn.Linear(32, 3)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        features = self.backbone(pixel_values=pixels).pooler_output
        print("features", tuple(features.shape))
        return self.head(features)


def test_a_graph_break_in_the_users_forward_is_one_component_named_by_the_users_class(
    capsys: pytest.CaptureFixture[str],
) -> None:
    torch._dynamo.reset()
    reg = Registry()
    model = Classifier().eval()
    with compiletrace.observe(registry=reg):
        compiled = torch.compile(model, backend="eager")
        with torch.no_grad():
            compiled(torch.randn(1, 3, 32, 32))
    assert "features (1, 32)" in capsys.readouterr().out
    records = reg.records()
    codes = [r.code_name for r in records]
    assert codes[0] == "forward" and any(c.startswith("torch_dynamo_resume_in_forward") for c in codes)
    # The part after the break is the same module's, and the same component.
    assert {(r.component, r.module_class, r.module_forward) for r in records} == {
        ("Classifier", "Classifier", _forward_def(Classifier))
    }
    finding = _only(diagnose_records(records), FindingKind.GRAPH_BREAK)
    assert finding.title.startswith("a graph break split Classifier.forward into 2 graphs:")
    lines, first = inspect.getsourcelines(Classifier.forward)
    print_line = first + next(i for i, line in enumerate(lines) if "print(" in line)
    assert finding.location == f"{__file__}:{print_line}"
    assert finding.evidence["modules"] == ["Classifier"]
    assert "reorderable_logging_functions" in finding.fix


class ScaledClassifier(Classifier):
    """The same head, scaling its features by a value it reads out with ``.item()``."""

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        features = self.backbone(pixel_values=pixels).pooler_output
        scale = features.abs().max().item()
        return self.head(features / (scale + 1.0))


def test_a_value_read_with_item_is_a_break_and_a_recompile_that_capturing_scalars_fixes() -> None:
    torch._dynamo.reset()
    reg = Registry()
    model = ScaledClassifier().eval()
    with compiletrace.observe(registry=reg):
        compiled = torch.compile(model, backend="eager")
        with torch.no_grad():
            for seed in range(2):
                compiled(torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(seed)))
    findings = diagnose_records(reg.records())
    broken = _only(findings, FindingKind.GRAPH_BREAK)
    assert broken.evidence["auto_fix"] == "capture-scalar-outputs"
    # The value the break hands on is baked into the graph after it: a recompile per value,
    # whose cause is the .item(), not a constant to "hold in a tensor" (out of the user's reach:
    # the name is a stack slot of torch's resume function).
    recompiled = _only(findings, FindingKind.RECOMPILES)
    assert "___stack0 ==" in recompiled.evidence["guards"]["Python value or constant"]["reasons"][0]
    assert "a number computed before a graph break (a .item())" in recompiled.fix
    assert "hold it in a tensor" not in recompiled.fix
    assert recompiled.evidence["auto_fix"] == "capture-scalar-outputs"
    assert recompiled.evidence["modules"] == ["ScaledClassifier"]


# -- generate: the guards a generation cache makes, and the fixes that apply to them ----------


def _t5() -> Any:
    torch.manual_seed(3)
    config = transformers.T5Config(
        vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )  # fmt: skip
    return transformers.T5ForConditionalGeneration(config).eval()


def _generate(model: Any, **options: Any) -> list[str]:
    """``model.forward`` compiled, as transformers' docs do it, then one generate call; the
    recompiles' failed-guard kinds, and the one recompiles finding."""
    torch._dynamo.reset()
    reg = Registry()
    with compiletrace.observe(registry=reg):
        model.forward = torch.compile(model.forward, backend="eager")
        with torch.no_grad():
            model.generate(_ids(5), max_new_tokens=4, min_new_tokens=4, do_sample=False, **options)
    findings = diagnose_records(reg.records())
    return [f for f in findings if f.kind == FindingKind.RECOMPILES]


def test_llama_generate_the_size_torch_specialises_and_the_cache_that_grows() -> None:
    (dynamic,) = _generate(_llama())
    assert dynamic.title.startswith("LlamaForCausalLM.forward recompiled 2 times")
    assert sorted(dynamic.evidence["readings"].values()) == [
        "a size torch specialises",  # prefill then decode: length 5, then 1
        "the generation cache grew",
    ]
    assert "input_ids changed from size 5 to 1 in dimension 1" in dynamic.fix
    assert "no setting removes this recompile" in dynamic.fix
    assert "hold it in a tensor" not in dynamic.fix
    # The cache's keys grow every step: torch compiles them dynamic after one recompile, and
    # marking them dynamic from the first call saves the static decode graph. The static
    # cache is named beside it, measured with --alternatives.
    entries = dynamic.evidence["dynamic_sources"]
    assert "L['kwargs']['cache'].layers[0].keys:2" in entries
    assert dynamic.evidence["auto_fix"] == "mark-dynamic=" + ",".join(entries)
    assert "static-cache" in dynamic.evidence["other_fixes"]
    assert [s["by"] for s in dynamic.evidence["superseded"]] == ["0/2"]  # the decode graph, 0/1

    # The fix applied: the cache's recompile is gone, one recompile is left (the calls'
    # keyword arguments differ between generate's first step and the rest).
    (static,) = _generate(_llama(), cache_implementation="static")
    assert static.title.startswith("LlamaForCausalLM.forward recompiled 1 time")
    assert "generation cache state" not in static.evidence["guards"]
    assert "another set of keyword arguments" in static.fix


def test_t5_generate_a_cache_flag_that_flips_once_is_not_told_to_be_a_tensor() -> None:
    (dynamic,) = _generate(_t5())
    assert dynamic.title.startswith("T5ForConditionalGeneration.forward recompiled 2 times")
    assert dynamic.evidence["guards"]["generation cache state"]["count"] == 2
    assert "a flag of the cache flips once" in dynamic.fix  # the static cache: among the other fixes
    assert "tensor (a registered buffer" not in dynamic.fix
    assert "dynamic=True would make every other dimension" in dynamic.fix  # named only as what not to do

    (static,) = _generate(_t5(), cache_implementation="static")
    assert static.title.startswith("T5ForConditionalGeneration.forward recompiled 1 time")
    assert "a flag of the cache flips once" in static.fix and "static cache" not in static.fix
    assert dynamic.evidence["auto_fix"].startswith("mark-dynamic=") and "auto_fix" not in static.evidence
    assert "static-cache" in dynamic.evidence["other_fixes"]


# -- LLaVA: a vision tower beside a Llama, and transformers' one-time hooks -----------------


def _llava() -> Any:
    from tests.programs.hf_cases import llava_model  # the program's own model: one definition

    return llava_model()


def _llava_call(model: Any) -> Any:
    """One call: four image tokens (the 16x16 image's 2x2 patches), then text."""
    from tests.programs.hf_cases import IMAGE_TOKEN

    ids = torch.cat([torch.full((1, 4), IMAGE_TOKEN), _ids(5)], dim=1)
    pixels = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    return model(input_ids=ids, pixel_values=pixels, use_cache=False)


def _llava_findings(warm_first: bool) -> list[Finding]:
    torch._dynamo.reset()
    reg = Registry()
    model = _llava()
    with torch.no_grad():
        if warm_first:
            _llava_call(model)  # eagerly: transformers installs its hooks now
        with compiletrace.observe(registry=reg):
            compiled = torch.compile(model, backend="eager")
            for _ in range(2):
                _llava_call(compiled)
    return diagnose_records(reg.records())


def test_llava_transformers_one_time_hooks_are_named_and_the_model_call_that_avoids_them() -> None:
    """Compiled before its first call, LLaVA makes Dynamo trace transformers' installation of
    its output-capturing hooks (a lock, class attributes): breaks in a dozen of the library's
    functions. They are one finding per component, whose fix is a call before compiling."""
    cold = _llava_findings(warm_first=False)
    hooks = [f for f in cold if "a library's one-time code" in f.title]
    assert hooks and all("call the model once before compiling it" in f.fix for f in hooks)
    assert any("CLIPVisionModel at model.vision_tower" in f.evidence["modules"] for f in hooks)
    assert all("hold it in a tensor" not in f.fix for f in cold)

    # Called once first: the hooks are gone from the compile; what is left is LLaVA's own
    # check of the image tokens (a .item()), which capturing scalar outputs applies to.
    warm = _llava_findings(warm_first=True)
    assert not [f for f in warm if "one-time code" in f.title or "output_capturing" in f.location]
    breaks = [f for f in warm if f.kind == FindingKind.GRAPH_BREAK]
    assert breaks and breaks[0].evidence["auto_fix"] == "capture-scalar-outputs"
    assert "Tensor.item()" in breaks[0].title
    assert any("LlavaModel at model" in f.evidence["modules"] for f in breaks)


# -- a healthy run of each real model: no finding above 5% of its compile time -------------


def _healthy_llama() -> tuple[Any, Any]:
    model = _llama()
    return torch.compile(model, backend="eager"), lambda m: m(_ids(6), use_cache=False)


def _healthy_llama_by_layer() -> tuple[Any, Any]:
    model = _llama(layers=3)
    for i, layer in enumerate(model.model.layers):  # regional compilation, as torchtitan does
        model.model.layers[i] = torch.compile(layer, backend="eager")
    return model, lambda m: m(_ids(6), use_cache=False)


def _healthy_bert() -> tuple[Any, Any]:
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    model = transformers.BertForSequenceClassification(config).eval()
    return torch.compile(model, backend="eager"), lambda m: m(input_ids=_ids(8))


def _healthy_vit() -> tuple[Any, Any]:
    backbone = Classifier().eval().backbone  # transformers' ViT, its forward behind its decorators
    return torch.compile(backbone, backend="eager"), lambda m: m(pixel_values=torch.randn(1, 3, 32, 32))


def _healthy_llava() -> tuple[Any, Any]:
    """LLaVA called once before it is compiled (transformers' hooks in place) and compiled with
    scalar outputs captured (its image-token check): one graph."""
    model = _llava()
    with torch.no_grad():
        _llava_call(model)

    def call(m: Any) -> None:
        with torch._dynamo.config.patch(capture_scalar_outputs=True):
            _llava_call(m)

    return torch.compile(model, backend="eager"), call


def _healthy_t5() -> tuple[Any, Any]:
    model = _t5()
    return torch.compile(model, backend="eager"), lambda m: m(
        input_ids=_ids(5), decoder_input_ids=_ids(3), use_cache=False
    )


@pytest.mark.parametrize(
    "build",
    [_healthy_llama, _healthy_llama_by_layer, _healthy_bert, _healthy_vit, _healthy_t5, _healthy_llava],
    ids=["llama", "llama-by-layer", "bert", "vit-trace-cost", "t5", "llava"],
)
def test_a_healthy_run_of_each_real_model_has_no_finding_above_5_percent(build: Any) -> None:
    """The same shapes on every call, one compile per frame: whatever the doctor says then
    is noise, and it must say nothing that costs more than 5% of the compile time."""
    torch._dynamo.reset()
    reg = Registry()
    with compiletrace.observe(registry=reg, trace_cost=True):
        model, call = build()
        with torch.no_grad():
            for _ in range(3):
                call(model)
    records = reg.records()
    compile_s = sum(r.total_s for r in records)
    assert records and compile_s > 0
    findings = diagnose_records(records)
    loud = [(f.kind.value, f.title, f.seconds) for f in findings if f.seconds > 0.05 * compile_s]
    assert loud == [], loud
