"""The ``compiletrace`` command: ``profile``, ``run``, ``bench startup``, ``report``,
``cache``, ``compare``, ``doctor`` and ``env``.

A thin layer: argument parsing and output here, the work in the applications and the views.
The layout (pip's):

- ``commands/__init__.py``: the table of commands (name -> module, one-line summary),
  which ``compiletrace --help`` reads without importing a command;
- ``commands/NAME.py``: one command, its options beside its ``run``, imported only when it
  runs;
- ``parsing``: the parser built from the table; ``options`` and ``outputs``: what several
  commands share;
- ``errors``: exceptions -> exit statuses, in one place; ``exit_codes``: the statuses, named.

>>> main(["report", "/no/such/run.json"])
2
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Sequence

from compiletrace._io.signals import terminate_on_signals
from compiletrace.cli.errors import HANDLED, exit_status
from compiletrace.cli.exit_codes import EXIT_USAGE, KilledBy
from compiletrace.cli.parsing import build_parser, command_in, load_command

__all__ = ["build_parser", "console_main", "main"]

# Signals whose default action ends a process without a core dump: a command killed by one
# of them has the launcher die of it too. One that dumps core (SIGSEGV, SIGABRT) is reported
# as 128 + N: the launcher did not crash, and its core would mislead.
_RE_ENACTED = frozenset(
    {signal.SIGHUP, signal.SIGINT, signal.SIGKILL, signal.SIGPIPE, signal.SIGALRM, signal.SIGTERM,
     signal.SIGUSR1, signal.SIGUSR2}
)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 1 failed, 2 bad input or an output that
    could not be written, 130 interrupted, 143 SIGTERM, 129 SIGHUP; see
    :mod:`compiletrace.cli.exit_codes`).

    While the command runs, SIGTERM and SIGHUP raise :class:`Terminated` (from the main
    thread only; the previous handlers come back afterwards), so the clean-up that Ctrl-C
    runs runs for them too: child processes stopped, temporary directories removed.
    """
    return int(_main(argv))


def _main(argv: Sequence[str] | None) -> int:
    """:func:`main`, whose status is a :class:`KilledBy` when 'run''s command died of a signal."""
    words = sys.argv[1:] if argv is None else list(argv)
    command = command_in(words)
    parser = build_parser([] if command is None else [command])  # that command's module alone
    if not words:  # a bare 'compiletrace': what there is to run
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    after: list[str] | None = None
    if command in ("bench", "compare") and "--" in words:
        # bench startup [OPTIONS] -- COMMAND: the command's own words; compare BASE... --
        # CURRENT...: the current runs' files, every one a path (options go before --)
        cut = words.index("--")
        words, after = words[:cut], words[cut + 1 :]
    try:
        args = parser.parse_args(words)
    except SystemExit as exc:  # --help, or argparse's own usage error (status 2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if after is not None and command == "compare":
        args.current = after
    elif after is not None:
        args.command_argv = after
    try:
        with terminate_on_signals():
            return load_command(args.command).run(args)
    except HANDLED as exc:
        return exit_status(exc, debug=getattr(args, "debug", False))


def console_main() -> None:
    """The ``compiletrace`` command (and ``python -m compiletrace``): :func:`main`, then the
    exit a caller expects. When ``compiletrace run``'s command was killed by a signal, the
    launcher dies of the same signal, its outputs written first: a shell, a supervisor or
    a parent's ``waitpid`` sees the program's own death, not an exit status."""
    status = _main(None)
    killed_by = status.signal if isinstance(status, KilledBy) else None
    if killed_by in _RE_ENACTED:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
            signal.signal(killed_by, signal.SIG_DFL)
        os.kill(os.getpid(), killed_by)
    sys.exit(int(status))
