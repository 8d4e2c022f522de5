"""Exceptions become exit statuses here, in one place, each with the one line it prints.

========================================  ===================================================
raised by a command                       exit status, and what is printed
========================================  ===================================================
``CommandNotFound`` ('run''s command)     127, as a shell gives; one line
:class:`~compiletrace.UsageError`         2 (bad input: nothing was compiled); one line
:class:`~compiletrace.OutputError`        2 (an output could not be written); one line
``KeyboardInterrupt``                     130; "compiletrace: interrupted"
``BrokenPipeError``                       141, quietly (the reader of stdout went away)
``Terminated`` (SIGTERM, SIGHUP)          128 + the signal's number; one line
any other ``Exception``                   1; one line naming its type
========================================  ===================================================

The line is ``compiletrace: error: ...``; ``--debug`` prints the traceback before it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback

from compiletrace._io.errors import CommandNotFound, OutputError, UsageError
from compiletrace._io.signals import Terminated
from compiletrace._io.text import first_line, printable
from compiletrace.cli.exit_codes import (
    EXIT_BROKEN_PIPE,
    EXIT_COMMAND_NOT_FOUND,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
)
from compiletrace.cli.parsing import PROG

__all__ = ["HANDLED", "exit_status", "print_error"]

# What :func:`exit_status` takes: everything a command may raise but SystemExit and the like.
HANDLED = (Exception, KeyboardInterrupt, Terminated)


def print_error(message: str, *, debug: bool) -> None:
    """The one line an error prints (after the traceback, with ``--debug``)."""
    if debug:
        traceback.print_exc()
    hint = "" if debug else " (--debug shows the traceback)"
    print(f"{PROG}: error: {printable(message)}{hint}", file=sys.stderr)


def exit_status(exc: BaseException, *, debug: bool) -> int:
    """The exit status for ``exc``, raised by a command, its line printed. Call it in the
    ``except`` block (``--debug`` prints the traceback being handled)."""
    if isinstance(exc, CommandNotFound):  # a UsageError with the status a shell gives
        print_error(first_line(exc), debug=debug)
        return EXIT_COMMAND_NOT_FOUND
    if isinstance(exc, UsageError):
        print_error(first_line(exc), debug=debug)
        return EXIT_USAGE
    if isinstance(exc, OutputError):  # a full disk, say: one line naming the path ("cannot write P: why")
        print_error(first_line(exc.strerror or exc), debug=debug)
        return EXIT_USAGE
    if isinstance(exc, KeyboardInterrupt):
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if isinstance(exc, BrokenPipeError):
        # The reader went away (``compiletrace ... | head``): stop quietly, as a shell tool does,
        # and keep the interpreter's final flush from failing on the closed pipe.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    if isinstance(exc, Terminated):
        # After SIGHUP the terminal may be gone: the exit status matters, the line does not.
        with contextlib.suppress(OSError):
            print(f"{PROG}: {exc} (exit status {exc.exit_status})", file=sys.stderr, flush=True)
        return exc.exit_status
    first = first_line(exc)
    print_error(f"{type(exc).__name__}: {first}" if first else type(exc).__name__, debug=debug)
    return EXIT_FAILED
