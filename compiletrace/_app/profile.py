"""Profiling a model end to end: load a MODEL spec, compile its components, warm up, and
keep the outcome as a :class:`~compiletrace._app.profile_run.ProfileRun` (plain data that
saves to and loads from JSON, with its views), with the start-up timeline of the process
that ran it.

The CLI's ``profile`` and ``report`` commands and the start-up benchmark's child processes
are thin layers over this module.
"""

from __future__ import annotations

import contextlib
import datetime
import difflib
import inspect
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from compiletrace._app.model_spec import DEFAULT_MODEL, load_factory, parse_component
from compiletrace._app.profile_run import ProfileRun
from compiletrace._app.timeline import OwnPhase, startup_timeline
from compiletrace._app.warmup import warm_up
from compiletrace._core import torch_compat as tc
from compiletrace._core.compile import CompilationMode
from compiletrace._core.compile import compile as ct_compile
from compiletrace._data.registry import Registry
from compiletrace._data.run import RUN_KIND, RUN_SCHEMA_VERSION
from compiletrace._data.run_meta import RunMeta
from compiletrace._io.errors import UsageError
from compiletrace._version import __version__

__all__ = [
    "DEFAULT_MODEL",
    "RUN_KIND",
    "RUN_SCHEMA_VERSION",
    "ProfileRun",
    "load_factory",
    "parse_component",
    "profile",
]

ROOT = "."  # the component path that means the whole model

# The phases profile() itself marks (the warm-up is one too: "Warmup (CPU)", ...).
BUILD_PHASE = "build the model"  # import the factory's module and call it
# Wrap each component with compiletrace.compile (torch.compile): it compiles nothing (the
# warm-up does), but the first in a process imports Dynamo, seconds of start-up of its own.
COMPILE_SETUP_PHASE = "compile set-up"
ARTIFACTS_PHASE = "load cache artifacts"
EAGER_RUN_PHASE = "eager run"  # compilation mode none: the one eager run of the request path
STEADY_PHASE = "steady-state calls"  # steady_calls > 0: the calls timed after the warm-up


# -- loading a model ---------------------------------------------------------------------


def _call_factory(factory: Callable[..., Any], spec: str, device: str) -> Any:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    takes_device = "device" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    try:
        built = factory(device=device) if takes_device else factory()
    except Exception as exc:
        raise UsageError(f"factory {spec!r} raised {type(exc).__name__}: {exc}") from exc
    missing = [a for a in ("model", "example_inputs") if not hasattr(built, a)]
    if missing:
        raise UsageError(
            f"factory {spec!r} returned a {type(built).__name__} without {', '.join(missing)}; "
            "see the factory contract in compiletrace.models"
        )
    if not isinstance(built.model, torch.nn.Module):
        raise UsageError(
            f"factory {spec!r}: model must be a torch.nn.Module, got {type(built.model).__name__}"
        )
    if not isinstance(built.example_inputs, (tuple, list)):
        raise UsageError(
            f"factory {spec!r}: example_inputs must be a tuple of positional arguments, "
            f"got {type(built.example_inputs).__name__}"
        )
    kwargs = getattr(built, "example_kwargs", None)
    if kwargs is not None and not (isinstance(kwargs, Mapping) and all(isinstance(k, str) for k in kwargs)):
        raise UsageError(
            f"factory {spec!r}: example_kwargs must map keyword names to inputs, got {type(kwargs).__name__}"
        )
    components = getattr(built, "components", None)
    if components is not None and not (
        isinstance(components, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in components.items())
    ):
        raise UsageError(
            f"factory {spec!r}: components must map submodule paths to component names "
            f"(e.g. {{'vision': 'encoder'}}), got {type(components).__name__}"
        )
    return built


def _submodules_hint(model: torch.nn.Module, path: str) -> str:
    """The real paths next to a wrong one: the closest first, then the top-level submodules.

    >>> m = torch.nn.Module(); m.vision_tower = torch.nn.Linear(2, 2); m.lm = torch.nn.Linear(2, 2)
    >>> _submodules_hint(m, "vison_tower")
    "did you mean 'vision_tower'? its top-level submodules: vision_tower, lm"
    """
    top = [name for name, _ in model.named_children()]
    if not top:
        return f"it has no submodules: use {ROOT!r} for the whole model"
    # Close matches among the paths as deep as the one given (a typo at any depth), then the
    # top level for orientation.
    depth = path.count(".")
    same_depth = [name for name, _ in model.named_modules() if name and name.count(".") == depth]
    close = difflib.get_close_matches(path, same_depth, n=3, cutoff=0.6)
    shown = ", ".join(top[:12]) + (f", ... ({len(top) - 12} more)" if len(top) > 12 else "")
    guess = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return f"{guess}its top-level submodules: {shown}"


