"""The front door's first import, for the start-up timeline: importing the timeline's clock
notes when ``import compiletrace`` began; then torch's import is timed on its own, wherever
it happens: ``import compiletrace`` loads no torch (``compiletrace --help``, ``report`` and
``doctor`` never need it), so torch is imported later, by the program itself or by
compiletrace's core at its first use, and that import (most of a start-up's import seconds)
is an entry of its own.

The timing is a finder at the head of ``sys.meta_path`` that waits for the one import of
``torch``: it notes the start, lets the import system find torch as it would have, times
the module's execution, and removes itself. Nothing else is touched: every other import
goes past it, and any failure of its own leaves torch's import as it would have been.

When torch was imported before compiletrace this costs nothing, and the timeline says so.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType

from compiletrace._core import startup

__all__ = ["CORE_IMPORT", "TORCH_IMPORT", "TorchImportTimer", "core_import_timed"]

TORCH_IMPORT = "import torch"  # the timeline entry's name
# The torch-facing core, which ``import compiletrace`` leaves for first use (the tracker
# stands for it: every name that needs torch loads it), and its timeline entry's name.
CORE_MODULE = "compiletrace._core.tracker"
CORE_IMPORT = "import compiletrace core"


class TorchImportTimer:
    """Times the import of the module ``name`` (torch) once, then leaves ``sys.meta_path``
    (a meta path finder: ``find_spec`` is all the import system asks of one; not a subclass
    of ``importlib.abc.MetaPathFinder``, whose import costs more than the rest of this):
    ``mark(start, end)`` is told its bounds on ``clock`` (default: the start-up timeline's
    mark "import torch", on the timeline's clock)."""

    def __init__(
        self,
        name: str = "torch",
        mark: Callable[[int, int], None] | None = None,
        clock: startup.UnixClock = startup.unix_now_ns,
    ) -> None:
        self.name, self.clock = name, clock
        self.mark = mark if mark is not None else _mark_torch_import
        self._done = False  # torch's module lock lets one thread at a time find it

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name or self._done:
            return None
        self._done = True
        self.remove()
        began = self.clock()
        try:
            spec = importlib.util.find_spec(fullname)  # the finders after this one, as before
            loader = spec.loader if spec is not None else None
            exec_module = getattr(loader, "exec_module", None)
            if spec is None or exec_module is None:
                return None  # not found, or an old-style loader: imported untimed
            clock, mark = self.clock, self.mark

            def timed_exec_module(module: ModuleType) -> None:
                try:
                    exec_module(module)
                finally:
                    # The loader is this import's own: leave it as it was made.
                    vars(loader).pop("exec_module", None)
                    mark(began, clock())

            loader.exec_module = timed_exec_module  # type: ignore[method-assign,union-attr]
            return spec
        except Exception:  # timing is a nicety: the import goes on as it would have
            return None

    def remove(self) -> None:
        """Leave ``sys.meta_path`` (idempotent)."""
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)


@contextlib.contextmanager
def core_import_timed() -> Iterator[None]:
    """Around code that may import compiletrace's torch-facing core for the first time (the
    front door's names that need torch, ``compiletrace profile``'s work): if it does, the
    timeline gets an entry for that import, beside torch's own (which it holds, and which
    keeps its own entry)."""
    if CORE_MODULE in sys.modules:
        yield
        return
    start = startup.unix_now_ns()
    try:
        yield
    finally:
        if CORE_MODULE in sys.modules:
            startup.mark_import(CORE_IMPORT, start)


def _mark_torch_import(start_unix_ns: int, end_unix_ns: int) -> None:
    startup.mark_import(TORCH_IMPORT, start_unix_ns, end_unix_ns)


def install() -> TorchImportTimer | None:
    """Time torch's import from now on; None when torch is imported already."""
    if "torch" in sys.modules:
        return None
    timer = TorchImportTimer()
    sys.meta_path.insert(0, timer)
    return timer


_TIMER = install()  # once per process: this module is imported once, by the front door
