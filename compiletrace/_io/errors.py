"""Every exception compiletrace raises, under one root.

::

    CompiletraceError
     ├── UsageError (ValueError)          bad input; the CLI prints it on one line, exit 2
     │    ├── CommandNotFound                'run''s command does not exist (exit 127)
     │    ├── ArgumentTypeError (TypeError)   an argument of the wrong type
     │    ├── CompileOptionError (RuntimeError)  a backend, mode or option torch.compile refuses
     │    ├── RunFileError                 a file that is not a valid compiletrace run
     │    └── MissingDependencyError (ImportError)  an optional package is not installed
     ├── OutputError (OSError)            an output file could not be written; one line, exit 2
     ├── GatherError (RuntimeError)       ranks could not gather their figures
     ├── LaunchError (RuntimeError)       a job started by distributed.launch failed
     ├── ChildFailed (RuntimeError)       a benchmark child process failed
     └── UnexpectedCompileError (RuntimeError)  something compiled inside expect_no_compiles()

The second base keeps ``except ValueError`` (and the like) working in existing code.
Failures inside torch are not wrapped: they reach the caller as torch raised them.

>>> from compiletrace import CompiletraceError, UsageError
>>> issubclass(UsageError, CompiletraceError) and issubclass(UsageError, ValueError)
True
"""

from __future__ import annotations

__all__ = [
    "ArgumentTypeError",
    "ChildFailed",
    "CommandNotFound",
    "CompileOptionError",
    "CompiletraceError",
    "GatherError",
    "LaunchError",
    "MissingDependencyError",
    "OutputError",
    "RunFileError",
    "UnexpectedCompileError",
    "UsageError",
]


class CompiletraceError(Exception):
    """The root of every exception compiletrace raises."""


class UsageError(CompiletraceError, ValueError):
    """Bad input from the user: a malformed MODEL spec, a missing module, a factory that
    raised, an unwritable output path, an argument out of range. Its message says what was
    wrong and what to do; the CLI prints it on one line and exits with 2."""


class CommandNotFound(UsageError):
    """The command ``compiletrace run`` was given does not exist or is not executable: the
    CLI exits 127 for it, as a shell does."""


class ArgumentTypeError(UsageError, TypeError):
    """An argument of the wrong type (``component=3``)."""


class CompileOptionError(UsageError, RuntimeError):
    """An unknown backend, mode or inductor option, or a mode given with options: what
    ``torch.compile`` refuses with a ``RuntimeError``, so it is one here too (a drop-in
    raises what the original raises)."""


class RunFileError(UsageError):
    """A file that is not a valid compiletrace run: not JSON, the wrong kind, an unknown
    schema version, or a field of the wrong type or out of range. The message names the
    file, the field and what was expected."""


class MissingDependencyError(UsageError, ImportError):
    """An optional package a feature needs is not installed; the message says which extra
    to install."""


class OutputError(CompiletraceError, OSError):
    """An output file could not be written (a full disk, a directory gone or read-only);
    the message names the path. Whatever the path held before is left as it was. The CLI
    prints it on one line (``compiletrace: error: cannot write PATH: why``) and exits with 2,
    as for bad input: the command did not do what was asked, and it is not a regression."""


class GatherError(CompiletraceError, RuntimeError):
    """A rank could not gather: another rank died, or did not call ``gather`` in time."""


class LaunchError(CompiletraceError, RuntimeError):
    """A job started by ``distributed.launch`` failed, timed out, or wrote no result.
    ``output`` holds the job's whole output when it was captured, else ""."""

    def __init__(self, message: str, *, output: str = "") -> None:
        super().__init__(message)
        self.output = output


class ChildFailed(CompiletraceError, RuntimeError):
    """A benchmark child process exited non-zero; carries the tail of its stderr."""

    def __init__(self, label: str, returncode: int, stderr_tail: str) -> None:
        super().__init__(f"{label} iteration failed (exit status {returncode})")
        self.label = label
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class UnexpectedCompileError(CompiletraceError, RuntimeError):
    """Something compiled inside ``compiletrace.expect_no_compiles()``: in serving, a
    latency spike. The message names each compile; ``records`` holds their graph records."""

    def __init__(self, message: str, records: tuple[object, ...] = ()) -> None:
        super().__init__(message)
        self.records = records
