"""compiletrace run's bootstrap, put first on ``PYTHONPATH`` for the command it runs, so
every Python process the command starts (and their children: the variable is inherited)
imports it at start-up, as Python imports any ``sitecustomize``.

It costs next to nothing where torch is never compiled: it runs the ``sitecustomize`` it
shadows (the user's own, if any), then waits for ``torch._dynamo`` to be imported (which
``torch.compile`` does before its first compile) and only then imports compiletrace and
starts recording (``compiletrace._app.job_process.start``). A job whose fixes change how
the program calls torch (``run --apply regional-compile=CLASS``) also waits for ``torch``
itself, and installs them as soon as it is imported, before the program can call
``torch.compile`` (``compiletrace._app.program_fixes``). A job with a ready mark on a
function (``run --ready MODULE:FUNCTION``) waits for that module too, and wraps the
function as soon as the module has run, before the program can bind it elsewhere (``from
MODULE import FUNCTION``): its first return in a process marks that process ready
(``compiletrace._core.ready``). The standard library only, and never an exception: a
failure is one line on stderr, and the program runs on.
"""

from __future__ import annotations

import os  # loaded by site already: every process would pay for any other module
import sys

TYPE_CHECKING = False  # not typing's: importing typing alone costs every process milliseconds
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec
    from types import FrameType, ModuleType

_HERE = os.path.dirname(os.path.abspath(__file__))
_WATCHED = "torch._dynamo"
_TORCH = "torch"
_JOB_DIR_ENV = "COMPILETRACE_JOB_DIR"  # as compiletrace._app.job_process names it
_PROGRAM_FIXES_ENV = "COMPILETRACE_PROGRAM_FIXES"  # set by compiletrace._app.job, "1" when asked
_RANK_PID_ENV = "COMPILETRACE_RANK_PID"  # as compiletrace._data.job_dir names it
_READY_ENV = "COMPILETRACE_READY"  # as compiletrace._data.job_dir names it: MODULE:FUNCTION, phase:NAME, ...
_MAIN = "__main__"
_CO_COROUTINE = 0x80  # inspect.CO_COROUTINE, without importing inspect
_WRAPPED = "_compiletrace_ready"  # set on a wrapper: never wrapped twice
# The global tracer while the program's top level is watched: Python calls it with (frame,
# "call", None) for every new frame, and getattr returns None (frames have no attribute
# "call"): no frame but the one watched is traced, and no Python runs for the others.
_NO_TRACE = getattr


def _say(what: str, exc: BaseException | None = None) -> None:
    because = "" if exc is None else f": {type(exc).__name__}: {exc}"
    try:  # noqa: SIM105 (contextlib is not loaded yet, and would cost every process)
        sys.stderr.write(f"compiletrace: {what}{because}\n")
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
_PENDING: dict[str, list[Callable[[], None]]] = {}


def _when_imported(name: str, hook: Callable[[], None]) -> None:
    """Run ``hook`` once module ``name`` has run (now, if it has)."""
    if name in sys.modules:
        hook()
    else:
        _PENDING.setdefault(name, []).append(hook)


# -- the ready mark on a function (compiletrace run --ready MODULE:FUNCTION) --------------------


def _mark_ready(what: str) -> None:
    import time  # built in: at the ready mark only

    now = time.time_ns()
    try:
        from compiletrace._core.ready import mark_ready

        mark_ready("function", what, now)
    except Exception as exc:
        _say(f"the ready mark ({what}) is lost in this process (pid {os.getpid()})", exc)


