"""The table of commands: each command's name, the module that holds it, and the one line
``compiletrace --help`` shows for it. The table imports no command: a command's module is
imported only when that command runs (or shows its own ``--help``).

A command's module (``commands/NAME.py``) holds ``DESCRIPTION``, ``EPILOG``,
``add_options(parser)`` and ``run(args) -> int`` (see :class:`compiletrace.cli.parsing.Command`);
it imports nothing torch-bound at import time (``tests/test_layout.py`` checks), so that
parsing its arguments, and its ``--help``, never wait for torch.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["COMMANDS", "CommandInfo"]


class CommandInfo(NamedTuple):
    module: str  # the module that holds the command, imported when it runs
    summary: str  # its line in ``compiletrace --help``


# In the order ``compiletrace --help`` lists them.
COMMANDS: dict[str, CommandInfo] = {
    "profile": CommandInfo(
        "compiletrace.cli.commands.profile",
        "compile a model, warm it up, and show where the compile time went",
    ),
    "run": CommandInfo(
        "compiletrace.cli.commands.run",
        "run any command and record every compile of every Python process it starts",
    ),
    "bench": CommandInfo("compiletrace.cli.commands.bench", "benchmarks"),
    "report": CommandInfo(
        "compiletrace.cli.commands.report",
        "render a run saved by 'profile --json', a job saved by 'run --json', or torch's trace",
    ),
    "cache": CommandInfo(
        "compiletrace.cli.commands.cache",
        "portable compile caches: save, inspect and load torch's cache artifacts",
    ),
    "compare": CommandInfo(
        "compiletrace.cli.commands.compare",
        "compare two saved runs; exit 1 when anything regressed",
    ),
    "why": CommandInfo(
        "compiletrace.cli.commands.why",
        "say why a compile cache did not apply, by the part of its key that changed",
    ),
    "doctor": CommandInfo(
        "compiletrace.cli.commands.doctor",
        "say why a saved run's compile time went where it went, and what to change",
    ),
    "env": CommandInfo(
        "compiletrace.cli.commands.env",
        "show the versions and which torch internals compiletrace can measure with",
    ),
}
