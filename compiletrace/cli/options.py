"""Options several commands share, and the checks of their values made before any work:
MODEL and how to build it (``profile``, ``bench startup``, ``cache save``), ``--component``
for torch's trace (``report``, ``doctor``), and the output paths every command checks.
Torch-free, as every command module is at import time.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

from compiletrace._app.model_spec import DEFAULT_MODEL, parse_component
from compiletrace._io.errors import UsageError
from compiletrace._io.files import check_writable, is_stdout
from compiletrace._io.inputs import check_outputs_apart

__all__ = [
    "add_model_options",
    "add_trace_components",
    "check_outputs",
    "check_seconds",
    "component_pairs",
    "prints_text",
]


def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model",
        nargs="?",
        metavar="MODEL",
        help="factory as package.module:factory, imported as 'python -m' does (the current directory "
        f"first); it returns a compiletrace.models.Demo or the like (default: {DEFAULT_MODEL})",
    )
    p.add_argument("--backend", default="inductor", help="backend to wrap (default: inductor)")
    p.add_argument("--mode", default=None, help="inductor mode, e.g. reduce-overhead, max-autotune")
    p.add_argument(
        "--compilation-mode",
        choices=("none", "stock"),
        default="stock",
        help="stock: torch.compile through compiletrace; none: run eagerly (default: stock)",
    )
    p.add_argument("--device", default="cpu", help="device to build the model on (default: cpu)")
    p.add_argument(
        "--component",
        action="append",
        default=[],
        metavar="PATH=NAME",
        help="compile submodule PATH as component NAME (repeatable; replaces the factory's mapping)",
    )


def add_trace_components(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--component",
        action="append",
        default=[],
        metavar="PATTERN=NAME",
        help="for torch's trace: name NAME the compiles whose code file or function match PATTERN\n"
        "(shell-style; repeatable; default: the function and its file, 'forward (model.py)')",
    )


def component_pairs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The ``--component PATH=NAME`` pairs of a command that builds a model."""
    return [parse_component(c) for c in args.component]


def check_outputs(pairs: Sequence[tuple[str | None, str]], inputs: Sequence[str] = ()) -> None:
    """Check every output path before any work: writable, not one of the inputs nor inside
    an input directory, and no two outputs the same file (one would overwrite the other)."""
    named = [(path, what) for path, what in pairs if path is not None]
    for path, what in named:
        check_writable(path, what)
    check_outputs_apart(named, inputs)


def prints_text(pairs: Sequence[tuple[str | None, str]]) -> bool:
    """Whether a command prints its text (tables, "wrote ..." lines) on standard output: not
    where one of its outputs goes there (``-``, ``/dev/stdout``, the file it was redirected
    to), which then holds that output alone, whole.

    >>> prints_text([("out.json", "--json"), (None, "--html")]), prints_text([("-", "--json")])
    (True, False)
    """
    return not any(is_stdout(path) for path, _ in pairs if path)


def check_seconds(value: float, option: str, *, minimum: float) -> None:
    """A number of seconds an option gives: finite and at least ``minimum``, else
    :class:`~compiletrace.UsageError` naming the option.

    >>> check_seconds(3.0, "--grace", minimum=0.0)
    """
    if not math.isfinite(value) or value < minimum:
        raise UsageError(f"{option} must be a number of seconds of at least {minimum:g}, got {value:g}")
