"""compiletrace.compile on real torch.compile runs (fast "eager"/"aot_eager" backends)."""

from __future__ import annotations

import io
import threading
import warnings
from typing import Any

import pytest
import torch

import compiletrace
from compiletrace import CompileStatus, Registry
from compiletrace._app.progress import Progress, compile_lines
from compiletrace._core import torch_compat as tc
from compiletrace._core.observers import process_observers
from compiletrace._core.tracker import get_tracker
from tests.tiny_models import Encoder, LanguageModel


def torch_metrics(kind: str = "forward") -> dict[str, Any]:
    return {str(m.compile_id): m for m in tc.compilation_metrics() if m.is_forward is (kind == "forward")}


def test_returns_what_torch_compile_returns() -> None:
    reg = Registry()
    model = Encoder()
    compiled = compiletrace.compile(model, is_encoder=True, backend="eager", registry=reg)
    plain = torch.compile(model, backend="eager")
    assert type(compiled) is type(plain)
    assert compiled._orig_mod is model  # type: ignore[attr-defined]

    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    fn = compiletrace.compile(double, backend="eager", registry=reg)
    x = torch.randn(3, 8)
    assert torch.equal(fn(x), x * 2)
    assert torch.allclose(compiled(x), model(x))
    assert [r.component for r in reg.records()] == ["language_model", "encoder"]


def test_component_naming() -> None:
    reg = Registry()
    for kwargs in (
        {},
        {"is_encoder": True},
        {"component": "audio_tower"},
        {"is_encoder": True, "component": "encoder"},
    ):
        fn = compiletrace.compile(lambda x: x + 1, backend="eager", registry=reg, **kwargs)
        fn(torch.ones(2))
    # The last is the second one's configuration: one backend, so Dynamo reuses what it compiled
    # for the same code (the lambda's), as torch.compile does.
    assert [r.component for r in reg.records()] == ["language_model", "encoder", "audio_tower"]
    assert set(reg.by_component()) == {"language_model", "encoder", "audio_tower"}


def test_attribution_is_complete_and_agrees_with_torch() -> None:
    reg = Registry()
    enc = compiletrace.compile(Encoder(), is_encoder=True, backend="aot_eager", registry=reg)
    lm = compiletrace.compile(LanguageModel(graph_break=True), backend="aot_eager", registry=reg)
    x = torch.randn(4, 8)

    tracker = get_tracker()  # read the clock the records are timed with
    t0 = tracker.now_ns()
    lm(enc(x))
    t1 = tracker.now_ns()
    lm(enc(x))
    t2 = tracker.now_ns()

    records = reg.records()
    assert [r.component for r in records] == ["encoder", "language_model", "language_model"]
    # On the tracker's clock, with no tolerance: every compile lies inside the first call, one
    # after the other, its backend call inside its frame.
    bounds = [tracker.to_unix_ns(t0)]
    bounds += [ns for r in records for ns in (r.start_unix_ns, r.end_unix_ns)]
    bounds.append(tracker.to_unix_ns(t1))
    assert bounds == sorted(bounds)
    for r in records:
        assert r.backend_start_unix_ns is not None
        assert r.start_unix_ns <= r.backend_start_unix_ns <= r.end_unix_ns - r.backend_ns
    # Complete: compiling is what makes a first call slow, and the records hold it. Real time
    # on a machine that may be busy, so the bound is generous (idle, they hold over 90%).
    assert sum(r.total_ns for r in records) >= 0.5 * ((t1 - t0) - (t2 - t1))
    theirs = torch_metrics()
    for r in records:
        # torch times the same frames: the figures agree.
        expected = theirs[r.compile_id].entire_frame_compile_time_s
        assert abs(r.frame_s - expected) <= max(0.05 * expected, 0.010), r
        assert r.dynamo_ns is not None and r.dynamo_ns > 0
        assert r.backend_ns > 0
        assert r.graph_node_count > 0
        assert r.status is CompileStatus.OK


def test_graph_breaks_give_several_records_of_one_component() -> None:
    reg = Registry()
    lm = compiletrace.compile(LanguageModel(graph_break=True), backend="eager", registry=reg)
    lm(torch.randn(2, 8))
    records = reg.records()
    assert len(records) == 2
    assert {r.component for r in records} == {"language_model"}
    assert records[0].code_name == "forward"
    assert records[1].code_name.startswith("torch_dynamo_resume_in_forward")
    assert records[0].compile_id != records[1].compile_id


def test_recompiles_are_flagged_with_torchs_reason() -> None:
    reg = Registry()
    fn = compiletrace.compile(lambda x: x.sin() + 1, backend="eager", dynamic=False, registry=reg)
    fn(torch.randn(2))
    fn(torch.randn(5))
    first, second = reg.records()
    assert not first.is_recompile and first.recompile_reason is None
    assert second.is_recompile
    theirs = torch_metrics()[second.compile_id].recompile_reason
    assert second.recompile_reason == theirs
    assert "size mismatch" in (second.recompile_reason or "")


