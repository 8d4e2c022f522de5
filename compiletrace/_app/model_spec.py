"""A MODEL spec (``package.module:factory``) and a ``--component PATH=NAME``, read without
torch: what ``profile``, ``bench startup`` and ``cache save`` check before any work, and what
their options' help names (the built-in model). Building and compiling the model is
:func:`compiletrace._app.profile.profile`'s.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from compiletrace._io.errors import UsageError

__all__ = ["DEFAULT_MODEL", "load_factory", "parse_component"]

DEFAULT_MODEL = "compiletrace.models:build_demo"


def load_factory(spec: str) -> Callable[..., Any]:
    """The callable named by ``package.module:factory``, imported as ``python -m`` imports:
    the current directory first on the import path, so ``mymodule:build`` finds the
    ``mymodule.py`` beside the user (the ``compiletrace`` command's own path starts at its
    ``bin`` directory).

    >>> load_factory("compiletrace.models:build_demo").__name__
    'build_demo'
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr or ":" in attr:
        raise UsageError(f"MODEL must look like 'package.module:factory', got {spec!r}")
    cwd = os.getcwd()
    # The user's own module only: compiletrace's (the built-in model) is found where it is
    # installed, and a directory of strangers' files never shadows what torch imports later.
    if module_name.partition(".")[0] != "compiletrace" and not {"", cwd} & set(sys.path):
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise UsageError(f"cannot import module {module_name!r} of MODEL {spec!r}: {exc}") from exc
    except Exception as exc:
        raise UsageError(f"importing {module_name!r} raised {type(exc).__name__}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"module {module_name!r} has no attribute {attr!r} (MODEL {spec!r})")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UsageError(f"MODEL {spec!r} names a {type(obj).__name__}, not a callable factory")
    return obj  # type: ignore[no-any-return]


def parse_component(text: str) -> tuple[str, str]:
    """``"vision=encoder"`` -> ``("vision", "encoder")`` (``--component PATH=NAME``).

    >>> parse_component("language_model=language_model")
    ('language_model', 'language_model')
    """
    path, sep, name = text.partition("=")
    if not sep or not path.strip() or not name.strip():
        raise UsageError(f"--component must look like PATH=NAME (e.g. vision=encoder), got {text!r}")
    return path.strip(), name.strip()
