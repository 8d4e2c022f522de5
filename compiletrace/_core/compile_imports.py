"""Time the modules a compile imports: the larger part of a process's one-time set-up.

A process's first compiles import most of torch's compiler (Dynamo's variable trackers,
AOTAutograd, inductor's lowerings and code cache) and compute torch's cache keys; the
graphs compiled after them do not. Left inside the first graph's time, that set-up makes
whichever component compiles first look slow (on a warm cache, 90% of the compile time).
The tracker subtracts nothing: each graph keeps torch's own figure, and its record says how
much of it was this set-up (``GraphRecord.setup_ns``), so views show it as its own line.

:class:`ImportTimer` is a meta-path finder that answers no import itself: while a compile
is open on the importing thread, it finds the module's spec through the other finders and
times the loader's ``exec_module`` (the outermost import only: a module importing others
is one interval). The loader object, ``__loader__`` and ``__spec__`` stay the real ones; the
timing wrapper is an attribute of the loader instance for the one call, removed after it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from compiletrace._io.state import warn_once

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

__all__ = ["ImportTimer"]


class _ThreadImports(threading.local):
    total_ns = 0  # outermost imports timed on this thread, in all
    total_cpu_ns = 0  # ... and their CPU time (the CPU clock's, where one is given)
    depth = 0  # imports being executed on this thread, nested
    finding = False  # this finder is asking the others: it must not answer its own question


class ImportTimer:
    """Times the imports made while ``active()`` says a compile is open on this thread.

    >>> import importlib, sys, tempfile, pathlib
    >>> ticks = iter(range(0, 1000, 7))
    >>> timer = ImportTimer(lambda: next(ticks), active=lambda: True)
    >>> folder = tempfile.mkdtemp()
    >>> _ = pathlib.Path(folder, "ct_doc_fresh.py").write_text("X = 1\\n")
    >>> sys.path.insert(0, folder)
    >>> with timer:
    ...     module = importlib.import_module("ct_doc_fresh")
    >>> timer.thread_total_ns(), module.X, type(module.__loader__).__name__
    (7, 1, 'SourceFileLoader')
    >>> _ = sys.path.remove(folder), sys.modules.pop("ct_doc_fresh")
    """

    def __init__(
        self, clock: Callable[[], int], active: Callable[[], bool], cpu_clock: Callable[[], int] | None = None
    ) -> None:
        self._clock = clock
        self._cpu_clock = cpu_clock or _zero
        self._active = active
        self._thread = _ThreadImports()
        self._watched: dict[str, Callable[[ModuleType], None]] = {}
        # Told of each interval timed, (start, end) on the clock, on the thread that timed it
        # (the tracker places them among torch's regions of the compile).
        self.on_interval: Callable[[int, int], None] | None = None

    def _timed(self, start: int, end: int) -> None:
        self._thread.total_ns += end - start
        tell = self.on_interval
        if tell is not None:
            try:
                tell(start, end)
            except Exception as exc:  # never break an import over timing it
                warn_once(f"placing a compile's import in its time failed and was skipped: {exc!r}")

    def watch(self, name: str, loaded: Callable[[ModuleType], None]) -> None:
        """Call ``loaded(module)`` once module ``name`` has run, whenever it is imported
        (inside a compile or not, nested in another import or not)."""
        self._watched[name] = loaded

    # -- installing ------------------------------------------------------------------

    def install(self) -> None:
        """Put the finder first on ``sys.meta_path`` (once)."""
        if not any(finder is self for finder in sys.meta_path):
            sys.meta_path.insert(0, self)  # type: ignore[arg-type]

    def uninstall(self) -> None:
        sys.meta_path[:] = [finder for finder in sys.meta_path if finder is not self]

    def __enter__(self) -> ImportTimer:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    @contextlib.contextmanager
    def timed_block(self) -> Iterator[None]:
        """Time a block of one-time set-up that is no import (torch's CPU probe) as if it
        were one: the imports inside it are inside its interval, never counted twice."""
        state = self._thread
        if state.depth:
            yield  # inside an import already: its time is counted there
            return
        state.depth += 1
        start, cpu_start = self._clock(), self._cpu_clock()
        try:
            yield
        finally:
            state.depth -= 1
            end, cpu_end = self._clock(), self._cpu_clock()
            state.total_cpu_ns += cpu_end - cpu_start
            self._timed(start, end)

    def thread_total_ns(self) -> int:
        """Nanoseconds of timed imports on the calling thread so far (a running total: a
        compile's share is the difference between its end and its start)."""
        return self._thread.total_ns

    def thread_total_cpu_ns(self) -> int:
        """:meth:`thread_total_ns`'s CPU time, by the CPU clock (0 without one)."""
        return self._thread.total_cpu_ns

    # -- the finder ------------------------------------------------------------------

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        state = self._thread
        if state.finding:
            return None
        watched = fullname in self._watched  # handed over once it has run (a probe runs nothing)
        if not watched and (state.depth or not self._safely_active()):
            return None  # nested: inside the outermost import's time already
        state.finding = True
        try:
            spec = importlib.util.find_spec(fullname)
        except Exception:
            return None  # the real import reports it, as it would without this finder
        finally:
            state.finding = False
        loader = spec.loader if spec is not None else None
        own = getattr(loader, "__dict__", None)
        if loader is None or isinstance(loader, type) or own is None or "exec_module" in own:
            return spec  # a namespace package, a class or slotted loader, or already timed
        self._wrap_exec(loader)
        return spec

    def _safely_active(self) -> bool:
        try:
            return self._active()
        except Exception as exc:  # never break an import over timing it
            warn_once(f"timing the imports of a compile failed and was turned off: {exc!r}")
            self._active = _never
            return False

    def _wrap_exec(self, loader: Any) -> None:
        real = loader.exec_module
        state = self._thread
        clock, cpu_clock = self._clock, self._cpu_clock

        def exec_module(module: ModuleType) -> None:
            # Back to the class's own method at once: a loader shared by several modules
            # (one object answering many imports) is timed once per import, never wrapped twice.
            # What to do is decided now, for the module running now: a probe (find_spec with
            # no import) may have left this wrapper on a shared loader for another module.
            loader.__dict__.pop("exec_module", None)
            timed = not state.depth and self._safely_active()
            state.depth += timed
            start, cpu_start = (clock(), cpu_clock()) if timed else (0, 0)
            try:
                real(module)
            finally:
                if timed:
                    state.depth -= 1
                    end, cpu_end = clock(), cpu_clock()
                    state.total_cpu_ns += cpu_end - cpu_start
                    self._timed(start, end)
            loaded = self._watched.pop(module.__name__, None)
            if loaded is not None:
                try:
                    loaded(module)
                except Exception as exc:
                    warn_once(f"after importing {module.__name__}: {exc!r}")

        loader.exec_module = exec_module


def _never() -> bool:
    return False


def _zero() -> int:
    return 0
