"""Passive recording (``compiletrace.observe()``): every frame compile in the process,
whatever its backend, recorded as a compiletrace backend records its own, checked frame by
frame against torch's own metrics; and the components it names with no edit."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch

import compiletrace
from compiletrace._core import torch_compat as tc
from compiletrace._core.components import (
    CompiledTarget,
    ComponentRule,
    name_component,
    parse_component_rules,
    target_of,
)
from compiletrace._doctor.shared import owners
from tests.conftest import torch_rows


def _close(ours_ns: int, torch_s: float) -> bool:
    # Both come from torch's own bounds (the frame region) or our timing of the same call.
    return abs(ours_ns / 1e9 - torch_s) <= 0.02 * torch_s + 0.002


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).relu()


class CustomBackend:
    """A backend object of the user's own (not a function)."""

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        return gm.forward


def test_every_backend_is_recorded_and_agrees_with_torch_frame_by_frame() -> None:
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @torch.compile(backend="eager")
    def decorated(x: torch.Tensor) -> torch.Tensor:
        return x - 1

    method = Tower()
    method.compile(backend="aot_eager")  # nn.Module.compile(): compiles in place
    with compiletrace.observe(registry=compiletrace.Registry()) as observed:
        torch.compile(double, backend="eager")(torch.ones(2))
        torch.compile(lambda x: x + 1, backend=lambda gm, inputs: gm.forward)(torch.ones(2))
        torch.compile(Block(), backend="aot_eager")(torch.ones(2, 4))
        torch.compile(lambda x: x.cos(), backend=CustomBackend())(torch.ones(2))
        decorated(torch.ones(2))
        method(torch.ones(2, 4))
    records = observed.registry.records()
    before = len(compiletrace.get_registry())
    assert [r.backend for r in records] == [
        "eager",
        "<lambda>",
        "aot_eager",
        "CustomBackend",
        "eager",
        "aot_eager",
    ]
    rows = {k: m for k, m in torch_rows().items() if m.entire_frame_compile_time_s is not None}
    assert [r.compile_id for r in records] == list(rows)
    for record in records:
        row = rows[record.compile_id]
        assert record.dynamo_ns is not None and record.dynamo_ns > 0
        assert _close(record.total_ns, row.entire_frame_compile_time_s), record
        # The backend's time as torch reads it: its own backend region, the bookkeeping
        # around the call included (torch keeps it in microseconds).
        assert abs(record.backend_ns - row.backend_compile_time_s * 1e9) <= 2_000, record
    assert records[2].phase_ns["aot_autograd"] > 0  # torch's timed regions split the backend call
    assert records[0].code_location == f"{__file__}:{double.__code__.co_firstlineno}"
    assert len(compiletrace.get_registry()) == before  # the given registry, not the process one


def test_compiletrace_compiles_keep_their_component_and_are_never_counted_twice() -> None:
    own = compiletrace.Registry()
    passive = compiletrace.Registry()
    with compiletrace.observe(registry=passive):
        compiletrace.compile(Block(), is_encoder=True, backend="eager", registry=own)(torch.ones(2, 4))
        torch.compile(Block(), backend="eager")(torch.ones(2, 4))
    assert [(r.component, r.compile_id) for r in own.records()] == [("encoder", "0/0")]
    assert [(r.component, r.compile_id) for r in passive.records()] == [("Block", "0/1")]


def test_a_jobs_recording_also_copies_compiletrace_compiles_in_any_registry() -> None:
    """A program that keeps compiletrace.compile's records in a registry of its own (as
    ``compiletrace profile`` does) still shows them in a ``compiletrace run`` job."""
    own = compiletrace.Registry()
    job = compiletrace.Registry()
    with compiletrace.observe(registry=job) as recording:
        recording.recording.own_backends = True  # what the job's process sets
        compiletrace.compile(Block(), is_encoder=True, backend="eager", registry=own)(torch.ones(2, 4))
        torch.compile(Block(), backend="eager")(torch.ones(2, 4))
    assert [(r.component, r.compile_id) for r in own.records()] == [("encoder", "0/0")]
    assert [(r.component, r.compile_id) for r in job.records()] == [("encoder", "0/0"), ("Block", "0/1")]
    assert job.records()[0].start_unix_ns == own.records()[0].start_unix_ns  # one compile, two copies


