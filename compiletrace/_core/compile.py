"""``compiletrace.compile``: a drop-in ``torch.compile`` that records where the time goes."""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, overload

import torch

from compiletrace._core.backend import CompiletraceBackend, validate_component
from compiletrace._data.records import ENCODER, LANGUAGE_MODEL
from compiletrace._data.registry import Registry
from compiletrace._data.run import CompilationMode
from compiletrace._io.errors import ArgumentTypeError, UsageError
from compiletrace._io.state import STATE, Slot

__all__ = ["RELEASE_ARGUMENTS", "CompilationMode", "compile", "resolve_component"]

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


# compiletrace.compile's backends, one per configuration (weakly held): compiling many blocks
# the same way must be one backend, or Dynamo recompiles their shared code.
_SHARED_BACKENDS: Slot[weakref.WeakValueDictionary[tuple[Any, ...], CompiletraceBackend]] = STATE.slot(
    "shared backends", weakref.WeakValueDictionary()
)


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
        found = _SHARED_BACKENDS.value.get(key) if key is not None else None
        if found is not None and (registry is None or found.registry is registry):
            return found
        made = CompiletraceBackend(component, **settings)
        if key is not None:
            _SHARED_BACKENDS.value[key] = made
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


# torch.compile's arguments that only some torch releases take (2.13: ``shapes_spec``; 2.14
# and 2.15: ``dynamic_shapes``): accepted as keywords where the installed torch has them.
# ``tests/capture/test_compile.py`` checks every argument of the installed torch.compile is
# either one of compile's own or here, so a new one in a new torch is noticed.
RELEASE_ARGUMENTS = frozenset({"shapes_spec", "dynamic_shapes"})


@overload
def compile(
    model: _Model,
    *,
    is_encoder: bool = False,
    component: str | None = None,
    backend: str | Callable[..., Any] | None = None,
    mode: str | None = None,
    options: Mapping[str, Any] | None = None,
    dynamic: bool | None = None,
    fullgraph: bool = False,
    name: str | None = None,
    disable: bool = False,
    recompile_limit: int | None = None,
    isolate_recompiles: bool = False,
    registry: Registry | None = None,
    compilation_mode: CompilationMode | str = CompilationMode.STOCK_TORCH_COMPILE,
    trace_cost: bool = False,
    **release_arguments: Any,
) -> _Model: ...


@overload
def compile(
    model: None = None,
    *,
    is_encoder: bool = False,
    component: str | None = None,
    backend: str | Callable[..., Any] | None = None,
    mode: str | None = None,
    options: Mapping[str, Any] | None = None,
    dynamic: bool | None = None,
    fullgraph: bool = False,
    name: str | None = None,
    disable: bool = False,
    recompile_limit: int | None = None,
    isolate_recompiles: bool = False,
    registry: Registry | None = None,
    compilation_mode: CompilationMode | str = CompilationMode.STOCK_TORCH_COMPILE,
    trace_cost: bool = False,
    **release_arguments: Any,
) -> Callable[[_Model], _Model]: ...