def _resolve_components(model: torch.nn.Module, components: Mapping[str, str]) -> dict[str, str]:
    if not components:
        raise UsageError("no components to compile: the factory gave none; pass --component PATH=NAME")
    resolved: dict[str, str] = {}
    for path, name in components.items():
        if path != ROOT:
            try:
                model.get_submodule(path)
            except AttributeError:
                raise UsageError(
                    f"component path {path!r} is not a submodule of {type(model).__name__}; "
                    f"{_submodules_hint(model, path)}"
                ) from None
        if not isinstance(name, str) or not name.strip():
            raise UsageError(f"component name for {path!r} must be a non-empty string, got {name!r}")
        resolved[path] = name
    if ROOT in resolved and len(resolved) > 1:
        raise UsageError(f"component path {ROOT!r} (the whole model) cannot be combined with other paths")
    return resolved


@contextlib.contextmanager
def _announce(model: torch.nn.Module, name: str, on_compile: Callable[[str], None] | None) -> Iterator[None]:
    # A pre-hook on the compiled wrapper runs eagerly, before Dynamo sees the call: the
    # moment to say which component may be compiling now.
    if on_compile is None:
        yield
        return
    handle = model.register_forward_pre_hook(lambda *_: on_compile(name))
    try:
        yield
    finally:
        handle.remove()


def _call_times_s(
    run_fn: Callable[[], Any], calls: int, device: str, clock: Callable[[], float]
) -> tuple[float, float]:
    """The median seconds of ``calls`` calls (the device's queue drained after each), and
    their spread (the interquartile range; 0 for fewer than 2 calls)."""
    sync = torch.cuda.synchronize if device.startswith("cuda") and torch.cuda.is_available() else None
    seconds = []
    for _ in range(calls):
        start = clock()
        run_fn()
        if sync is not None:
            sync()
        seconds.append(clock() - start)
    if len(seconds) < 2:
        return seconds[0], 0.0
    q1, _, q3 = statistics.quantiles(seconds, n=4)
    return statistics.median(seconds), q3 - q1


