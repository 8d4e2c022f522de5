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

import contextlib
import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol

from compiletrace._core.torch_compat.frames import CompilingFrame, _caller_selves, _takes_self
from compiletrace._io.state import STATE, Slot, warn_once

# (the backend Dynamo will call, the call itself, the graph, its example inputs) -> compiled
BackendCallHandler = Callable[[Any, Callable[[], Any], Any, Any], Any]


# Every Dynamo backend call goes through it while passive recording is on (observe()).
_BACKEND_CALL_HANDLER: Slot[BackendCallHandler | None] = STATE.slot("backend call handler", None)


def install_backend_call_hook(handler: BackendCallHandler) -> bool:
    """Route every Dynamo backend call through ``handler``, which must call the given
    thunk exactly once and return (or raise) what it does. Returns False when torch's
    backend call is not where it was (passive recording then has frames without backend
    time, phases or cache outcomes)."""
    with STATE.lock:
        _BACKEND_CALL_HANDLER.value = handler
        try:
            from torch._dynamo.output_graph import OutputGraph

            original = OutputGraph._call_user_compiler
        except Exception:
            return False
        if getattr(original, "_compiletrace_patched", False):
            return True

        def _call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
            current = _BACKEND_CALL_HANDLER.value
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
        _BACKEND_CALL_HANDLER.value = None


# ---------------------------------------------------------------------------------------
# torch's ahead-of-time path (``aot_compile``), which calls its backend directly
# ---------------------------------------------------------------------------------------

# What is used, and why: ``torch._dynamo.aot_compile.aot_compile_fullgraph`` (what
# ``torch.compile(...).aot_compile(...)`` runs, vLLM's default path) captures the graph with
# ``convert_frame.fullgraph_capture`` (Dynamo's tracing; its own backend call only records
# the graph), then calls the backend itself, then builds the guards
# (``GraphCaptureOutput.build_guards``). Dynamo's frame callbacks fire for none of it.
# Both module functions are wrapped (torch looks them up on the module when it calls
# them); the three instants are told to a listener, and the backend call is the stretch
# between the end of the capture and the start of the guards.


class AotCompileListener(Protocol):
    """Told of each ahead-of-time compile on the thread that runs it; the token is what
    :meth:`aot_started` returned (None: not recorded)."""

    def aot_started(self, frame: CompilingFrame, backend: Any) -> Any: ...

    def aot_captured(self, token: Any, graph_module: Any) -> None: ...  # Dynamo's capture ended

    def aot_backend_done(self, token: Any) -> None: ...  # the guards are built next

    def aot_finished(self, token: Any, error: BaseException | None) -> None: ...


class _AotSink(threading.local):
    token: Any = None  # the listener's token for the compile running on this thread
    active: bool = False
    captured: bool = False  # its capture has ended


_aot_sink = _AotSink()  # per thread (the ahead-of-time compile running on it): not process state
# Told of torch's ahead-of-time compiles (the tracker).
_AOT_LISTENER: Slot[AotCompileListener | None] = STATE.slot("ahead-of-time compile listener", None)


def install_aot_compile_hook(listener: AotCompileListener) -> bool:
    """Tell ``listener`` of every ahead-of-time compile. Returns False when torch's
    ahead-of-time path is not where it was (its compiles are then not recorded)."""
    with STATE.lock:
        _AOT_LISTENER.value = listener
        try:
            from torch._dynamo import aot_compile, convert_frame

            original = aot_compile.aot_compile_fullgraph
            original_capture = convert_frame.fullgraph_capture
        except Exception:
            return False
        if getattr(original, "_compiletrace_patched", False):
            return True

        def aot_compile_fullgraph(
            model: Any, example_inputs: Any, hooks: Any, backend: Any, *args: Any, **kwargs: Any
        ) -> Any:
            current = _AOT_LISTENER.value
            token = None
            if current is not None:
                token = _safely(current.aot_started, _aot_frame(model, example_inputs, backend), backend)
            previous = (_aot_sink.token, _aot_sink.active, _aot_sink.captured)
            _aot_sink.token, _aot_sink.active, _aot_sink.captured = token, True, False
            error: BaseException | None = None
            try:
                return original(model, example_inputs, hooks, backend, *args, **kwargs)
            except BaseException as exc:
                error = exc
                raise
            finally:
                _aot_sink.token, _aot_sink.active, _aot_sink.captured = previous
                if current is not None and token is not None:
                    _safely(current.aot_finished, token, error)

        def fullgraph_capture(*args: Any, **kwargs: Any) -> Any:
            output = original_capture(*args, **kwargs)
            token = _aot_sink.token
            listener_now = _AOT_LISTENER.value
            if _aot_sink.active and token is not None and listener_now is not None:
                _aot_sink.captured = True
                graph_module = getattr(getattr(output, "backend_input", None), "graph_module", None)
                _safely(listener_now.aot_captured, token, graph_module)
                _wrap_build_guards(output, listener_now, token)
            return output

        aot_compile_fullgraph._compiletrace_patched = True  # type: ignore[attr-defined]
        aot_compile.aot_compile_fullgraph = aot_compile_fullgraph
        convert_frame.fullgraph_capture = fullgraph_capture
        return True


def _wrap_build_guards(output: Any, listener: AotCompileListener, token: Any) -> None:
    graph_output = getattr(output, "graph_capture_output", None)
    build_guards = getattr(graph_output, "build_guards", None)
    if graph_output is None or not callable(build_guards):
        return

    def build_guards_after_backend(*args: Any, **kwargs: Any) -> Any:
        _safely(listener.aot_backend_done, token)
        return build_guards(*args, **kwargs)

    # A frozen object refuses: the backend's end is then the compile's end.
    with contextlib.suppress(Exception):
        graph_output.build_guards = build_guards_after_backend


def _aot_frame(model: Any, example_inputs: Any, backend: Any) -> CompilingFrame:
    try:
        from torch._dynamo.convert_frame import get_traced_fn

        fn, bound = get_traced_fn(model)
    except Exception:
        fn, bound = model, None
    code = getattr(fn, "__code__", None)
    if bound is None and callable(getattr(model, "named_modules", None)):
        bound = model  # a module compiled whole
    if bound is None and code is not None and _takes_self(code):
        # A class's function compiled, its object the first example input (as vLLM does).
        with contextlib.suppress(Exception):
            bound = example_inputs[0][0]
    return CompilingFrame(
        code_name=str(getattr(code, "co_name", "?")),
        compiler_fn=backend,
        filename=str(getattr(code, "co_filename", "") or ""),
        first_line=int(getattr(code, "co_firstlineno", 0) or 0),
        qualname=str(getattr(code, "co_qualname", "") or getattr(code, "co_name", "")),
        target=bound,
        callers=_caller_selves(sys._getframe(2)),
        code=code,
    )


def _safely(method: Callable[..., Any], *args: Any) -> Any:
    try:
        return method(*args)
    except Exception as exc:  # measuring never breaks a compile
        warn_once(f"recording an ahead-of-time compile failed and was skipped: {exc!r}")
        return None