def test_off_by_default_and_after_stop() -> None:
    reg = compiletrace.Registry()
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))
    observed = compiletrace.observe(registry=reg)
    torch.compile(lambda x: x + 2, backend="eager")(torch.ones(1))
    observed.stop()
    observed.stop()  # twice is harmless
    torch.compile(lambda x: x + 3, backend="eager")(torch.ones(1))
    assert [r.compile_id for r in reg.records()] == ["1/0"]


def test_recompiles_graph_breaks_lazy_backwards_and_errors_are_recorded_passively() -> None:
    def broken(x: torch.Tensor) -> torch.Tensor:
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()

    def fails(gm: torch.fx.GraphModule, inputs: Any) -> Any:
        raise RuntimeError("backend exploded")

    with compiletrace.observe(registry=compiletrace.Registry()) as observed:
        shaped = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
        shaped(torch.ones(2))
        shaped(torch.ones(3))
        torch.compile(broken, backend="eager")(torch.ones(2))
        trained = torch.compile(Block(), backend="aot_eager")
        trained(torch.randn(2, 4, requires_grad=True)).sum().backward()
        with pytest.raises(torch._dynamo.exc.BackendCompilerFailed):
            torch.compile(lambda x: x - 1, backend=fails)(torch.ones(2))
    _, recompile, brk, resume, block, failed = observed.registry.records()
    assert recompile.is_recompile and "size mismatch" in (recompile.recompile_reason or "")
    (graph_break,) = brk.graph_breaks
    assert graph_break.lineno == broken.__code__.co_firstlineno + 2
    assert resume.code_name.startswith("torch_dynamo_resume_in_broken")
    assert block.backward_ns > 0
    assert failed.status is compiletrace.CompileStatus.ERROR and failed.error_type == "RuntimeError"


class Tower(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


class Decoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([Block(), Block()])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class Multimodal(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.vision_tower = torch.compile(Tower(), backend="eager")
        self.language_model = Decoder()
        self.language_model.layers[0] = torch.compile(self.language_model.layers[0], backend="eager")
        self.head = torch.compile(torch.nn.Linear(4, 2), backend="eager")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.language_model(self.vision_tower(x)))


class EncoderFlagged:
    """A library's compile wrapper that flags its encoder, as vLLM's does."""

    def __init__(self) -> None:
        self._is_encoder = True
        self.compiled = torch.compile(lambda x: x.tanh(), backend="eager")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.compiled(x)


def test_components_are_named_as_a_person_would_with_no_edit() -> None:
    with compiletrace.observe(registry=compiletrace.Registry()) as observed:
        Multimodal()(torch.ones(2, 4))
        EncoderFlagged()(torch.ones(2))
    assert [r.component for r in observed.registry.records()] == [
        "encoder",  # the vision tower, by its attribute name
        "language_model.layers.0",  # the path from the outermost module that called it
        "head",
        "encoder",  # the wrapper's own flag
    ]


def test_rules_come_first_and_match_path_class_or_file() -> None:
    rules = ["language_model.*=decoder", "Linear=head", f"{__file__}=mine"]
    with compiletrace.observe(components=rules, registry=compiletrace.Registry()) as observed:
        Multimodal()(torch.ones(2, 4))
        torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))
    assert [r.component for r in observed.registry.records()] == ["mine", "decoder", "head", "mine"]