def _ready_when_returned(function: Callable[..., object], what: str) -> Callable[..., object]:
    """``function``, whose first normal return in a process marks that process ready (an
    exception passes through and marks nothing; an async function marks at its result)."""
    fired: list[int] = []  # the process that fired (a forked child fires on its own)

    def fire() -> None:
        pid = os.getpid()
        if not fired or fired[0] != pid:
            fired[:] = [pid]
            _mark_ready(what)

    wrapper: Callable[..., object]
    if function.__code__.co_flags & _CO_COROUTINE:  # type: ignore[attr-defined]

        async def ready_when_awaited(*args: object, **kwargs: object) -> object:
            result = await function(*args, **kwargs)  # type: ignore[misc]
            fire()
            return result

        wrapper = ready_when_awaited
    else:

        def ready_when_returned(*args: object, **kwargs: object) -> object:
            result = function(*args, **kwargs)
            fire()
            return result

        wrapper = ready_when_returned
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:  # noqa: SIM105 (as above)
            setattr(wrapper, attr, getattr(function, attr))
        except Exception:
            pass
    wrapper.__dict__.update(getattr(function, "__dict__", {}))
    wrapper.__wrapped__ = function  # type: ignore[attr-defined]
    setattr(wrapper, _WRAPPED, True)
    return wrapper


def _resolve(module: object, dotted: str) -> tuple[object, str, object] | None:
    """(owner, name, what the owner holds) for ``Class.method`` or ``function`` in ``module``."""
    *path, name = dotted.split(".")
    owner = module
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    held = vars(owner).get(name) if isinstance(owner, type) else None
    if held is None:
        held = getattr(owner, name, None)
    return None if held is None else (owner, name, held)


def _wrap_ready(module: object, dotted: str, what: str) -> bool:
    """Wrap ``dotted`` in ``module`` (see :func:`_ready_when_returned`); False when it is
    not there yet. A name that is no function is one line on stderr."""
    found = _resolve(module, dotted)
    if found is None:
        return False
    owner, name, held = found
    inner = getattr(held, "__func__", held) if isinstance(held, (staticmethod, classmethod)) else held
    if getattr(inner, _WRAPPED, False):
        return True
    if getattr(inner, "__code__", None) is None:
        _say(f"--ready {what}: {type(held).__name__} is not a function; this process is never marked ready")
        return True
    wrapped = _ready_when_returned(inner, what)  # type: ignore[arg-type]
    setattr(owner, name, type(held)(wrapped) if inner is not held else wrapped)  # type: ignore[call-arg]
    return True


def _on_stack(code: object) -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _top_level_frame(main: object) -> FrameType | None:
    """The frame running the program's own top level (``__main__``'s module code), if it
    is on this thread's stack."""
    namespace = getattr(main, "__dict__", None)
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is namespace and frame.f_code.co_name == "<module>":
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _binds_later(frame: FrameType, name: str) -> bool:
    """Whether the top level's code binds ``name`` (``def``, ``class``, ``=``) at an
    instruction it has not reached yet."""
    if name not in frame.f_code.co_names:
        return False  # the cheap answer, before dis is imported
    import dis

    return any(
        i.opname in ("STORE_NAME", "STORE_GLOBAL") and i.argval == name and i.offset > frame.f_lasti
        for i in dis.get_instructions(frame.f_code)
    )