def profile(
    model: str | None = None,
    *,
    backend: str = "inductor",
    mode: str | None = None,
    compilation_mode: CompilationMode | str = CompilationMode.STOCK_TORCH_COMPILE,
    device: str = "cpu",
    components: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
    registry: Registry | None = None,
    on_compile: Callable[[str], None] | None = None,
    cache_artifacts: str | os.PathLike[str] | None = None,
    trust: bool = False,
    trace_cost: bool = False,
    steady_calls: int = 0,
    clock: Callable[[], float] = time.perf_counter,
) -> ProfileRun:
    """Build the model a MODEL spec names (the built-in demo by default), compile each of
    its components through compiletrace, run the guarded warm-up, and return the run.

    ``components`` (path -> name) replaces the factory's own mapping when given.
    ``on_compile(component)`` is called before each component's forward (for progress).
    ``cache_artifacts`` names a file saved by ``compiletrace cache save``, loaded into the
    compile caches before anything compiles (a portable warm start). The file is checked
    first and refused (:class:`~compiletrace.RunFileError`) when compiletrace cannot vouch
    for it; ``trust=True`` loads it unchecked (see
    :func:`compiletrace._app.cache.load_cache_artifacts`: an artifacts file is code).
    ``trace_cost=True`` records Dynamo's tracing time per user function in each record
    (``GraphRecord.trace_cost``; shown by ``summary()``, exported by
    ``compiletrace.reports.write_speedscope``).
    ``steady_calls=N`` times N more calls of the request path after the warm-up, on
    ``clock`` (seconds), and keeps the median seconds per call as ``meta.steady_call_s``
    (their interquartile range as ``meta.steady_call_spread_s``):
    the compiled model's steady-state speed, which a fix to its compile may change
    (``doctor --verify`` compares it).
    Raises :class:`UsageError` for bad input, before anything compiles.

    Building the model (with the factory's module imported), the compile set-up (wrapping
    the components; the first in a process imports Dynamo), loading cache artifacts, the
    warm-up and, in compilation mode none, the eager run are phases of the start-up
    (recorded in ``registry``): the run's ``timeline`` shows them from the process's own
    start. Phases the factory or its ``run`` declare (``compiletrace.phase``) nest under
    them.

    >>> run = profile(backend="eager")
    >>> run.warmup.skipped, len(run.records())
    (False, 2)
    """
    spec = model or DEFAULT_MODEL
    if isinstance(steady_calls, bool) or not isinstance(steady_calls, int) or steady_calls < 0:
        raise UsageError(f"steady_calls must be a whole number >= 0, got {steady_calls!r}")
    cmode = CompilationMode.parse(compilation_mode)
    reg = registry if registry is not None else Registry()
    hooks = contextlib.ExitStack()
    with hooks:
        # compiletrace's own phases join an open start-up root span but open none.
        with OwnPhase(BUILD_PHASE, registry=reg):
            factory = load_factory(spec)
            built = _call_factory(factory, spec, device)
            wanted = dict(components) if components else dict(getattr(built, "components", {}) or {})
            resolved = _resolve_components(built.model, wanted)
        with OwnPhase(COMPILE_SETUP_PHASE, registry=reg):
            for path, name in resolved.items():
                try:
                    target = built.model if path == ROOT else built.model.get_submodule(path)
                    compiled = ct_compile(
                        target,
                        component=name,
                        backend=backend,
                        mode=mode,
                        registry=reg,
                        compilation_mode=cmode,
                        trace_cost=trace_cost,
                    )
                except (TypeError, ValueError) as exc:
                    raise UsageError(str(exc).splitlines()[0]) from exc
                if path == ROOT:
                    built.model = compiled
                else:
                    parent_path, _, leaf = path.rpartition(".")
                    parent = built.model.get_submodule(parent_path) if parent_path else built.model
                    setattr(parent, leaf, compiled)
                hooks.enter_context(_announce(compiled, name, on_compile))

        loaded = None
        if cache_artifacts is not None:
            from compiletrace._app.cache import load_cache_artifacts

            # Loaded into the compile caches before anything compiles (at the warm-up).
            with OwnPhase(ARTIFACTS_PHASE, registry=reg):
                try:
                    loaded = load_cache_artifacts(cache_artifacts, trust=trust)
                except OSError as exc:
                    raise UsageError(f"cannot load cache artifacts: {exc}") from exc

        run_fn: Callable[[], Any] | None = getattr(built, "run", None)
        if run_fn is None or not callable(run_fn):
            inputs = tuple(built.example_inputs)
            keywords = dict(getattr(built, "example_kwargs", None) or {})

            def run_fn() -> Any:
                with torch.no_grad():
                    return built.model(*inputs, **keywords)

        result = warm_up(run_fn, compilation_mode=cmode, device=device, registry=reg)

    eager_run_s = None
    if cmode is CompilationMode.NONE:
        # Nothing compiles and the warm-up is skipped: run the request path once, eagerly
        # (the progress hooks removed), for the baseline a compiled start-up is weighed against.
        with OwnPhase(EAGER_RUN_PHASE, registry=reg):
            eager_start = time.perf_counter()
            run_fn()
            eager_run_s = time.perf_counter() - eager_start

    steady_call_s = steady_spread_s = None
    if steady_calls:
        with OwnPhase(STEADY_PHASE, registry=reg):
            steady_call_s, steady_spread_s = _call_times_s(run_fn, steady_calls, device, clock)

    meta = RunMeta(
        model=spec,
        backend=backend,
        mode=mode,
        compilation_mode=cmode,
        device=device,
        components=resolved,
        created_unix_s=time.time(),
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        torch_version=str(torch.__version__),
        compiletrace_version=__version__,
        cache_artifacts=loaded.loaded() if loaded is not None else None,
        eager_run_s=eager_run_s,
        steady_call_s=steady_call_s,
        steady_call_spread_s=steady_spread_s,
        steady_calls=steady_calls or None,
        cache_keys=tc.run_cache_keys(reg.records()),
    )
    return ProfileRun(reg.records(), result, meta, startup_timeline(reg), reg.runtime_events())