def test_torch_compile_name_is_read_from_torchs_own_wrapper() -> None:
    # torch keeps name= on its inductor wrapper only; read without compiling (inductor is slow).
    wrapper = torch._TorchCompileInductorWrapper("default", None, None, "vision")  # type: ignore[attr-defined]
    assert tc.compile_name(wrapper) == "vision"
    assert tc.compile_name(torch._TorchCompileInductorWrapper("default", None, None)) is None  # type: ignore[attr-defined]
    assert tc.compile_name(lambda gm, inputs: gm) is None
    assert name_component(CompiledTarget(path="vision_tower", compile_name="pixels")) == "pixels"


def test_naming_order_and_fallbacks() -> None:
    assert (
        name_component(CompiledTarget(path="model.visual", class_name="Qwen2VisionTransformer")) == "encoder"
    )
    assert name_component(CompiledTarget(path="", class_name="WhisperEncoder")) == "encoder"
    assert name_component(CompiledTarget(class_name="LlamaForCausalLM")) == "LlamaForCausalLM"
    assert name_component(CompiledTarget(qualname="train_step")) == "train_step"
    assert name_component(CompiledTarget()) == "?"
    assert name_component(CompiledTarget(path="lm", encoder_flag=True)) == "encoder"
    assert name_component(CompiledTarget(path="lm", encoder_flag=False)) == "lm"
    flagged = CompiledTarget(path="vision_tower", encoder_flag=False)
    assert name_component(flagged, [ComponentRule("vision*", "pixels")]) == "pixels"


def test_target_of_reads_the_outermost_callers_path_through_torchs_wrapper() -> None:
    model = Multimodal()
    tower = model.vision_tower._orig_mod  # type: ignore[union-attr]
    assert target_of(tower, (model.vision_tower, model)).path == "vision_tower"
    assert target_of(tower, ()).path == "" and target_of(tower, ()).class_name == "Tower"
    assert target_of(lambda x: x, (model,)).class_name == ""


@pytest.mark.parametrize("bad", ["novalue", "=encoder", "vision=", " = "])
def test_a_bad_rule_is_bad_input_and_nothing_starts(bad: str) -> None:
    with pytest.raises(compiletrace.UsageError, match="PATTERN=NAME"):
        compiletrace.observe(components=[bad])
    with pytest.raises(compiletrace.UsageError, match="PATTERN=NAME"):
        parse_component_rules([bad])
    with pytest.raises(compiletrace.ArgumentTypeError):
        compiletrace.observe(registry="not a registry")  # type: ignore[arg-type]


class Serving(torch.nn.Module):
    """Compiles its language model ahead of time, as vLLM does by default."""

    def __init__(self) -> None:
        super().__init__()
        self.language_model = Tower()

    def forward(self, x: torch.Tensor) -> Any:  # called as server(x): a module call
        compiled = torch.compile(Tower.forward, fullgraph=True, backend="aot_eager")
        return compiled.aot_compile(((self.language_model, x), {}))


def test_torchs_ahead_of_time_path_is_recorded_whole() -> None:
    # torch's aot_compile fires no frame callback and calls its backend directly.
    server = Serving()
    with compiletrace.observe(registry=compiletrace.Registry()) as observed:
        compiled = server(torch.ones(2, 4))
    assert torch.equal(
        compiled(server.language_model, torch.ones(2, 4)), server.language_model(torch.ones(2, 4))
    )
    (record,) = observed.registry.records()
    assert record.compile_id == "aot0/0" and record.component == "language_model"
    assert record.backend == "aot_eager" and record.graph_node_count > 0
    assert record.code_location == f"{__file__}:{Tower.forward.__code__.co_firstlineno}"
    assert record.dynamo_ns and record.backend_ns and record.phase_ns["aot_autograd"] > 0
    # torch's own figure for the whole of it: its "fullgraph_capture" region.
    (torch_s,) = torch._dynamo.utils.compilation_time_metrics["fullgraph_capture"]
    assert _close(record.total_ns, torch_s)


