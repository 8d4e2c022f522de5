"""torch's one-time set-up that no timed region of its own covers: functions a process runs
in full at its first compile that needs them, then answers from a cache
(``functools.cache``). Timed so that the first graph's record can say how much of its time
was this set-up (``GraphRecord.setup_ns``), not the graph.

Internals used: ``torch._inductor.cpu_vec_isa.valid_vec_isa_list``, which on the CPU builds
and runs a small C++ program per vector instruction set (seconds, at the first inductor
compile of a process, warm cache or not).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any

__all__ = ["ONE_TIME_FUNCTIONS", "one_time_functions_available", "time_one_time_functions"]

# (module, function): called in full once per process, cached after.
ONE_TIME_FUNCTIONS: tuple[tuple[str, str], ...] = (("torch._inductor.cpu_vec_isa", "valid_vec_isa_list"),)

_TIMED = "__compiletrace_one_time__"  # marks a wrapper, so a function is never wrapped twice


def one_time_functions_available() -> bool:
    """Each listed function exists (checked on its module once loaded; before that, that
    the module exists: importing inductor only to look would cost every process a second)."""
    for module_name, name in ONE_TIME_FUNCTIONS:
        module = sys.modules.get(module_name)
        if module is None:
            if importlib.util.find_spec(module_name) is None:
                return False
        elif not callable(getattr(module, name, None)):
            return False
    return True


def time_one_time_functions(module: ModuleType, timed: Callable[[], AbstractContextManager[object]]) -> int:
    """Wrap the listed functions of ``module`` so that their first call runs inside
    ``timed()`` (the tracker's timer of one-time set-up, on the calling thread) and puts the
    function back; the number wrapped. A function missing from this torch is left alone."""
    wrapped = 0
    for module_name, name in ONE_TIME_FUNCTIONS:
        real = getattr(module, name, None) if module.__name__ == module_name else None
        if not callable(real) or getattr(real, _TIMED, False):
            continue

        def first_call(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            setattr(module, _name, _real)  # every later call is the cached one, unwrapped
            with timed():
                return _real(*args, **kwargs)

        functools.update_wrapper(first_call, real)
        for method in ("cache_clear", "cache_info"):  # what callers of a cached function use
            if hasattr(real, method):
                setattr(first_call, method, getattr(real, method))
        setattr(first_call, _TIMED, True)
        setattr(module, name, first_call)
        wrapped += 1
    return wrapped
