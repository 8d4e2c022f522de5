"""Backends and inductor's configuration. The lookups are what compiling itself needs, so
they raise torch's own error, as ``torch.compile`` would, instead of degrading.

What is used, and why:

- ``torch._dynamo.lookup_backend`` / ``list_backends`` and
  ``torch._inductor.compile_fx.compile_fx``: the backend a compiletrace backend wraps.
- ``torch._inductor.list_mode_options`` and ``torch._inductor.config``: a ``torch.compile``
  mode turned into inductor config patches, as torch's own inductor wrapper does.
- ``torch._dynamo.exc.BackendCompilerFailed`` and ``torch._dynamo.config.suppress_errors``:
  how a failing backend surfaces, or falls back to eager.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch


def lookup_backend(name: str) -> Callable[..., Any]:
    """The backend torch registers under ``name`` (raises torch's error for unknown names).

    "inductor" goes straight to ``compile_fx``, as torch's registered inductor backend and
    ``torch.compile``'s own inductor wrapper do: a lookup by name first imports every
    registered backend module and scans the installed packages' entry points, seconds of
    start-up that ``torch.compile(backend="inductor")`` itself never pays.
    """
    if name == "inductor":
        return _inductor_compile_fx
    from torch._dynamo import lookup_backend as _lookup

    return _lookup(name)  # type: ignore[no-any-return]


def _inductor_compile_fx(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs, **kwargs)


def list_backends() -> list[str]:
    """Every backend name torch accepts, debug ones ("eager", "aot_eager") included."""
    try:
        from torch._dynamo import list_backends as _list

        return sorted(set(_list(exclude_tags=())))
    except Exception:
        return sorted(set(torch._dynamo.list_backends()))


def inductor_mode_options(mode: str, dynamic: bool | None) -> dict[str, Any]:
    """Inductor config patches for a ``torch.compile`` mode (raises RuntimeError for an
    unknown mode, as torch does)."""
    from torch._inductor import list_mode_options

    return dict(list_mode_options(mode, dynamic))


def inductor_modes() -> list[str]:
    from torch._inductor import list_mode_options

    return sorted(list_mode_options())


def inductor_config_keys() -> set[str]:
    from torch._inductor import config

    return set(config.get_config_copy())


def backend_failure_type() -> str:
    """The exception type torch raises when a backend fails, or returns something that is
    not callable (as recorded in ``error_type``)."""
    try:
        from torch._dynamo.exc import BackendCompilerFailed
    except Exception:
        return "BackendCompilerFailed"
    return f"{BackendCompilerFailed.__module__}.{BackendCompilerFailed.__qualname__}"


def suppress_errors() -> bool:
    """Whether Dynamo falls back to eager when a backend fails."""
    try:
        return bool(torch._dynamo.config.suppress_errors)
    except Exception:
        return False


@contextmanager
def patched_suppress_errors(value: bool) -> Iterator[None]:
    with torch._dynamo.config.patch(suppress_errors=value):
        yield


def backend_error(exc: BaseException) -> BaseException:
    """The backend's own exception: torch wraps what a backend raises in
    ``BackendCompilerFailed`` (its ``inner_exception``) when the call is its own (passive
    recording times torch's call, a compiletrace backend its inner backend's)."""
    inner = getattr(exc, "inner_exception", None)
    return inner if isinstance(inner, BaseException) else exc
