"""The argument parser: the top level built from the table of commands
(:mod:`compiletrace.cli.commands`), each command's own options added by its module.

``compiletrace --help`` lists the commands from the table alone; a command's module is
imported only to parse that command's arguments (``compiletrace report RUN.json``, or
``compiletrace report --help``). Every ``--help`` text is quoted in docs/reference.md.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Collection, Sequence
from typing import Protocol, cast

from compiletrace._io.text import ascii_int
from compiletrace._version import __version__
from compiletrace.cli.commands import COMMANDS

__all__ = [
    "HELP_WIDTH",
    "PROG",
    "Command",
    "add_common_options",
    "build_parser",
    "command_in",
    "decimal",
    "formatter",
    "load_command",
    "whole_number",
]

PROG = "compiletrace"
HELP_WIDTH = 100  # fixed, so --help reads the same everywhere (docs/reference.md quotes it)


class Command(Protocol):
    """What a command's module holds (``compiletrace/cli/commands/NAME.py``)."""

    DESCRIPTION: str  # the paragraph under the usage line of ``compiletrace NAME --help``
    EPILOG: str | None  # what follows the options (examples), or None

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        """Add the command's arguments (and sub-commands) to its parser."""

    def run(self, args: argparse.Namespace) -> int:
        """Do the work; return the exit status (raise to fail: see cli.errors)."""


def whole_number(text: str) -> int:
    """An option's whole number (``type=whole_number``): ASCII digits, a sign allowed (the
    option says what range it takes); anything else is a usage error, exit 2. ``type=int``
    would take ``'٣'``, ``' 3'`` and ``'3_000'``.

    >>> whole_number("3"), whole_number("-1")
    (3, -1)
    """
    number = ascii_int(text[1:] if text[:1] in "+-" else text)
    if number is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number in ASCII digits 0-9 (e.g. 3)")
    return -number if text[:1] == "-" else number


def decimal(text: str) -> float:
    """An option's number of seconds or percent (``type=decimal``): as ``float`` reads it,
    in ASCII only (``float`` takes Arabic-Indic digits); anything else is a usage error, exit 2.

    >>> decimal("1.5"), decimal("3")
    (1.5, 3.0)
    """
    try:
        if text.isascii():
            return float(text)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"{text!r} is not a number in ASCII digits 0-9 (e.g. 1.5)")


def formatter(prog: str) -> argparse.HelpFormatter:
    """The help layout every parser of the command uses."""
    return argparse.RawDescriptionHelpFormatter(prog, width=HELP_WIDTH, max_help_position=32)


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """What every command takes, defined once (added first, so it follows ``-h`` in help)."""
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def load_command(name: str) -> Command:
    """The module of the command ``name``, imported now."""
    return cast(Command, importlib.import_module(COMMANDS[name].module))


def command_in(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (the top level
    takes no option with a value), if it is one of the table's.

    >>> command_in(["--debug", "report", "run.json"]), command_in(["--help"]), command_in(["nope"])
    ('report', None, None)
    """
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser: every command listed, with the options of those in ``commands``
    (default: all of them); the others' modules are not imported.

    >>> build_parser(["compare"]).parse_args(["compare", "a.json", "b.json"]).runs
    ['a.json', 'b.json']
    """
    parser = argparse.ArgumentParser(
        prog=PROG,
        formatter_class=formatter,
        description="Where torch.compile start-up time goes, per component and per graph.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, info in COMMANDS.items():
        if commands is not None and name not in commands:
            sub.add_parser(name, help=info.summary)  # listed; its options are its module's
            continue
        command = load_command(name)
        cmd = sub.add_parser(
            name,
            formatter_class=formatter,
            help=info.summary,
            description=command.DESCRIPTION,
            epilog=command.EPILOG,
        )
        command.add_options(cmd)
    return parser