def test_lazy_backward_lands_on_the_right_component() -> None:
    reg = Registry()
    enc = compiletrace.compile(Encoder(), is_encoder=True, backend="aot_eager", registry=reg)
    lm = compiletrace.compile(torch.nn.Linear(8, 1), backend="aot_eager", registry=reg)
    x = torch.randn(4, 8, requires_grad=True)
    loss = lm(enc(x)).sum()
    before = {r.compile_id: r.backward_ns for r in reg.records()}
    assert set(before.values()) == {0}
    loss.backward()
    after = {r.compile_id: r for r in reg.records()}
    backward_metrics = torch_metrics("backward")
    for cid, rec in after.items():
        assert rec.backward_ns > 0, rec
        assert cid in backward_metrics  # torch compiled a backward for this very graph
    enc_rec = next(r for r in after.values() if r.component == "encoder")
    assert reg.compilation_times().encoder == pytest.approx(enc_rec.total_s)


def test_threads_never_cross_attribute_and_lose_nothing() -> None:
    reg = Registry()

    def encoder_fn(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ x.T)

    def language_model_fn(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x).sum(-1)

    enc = compiletrace.compile(encoder_fn, is_encoder=True, backend="eager", dynamic=False, registry=reg)
    lm = compiletrace.compile(language_model_fn, backend="eager", dynamic=False, registry=reg)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(i: int) -> None:
        try:
            barrier.wait()
            for j in range(6):
                x = torch.randn(2 + (i + j) % 3, 4)  # three shapes: recompiles under contention
                (enc if (i + j) % 2 else lm)(x)
                (lm if (i + j) % 2 else enc)(x)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    records = reg.records()
    expected_component = {"encoder_fn": "encoder", "language_model_fn": "language_model"}
    for r in records:
        assert r.component == expected_component[r.code_name], r
    rows = torch_metrics()
    theirs = {cid for cid, m in rows.items() if m.co_name in expected_component}
    compiled = [r for r in records if not r.recompile_limit_hit]
    assert {r.compile_id for r in compiled} == theirs
    # At least 3 shapes x 2 functions; torch may compile more under contention, each recorded once.
    assert len(compiled) == len(theirs) >= 6
    # Past torch's recompile limit (contention compiles duplicates) a frame runs eagerly: torch
    # logs that attempt with no code name, compiletrace records it as the doctor's evidence.
    latest = {str(m.compile_id): m for m in tc.compilation_metrics()}  # is_forward unset there
    for r in records:
        if r.recompile_limit_hit:
            assert latest[r.compile_id].fail_type is not None and r.graph_node_count == 0


def test_measuring_survives_dynamo_reset() -> None:
    reg = Registry()
    compiletrace.compile(lambda x: x * 3, backend="eager", registry=reg)(torch.ones(2))
    torch._dynamo.reset()
    torch._dynamo.reset()
    compiletrace.compile(lambda x: x * 4, backend="eager", registry=reg)(torch.ones(2))
    assert [r.dynamo_ns is not None for r in reg.records()] == [True, True]


def test_callbacks_removed_behind_our_back_are_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    reg = Registry()
    fn = compiletrace.compile(lambda x: x - 1, backend="eager", dynamic=False, registry=reg)
    tc.uninstall_callbacks_for_tests()
    with pytest.warns(RuntimeWarning, match="re-registered"):
        fn(torch.ones(2))
    fn(torch.ones(3))  # measured in full again
    first, second = reg.records()
    assert first.dynamo_ns is None
    assert second.dynamo_ns is not None


