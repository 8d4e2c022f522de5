"""Every backend call Dynamo makes, whatever the backend: the hook passive recording
(``compiletrace.observe()``, ``compiletrace run``) times graphs with when no compiletrace
backend is in the way.

What is used, and why:

- ``torch._dynamo.output_graph.OutputGraph._call_user_compiler``: Dynamo calls every
  backend through it, once per graph, inside the region torch times as the graph's
  backend compile (``backend_compile_time_s``) (a name like ``"inductor"``, a callable, a library's
  own backend object), inside the frame compile on the same thread. Wrapped at the class,
  so the wrapper sees the graph and the backend (``self.compiler_fn``) and times the call
  as a compiletrace backend times its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compiletrace._io.state import STATE

# (the backend Dynamo will call, the call itself, the graph, its example inputs) -> compiled
BackendCallHandler = Callable[[Any, Callable[[], Any], Any, Any], Any]


def install_backend_call_hook(handler: BackendCallHandler) -> bool:
    """Route every Dynamo backend call through ``handler``, which must call the given
    thunk exactly once and return (or raise) what it does. Returns False when torch's
    backend call is not where it was (passive recording then has frames without backend
    time, phases or cache outcomes)."""
    with STATE.lock:
        STATE.backend_call_handler = handler
        try:
            from torch._dynamo.output_graph import OutputGraph

            original = OutputGraph._call_user_compiler
        except Exception:
            return False
        if getattr(original, "_compiletrace_patched", False):
            return True

        def _call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
            current: BackendCallHandler | None = STATE.backend_call_handler
            if current is None:
                return original(self, gm, example_inputs)
            backend = getattr(self, "compiler_fn", None)
            return current(backend, lambda: original(self, gm, example_inputs), gm, example_inputs)

        _call_user_compiler._compiletrace_patched = True  # type: ignore[attr-defined]
        _call_user_compiler.__wrapped__ = original  # type: ignore[attr-defined]
        OutputGraph._call_user_compiler = _call_user_compiler  # type: ignore[method-assign]
        return True


def remove_backend_call_handler() -> None:
    """Stop routing backend calls (the wrapper stays, and calls torch's own directly)."""
    with STATE.lock:
        STATE.backend_call_handler = None
