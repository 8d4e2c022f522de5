"""The frame Dynamo is compiling on this thread, and what Dynamo made of it: its code and
backend, its compile id, its graph breaks, and a refusal past the recompile limit.

What is used, and why:

- The ``_compile`` frame of ``torch._dynamo.convert_frame``: at a start callback it holds
  the code object being compiled and the backend (``compiler_fn``). Reading it tells
  whether a frame compile belongs to a compiletrace backend even when the frame
  produces no graph, and gives the frame's code name.
- Also at a start callback, for naming the component of a compile no compiletrace backend
  made: the ``self`` the compiled code runs on (``_compile``'s ``locals``), the ``self`` of
  each frame that called it (the stack beyond ``_compile``: the compiled frame has not
  started, so its callers are next), and the label ``torch.compile(name=...)`` keeps on
  its inductor wrapper (``_TorchCompileInductorWrapper.name``; other backends drop it).
- ``torch.compile``'s backend wrappers (``_TorchCompileInductorWrapper``: its inductor
  config and ``dynamic``; ``_TorchCompileWrapper``: its ``mode`` and ``dynamic``), for what
  each compile used: ``torch.compile`` keeps the inductor mode only as the config patches
  ``torch._inductor.list_mode_options`` gave, so the mode is the one whose patches those are.
- ``torch._guards.CompileContext``: the compile id of the compile running on this thread
  (inside a backend call, and before torch's callbacks took an argument), and the context
  object that tells two compiles apart after a reset reuses their ids.
- ``torch._dynamo.exc.RestartAnalysis`` and ``torch._dynamo.config.recompile_limit``:
  Dynamo restarting a frame's analysis (not an error), and how many entries it keeps per
  frame.
- What the doctor reads (``compiletrace._doctor``): ``torch._dynamo.utils.graph_break_reasons``
  (torch appends one ``GraphCompileReason``, reason and user stack, per graph break); its
  reason is Dynamo's internal name for some breaks (``generic_jump TensorVariable()``), so
  ``InstructionTranslatorBase.log_graph_break`` is wrapped to keep torch's user-facing
  message for each break's line (what ``TORCH_TRACE`` logs: title, explanation, hints, the
  documentation page); and
  ``convert_frame.exceeds_recompile_limit`` (wrapped: a frame past the limit fires no
  compile callback and runs eagerly from then on).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from compiletrace._data.torch_text import break_reason, is_user_facing_break
from compiletrace._io.state import STATE, Slot, warn_once


@dataclass(frozen=True)
class CompilingFrame:
    """What a start callback can learn about the frame Dynamo is compiling."""

    code_name: str  # co_name of the frame's code ("forward", "torch_dynamo_resume_in_...")
    compiler_fn: Any  # the backend Dynamo will call, possibly wrapped by torch
    filename: str = ""  # co_filename of the frame's code
    first_line: int = 0  # co_firstlineno of the frame's code
    qualname: str = ""  # co_qualname of the frame's code ("Tower.forward")
    # To name the module and the component:
    target: Any = None  # the ``self`` the compiled code runs on, if it is a method
    code: Any = None  # the code object compiled
    fullgraph: bool = False  # compiled with fullgraph=True: a graph break is an error
    callers: tuple[Any, ...] = ()  # the ``self`` of each calling frame, nearest first


_COMPILE_FRAME_NAME = "_compile"
_MAX_STACK_WALK = 40


_MAX_CALLERS_WALK = (
    256  # frames beyond ``_compile`` searched for the module calls around it (deep in a model)
)


def compiling_frame() -> CompilingFrame | None:
    """Find Dynamo's ``_compile`` frame on this thread's stack (called from a start
    callback) and read its code object, its backend and the objects the compiled code and
    its callers run on. None if not found."""
    try:
        frame = sys._getframe(1)
        for _ in range(_MAX_STACK_WALK):
            if frame is None:
                return None
            code = frame.f_code
            if code.co_name == _COMPILE_FRAME_NAME and "convert_frame" in code.co_filename:
                return _compiling_frame_of(frame)
            frame = frame.f_back  # type: ignore[assignment]
    except Exception:
        return None
    return None


def _compiling_frame_of(compile_frame: Any) -> CompilingFrame:
    """What Dynamo's ``_compile`` frame holds: the code it compiles, the backend, and the
    objects the code and its callers run on (to name the module and the component)."""
    f_locals = compile_frame.f_locals
    compiled_code = f_locals.get("code")
    target = None
    frame_locals = f_locals.get("locals")
    first = _first_argument(compiled_code)  # a method's object, whatever its name
    if isinstance(frame_locals, dict) and first is not None:
        target = frame_locals.get(first)
    found = _caller_selves(compile_frame.f_back)
    return CompilingFrame(
        code_name=str(getattr(compiled_code, "co_name", "?")),
        compiler_fn=f_locals.get("compiler_fn"),
        filename=str(getattr(compiled_code, "co_filename", "") or ""),
        first_line=int(getattr(compiled_code, "co_firstlineno", 0) or 0),
        qualname=str(getattr(compiled_code, "co_qualname", "") or getattr(compiled_code, "co_name", "")),
        target=target,
        callers=found,
        code=compiled_code,
        fullgraph=f_locals.get("one_graph") is True,
    )


def _first_argument(code: Any) -> str | None:
    names: tuple[str, ...] = tuple(getattr(code, "co_varnames", ()))
    return names[0] if getattr(code, "co_argcount", 0) and names else None


def _takes_self(code: Any) -> bool:
    return _first_argument(code) == "self"


# The frames whose ``self`` is read: how a module is called (``nn.Module.__call__``'s
# ``_wrapped_call_impl`` and ``_call_impl``) and a wrapper's ``__call__``. Reading a frame's
# locals (``f_locals``) makes a snapshot of all of them that lives as long as the frame:
# these frames hold little besides their arguments, a training loop's frame holds much.
_CALLER_FRAMES = frozenset({"_call_impl", "_wrapped_call_impl", "__call__"})


def _caller_selves(frame: Any) -> tuple[Any, ...]:
    """The ``self`` of each calling frame on the stack from ``frame`` outwards that calls a
    module or a wrapper (Dynamo's own included: the caller decides which matter)."""
    found: list[Any] = []
    seen: set[int] = set()
    for _ in range(_MAX_CALLERS_WALK):
        if frame is None:
            break
        if frame.f_code.co_name in _CALLER_FRAMES and _takes_self(frame.f_code):
            obj = frame.f_locals.get("self")
            if obj is not None and id(obj) not in seen:
                seen.add(id(obj))
                found.append(obj)
        frame = frame.f_back
    return tuple(found)


def compile_name(compiler_fn: Any) -> str | None:
    """The label ``torch.compile(model, name=...)`` gave this compile, where torch keeps it
    (on its inductor wrapper; a torch without the argument, or another backend: None)."""
    try:
        backend = innermost_backend(compiler_fn)
        if not type(backend).__name__.startswith("_TorchCompile"):
            return None
        label = getattr(backend, "name", None)
    except Exception:
        return None
    return label if isinstance(label, str) and label else None


def innermost_backend(fn: Any) -> Any:
    """Unwrap torch's backend wrappers (debug wrappers, ``torch.compile``'s wrapper) down to
    the backend the user passed."""
    seen = 0
    while seen < 16:
        inner = getattr(fn, "_torchdynamo_orig_backend", None)
        if inner is None:
            # torch.compile(backend=callable) wraps it in _TorchCompileWrapper(compiler_fn=...)
            inner = getattr(fn, "compiler_fn", None) if type(fn).__name__ == "_TorchCompileWrapper" else None
        if inner is None or inner is fn:
            return fn
        fn = inner
        seen += 1
    return fn


_INDUCTOR_WRAPPER = "_TorchCompileInductorWrapper"
_WRAPPER = "_TorchCompileWrapper"


def _inductor_mode(config: dict[str, Any], dynamic: bool | None) -> str:
    """The ``torch.compile`` mode whose inductor config patches ``config`` holds: the mode
    with the most patches that all hold ("default" when none does), "+ options" when
    ``config`` holds more."""
    from torch._inductor import list_mode_options

    best, best_patches = "default", dict[str, Any]()
    for mode in list_mode_options():
        patches = dict(list_mode_options(mode, dynamic))
        if patches and len(patches) > len(best_patches) and patches.items() <= config.items():
            best, best_patches = mode, patches
    return best + (" + options" if len(config) > len(best_patches) else "")


def compile_settings(fn: Any, fullgraph: bool) -> tuple[tuple[str, str], ...]:
    """What a compile used, as ``torch.compile``'s arguments name it: ``mode`` (where the
    backend has one: inductor's, or a backend object's own ``mode``), ``dynamic`` and
    ``fullgraph``; () where reading them failed.

    >>> compile_settings(object(), True)
    (('fullgraph', 'True'),)
    """
    settings: dict[str, str] = {}
    try:
        seen = 0
        while fn is not None and seen < 16:
            kind = type(fn).__name__
            if kind == _INDUCTOR_WRAPPER and isinstance(getattr(fn, "config", None), dict):
                settings.setdefault("mode", _inductor_mode(fn.config, getattr(fn, "dynamic", None)))
            if kind == _WRAPPER and isinstance(getattr(fn, "kwargs", None), dict):
                mode = fn.kwargs.get("mode")
                if isinstance(mode, str):
                    settings.setdefault("mode", mode)
            if kind in (_INDUCTOR_WRAPPER, _WRAPPER):
                settings.setdefault("dynamic", repr(getattr(fn, "dynamic", None)))
            inner = getattr(fn, "_torchdynamo_orig_backend", None)
            if inner is None and kind == _WRAPPER:
                inner = getattr(fn, "compiler_fn", None)
            if inner is None or inner is fn:
                own = getattr(fn, "mode", None)  # a backend object's own mode (compiletrace's)
                if isinstance(own, str) and "mode" not in settings:
                    settings["mode"] = own
                break
            fn, seen = inner, seen + 1
    except Exception as exc:  # what a compile used is a label: never worth failing it
        warn_once(f"reading a compile's mode and dynamic failed; they are not recorded: {exc!r}")
        settings = {}
    settings["fullgraph"] = repr(bool(fullgraph))
    return tuple((key, settings[key]) for key in ("mode", "dynamic", "fullgraph") if key in settings)


def current_compile_id() -> str | None:
    """The compile id ("frame/attempt") of the compile running on this thread, if any."""
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
    except Exception:
        return None
    return None if cid is None else str(cid)


def current_compile_context() -> Any | None:
    """The ``CompileContext`` object of the compile running on this thread: its identity
    tells one compile from another after ``torch._dynamo.reset()`` reuses compile ids (a
    lazy backward runs under its forward's context)."""
    try:
        from torch._guards import CompileContext

        return CompileContext.try_get()
    except Exception:
        return None


def is_restart(exc: BaseException) -> bool:
    """Whether ``exc`` is Dynamo restarting its analysis of a frame (e.g. to turn a Python
    float into a tensor): Dynamo catches it and compiles the frame again, the user sees no
    error."""
    try:
        from torch._dynamo.exc import RestartAnalysis
    except Exception:
        return False
    return isinstance(exc, RestartAnalysis)


def recompile_limit() -> int | None:
    """How many entries torch keeps per frame before it runs the frame eagerly."""
    try:
        return int(torch._dynamo.config.recompile_limit)
    except Exception:
        return None


MAX_REASON_CHARS = 2000  # torch's reasons carry hints and a link; a traceback is not kept


# torch's user-facing message for the latest break at each user line (file, line), from
# log_graph_break; bounded (cleared past _MAX_BREAK_TEXTS lines).
_BREAK_TEXTS: Slot[dict[tuple[str, int], str]] = STATE.slot("graph-break texts", {})
_BREAK_TEXT_HOOK: Slot[bool] = STATE.slot("graph-break text hook", False)
_MAX_BREAK_TEXTS = 4096


def _install_break_text_hook() -> None:
    """Wrap Dynamo's ``log_graph_break`` (once) to keep each break's user-facing message."""
    if _BREAK_TEXT_HOOK.value:
        return
    _BREAK_TEXT_HOOK.value = True
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslatorBase

        original = InstructionTranslatorBase.log_graph_break
    except Exception as exc:
        warn_once(f"torch's graph-break messages are not reachable; breaks keep Dynamo's reason: {exc!r}")
        return
    texts = _BREAK_TEXTS.value

    def log_graph_break(
        self: Any, code_options: Any, reason: str, exc: Any, *args: Any, **kwargs: Any
    ) -> Any:
        try:
            where = self.frame_summary()
            if len(texts) >= _MAX_BREAK_TEXTS:
                texts.clear()
            texts[(str(where.filename), int(where.lineno or 0))] = str(reason)[:MAX_REASON_CHARS]
        except Exception:  # a label: never worth failing the compile
            pass
        return original(self, code_options, reason, exc, *args, **kwargs)

    InstructionTranslatorBase.log_graph_break = log_graph_break  # type: ignore[method-assign]


def graph_break_mark() -> int:
    """A mark in torch's list of graph-break records; :func:`graph_breaks_since` reads the
    ones added after it."""
    _install_break_text_hook()
    try:
        from torch._dynamo.utils import graph_break_reasons

        return len(graph_break_reasons)
    except Exception:
        return 0


def graph_breaks_since(mark: int) -> list[tuple[str, str, int]]:
    """The graph breaks torch recorded since ``mark``, as (reason, user file, line).

    Torch appends one record per break to a process-wide list (``torch._dynamo.reset()``
    clears it). Dynamo compiles one frame at a time, so the records added between a frame's
    start and its end are that frame's.
    """
    try:
        from torch._dynamo.utils import graph_break_reasons

        end = len(graph_break_reasons)
        start = mark if mark <= end else 0  # cleared by a reset since the mark
        found = []
        texts = _BREAK_TEXTS.value
        for item in graph_break_reasons[start:end]:
            stack = getattr(item, "user_stack", None) or []
            where = stack[-1] if stack else None  # the user's line, innermost
            filename = str(getattr(where, "filename", "") or "")
            lineno = int(getattr(where, "lineno", 0) or 0)
            reason = str(getattr(item, "reason", ""))
            logged = texts.get((filename, lineno))
            if not is_user_facing_break(reason) and logged is not None:
                reason = break_reason(logged)  # torch's message, as TORCH_TRACE has it
            found.append((reason[:MAX_REASON_CHARS], filename, lineno))
        return found
    except Exception:
        return []


# (compile id, the frame Dynamo refused to compile, torch's last recompile reason, the limit)
RecompileLimitListener = Callable[[str, "CompilingFrame | None", "str | None", "int | None"], None]


# Told when Dynamo refuses a frame past its recompile limit (the tracker's on_recompile_limit).
_LIMIT_LISTENER: Slot[RecompileLimitListener | None] = STATE.slot("recompile-limit listener", None)


def install_recompile_limit_hook(listener: RecompileLimitListener) -> bool:
    """Tell ``listener`` when Dynamo refuses to compile a frame past its recompile limit.
    Dynamo then runs that frame eagerly, on this and every later call, and fires no compile
    callback for it: its check (``exceeds_recompile_limit``, where ``convert_frame`` calls it)
    is wrapped, and its caller, Dynamo's ``_compile`` frame, names the code and the backend.
    Returns False when the check is not where it was."""
    with STATE.lock:
        _LIMIT_LISTENER.value = listener
        try:
            from torch._dynamo import convert_frame

            original = convert_frame.exceeds_recompile_limit
        except Exception:
            return False
        if getattr(original, "_compiletrace_patched", False):
            return True

        def exceeds_recompile_limit(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            try:
                exceeded, limit_type = result
                if exceeded:
                    _notify_limit(sys._getframe(1), str(limit_type))
            except Exception as exc:  # measuring never breaks a compile
                warn_once(f"reading a recompile-limit hit failed and was skipped: {exc!r}")
            return result

        exceeds_recompile_limit._compiletrace_patched = True  # type: ignore[attr-defined]
        convert_frame.exceeds_recompile_limit = exceeds_recompile_limit
        return True


def _notify_limit(caller: Any, limit_type: str) -> None:
    listener = _LIMIT_LISTENER.value
    if listener is None:
        return
    frame = _compiling_frame_of(caller) if caller.f_code.co_name == _COMPILE_FRAME_NAME else None
    reason = caller.f_locals.get("recompile_reason") if frame is not None else None
    try:
        limit: int | None = int(getattr(torch._dynamo.config, limit_type))
    except Exception:
        limit = recompile_limit()
    listener(current_compile_id() or "?", frame, None if reason is None else str(reason), limit)
