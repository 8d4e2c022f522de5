"""``compiletrace env``: the versions, and which torch internals this torch gives
compiletrace (the capability table of :mod:`compiletrace._core.torch_compat`)."""

from __future__ import annotations

import argparse

from compiletrace.cli.exit_codes import EXIT_OK
from compiletrace.cli.parsing import add_common_options

__all__ = ["DESCRIPTION", "EPILOG", "add_options", "run"]

DESCRIPTION = (
    "Print the versions of Python, torch, compiletrace and OpenTelemetry, and which\n"
    "torch internals this torch gives compiletrace (a missing one names what records lack)."
)
EPILOG = None


def add_options(parser: argparse.ArgumentParser) -> None:
    add_common_options(parser)


def run(args: argparse.Namespace) -> int:
    import platform
    from importlib import metadata

    import torch

    from compiletrace._core import torch_compat as tc
    from compiletrace.reports import env_text

    # torch's own version string, as the profile header prints it: a CUDA wheel's metadata
    # says "2.15.0" where torch.__version__ says "2.15.0+cu132".
    versions = [("python", platform.python_version()), ("torch", str(torch.__version__))]
    for package in ("compiletrace", "opentelemetry-api", "opentelemetry-sdk", "transformers"):
        try:
            versions.append((package, metadata.version(package)))
        except metadata.PackageNotFoundError:
            versions.append((package, "not installed"))
    capabilities = [(c.name, c.available, c.lacking) for c in tc.capabilities()]
    hooks = [(c.name, c.available, c.lacking) for c in tc.capabilities(hooks=True)]
    print(env_text(versions, capabilities, hooks))
    return EXIT_OK
