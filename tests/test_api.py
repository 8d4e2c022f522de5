"""The public surface is exactly what __all__ says, and every public name is documented."""

from __future__ import annotations

import inspect

import compiletrace

PUBLIC = {
    "CacheOutcome",
    "CompilationMode",
    "CompilationTimes",
    "CompileStatus",
    "CompiletraceBackend",
    "GraphRecord",
    "Registry",
    "WarmupResult",
    "backend",
    "compilation_times",
    "compile",
    "get_registry",
    "summary",
    "warm_up",
}


def test_all_is_the_public_surface() -> None:
    names = set(compiletrace.__all__)
    # Names added by later modules are allowed; the core ones must stay.
    assert names >= PUBLIC
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


def test_import_is_cheap_and_loads_no_telemetry() -> None:
    import subprocess
    import sys

    code = (
        "import sys, compiletrace; "
        "print(sorted(m for m in ('opentelemetry', 'compiletrace.telemetry', 'compiletrace._profile') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "[]"
    # ...and the lazy names still resolve.
    assert callable(compiletrace.instrument) and callable(compiletrace.profile)
