"""The contract with torch: every private torch internal compiletrace reads returns a real
value on this torch, and a torch that lacks one says so, once, naming what records lose."""

from __future__ import annotations

import enum
import warnings
from typing import Any

import pytest
import torch

import compiletrace
from compiletrace._core import torch_compat as tc


class _Proj(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).relu()


def test_every_accessor_returns_a_real_value_on_this_torch() -> None:
    seen: dict[str, Any] = {}

    def probing_backend(gm: torch.fx.GraphModule, inputs: Any) -> Any:
        seen["compile_id"] = tc.current_compile_id()
        seen["context"] = tc.current_compile_context()
        return gm.forward

    reg = compiletrace.Registry()
    probe = compiletrace.compile(lambda x: x.sin() + 1, backend=probing_backend, dynamic=False, registry=reg)
    probe(torch.ones(2))
    probe(torch.ones(3))  # a recompile, with torch's reason
    train = compiletrace.compile(_Proj(), backend="aot_eager", registry=reg)
    train(torch.randn(2, 3)).sum().backward()

    first, recompile, trained = reg.records()
    assert seen["compile_id"] == "0/1" and seen["context"] is not None
    assert first.code_name == "<lambda>" and trained.code_name == "forward"  # frame identity
    assert recompile.is_recompile and "size mismatch" in (recompile.recompile_reason or "")
    assert trained.phase_ns["aot_autograd"] > 0  # timed regions split the backend call
    assert trained.backward_ns > 0  # the lazy backward
    assert all(r.dynamo_ns is not None for r in reg.records())  # frame callbacks
    assert len(tc.compilation_metrics()) >= 3
    assert tc.recompile_limit() == torch._dynamo.config.recompile_limit
    assert callable(tc.lookup_backend("aot_eager")) and "max-autotune" in tc.inductor_modes()
    assert "max_autotune" in tc.inductor_config_keys()
    torch._dynamo.utils.counters["inductor"]["fxgraph_cache_hit"] += 1
    assert tc.cache_counts().fx_hit >= 1
    assert tc.is_restart(torch._dynamo.exc.TensorifyScalarRestartAnalysis())
    assert all(c.available for c in tc.capabilities())


def test_what_the_doctor_reads_is_real_on_this_torch() -> None:
    # Each accessor behind the doctor's record fields, against a real compile.
    def broken(x: torch.Tensor) -> torch.Tensor:
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()

    reg = compiletrace.Registry()
    compiletrace.compile(broken, backend="eager", registry=reg)(torch.ones(2))
    first, resume = reg.records()
    line = broken.__code__.co_firstlineno
    assert first.code_location == f"{__file__}:{line}"  # frame identity: file and line
    (brk,) = first.graph_breaks  # torch's graph-break record, with the user's line
    assert (brk.filename, brk.lineno, brk.frame_skipped) == (__file__, line + 2, False)
    assert resume.code_name.startswith("torch_dynamo_resume_in_broken") and not resume.graph_breaks
    assert first.structure_hash and first.structure_hash != resume.structure_hash
    assert first.recompile_limit == torch._dynamo.config.recompile_limit

    limited = compiletrace.compile(lambda x: x + 1, backend="eager", dynamic=False, registry=reg)
    with torch._dynamo.config.patch(recompile_limit=1):
        limited(torch.ones(1))
        limited(torch.ones(2))  # past the limit: torch runs it eagerly, fires no callback
    refused = reg.records()[-1]
    assert refused.recompile_limit_hit and refused.recompile_limit == 1
    assert refused.status is compiletrace.CompileStatus.EAGER_FALLBACK and refused.graph_node_count == 0


class _NoLazyBackward(enum.Enum):
    DYNAMO = 1


