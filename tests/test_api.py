"""The public surface is exactly what __all__ says, and every public name is documented."""

from __future__ import annotations

import inspect

import pytest

import compiletrace

PUBLIC = {
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
    "ProfileJob",
    "observe",
    "load_ipython_extension",
    "phase",
    "profile",
    "ready",
    "summary",
    "warm_up",
}


def test_all_is_the_public_surface() -> None:
    names = set(compiletrace.__all__)
    assert names == PUBLIC
    assert list(compiletrace.__all__) == sorted(compiletrace.__all__)
    exported = {
        n
        for n in dir(compiletrace)
        if not n.startswith("_") and not inspect.ismodule(getattr(compiletrace, n))
    }
    assert exported == names


def test_every_public_name_has_a_docstring() -> None:
    for name in compiletrace.__all__:
        assert inspect.getdoc(getattr(compiletrace, name)), name


@pytest.mark.slow
def test_import_is_cheap_and_loads_no_telemetry() -> None:
    import subprocess
    import sys

    code = (
        "import sys, compiletrace; "
        "print(sorted(m for m in ('opentelemetry', 'compiletrace.telemetry', 'compiletrace._app.profile') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "[]"
    # ...and the lazy names still resolve.
    assert callable(compiletrace.instrument) and callable(compiletrace.profile)


@pytest.mark.slow
def test_import_loads_no_torch_until_a_name_needs_it() -> None:
    """``compiletrace --help``, ``report`` and ``doctor`` import the front door: it loads no
    torch, and still wires telemetry to the tracker (torch-free, through the process state)."""
    import subprocess
    import sys

    code = (
        "import sys, compiletrace\n"
        "from compiletrace._core.observers import OBSERVER_FACTORY\n"
        "assert OBSERVER_FACTORY.value is not None  # telemetry's observer, for the tracker to build\n"
        "print('torch' in sys.modules, end=' ')\n"
        "from compiletrace import Registry, CompilationMode, WarmupResult, UsageError, summary\n"
        "print('torch' in sys.modules, end=' ')\n"
        "from compiletrace import compile\n"
        "print('torch' in sys.modules, compile.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "True", "compiletrace._core.compile"]


def test_every_exception_is_a_compiletrace_error() -> None:
    errors = [getattr(compiletrace, n) for n in compiletrace.__all__ if n.endswith(("Error", "Failed"))]
    assert len(errors) == 11
    assert all(issubclass(e, compiletrace.CompiletraceError) for e in errors)
    # The second bases keep existing ``except ValueError`` / ``except TypeError`` working.
    assert issubclass(compiletrace.UsageError, ValueError)
    assert issubclass(compiletrace.ArgumentTypeError, TypeError)
    assert issubclass(compiletrace.OutputError, OSError)


@pytest.mark.slow
def test_subpackages_load_on_first_use() -> None:
    import subprocess
    import sys

    code = (
        "import sys, compiletrace; "
        "assert 'compiletrace.distributed' not in sys.modules; "
        "print(type(compiletrace.distributed.gather).__name__, compiletrace.telemetry.configure.__name__, "
        "compiletrace.reports.summary_table.__name__, compiletrace.bench.run_startup_bench.__name__, "
        "compiletrace.models.build_demo.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["function", "configure", "summary_table", "run_startup_bench", "build_demo"]
