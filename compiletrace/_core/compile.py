"""``compiletrace.compile``: a drop-in ``torch.compile`` that records where the time goes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import torch

from compiletrace._core.backend import CompiletraceBackend, validate_component
from compiletrace._data.records import ENCODER, LANGUAGE_MODEL
from compiletrace._data.registry import Registry
from compiletrace._data.run import CompilationMode
from compiletrace._io.errors import ArgumentTypeError, UsageError
from compiletrace._io.state import STATE

__all__ = ["CompilationMode", "compile", "resolve_component"]

_Model = TypeVar("_Model", bound=Callable[..., Any])


def resolve_component(is_encoder: object, component: object) -> str:
    """The component name for ``compile``'s ``is_encoder``/``component`` arguments."""
    if not isinstance(is_encoder, bool):
        raise ArgumentTypeError(f"is_encoder must be a bool, got {type(is_encoder).__name__}")
    if component is None:
        return ENCODER if is_encoder else LANGUAGE_MODEL
    name = validate_component(component)
    if is_encoder and name != ENCODER:
        raise UsageError(
            f"is_encoder=True conflicts with component={name!r}; pass one of them "
            "(is_encoder=True means component='encoder')"
        )
    return name


def shared_backend(component: str, **settings: Any) -> CompiletraceBackend:
    """The one backend for this component and these settings (``CompiletraceBackend``'s
    keywords): compiling many blocks the same way (a model compiled layer by layer, as
    regional compilation does) must give Dynamo one backend, as ``torch.compile(block)``
    does, or it recompiles the blocks' shared code once per block ("backend mismatch") up to
    its recompile limit and runs the rest eagerly.

    >>> a = shared_backend("encoder", backend="eager")
    >>> a is shared_backend("encoder", backend="eager") and a is not shared_backend("vision", backend="eager")
    True
    """
    key = _backend_key(component, settings)
    registry = settings.get("registry")
    with STATE.lock:
        found = STATE.shared_backends.get(key) if key is not None else None
        if found is not None and (registry is None or found.registry is registry):
            return found
        made = CompiletraceBackend(component, **settings)
        if key is not None:
            STATE.shared_backends[key] = made
        return made


def _backend_key(component: str, settings: Mapping[str, Any]) -> tuple[Any, ...] | None:
    # Callables and registries by identity (the backend holds them, so an id is not reused
    # while it lives). None: settings that cannot be compared (options of unhashable values,
    # or not a mapping, which the backend refuses): a backend of their own.
    parts: list[Any] = [component]
    for name, value in sorted(settings.items()):
        if name == "options" and value is not None:
            if not isinstance(value, Mapping):
                return None
            value = tuple(sorted(value.items(), key=lambda kv: str(kv[0])))
        elif name == "registry" or (name == "backend" and not isinstance(value, str)):
            value = None if value is None else ("id", id(value))
        parts.append((name, value))
    key = tuple(parts)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def compile(
    model: _Model,
    *,
    is_encoder: bool = False,
    component: str | None = None,
    backend: str | Callable[..., Any] = "inductor",
    mode: str | None = None,
    options: Mapping[str, Any] | None = None,
    dynamic: bool | None = None,
    fullgraph: bool = False,
    registry: Registry | None = None,
    compilation_mode: CompilationMode | str = CompilationMode.STOCK_TORCH_COMPILE,
    trace_cost: bool = False,
) -> _Model:
    """Compile ``model`` like ``torch.compile`` and record every graph's compile time under
    a component: ``component`` if given, else "encoder" when ``is_encoder``, else
    "language_model".

    Returns what ``torch.compile`` returns (an ``OptimizedModule`` for a module, a
    compiled function for a function). With ``compilation_mode=CompilationMode.NONE`` the
    model is returned unchanged, so one setting switches an application to eager.
    ``trace_cost=True`` also records, per frame, the Dynamo time spent tracing each of the
    user's functions (``GraphRecord.trace_cost``; see ``compiletrace.reports.top_functions_lines``).

    >>> import torch, compiletrace
    >>> reg = compiletrace.Registry()
    >>> vision = compiletrace.compile(torch.nn.Linear(4, 4), is_encoder=True, backend="eager", registry=reg)
    >>> _ = vision(torch.randn(2, 4))
    >>> reg.compilation_times().encoder > 0
    True
    """
    if not (isinstance(model, torch.nn.Module) or callable(model)):
        raise ArgumentTypeError(f"model must be a torch.nn.Module or a callable, got {type(model).__name__}")
    name = resolve_component(is_encoder, component)
    if not isinstance(fullgraph, bool):
        raise ArgumentTypeError(f"fullgraph must be a bool, got {type(fullgraph).__name__}")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise ArgumentTypeError(f"dynamic must be None or a bool, got {type(dynamic).__name__}")
    cmode = CompilationMode.parse(compilation_mode)
    be = shared_backend(
        name,
        backend=backend,
        mode=mode,
        options=options,
        dynamic=dynamic,
        registry=registry,
        trace_cost=trace_cost,
    )
    if cmode is CompilationMode.NONE:
        return model
    return torch.compile(model, backend=be, dynamic=dynamic, fullgraph=fullgraph)  # type: ignore[return-value,no-any-return]
