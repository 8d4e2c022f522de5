"""The one capability table: which of the internals the other modules of this package use
the installed torch gives (one probe each), and what records lack without it. Checked once
at install (``warn_missing_capabilities``) and shown by ``compiletrace env``;
``tests/capture/test_torch_contract.py`` removes each internal in turn and checks the table says so.

Beside it, ``capabilities(hooks=True)``: torch's own public hooks. ``torch.compile(name=...)``
names the component of a compile no compiletrace backend made (passive recording). The
Dynamo profiler is detected and shown, not used: its figures agree with ``trace_cost``'s
(``tests/capture/test_trace_cost.py`` checks both on one compile, on every release CI runs),
but at every frame it prints its tables to the program's stdout (docs/how-it-works.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from compiletrace._core.torch_compat.cache_keys import cache_key_hooks_available
from compiletrace._core.torch_compat.callbacks import TRIGGER_LAZY_BACKWARD, callbacks_available
from compiletrace._core.torch_compat.compile_workers import compile_workers_available
from compiletrace._core.torch_compat.dynamic_sources import automatic_dynamic_state_available
from compiletrace._core.torch_compat.fixes import config_fixes_available
from compiletrace._core.torch_compat.one_time import one_time_functions_available
from compiletrace._core.torch_compat.stance import stance_fixes_available
from compiletrace._core.torch_compat.trace_log import trace_artifacts_available
from compiletrace._io.state import warn_once


@dataclass(frozen=True)
class Capability:
    """One torch internal compiletrace measures with, and what records lack without it."""

    name: str
    available: bool
    lacking: str  # what the records lack when it is missing


def _has(probe: Callable[[], object]) -> bool:
    try:
        return bool(probe())
    except Exception:
        return False


def _frame_identity() -> bool:
    from torch._dynamo import convert_frame

    names = convert_frame._compile.__code__.co_varnames
    return "code" in names and "compiler_fn" in names


def _recompile_reasons() -> bool:
    from torch._dynamo.utils import get_metrics_context

    return hasattr(get_metrics_context(), "_metrics")


def _cache_counters() -> bool:
    from torch._dynamo.utils import counters

    return isinstance(counters["inductor"], Mapping)


def _timed_regions() -> bool:
    from torch._dynamo.utils import get_chromium_event_logger

    return callable(get_chromium_event_logger().log_event_end)


def _first_call_work() -> bool:
    from torch._dynamo.utils import ChromiumEventLogger

    return callable(ChromiumEventLogger.log_event_start)


def _lazy_backward_callbacks() -> bool:
    from torch._dynamo.callback import CallbackTrigger

    return hasattr(CallbackTrigger, TRIGGER_LAZY_BACKWARD)


def _compile_context() -> bool:
    from torch._guards import CompileContext

    return callable(CompileContext.try_get)


def _portable_caches() -> bool:
    return callable(torch.compiler.save_cache_artifacts) and callable(torch.compiler.load_cache_artifacts)


def _metrics_oracle() -> bool:
    from torch._dynamo.utils import get_compilation_metrics

    return callable(get_compilation_metrics)


def _graph_break_records() -> bool:
    from torch._dynamo.utils import graph_break_reasons

    return isinstance(graph_break_reasons, list)


def _cache_lookup_events() -> bool:
    from torch._dynamo.utils import ChromiumEventLogger

    return callable(ChromiumEventLogger.log_instant_event)


def _inline_timing() -> bool:
    from torch._dynamo.symbolic_convert import InliningInstructionTranslator, InstructionTranslator

    inline = InliningInstructionTranslator.__dict__.get("inline_call")
    return isinstance(inline, classmethod) and callable(InstructionTranslator.run)


def _recompile_limit_check() -> bool:
    from torch._dynamo import convert_frame

    return callable(convert_frame.exceeds_recompile_limit)


def _backend_calls() -> bool:
    from torch._dynamo.output_graph import OutputGraph

    return callable(OutputGraph._call_user_compiler)


def _graph_break_messages() -> bool:
    from torch._dynamo.symbolic_convert import InstructionTranslatorBase

    return callable(InstructionTranslatorBase.log_graph_break)


def _compile_wrappers() -> bool:
    from torch._inductor import list_mode_options

    wrappers = (torch._TorchCompileInductorWrapper, torch._TorchCompileWrapper)  # type: ignore[attr-defined]
    own = set.intersection(*(set(inspect.signature(w.__init__).parameters) for w in wrappers))
    return {"mode", "dynamic"} <= own and callable(list_mode_options)


# (name, probe, what records lack without it), in the order the table shows them.
_CAPABILITIES: tuple[tuple[str, Callable[[], object], str], ...] = (
    ("frame callbacks", callbacks_available, "Dynamo tracing and guard time (backend time only)"),
    ("frame identity", _frame_identity, "code names and locations, and frames that compile no graph"),
    ("recompile reasons", _recompile_reasons, "recompile reasons"),
    ("cache counters", _cache_counters, "cache outcomes (hit, miss, bypass)"),
    (
        "timed regions",
        _timed_regions,
        "the backend phase split, torch's exact frame bounds, and lazy backwards compiled "
        "while another thread compiles",
    ),
    (
        "lazy-backward callbacks",
        _lazy_backward_callbacks,
        "lazy backward time where timed regions are missing",
    ),
    ("compile context", _compile_context, "a lazy backward's graph after torch._dynamo.reset()"),
    ("portable caches", _portable_caches, "cache save/load and portable start-up iterations"),
    ("compilation metrics", _metrics_oracle, "nothing (torch's own figures, used to check compiletrace's)"),
    ("graph-break records", _graph_break_records, "graph-break reasons and locations"),
    (
        "graph-break messages",
        _graph_break_messages,
        "torch's own message for breaks Dynamo names internally (generic_jump: its internal name)",
    ),
    ("cache lookup events", _cache_lookup_events, "cache keys"),
    (
        "cache key parts",
        cache_key_hooks_available,
        "the parts of each cache key ('why' then compares whole keys only)",
    ),
    (
        "recompile-limit check",
        _recompile_limit_check,
        "frames that hit torch's recompile limit and run eagerly",
    ),
    ("compile wrappers", _compile_wrappers, "each compile's mode and dynamic (fullgraph stays)"),
    ("inline timing", _inline_timing, "trace_cost (Dynamo's time per user function)"),
    (
        "backend calls",
        _backend_calls,
        "backend time, phases and cache outcomes of compiles no compiletrace backend made "
        "(observe(), compiletrace run)",
    ),
    (
        "one-time functions",
        one_time_functions_available,
        "the CPU's vector-instruction probe in the one-time set-up (it stays in the first "
        "inductor graph's time)",
    ),
    (
        "automatic-dynamic state",
        automatic_dynamic_state_available,
        "the inputs and dimensions torch made dynamic on a recompile (the doctor names the first "
        "failing guard's alone, and offers no mark-dynamic fix)",
    ),
    (
        "compile workers",
        compile_workers_available,
        "the CPU of inductor's compile-worker processes (a subprocess pool's compiles) in compile CPU",
    ),
    (
        "config fixes",
        config_fixes_available,
        "nothing; 'run --apply' and 'doctor --verify' cannot apply the fixes this torch lacks",
    ),
    (
        "first-call work",
        _first_call_work,
        "autotuning and CUDA-graph recordings on compiled graphs' first calls (compiles after ready, "
        "the warm-start ledger)",
    ),
    (
        "compile stances",
        stance_fixes_available,
        "nothing; 'run --apply fail-after-ready' and 'eager-after-ready' cannot be applied",
    ),
    (
        "trace artifacts",
        trace_artifacts_available,
        "nothing; a TORCH_TRACE written under 'compiletrace run' does not carry the ready mark",
    ),
)


def _compile_name() -> bool:
    # pytorch #179003: torch.compile(fn, name="encoder"); checked on the signature, not a version.
    return "name" in inspect.signature(torch.compile).parameters


def _dynamo_profiler() -> bool:
    # pytorch #173942: pstats of Dynamo's tracing time per user function.
    import torch._dynamo.config as dynamo_config

    return hasattr(dynamo_config, "dynamo_profiler")


# torch's own hooks: (name, probe, what compiletrace uses instead, for now).
_HOOKS: tuple[tuple[str, Callable[[], object], str], ...] = (
    (
        "torch.compile(name=...)",
        _compile_name,
        "module paths and classes name passive compiles (compiletrace.compile names its own)",
    ),
    (
        "torch._dynamo.config.dynamo_profiler",
        _dynamo_profiler,
        "its own inline timing (trace_cost): torch's agrees, but prints to the program's stdout",
    ),
)


def capabilities(*, hooks: bool = False) -> tuple[Capability, ...]:
    """What this torch gives compiletrace to measure with; with ``hooks=True``, which of
    torch's own hooks it gives (``lacking`` then says what compiletrace uses instead).

    >>> all(c.available for c in capabilities())  # on the torch the package is tested on
    True
    >>> [c.name for c in capabilities(hooks=True)]
    ['torch.compile(name=...)', 'torch._dynamo.config.dynamo_profiler']
    """
    table = _HOOKS if hooks else _CAPABILITIES
    return tuple(Capability(name, _has(probe), lacking) for name, probe, lacking in table)


def warn_missing_capabilities() -> list[Capability]:
    """Warn once per missing capability, naming what the records will lack; returns them."""
    missing = [c for c in capabilities() if not c.available]
    for cap in missing:
        warn_once(
            f"this torch ({torch.__version__}) lacks {cap.name}: records will lack {cap.lacking}",
            key=f"capability:{cap.name}",
        )
    return missing
