"""The backend wrapper: a Dynamo backend that times the real one and tags its graphs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from compiletrace._core import torch_compat as tc
from compiletrace._core.tracker import Tracker, get_tracker
from compiletrace._data.records import LANGUAGE_MODEL
from compiletrace._data.registry import Registry, checked_registry, get_registry
from compiletrace._io.errors import ArgumentTypeError, CompileOptionError, UsageError
from compiletrace._io.state import STATE, Slot

__all__ = ["CompiletraceBackend", "backend"]

INDUCTOR = "inductor"


def validate_component(component: object) -> str:
    if not isinstance(component, str):
        raise ArgumentTypeError(
            f"component must be a non-empty string such as 'encoder', got {type(component).__name__}"
        )
    if not component.strip():
        raise UsageError("component must be a non-empty string such as 'encoder', got ''")
    return component


def validate_backend(backend: object) -> str:
    """Return the backend's display name; raise ValueError for an unknown name."""
    if callable(backend) and not isinstance(backend, str):
        return str(getattr(backend, "__name__", type(backend).__name__))
    if not isinstance(backend, str):
        raise ArgumentTypeError(f"backend must be a backend name or a callable, got {type(backend).__name__}")
    if backend == INDUCTOR:
        return backend
    available = tc.list_backends()
    if backend not in available:
        raise CompileOptionError(f"unknown backend {backend!r}; available backends: {', '.join(available)}")
    return backend


def inductor_config_patches(
    mode: str | None, options: Mapping[str, Any] | None, dynamic: bool | None
) -> dict[str, Any]:
    """Turn ``torch.compile``'s ``mode``/``options`` into inductor config patches, the way
    torch's own inductor wrapper does."""
    patches: dict[str, Any] = {}
    if mode is not None and mode != "default":
        modes = tc.inductor_modes()
        if mode not in modes:
            raise CompileOptionError(f"unknown mode {mode!r}; valid modes: {', '.join(modes)}")
        patches.update(tc.inductor_mode_options(mode, dynamic))
    if options:
        known = tc.inductor_config_keys()
        for key, value in options.items():
            if not isinstance(key, str):
                raise ArgumentTypeError(f"inductor option names must be strings, got {key!r}")
            name = key.replace("-", "_")
            if name not in known:
                raise CompileOptionError(
                    f"unknown inductor option {key!r}; see torch._inductor.list_options()"
                )
            patches[name] = value
    return patches