def _remove(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Take away the torch internal behind one capability, as a torch release might."""
    utils = torch._dynamo.utils
    removals = {
        "frame callbacks": lambda: monkeypatch.delattr(
            type(torch._dynamo.callback.callback_handler), "register_start_callback"
        ),
        "frame identity": lambda: monkeypatch.setattr(torch._dynamo.convert_frame, "_compile", lambda: None),
        "recompile reasons": lambda: monkeypatch.delattr(utils, "get_metrics_context"),
        "cache counters": lambda: monkeypatch.delattr(utils, "counters"),
        "timed regions": lambda: monkeypatch.delattr(utils, "get_chromium_event_logger"),
        "lazy-backward callbacks": lambda: monkeypatch.setattr(
            torch._dynamo.callback, "CallbackTrigger", _NoLazyBackward
        ),
        "compile context": lambda: monkeypatch.delattr(torch._guards.CompileContext, "try_get"),
        "portable caches": lambda: monkeypatch.delattr(torch.compiler, "save_cache_artifacts"),
        "compilation metrics": lambda: monkeypatch.delattr(utils, "get_compilation_metrics"),
        "graph-break records": lambda: monkeypatch.delattr(utils, "graph_break_reasons"),
        "cache lookup events": lambda: monkeypatch.delattr(utils.ChromiumEventLogger, "log_instant_event"),
        "cache key parts": lambda: monkeypatch.delattr(
            torch._functorch._aot_autograd.autograd_cache, "_get_debug_lines_for_cache_key"
        ),
        "recompile-limit check": lambda: monkeypatch.delattr(
            torch._dynamo.convert_frame, "exceeds_recompile_limit"
        ),
        "graph-break messages": lambda: monkeypatch.delattr(
            torch._dynamo.symbolic_convert.InstructionTranslatorBase, "log_graph_break"
        ),
        "compile wrappers": lambda: monkeypatch.delattr(torch, "_TorchCompileWrapper"),
        "inline timing": lambda: monkeypatch.setattr(
            torch._dynamo.symbolic_convert.InliningInstructionTranslator, "inline_call", lambda *a: None
        ),
        "backend calls": lambda: monkeypatch.delattr(
            torch._dynamo.output_graph.OutputGraph, "_call_user_compiler"
        ),
        "automatic-dynamic state": lambda: monkeypatch.delattr(torch._dynamo.pgo, "get_code_state"),
        "compile workers": lambda: monkeypatch.delattr("torch._inductor.async_compile._pool_set"),
        "config fixes": lambda: monkeypatch.delitem(torch._dynamo.config._config, "capture_scalar_outputs"),
        "one-time functions": lambda: monkeypatch.delattr(torch._inductor.cpu_vec_isa, "valid_vec_isa_list"),
        "first-call work": lambda: monkeypatch.delattr(utils.ChromiumEventLogger, "log_event_start"),
        "compile stances": lambda: monkeypatch.delattr(torch.compiler, "set_stance"),
        "trace artifacts": lambda: monkeypatch.delattr(torch._logging._internal, "trace_structured"),
    }
    assert set(removals) == {c.name for c in tc.capabilities()}, "a capability without a removal test"
    removals[name]()


@pytest.mark.parametrize("name", [c.name for c in tc.capabilities()])
def test_a_missing_capability_warns_once_naming_what_records_lack(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    _remove(monkeypatch, name)
    caps = {c.name: c for c in tc.capabilities()}
    assert not caps[name].available
    assert [c for c in caps.values() if not c.available] == [caps[name]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tc.warn_missing_capabilities() == [caps[name]]
        tc.warn_missing_capabilities()
    (warning,) = caught
    assert f"lacks {name}: records will lack {caps[name].lacking}" in str(warning.message)


def test_a_compile_still_works_without_the_cache_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(torch._dynamo.utils, "counters", raising=True)
    assert tc.cache_counts() == tc.CacheCounts()  # the neutral value, the compile unharmed
    monkeypatch.undo()
    reg = compiletrace.Registry()
    compiletrace.compile(lambda x: x * 2, backend="eager", registry=reg)(torch.ones(2))
    assert reg.records()[0].cache_outcome is compiletrace.CacheOutcome.NONE


def test_env_shows_versions_and_the_capability_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from compiletrace import cli

    assert cli.main(["env"]) == 0
    out = capsys.readouterr().out
    assert f"torch              {torch.__version__}" in out
    assert "compiletrace       " + compiletrace.__version__ in out
    assert "MISSING" not in out and "recompile reasons        yes" in out
    assert "torch.compile(name=...)               yes" in out  # 2.13 to 2.15 all have it
    assert "torch._dynamo.config.dynamo_profiler  yes" in out
    _remove(monkeypatch, "recompile reasons")
    assert cli.main(["env"]) == 0
    assert "recompile reasons        MISSING    recompile reasons" in capsys.readouterr().out


def test_env_says_which_of_torchs_own_hooks_it_lacks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from compiletrace import cli

    # A torch before pytorch #179003 and #173942: told by the signature and the config.
    monkeypatch.setattr(torch, "compile", lambda model=None, *, backend="inductor": model)
    monkeypatch.delattr(torch._dynamo.config, "dynamo_profiler")
    assert [c.available for c in tc.capabilities(hooks=True)] == [False, False]
    assert cli.main(["env"]) == 0
    out = capsys.readouterr().out
    assert "torch.compile(name=...)               no         module paths and classes" in out
    assert "torch._dynamo.config.dynamo_profiler  no         its own inline timing" in out
    assert "MISSING" not in out  # a hook it lacks is no missing capability