def _logged(fn: Any) -> Any:
    """A decorator as libraries put on forward (transformers wraps every one)."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapped


class DecoratedLM(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    @_logged
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def test_a_decorated_forward_is_named_by_its_module() -> None:
    with compiletrace.observe(registry=compiletrace.Registry()) as observed:
        torch.compile(DecoratedLM(), backend="eager")(torch.ones(2, 4))
        patched = DecoratedLM()
        patched.forward = torch.compile(patched.forward, backend="eager")  # type: ignore[method-assign]
        patched(torch.ones(3, 4))
    assert [r.component for r in observed.registry.records()] == ["DecoratedLM", "DecoratedLM"]


class Printing(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        torch._dynamo.graph_break()
        return y.relu()


class Holder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.compile(Printing(), backend="eager")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) + 1


def test_the_rest_of_a_function_after_a_graph_break_is_named_as_that_function() -> None:
    def helper(x: torch.Tensor) -> torch.Tensor:
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()

    with compiletrace.observe(registry=compiletrace.Registry()) as observed:
        Holder()(torch.ones(2, 4))
        torch.compile(helper, backend="eager")(torch.ones(2))
    forward, rest, function, function_rest = observed.registry.records()
    assert rest.code_name.startswith("torch_dynamo_resume_in_forward")
    assert function_rest.code_name.startswith("torch_dynamo_resume_in_helper")
    where = f"{__file__}:{Printing.forward.__code__.co_firstlineno}"
    for r in (forward, rest):
        assert (r.component, r.module_class, r.module_path, r.module_forward) == (
            "inner",
            "Printing",
            "inner",
            where,
        )
    assert function.component == function_rest.component == helper.__qualname__
    assert function.module_class == function_rest.module_class == ""


def test_a_users_backend_around_a_compiletrace_backend_is_timed_once() -> None:
    inner = compiletrace.backend(backend="eager", registry=compiletrace.Registry())

    def wrapping(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        return inner(gm, example_inputs)

    with compiletrace.observe(registry=compiletrace.Registry()) as observed:
        torch.compile(lambda x: x * 5, backend=wrapping)(torch.ones(2))
    (record,) = observed.registry.records()
    assert inner.registry.records() == ()  # its call was inside the one timed here
    (row,) = [m for m in torch_rows().values() if m.entire_frame_compile_time_s is not None]
    assert record.backend == "wrapping" and record.backend_ns <= record.total_ns
    assert _close(record.total_ns, row.entire_frame_compile_time_s)


def test_observers_stopped_out_of_order_leave_none_on() -> None:
    first = compiletrace.observe(registry=compiletrace.Registry())
    second = compiletrace.observe(registry=compiletrace.Registry())
    first.stop()
    second.stop()
    torch.compile(lambda x: x + 7, backend="eager")(torch.ones(1))
    assert len(first.registry) == len(second.registry) == 0


def test_observers_on_at_once_each_get_every_compile_under_their_own_names() -> None:
    # A job's recording (compiletrace run) and the user's own observe() inside the program.
    job = compiletrace.observe(registry=compiletrace.Registry())
    with compiletrace.observe(components=["Block=mine"], registry=compiletrace.Registry()) as users:
        block = torch.compile(Block(), backend="aot_eager")
        block(torch.randn(2, 4, requires_grad=True)).sum().backward()
    torch.compile(lambda x: x + 8, backend="eager")(torch.ones(1))  # after the inner one stopped
    job.stop()
    (theirs,) = users.registry.records()
    ours, after = job.registry.records()
    assert (theirs.component, ours.component) == ("mine", "Block")
    assert theirs.compile_id == ours.compile_id and theirs.frame_ns == ours.frame_ns
    assert theirs.backward_ns == ours.backward_ns > 0  # the lazy backward reaches both
    assert after.code_name == "<lambda>"

    # Stopped out of order: the one still on keeps recording alone.
    outer = compiletrace.observe(registry=compiletrace.Registry())
    inner = compiletrace.observe(registry=compiletrace.Registry())
    outer.stop()
    torch.compile(lambda x: x + 9, backend="eager")(torch.ones(1))
    inner.stop()
    assert (len(outer.registry), len(inner.registry)) == (0, 1)


def test_observers_sharing_a_registry_get_one_copy_and_any_one_asks_for_trace_cost() -> None:
    shared = compiletrace.Registry()
    first = compiletrace.observe(registry=shared, trace_cost=True)
    second = compiletrace.observe(registry=shared)
    with compiletrace.observe(registry=compiletrace.Registry()) as newest:
        torch.compile(Block(), backend="eager")(torch.ones(2, 4))
    second.stop()
    first.stop()
    (record,) = shared.records()
    (theirs,) = newest.registry.records()
    assert record.trace_cost and theirs.trace_cost  # the oldest asked for it: every copy has it


# -- a compile belongs to the module call it runs inside --------------------------------


def _patches(x: torch.Tensor) -> torch.Tensor:
    """A library helper the vision tower calls, which breaks the graph."""
    y = x.sin()
    torch._dynamo.graph_break()
    return y.cos()


def _mix(x: torch.Tensor) -> torch.Tensor:
    """A helper the language model calls, which breaks the graph."""
    y = x.tanh()
    torch._dynamo.graph_break()
    return y * 2


class HelperTower(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _patches(x) + 1


class HelperLM(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(_mix(x))


class VisionLanguage(torch.nn.Module):
    """A tower and a language model; ``image_features`` is a method other than forward
    that breaks the graph (as Qwen2-VL's ``get_image_features`` does)."""

    def __init__(self) -> None:
        super().__init__()
        self.vision_tower = HelperTower()
        self.language_model = HelperLM()

    def image_features(self, x: torch.Tensor) -> torch.Tensor:
        features = self.vision_tower(x)
        torch._dynamo.graph_break()
        return features * 3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.language_model(self.image_features(x))


def _whole_vision_language() -> list[compiletrace.GraphRecord]:
    torch._dynamo.reset()
    with compiletrace.observe(registry=compiletrace.Registry()) as observed:
        torch.compile(VisionLanguage(), backend="eager")(torch.ones(2, 4))
    return observed.registry.records()


def test_a_helper_compiled_inside_the_towers_call_is_the_encoder_whatever_its_name() -> None:
    records = _whole_vision_language()
    by_code = {r.code_name: r for r in records}
    tower_helper = [r for r in records if "_patches" in r.code_name]
    assert len(tower_helper) == 2  # the helper and the rest of it after its break
    assert {r.component for r in tower_helper} == {"encoder"}
    # A helper inside the language model's call is that call's component, not its own name.
    lm_helper = [r for r in records if "_mix" in r.code_name]
    assert lm_helper and {r.component for r in lm_helper} == {"language_model"}
    assert by_code["_patches"].module_class == ""  # the record's module is the code's own
    # Named with no module call around it, a function keeps its own name.
    target = target_of(_patches, (), qualname="_patches")
    assert target.enclosing == () and name_component(target) == "_patches"


def test_the_rest_of_any_method_after_a_break_keeps_its_module_and_method() -> None:
    records = _whole_vision_language()
    method = [r for r in records if r.code_name.endswith("image_features")]
    rest = [r for r in records if r.code_name.startswith("torch_dynamo_resume_in_image_features")]
    assert len(method) == 1 and rest  # a break after the tower's call, and the explicit one
    for r in (*method, *rest):
        assert (r.component, r.module_class, r.module_method) == (
            "VisionLanguage",
            "VisionLanguage",
            "image_features",
        )
    # One function, one owner: the same row and the same finding.
    found = set(owners([*method, *rest]))
    assert len(found) == 1 and next(iter(found))[2] == "VisionLanguage.image_features"
    # A function that takes a module as its first argument is no method of it.
    model = VisionLanguage()
    assert target_of(model, (), code=_patches.__code__).method == ""
    assert target_of(model, (), code=VisionLanguage.image_features.__code__).method == "image_features"