def test_torch_without_callback_api_degrades_to_backend_timing(monkeypatch: pytest.MonkeyPatch) -> None:
    tc.uninstall_callbacks_for_tests()
    monkeypatch.setattr("compiletrace._core.torch_compat.callbacks._callback_handler", lambda: None)
    reg = Registry()
    fn = compiletrace.compile(lambda x: x + 2, backend="eager", dynamic=False, registry=reg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn(torch.ones(2))
        fn(torch.ones(3))
    assert len([w for w in caught if "compile-callback API" in str(w.message)]) == 1
    assert len(reg) == 2
    assert all(r.dynamo_ns is None and r.backend_ns > 0 for r in reg.records())
    monkeypatch.undo()
    tc.ensure_callbacks_registered()


def _failing_backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
    raise NotImplementedError("this backend cannot compile anything")


def test_failing_backend_raises_as_torch_would_and_is_recorded() -> None:
    reg = Registry()
    x = torch.ones(2)
    with pytest.raises(Exception) as theirs:
        torch.compile(lambda x: x + 1, backend=_failing_backend)(x)
    torch._dynamo.reset()
    with pytest.raises(Exception) as ours:
        compiletrace.compile(lambda x: x + 1, backend=_failing_backend, registry=reg)(x)
    assert type(ours.value) is type(theirs.value)
    assert isinstance(ours.value, torch._dynamo.exc.BackendCompilerFailed)
    assert str(ours.value) == str(theirs.value)
    assert type(ours.value.inner_exception) is NotImplementedError  # type: ignore[attr-defined]
    (rec,) = reg.records()
    assert rec.status is CompileStatus.ERROR
    assert rec.error_type == "NotImplementedError"


def test_suppress_errors_records_the_eager_fallback() -> None:
    reg = Registry()
    fn = compiletrace.compile(lambda x: x + 1, backend=_failing_backend, registry=reg)
    with tc.patched_suppress_errors(True):
        out = fn(torch.ones(2))
    assert torch.equal(out, torch.full((2,), 2.0))
    (rec,) = reg.records()
    assert rec.status is CompileStatus.EAGER_FALLBACK
    assert rec.error_type == "NotImplementedError"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"model": 42}, TypeError, "model must be a torch.nn.Module or a callable, got int"),
        ({"is_encoder": "yes"}, TypeError, "is_encoder must be a bool, got str"),
        ({"component": ""}, ValueError, "component must be a non-empty string"),
        ({"component": 3}, TypeError, "component must be a non-empty string"),
        ({"is_encoder": True, "component": "vision"}, ValueError, "conflicts with component='vision'"),
        (
            {"backend": "no_such_backend"},
            ValueError,
            "unknown backend 'no_such_backend'; available backends: .*aot_eager",
        ),
        ({"backend": "eager", "mode": "max-autotune"}, ValueError, "applies to the inductor backend only"),
        ({"mode": "fastest"}, ValueError, "unknown mode 'fastest'; valid modes: .*max-autotune"),
        ({"options": {"no_such_option": 1}}, ValueError, "unknown inductor option 'no_such_option'"),
        ({"registry": {}}, TypeError, "registry must be a compiletrace.Registry"),
        ({"compilation_mode": "sometimes"}, ValueError, "valid modes: CompilationMode.NONE"),
        ({"compilation_mode": 5}, TypeError, "compilation mode must be a CompilationMode"),
        ({"mode": 5}, TypeError, "mode must be a string"),
        ({"options": ["epilogue_fusion"]}, TypeError, "options must be a mapping"),
        ({"disable": "yes"}, TypeError, "disable must be a bool"),
        ({"recompile_limit": "8"}, TypeError, "recompile_limit must be an int or None"),
        ({"name": 3}, TypeError, "name must be a string or None"),
        ({"no_such_argument": 1}, TypeError, "unexpected keyword argument.*no_such_argument"),
    ],
)
def test_bad_input_gives_a_clear_error_and_records_nothing(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    reg_default = compiletrace.get_registry()
    before = len(reg_default)
    model = kwargs.pop("model", torch.nn.Linear(2, 2))
    with pytest.raises(error, match=match):
        compiletrace.compile(model, **kwargs)
    assert len(reg_default) == before


def test_compilation_mode_none_returns_the_model_unchanged() -> None:
    model = Encoder()
    assert compiletrace.compile(model, compilation_mode=compiletrace.CompilationMode.NONE) is model
    assert compiletrace.compile(model, compilation_mode="none") is model


def test_mode_and_options_reach_inductor_as_torch_applies_them(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []

    def spy_inductor(gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return gm.forward

    monkeypatch.setattr(tc, "lookup_backend", lambda name: spy_inductor)
    for mode, options in (("max-autotune-no-cudagraphs", None), (None, {"epilogue_fusion": False})):
        compiletrace.compile(lambda x: x + 1, mode=mode, options=options, registry=Registry())(torch.ones(2))
        torch._dynamo.reset()
        # torch.compile's own inductor wrapper holds the config patches it would apply.
        expected = torch._TorchCompileInductorWrapper(mode, options, None).config  # type: ignore[attr-defined]
        assert seen[-1] == {"config_patches": expected}
    # mode passed by torch.compile to a compiletrace backend object reaches inductor too
    be = compiletrace.backend(registry=Registry())
    torch.compile(lambda x: x + 2, backend=be, mode="max-autotune-no-cudagraphs")(torch.ones(2))
    assert seen[-1] == {"config_patches": torch._inductor.list_mode_options("max-autotune-no-cudagraphs")}


def test_default_registry_shortcuts() -> None:
    reg = compiletrace.get_registry()
    reg.clear()
    compiletrace.compile(lambda x: x * 5, is_encoder=True, backend="eager")(torch.ones(2))
    times = compiletrace.compilation_times()
    assert times.encoder > 0 and times.language_model == 0
    assert times.total == times.encoder
    assert compiletrace.summary().splitlines()[-1].startswith("compilation took ")
    reg.clear()


def test_a_graph_compiled_elsewhere_after_reset_keeps_its_backward() -> None:
    reg = Registry()
    ours = compiletrace.compile(torch.nn.Linear(4, 1), backend="aot_eager", registry=reg)
    ours(torch.randn(2, 4, requires_grad=True))  # forward only: no backward compiled
    torch._dynamo.reset()  # compile ids restart at 0/0
    theirs = torch.compile(torch.nn.Linear(4, 1), backend="aot_eager")
    theirs(torch.randn(2, 4, requires_grad=True)).sum().backward()
    (rec,) = reg.records()
    assert rec.backward_ns == 0


def test_takes_every_argument_torch_compile_takes_as_torch_takes_it() -> None:
    """Against the installed torch's own signature: a new argument in a new torch fails here."""
    import inspect

    from compiletrace._core.compile import RELEASE_ARGUMENTS

    ours = inspect.signature(compiletrace.compile).parameters
    for name, theirs in inspect.signature(torch.compile).parameters.items():
        if name in RELEASE_ARGUMENTS:  # taken as a keyword, where this torch has it
            assert name not in ours and any(p.kind is p.VAR_KEYWORD for p in ours.values())
            continue
        assert name in ours, f"torch.compile takes {name!r}; compiletrace.compile does not"
        assert (ours[name].kind, ours[name].default) == (theirs.kind, theirs.default), name
    # Each release-specific argument this torch has reaches it (None: its own default).
    for name in RELEASE_ARGUMENTS & set(inspect.signature(torch.compile).parameters):
        fn = compiletrace.compile(lambda x: x + 1, backend="eager", registry=Registry(), **{name: None})
        assert fn(torch.ones(2)).tolist() == [2.0, 2.0]


def test_the_decorator_forms_compile_and_record_as_torch_compile_does() -> None:
    reg = Registry()

    @compiletrace.compile(backend="eager", registry=reg)
    def double(x: torch.Tensor) -> torch.Tensor:
        return 2 * x

    @compiletrace.compile
    def bare(x: torch.Tensor) -> torch.Tensor:
        return x - 1

    assert double(torch.ones(2)).tolist() == [2.0, 2.0]
    assert [(r.component, r.code_name) for r in reg.records()] == [("language_model", "double")]
    # The bare form is torch.compile's bare form: the same kind of wrapper (inductor, not run here).
    assert type(bare) is type(torch.compile(lambda x: x))
    assert bare.__wrapped__.__name__ == "bare"  # type: ignore[attr-defined]


def test_disable_name_and_recompile_limit_reach_torch() -> None:
    reg = Registry()
    model = Encoder()
    off = compiletrace.compile(model, backend="eager", registry=reg, disable=True)
    assert type(off) is type(torch.compile(model, backend="eager", disable=True))
    off(torch.randn(2, 8))
    assert reg.records() == ()  # disabled: nothing compiles, nothing is recorded
    # name= labels the component, as torch.compile(name=...) labels the region.
    named = compiletrace.compile(lambda x: x * 3, backend="eager", registry=reg, name="scaler")
    named(torch.ones(2))
    assert [r.component for r in reg.records()] == ["scaler"]
    # recompile_limit=1: one recompile, then torch runs new shapes eagerly (the default, 8,
    # would compile all three shapes).
    limited = compiletrace.compile(lambda x: x.sum(), backend="eager", dynamic=False, registry=reg,
                                   recompile_limit=1, component="limited")  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's own recompile-limit warning
        results = [limited(torch.ones(n)).item() for n in (2, 3, 4)]
    assert results == [2.0, 3.0, 4.0]
    mine = [r for r in reg.records() if r.component == "limited"]
    assert len(mine) == 2 and mine[-1].recompile_limit == 1 and mine[-1].recompile_limit_hit


def test_an_observer_of_one_registry_hears_its_compiles_only() -> None:
    # The progress lines compiletrace profile prints: one per frame compile of its run.
    out, mine, other = io.StringIO(), Registry(), Registry()
    with process_observers().observing(compile_lines(Progress(out)), registry=mine):
        compiletrace.compile(lambda x: x + 1, backend="eager", registry=mine)(torch.ones(2))
        compiletrace.compile(lambda x: x * 2, backend="eager", registry=other)(torch.ones(2))
    assert len(mine) == len(other) == 1
    (line,) = out.getvalue().splitlines()
    record = mine.records()[0]
    seconds = f"{record.total_s:.2f}"
    assert line == f"compiled language_model {record.compile_id} (<lambda>) in {seconds} s, cache none"