def compile(
    model: _Model | None = None,
    *,
    is_encoder: bool = False,
    component: str | None = None,
    backend: str | Callable[..., Any] | None = None,
    mode: str | None = None,
    options: Mapping[str, Any] | None = None,
    dynamic: bool | None = None,
    fullgraph: bool = False,
    name: str | None = None,
    disable: bool = False,
    recompile_limit: int | None = None,
    isolate_recompiles: bool = False,
    registry: Registry | None = None,
    compilation_mode: CompilationMode | str = CompilationMode.STOCK_TORCH_COMPILE,
    trace_cost: bool = False,
    **release_arguments: Any,
) -> _Model | Callable[[_Model], _Model]:
    """Compile ``model`` like ``torch.compile`` and record every graph's compile time under
    a component: ``component`` if given, else "encoder" when ``is_encoder``, else ``name``
    (torch.compile's label for the region) if given, else "language_model".

    A drop-in: it takes every argument ``torch.compile`` takes, in every form. Called
    without a model it is a decorator (``@compiletrace.compile(backend="eager")``, or bare
    ``@compiletrace.compile``); ``disable=True`` returns the model as it is, as torch does;
    ``name``, ``recompile_limit``, ``isolate_recompiles`` and the release's own arguments
    (``shapes_spec`` on torch 2.13, ``dynamic_shapes`` on 2.14 and 2.15) go to torch.

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
    >>> @compiletrace.compile(backend="eager", name="scaler", registry=reg)
    ... def scale(x):
    ...     return 2 * x
    >>> _ = scale(torch.ones(2))
    >>> sorted(reg.by_component())
    ['encoder', 'scaler']
    """
    settings: dict[str, Any] = dict(
        is_encoder=is_encoder,
        component=component,
        backend=backend,
        mode=mode,
        options=options,
        dynamic=dynamic,
        fullgraph=fullgraph,
        name=name,
        disable=disable,
        recompile_limit=recompile_limit,
        isolate_recompiles=isolate_recompiles,
        registry=registry,
        compilation_mode=compilation_mode,
        trace_cost=trace_cost,
        **release_arguments,
    )
    torch_arguments = _torch_arguments(name, disable, recompile_limit, isolate_recompiles, release_arguments)
    if model is None:
        # The decorator form: checked now, as torch checks its own, and applied to the function.
        resolve_component(
            is_encoder, component if component is not None else _name_component(name, is_encoder)
        )

        def decorate(fn: _Model) -> _Model:
            if fn is None:
                raise ArgumentTypeError("compiletrace.compile(...) decorates a function or module, got None")
            return compile(fn, **settings)

        return decorate
    if not (isinstance(model, torch.nn.Module) or callable(model)):
        raise ArgumentTypeError(f"model must be a torch.nn.Module or a callable, got {type(model).__name__}")
    label = resolve_component(
        is_encoder, component if component is not None else _name_component(name, is_encoder)
    )
    if not isinstance(fullgraph, bool):
        raise ArgumentTypeError(f"fullgraph must be a bool, got {type(fullgraph).__name__}")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise ArgumentTypeError(f"dynamic must be None or a bool, got {type(dynamic).__name__}")
    cmode = CompilationMode.parse(compilation_mode)
    be = shared_backend(
        label,
        backend="inductor" if backend is None else backend,  # None: torch.compile's default
        mode=mode,
        options=options,
        dynamic=dynamic,
        registry=registry,
        trace_cost=trace_cost,
    )
    if cmode is CompilationMode.NONE:
        return model
    return torch.compile(model, backend=be, dynamic=dynamic, fullgraph=fullgraph, **torch_arguments)  # type: ignore[return-value,no-any-return,call-overload]


def _name_component(name: object, is_encoder: bool) -> str | None:
    # torch.compile(name=...) labels the region: the component, unless is_encoder says one.
    if name is None or is_encoder:
        return None
    if not isinstance(name, str):
        raise ArgumentTypeError(f"name must be a string or None, got {type(name).__name__}")
    return name


def _torch_arguments(
    name: str | None,
    disable: object,
    recompile_limit: object,
    isolate_recompiles: object,
    release_arguments: Mapping[str, Any],
) -> dict[str, Any]:
    """The arguments handed on to ``torch.compile`` as they are: only those given, so a torch
    that lacks one is asked for it only by a caller who used it."""
    for arg, value in (("disable", disable), ("isolate_recompiles", isolate_recompiles)):
        if not isinstance(value, bool):
            raise ArgumentTypeError(f"{arg} must be a bool, got {type(value).__name__}")
    if recompile_limit is not None and (
        isinstance(recompile_limit, bool) or not isinstance(recompile_limit, int)
    ):
        raise ArgumentTypeError(
            f"recompile_limit must be an int or None, got {type(recompile_limit).__name__}"
        )
    accepted = inspect.signature(torch.compile).parameters
    unknown = sorted(set(release_arguments) - (RELEASE_ARGUMENTS & set(accepted)))
    if unknown:
        takes = ", ".join(sorted(RELEASE_ARGUMENTS & set(accepted))) or "none of them"
        raise ArgumentTypeError(
            f"compile() got unexpected keyword argument(s) {', '.join(unknown)}; of torch.compile's "
            f"release-specific arguments this torch ({torch.__version__}) takes {takes}"
        )
    given: dict[str, Any] = {
        "name": name,
        "disable": disable,
        "recompile_limit": recompile_limit,
        "isolate_recompiles": isolate_recompiles,
    }
    defaults = {"name": None, "disable": False, "recompile_limit": None, "isolate_recompiles": False}
    out = {k: v for k, v in given.items() if v is not defaults[k] and v != defaults[k]}
    out.update(release_arguments)
    return out
