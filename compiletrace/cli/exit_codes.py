"""The exit statuses of the ``compiletrace`` command, named: what scripts and CI read.

docs/reference.md lists them; :mod:`compiletrace.cli.errors` maps exceptions to them.
"""

from __future__ import annotations

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_COMMAND_NOT_FOUND",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "KilledBy",
]

EXIT_OK = 0
EXIT_FAILED = 1  # the model failed to compile or run; a benchmark child failed; a gate tripped
EXIT_USAGE = 2  # bad input (nothing was compiled), or an output that could not be written
EXIT_COMMAND_NOT_FOUND = 127  # 'run''s command does not exist: what a shell gives for one
EXIT_INTERRUPTED = 130  # Ctrl-C; SIGTERM and SIGHUP exit 128 + their number: 143, 129
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout went away


class KilledBy(int):
    """An exit status (128 + N) that also says 'run''s command was killed by signal N, so
    that the ``compiletrace`` process can die of the same signal (see ``console_main``).

    >>> status = KilledBy(143, 15)
    >>> status == 143, status.signal
    (True, 15)
    """

    signal: int

    def __new__(cls, status: int, signal: int) -> KilledBy:
        made = super().__new__(cls, status)
        made.signal = signal
        return made
