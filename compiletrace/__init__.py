"""compiletrace: where torch.compile start-up time goes, and how to cut the wasted part.

The front door: every public name is here, in ``__all__``. The layout behind it (see
docs/how-it-works.md), data flowing one way:

- ``_io``: the torch-free leaf (exceptions, atomic files, the JSON envelope, process state);
- ``_core``: torch events -> records in a registry (every private torch API in
  the package ``_core/torch_compat/``, one module per concept);
- ``reports`` and ``telemetry``: views of plain records (text, HTML, Chrome trace, OTel);
- ``_app``, ``bench``, ``distributed``, ``cli``: the applications on top.

>>> import torch, compiletrace
>>> reg = compiletrace.Registry()
>>> enc = compiletrace.compile(torch.nn.Linear(8, 8), is_encoder=True, backend="eager", registry=reg)
>>> lm = compiletrace.compile(torch.nn.Linear(8, 8), backend="eager", registry=reg)
>>> _ = lm(enc(torch.randn(2, 8)))
>>> sorted(reg.by_component())
['encoder', 'language_model']
"""

import contextlib as _contextlib
import importlib as _importlib
import sys as _sys
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

# isort: split
# First of all: note when this import began, and time torch's import on its own whenever it
# comes (the start-up timeline shows both, from the process's own start).
from compiletrace._core import import_timing as _import_timing

# isort: split
# Nothing here imports torch: the names that need it load on first use (below), so that
# ``compiletrace --help``, ``report``, ``doctor`` and ``compare`` never wait for it.
from compiletrace._core.observers import register_observer_factory as _register_observer_factory
from compiletrace._core.startup import mark_import as _mark_import
from compiletrace._data.records import CacheOutcome, CompilationTimes, CompileStatus, GraphRecord
from compiletrace._data.registry import Registry, compilation_times, get_registry
from compiletrace._data.run import CompilationMode, WarmupResult
from compiletrace._io.errors import (
    ArgumentTypeError,
    ChildFailed,
    CompileOptionError,
    CompiletraceError,
    GatherError,
    LaunchError,
    MissingDependencyError,
    OutputError,
    RunFileError,
    UnexpectedCompileError,
    UsageError,
)
from compiletrace._version import __version__ as __version__

if _TYPE_CHECKING:
    from compiletrace import bench as bench
    from compiletrace import cli as cli
    from compiletrace import distributed as distributed
    from compiletrace import models as models
    from compiletrace import reports as reports
    from compiletrace import telemetry as telemetry
    from compiletrace._app.job import ProfileJob
    from compiletrace._app.profile import profile
    from compiletrace._app.profile_run import ProfileRun
    from compiletrace._app.timeline import phase
    from compiletrace._app.warmup import expect_no_compiles, warm_up
    from compiletrace._core.backend import CompiletraceBackend, backend
    from compiletrace._core.compile import compile
    from compiletrace._core.observers import CompileObserver as _CompileObserver
    from compiletrace._core.passive import observe
    from compiletrace._core.ready import ready
    from compiletrace._doctor import Finding, diagnose
    from compiletrace._load import load
    from compiletrace.reports import export_chrome_trace
    from compiletrace.telemetry import instrument

# Loaded on first use, so that ``import compiletrace`` stays cheap: torch, OpenTelemetry,
# the views and the profiling helpers load only when something asks for them.
_LAZY = {
    "CompiletraceBackend": "compiletrace._core.backend",
    "Finding": "compiletrace._doctor",
    "ProfileJob": "compiletrace._app.job",
    "ProfileRun": "compiletrace._app.profile_run",
    "backend": "compiletrace._core.backend",
    "compile": "compiletrace._core.compile",
    "diagnose": "compiletrace._doctor",
    "expect_no_compiles": "compiletrace._app.warmup",
    "export_chrome_trace": "compiletrace.reports",
    "instrument": "compiletrace.telemetry",
    "load": "compiletrace._load",
    "observe": "compiletrace._core.passive",
    "phase": "compiletrace._app.timeline",
    "profile": "compiletrace._app.profile",
    "ready": "compiletrace._core.ready",
    "warm_up": "compiletrace._app.warmup",
}
_SUBMODULES = ("bench", "cli", "distributed", "models", "reports", "telemetry")

__all__ = [
    "ArgumentTypeError",
    "CacheOutcome",
    "ChildFailed",
    "CompilationMode",
    "CompilationTimes",
    "CompileOptionError",
    "CompileStatus",
    "CompiletraceBackend",
    "CompiletraceError",
    "Finding",
    "GatherError",
    "GraphRecord",
    "LaunchError",
    "MissingDependencyError",
    "OutputError",
    "ProfileJob",
    "ProfileRun",
    "Registry",
    "RunFileError",
    "UnexpectedCompileError",
    "UsageError",
    "WarmupResult",
    "backend",
    "compilation_times",
    "compile",
    "diagnose",
    "expect_no_compiles",
    "export_chrome_trace",
    "get_registry",
    "instrument",
    "load",
    "load_ipython_extension",
    "observe",
    "phase",
    "profile",
    "ready",
    "summary",
    "warm_up",
]


def __getattr__(name: str) -> _Any:
    if name in _SUBMODULES:
        return _importlib.import_module(f"compiletrace.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'compiletrace' has no attribute {name!r}")
    with _import_timing.core_import_timed():  # the first name that needs torch loads the core
        value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


def summary(registry: Registry | None = None) -> str:
    """A text table of compile time per component and per graph, ending with the one-line
    summary (``compilation took 1.23 s (language_model: 1.00 s, encoder: 0.23 s)``).

    >>> import compiletrace
    >>> compiletrace.summary(compiletrace.Registry()).splitlines()[-1]
    'compilation took 0.00 s (nothing compiled)'
    """
    from compiletrace.reports import summary_table, totals_line

    reg = registry if registry is not None else get_registry()
    text = summary_table(reg.records())
    if reg.dropped:
        text += (
            f"\n{reg.dropped} older graphs were dropped past the registry's capacity "
            f"({reg.capacity}); with them, {totals_line(reg.by_component())}"
        )
    return text


def _span_observer() -> "_CompileObserver":
    # Telemetry observes the core; the core never imports it. OpenTelemetry loads at the
    # first compile, not at import.
    from compiletrace.telemetry import CompileSpanObserver

    return CompileSpanObserver()


def _registry_html(registry: Registry) -> str:
    from compiletrace.reports import registry_html_table

    return registry_html_table(registry.records())


def load_ipython_extension(ipython: _Any) -> None:
    """``%load_ext compiletrace``: show registries as HTML tables, and add the cell magic
    ``%%compiletrace``, which records every compile of one cell and shows them as the report
    (see ``%%compiletrace?``). Done by itself when compiletrace is imported in a running
    IPython shell."""
    formatter = ipython.display_formatter.formatters["text/html"]
    formatter.for_type(Registry, _registry_html)
    # Loaded here, not at import: the magic's module and IPython's parser only in a shell.
    from compiletrace._app.notebook import register_magic

    register_magic(ipython)


def _register_notebook_display() -> None:
    ipython_module = _sys.modules.get("IPython")
    get_ipython = getattr(ipython_module, "get_ipython", None)
    shell = get_ipython() if callable(get_ipython) else None
    if shell is not None:
        # Display is a nicety: a changed IPython must not break the import.
        with _contextlib.suppress(Exception):
            load_ipython_extension(shell)


_register_observer_factory(_span_observer)  # torch-free: the tracker builds it when it needs it
_register_notebook_display()
_mark_import("import compiletrace")  # last: the timeline's "import compiletrace" ends here
