"""compiletrace run's bootstrap, put first on ``PYTHONPATH`` for the command it runs, so
every Python process the command starts (and their children: the variable is inherited)
imports it at start-up, as Python imports any ``sitecustomize``.

It costs next to nothing where torch is never compiled: it runs the ``sitecustomize`` it
shadows (the user's own, if any), then waits for ``torch._dynamo`` to be imported (which
``torch.compile`` does before its first compile) and only then imports compiletrace and
starts recording (``compiletrace._app.job_process.start``). A job whose fixes change how
the program calls torch (``run --apply regional-compile=CLASS``) also waits for ``torch``
itself, and installs them as soon as it is imported, before the program can call
``torch.compile`` (``compiletrace._app.program_fixes``). The standard library only, and
never an exception: a failure is one line on stderr, and the program runs on.
"""

from __future__ import annotations

import os  # loaded by site already: every process would pay for any other module
import sys

TYPE_CHECKING = False  # not typing's: importing typing alone costs every process milliseconds
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec
    from types import ModuleType

_HERE = os.path.dirname(os.path.abspath(__file__))
_WATCHED = "torch._dynamo"
_TORCH = "torch"
_JOB_DIR_ENV = "COMPILETRACE_JOB_DIR"  # as compiletrace._app.job_process names it
_PROGRAM_FIXES_ENV = "COMPILETRACE_PROGRAM_FIXES"  # set by compiletrace._app.job, "1" when asked
_RANK_PID_ENV = "COMPILETRACE_RANK_PID"  # as compiletrace._data.job_dir names it


def _say(what: str, exc: BaseException) -> None:
    try:  # noqa: SIM105 (contextlib is not loaded yet, and would cost every process)
        sys.stderr.write(f"compiletrace: {what}: {type(exc).__name__}: {exc}\n")
    except Exception:  # a closed stderr: nothing left to tell
        pass


def _run_shadowed_sitecustomize() -> None:
    # Python imports one sitecustomize, the first on the path: this one. Ask the import
    # system for the next, on the entries after this one's (a bootstrap of a `run` inside a
    # `run` then chains to the outer one, never back), so that one in a zip file or behind
    # any other path hook is found as Python itself would find it.
    entries = [os.path.abspath(entry or os.curdir) for entry in sys.path]
    start = entries.index(_HERE) + 1 if _HERE in entries else 0
    after = [sys.path[i] for i in range(start, len(entries)) if entries[i] != _HERE]
    from importlib.machinery import PathFinder
    from importlib.util import module_from_spec

    spec = PathFinder.find_spec("sitecustomize", after)
    if spec is None or spec.loader is None:
        return
    module = module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # as site.py does for a failing sitecustomize: say so, go on
        _say(f"the sitecustomize at {spec.origin} failed", exc)


def _start_recording() -> None:
    try:
        from compiletrace._app.job_process import start

        start()
    except Exception as exc:
        _say(f"recording is off in this process (pid {os.getpid()})", exc)


def _install_program_fixes() -> None:
    try:
        from compiletrace._app.job_process import install_program_fixes

        install_program_fixes()
    except Exception as exc:
        _say(f"the fixes to the program are off in this process (pid {os.getpid()})", exc)


# module name -> what runs once it has run; emptied as each is seen. Here, not in the
# process state: every process of a job imports this module, which imports the standard
# library only (compiletrace itself is imported once torch is).
_PENDING: dict[str, Callable[[], None]] = {}


class _Loader:
    """The loader of a watched module (``torch._dynamo``, or ``torch``), which runs its hook
    once the module has run (a loader by its methods, as importlib takes one)."""

    def __init__(self, loader: Loader, fullname: str) -> None:
        self._loader = loader
        self._fullname = fullname

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        hook = _PENDING.pop(self._fullname, None)
        if not _PENDING:
            _stop_watching()
        if hook is not None:
            hook()

    def __getattr__(self, name: str) -> object:
        return getattr(self._loader, name)


class _WatchDynamo:
    """A meta-path finder that asks nothing of any import but the watched modules'."""

    _busy = False  # finding the real spec: this finder must not answer its own question

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        # Removed once the module has run (not here: a find_spec probe, as importlib.util's,
        # must not disarm it before the real import).
        if fullname not in _PENDING or self._busy:
            return None
        self._busy = True
        try:
            from importlib.util import find_spec

            spec = find_spec(fullname)
        except Exception as exc:
            _say("could not watch torch's compiler import", exc)
            return None
        finally:
            self._busy = False
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, fullname)  # type: ignore[assignment]
        return spec


def _stop_watching() -> None:
    for finder in [f for f in sys.meta_path if isinstance(f, _WatchDynamo)]:
        sys.meta_path.remove(finder)  # type: ignore[arg-type]


def _install() -> None:
    try:
        _run_shadowed_sitecustomize()
    except Exception as exc:
        _say("could not run the shadowed sitecustomize", exc)
    if os.environ.get(_JOB_DIR_ENV):
        if "RANK" in os.environ and _RANK_PID_ENV not in os.environ:
            # torchrun started this process as a rank: its children inherit RANK, and this
            # mark tells them apart from it (compiletrace._app.job_process.process_role).
            os.environ[_RANK_PID_ENV] = str(os.getpid())
        if os.environ.get(_PROGRAM_FIXES_ENV) == "1":
            if _TORCH in sys.modules:
                _install_program_fixes()
            else:
                _PENDING[_TORCH] = _install_program_fixes
        if _WATCHED in sys.modules:
            _start_recording()
        else:
            _PENDING[_WATCHED] = _start_recording
        if _PENDING:
            sys.meta_path.insert(0, _WatchDynamo())  # type: ignore[arg-type]


_install()