class _ReadyInMain:
    """``--ready MODULE:FUNCTION`` where MODULE runs as the program itself (``__main__``, or
    ``python -m MODULE``): its module is never imported, so the function is wrapped in the
    program's namespace when torch, then its compiler, is imported, unless it is running
    already. A script that compiles at its top level (``model = torch.compile(...)``) and
    defines the function below it has not defined it yet then: its top level is watched,
    statement by statement, until the definition has run, and the function is wrapped
    before its first call (:meth:`watch`)."""

    def __init__(self, module: str, dotted: str, what: str) -> None:
        self.module, self.dotted, self.what = module, dotted, what
        self.done = False
        self.frame: FrameType | None = None  # the top level watched, until the definition ran

    def attempt(self, last: bool) -> None:
        main = sys.modules.get(_MAIN)
        spec = getattr(main, "__spec__", None)
        if self.done or main is None or self.module not in (_MAIN, getattr(spec, "name", None)):
            return
        found = _resolve(main, self.dotted)
        held = None if found is None else found[2]
        inner = getattr(held, "__func__", held)
        code = getattr(inner, "__code__", None)
        if code is not None and _on_stack(code):
            self.done = True
            _say(
                f"--ready {self.what}: it was already running when the program first compiled, so "
                "its return cannot be seen without tracing every call; this process is never marked "
                "ready. Call compiletrace.ready() after it, or move it to a module (MODULE:FUNCTION)"
            )
        elif _wrap_ready(main, self.dotted, self.what):
            self.done = True
        elif last:
            self.done = True
            self.watch(main)

    def watch(self, main: object) -> None:
        """Wrap the function once the program's top level has defined it: a line tracer on
        that one frame, whose events come between its statements. Tracing is on for this
        thread meanwhile, with a C function (``getattr``) as its global tracer, so no other
        frame calls Python for it; it ends at the definition (in the usual script, the next
        statement), or when the top level ends."""
        top = _top_level_frame(main)
        first = self.dotted.partition(".")[0]
        if top is None or not _binds_later(top, first):
            _say(
                f"--ready {self.what}: the program's top level does not define {first} after it "
                "imported torch's compiler; this process is never marked ready"
            )
            return
        if sys.gettrace() is not None:  # a debugger's or a coverage tool's: left alone
            _say(
                f"--ready {self.what}: the program had not defined it yet when it imported torch's "
                "compiler, and another tracer is on, so its definition cannot be watched; this "
                "process is never marked ready. Define it before torch.compile is called, or call "
                "compiletrace.ready() after it"
            )
            return
        self.frame = top
        top.f_trace = self.on_line
        top.f_trace_lines = True
        sys.settrace(_NO_TRACE)

    def on_line(self, frame: FrameType, event: str, arg: object) -> object:
        """The top level's trace function: wrap the function as soon as it is defined."""
        try:
            main = sys.modules.get(_MAIN)
            if main is not None and _wrap_ready(main, self.dotted, self.what):
                self.stop()
                return None
            if event == "return":
                self.stop()
                _say(
                    f"--ready {self.what}: the program's top level ended without defining it; "
                    "this process is never marked ready"
                )
                return None
        except Exception as exc:  # never into the program
            self.stop()
            _say(f"--ready {self.what} is off in this process (pid {os.getpid()})", exc)
            return None
        return self.on_line

    def stop(self) -> None:
        if self.frame is not None:
            self.frame.f_trace = None
            self.frame = None
        if sys.gettrace() is _NO_TRACE:  # ours: one set since is not undone
            sys.settrace(None)


def _watch_ready(spec: str) -> None:
    module, sep, dotted = spec.partition(":")
    if not sep or module in ("phase", "port", "step"):
        return  # phase:NAME, port:PORT, step:N: the recording watches them
    in_main = _ReadyInMain(module, dotted, spec)
    _when_imported(_TORCH, lambda: in_main.attempt(last=False))
    _when_imported(_WATCHED, lambda: in_main.attempt(last=True))
    if module == _MAIN:
        return

    def wrap() -> None:
        if not _wrap_ready(sys.modules[module], dotted, spec):
            _say(f"--ready {spec}: {module} has no {dotted}; this process is never marked ready")

    _when_imported(module, wrap)


class _Loader:
    """The loader of a watched module (``torch._dynamo``, or ``torch``), which runs its hook
    once the module has run (a loader by its methods, as importlib takes one)."""

    def __init__(self, loader: Loader, fullname: str) -> None:
        self._loader = loader
        self._fullname = fullname

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        try:
            self._loader.exec_module(module)
        finally:  # the module keeps its own loader (a reload, importlib.resources)
            try:
                if module.__spec__ is not None:
                    module.__spec__.loader = self._loader
                module.__loader__ = self._loader
            except Exception:
                pass
        hooks = _PENDING.pop(self._fullname, ())
        if not _PENDING:
            _stop_watching()
        for hook in hooks:
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
            _when_imported(_TORCH, _install_program_fixes)
        ready = os.environ.get(_READY_ENV)
        if ready:
            try:
                _watch_ready(ready)
            except Exception as exc:
                _say(f"--ready {ready} is off in this process (pid {os.getpid()})", exc)
        _when_imported(_WATCHED, _start_recording)
        if _PENDING:
            sys.meta_path.insert(0, _WatchDynamo())  # type: ignore[arg-type]


_install()
