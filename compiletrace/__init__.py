"""compiletrace: where torch.compile start-up time goes, and how to cut the wasted part.

>>> import torch, compiletrace
>>> reg = compiletrace.Registry()
>>> enc = compiletrace.compile(torch.nn.Linear(8, 8), is_encoder=True, backend="eager", registry=reg)
>>> lm = compiletrace.compile(torch.nn.Linear(8, 8), backend="eager", registry=reg)
>>> _ = lm(enc(torch.randn(2, 8)))
>>> sorted(reg.by_component())
['encoder', 'language_model']
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from compiletrace._backend import CompiletraceBackend, backend
from compiletrace._compile import CompilationMode, compile
from compiletrace._records import CacheOutcome, CompilationTimes, CompileStatus, GraphRecord
from compiletrace._registry import Registry, compilation_times, get_registry
from compiletrace._warmup import WarmupResult, warm_up

if _TYPE_CHECKING:
    from compiletrace._profile import ProfileRun, UsageError, profile
    from compiletrace.reports._chrome import export_chrome_trace
    from compiletrace.telemetry import instrument

# Loaded on first use, so that ``import compiletrace`` stays cheap (OpenTelemetry and the
# profiling helpers load only when something asks for them).
_LAZY = {
    "ProfileRun": "compiletrace._profile",
    "UsageError": "compiletrace._profile",
    "profile": "compiletrace._profile",
    "export_chrome_trace": "compiletrace.reports._chrome",
    "instrument": "compiletrace.telemetry",
}

__all__ = [
    "CacheOutcome",
    "CompilationMode",
    "CompilationTimes",
    "CompileStatus",
    "CompiletraceBackend",
    "GraphRecord",
    "ProfileRun",
    "Registry",
    "UsageError",
    "WarmupResult",
    "backend",
    "compilation_times",
    "compile",
    "export_chrome_trace",
    "get_registry",
    "instrument",
    "profile",
    "summary",
    "warm_up",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> _Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'compiletrace' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def summary(registry: Registry | None = None) -> str:
    """A text table of compile time per component and per graph, ending with the one-line
    summary (``compilation took 1.23 s (language_model: 1.00 s, encoder: 0.23 s)``).

    >>> import compiletrace
    >>> compiletrace.summary(compiletrace.Registry()).splitlines()[-1]
    'compilation took 0.00 s (language_model: 0.00 s)'
    """
    from compiletrace.reports import summary_table

    return summary_table((registry if registry is not None else get_registry()).records())
