"""Dynamo's tracing time per user function (``trace_cost``): hooks on Dynamo's instruction
translators, and the policy of which files are the user's.

What is used, and why:

- ``torch._dynamo.symbolic_convert``: ``InstructionTranslator.run`` (Dynamo tracing a
  frame's own function) and ``InliningInstructionTranslator.inline_call`` (the classmethod
  that traces one inlined call), wrapped when ``trace_cost`` is asked for, to time Dynamo's
  tracing per user function.
"""

from __future__ import annotations

import functools
import os
import sysconfig
import threading
from typing import Any

import torch

from compiletrace._io.state import STATE, warn_once


class _TraceSink(threading.local):
    # The collector of the frame compiling on this thread with trace_cost on (else None):
    # the one attribute the hooks check when tracing cost is off.
    collector: Any = None


_trace_sink = _TraceSink()  # per thread: not process state
# A memo, not state, of the user-file policy (file -> whether its functions get nodes of
# their own), asked on every inlined call while tracing cost is on.
_user_files: dict[str, bool] = {}


def set_trace_collector(collector: Any) -> None:
    """Make ``collector`` (a ``TraceCollector``, or None) receive this thread's traced calls."""
    _trace_sink.collector = collector


def trace_collector() -> Any:
    """The collector receiving this thread's traced calls, or None."""
    return _trace_sink.collector


@functools.cache
def _folded_dirs() -> tuple[str, str, tuple[str, ...]]:
    """(torch's package, Python's standard library, the site-packages inside it)."""
    paths = sysconfig.get_paths()
    site = tuple(os.path.join(os.path.realpath(paths[k]), "") for k in ("purelib", "platlib"))
    stdlib = os.path.join(os.path.realpath(paths["stdlib"]), "")
    torch_dir = os.path.join(os.path.realpath(os.path.dirname(torch.__file__)), "")
    return torch_dir, stdlib, site


def _is_user_file(filename: str) -> bool:
    # torch's and Python's own functions fold into their user caller; installed packages
    # (transformers, ...) are the user's.
    known = _user_files.get(filename)
    if known is None:
        torch_dir, stdlib, site = _folded_dirs()
        real = os.path.realpath(filename)
        known = _user_files[filename] = not (
            filename.startswith("<")
            or real.startswith(torch_dir)
            or (real.startswith(stdlib) and not real.startswith(site))
        )
    return known


def _enter(collector: Any, code: Any, always: bool) -> bool:
    try:
        if not always and not _is_user_file(code.co_filename):
            return False
        name = getattr(code, "co_qualname", code.co_name)
        collector.enter(name, code.co_filename, code.co_firstlineno)
        return True
    except Exception as exc:  # measuring never breaks a compile
        warn_once(f"timing a traced function failed and was skipped: {exc!r}")
        return False


def install_trace_cost_hook() -> bool:
    """Time Dynamo's tracing of each frame's own function (``InstructionTranslator.run``)
    and of each function it inlines (``InliningInstructionTranslator.inline_call``, the
    classmethod that traces one inlined call's body), into the thread's collector. Installed
    once; with no collector a hook costs one attribute check. Returns False (records then
    have no ``trace_cost``, with one warning) when either is not where it was."""
    with STATE.lock:  # installed once per process, as the callbacks are
        try:
            from torch._dynamo.symbolic_convert import InliningInstructionTranslator, InstructionTranslator

            inline = InliningInstructionTranslator.__dict__["inline_call"]
            inline_fn = inline.__func__
            run_fn = InstructionTranslator.run
            found = isinstance(inline, classmethod) and callable(run_fn)
        except Exception:
            found = False
        if not found:
            warn_once(
                f"this torch ({torch.__version__}) lacks inline timing: records will lack trace_cost",
                key="capability:inline timing",
            )
            return False
        if getattr(inline_fn, "_compiletrace_patched", False):
            return True

        def inline_call(cls: Any, parent: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            collector = _trace_sink.collector
            if collector is None:
                return inline_fn(cls, parent, func, *args, **kwargs)
            entered = _enter(collector, func.get_code(), always=False)
            try:
                return inline_fn(cls, parent, func, *args, **kwargs)
            finally:
                if entered:
                    collector.leave()

        def run(self: Any) -> Any:
            collector = _trace_sink.collector
            if collector is None:
                return run_fn(self)
            entered = _enter(collector, self.f_code, always=True)
            try:
                return run_fn(self)
            finally:
                if entered:
                    collector.leave()

        inline_call._compiletrace_patched = True  # type: ignore[attr-defined]
        InliningInstructionTranslator.inline_call = classmethod(inline_call)  # type: ignore[method-assign,assignment]
        InstructionTranslator.run = run  # type: ignore[method-assign]
        return True