class CompiletraceBackend:
    """A Dynamo backend that wraps a real one (inductor by default), times every graph it
    compiles, and records it under ``component`` in ``registry``; ``compiletrace.backend``
    is this class, to pass to ``torch.compile(..., backend=...)`` yourself. Making one
    installs the compile callbacks (unless a ``tracker`` is given), so the first compile is
    seen whole.

    Use one object for everything compiled the same way (every block of a model compiled
    block by block, say): Dynamo recompiles shared code when the backend object changes.
    ``compiletrace.compile`` does this by itself (one backend per configuration).

    >>> import torch, compiletrace
    >>> be = compiletrace.backend(component="encoder", backend="eager")
    >>> fn = torch.compile(lambda x: x * 2, backend=be)
    >>> fn(torch.ones(2)).tolist()
    [2.0, 2.0]
    """

    # Lets the tracker recognise this backend behind torch's wrappers.
    _is_compiletrace_backend = True

    def __init__(
        self,
        component: str = LANGUAGE_MODEL,
        *,
        backend: str | Callable[..., Any] = INDUCTOR,
        mode: str | None = None,
        options: Mapping[str, Any] | None = None,
        dynamic: bool | None = None,
        registry: Registry | None = None,
        tracker: Tracker | None = None,
        trace_cost: bool = False,
    ) -> None:
        self.component = validate_component(component)
        if not isinstance(trace_cost, bool):
            raise ArgumentTypeError(f"trace_cost must be True or False, got {type(trace_cost).__name__}")
        # Time Dynamo's tracing per user function for this backend's frames (GraphRecord.trace_cost);
        # off, with one warning, on a torch whose tracer is not where it was.
        self.trace_cost = trace_cost and tc.install_trace_cost_hook()
        self.backend_name = validate_backend(backend)
        if mode is not None and not isinstance(mode, str):
            raise ArgumentTypeError(
                f"mode must be a string such as 'max-autotune', got {type(mode).__name__}"
            )
        if options is not None and not isinstance(options, Mapping):
            raise ArgumentTypeError(
                f"options must be a mapping of option name to value, got {type(options).__name__}"
            )
        checked_registry(registry)
        if mode is not None and mode != "default" and backend != INDUCTOR:
            raise UsageError(
                f"mode={mode!r} applies to the inductor backend only, got backend={self.backend_name!r}; "
                "pass options= for other backends"
            )
        if mode is not None and options:
            raise CompileOptionError("pass either mode or options, not both (as torch.compile requires)")
        self._backend = backend
        # What each compile's record names (compiletrace._core.torch_compat.compile_settings).
        self.mode = mode if mode is not None or backend != INDUCTOR else "default"
        self._dynamic = dynamic
        self._registry = registry
        self._tracker = tracker
        if tracker is None:
            get_tracker()  # install the compile callbacks before the first compile
        self._inner: Callable[..., Any] | None = None
        self._inner_lock = threading.Lock()
        self._kwargs: dict[str, Any] = {}
        self._kwargs_by_call: dict[tuple[Any, str], dict[str, Any]] = {}
        if backend == INDUCTOR:
            patches = inductor_config_patches(mode, options, dynamic)
            if patches:
                self._kwargs = {"config_patches": patches}
        elif options:
            self._kwargs = {"options": dict(options)}
        # torch names the backend in BackendCompilerFailed with this.
        self.__name__ = self.backend_name

    @property
    def registry(self) -> Registry:
        return self._registry if self._registry is not None else get_registry()

    def _resolve_inner(self) -> Callable[..., Any]:
        inner = self._inner
        if inner is None:
            with self._inner_lock:
                if self._inner is None:
                    self._inner = (
                        tc.lookup_backend(self._backend) if isinstance(self._backend, str) else self._backend
                    )
                inner = self._inner
        return inner

    def _call_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        # torch.compile(m, backend=this, mode=..., options=...) passes mode/options here.
        if not kwargs:
            return self._kwargs
        key = (kwargs.get("mode"), repr(sorted((kwargs.get("options") or {}).items())))
        cached = self._kwargs_by_call.get(key)
        if cached is None:
            if self._backend == INDUCTOR:
                patches = dict(self._kwargs.get("config_patches", {}))
                patches.update(
                    inductor_config_patches(kwargs.get("mode"), kwargs.get("options"), self._dynamic)
                )
                cached = {"config_patches": patches} if patches else {}
            else:
                cached = {**self._kwargs, **kwargs}
            self._kwargs_by_call[key] = cached
        return cached

    def __call__(self, gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        tracker = self._tracker or get_tracker()
        try:
            node_count = len(gm.graph.nodes)
        except Exception:
            node_count = 0
        return tracker.compile_graph(
            self, self._resolve_inner(), gm, example_inputs, self._call_kwargs(kwargs), node_count
        )

    def reset(self) -> None:
        """Forwarded by torch on ``torch._dynamo.reset()``."""
        inner_reset = getattr(self._inner, "reset", None)
        if callable(inner_reset):
            inner_reset()

    def __repr__(self) -> str:
        return f"CompiletraceBackend(component={self.component!r}, backend={self.backend_name!r})"


# ``compiletrace.backend("encoder", backend="eager")``: the class is its own factory, so its
# keywords are written once.
backend = CompiletraceBackend


# torch.compile(backend="compiletrace")'s backend, made when torch first asks for it.
_ENTRY_POINT_BACKEND: Slot[CompiletraceBackend | None] = STATE.slot("entry-point backend", None)


def __getattr__(name: str) -> Any:
    # ``torch.compile(m, backend="compiletrace")`` loads this attribute through the
    # ``torch_dynamo_backends`` entry point when torch.compile is called, before the first
    # frame compiles: the right moment to install the compile callbacks (torch._dynamo is
    # imported by then, so this costs nothing extra).
    if name == "compiletrace_backend":
        with STATE.lock:
            made = _ENTRY_POINT_BACKEND.value
            if made is None:
                get_tracker()
                _ENTRY_POINT_BACKEND.value = made = CompiletraceBackend(LANGUAGE_MODEL)
            return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
