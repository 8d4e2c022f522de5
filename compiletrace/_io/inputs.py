"""What the user names to read, opened once, and the outputs kept off it.

An input (a run file, a job file, torch's trace) is a regular file or a pipe: ``report
<(zcat trace.log.gz)`` and ``report /dev/stdin`` are real uses. Either is opened once and
read once, through one buffer: the first bytes, which tell its format, stay in that buffer
for the reader that follows (a pipe opened again would start where the first read stopped).
Anything else (a terminal, ``/dev/zero``, a socket, a disk) is not a file: it is refused
before a byte is read. Every reader bounds what it takes (:meth:`InputFile.read_all`, and
the trace reader's own limits), so no input is read until memory runs out.

An output is kept apart from the inputs (:func:`check_outputs_apart`): one that is an input,
or lies inside an input directory (torch's trace), is refused before anything is written.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "run.json")
>>> with open(path, "w") as out:
...     _ = out.write('{"kind": "compiletrace.run"}')
>>> with open_input(path) as source:
...     source.head[:9], source.read_all(1024)[:9]
(b'{"kind": ', b'{"kind": ')
>>> open_input("/dev/zero")
Traceback (most recent call last):
  ...
compiletrace._io.errors.RunFileError: /dev/zero is a character device (...), not a file: ...
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from compiletrace._io.errors import RunFileError, UsageError
from compiletrace._io.files import is_stdout

__all__ = ["HEAD_BYTES", "InputFile", "check_outputs_apart", "open_input"]

HEAD_BYTES = 4096  # what telling a format reads: the first line of torch's trace fits in it

_NOT_FILES = (
    (stat.S_ISCHR, "a character device (a terminal, or a device such as /dev/zero)"),
    (stat.S_ISBLK, "a block device (a disk)"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str | None:
    """What ``mode`` is when it is neither a file nor a pipe (None when it is one)."""
    if stat.S_ISREG(mode) or stat.S_ISFIFO(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return next((what for test, what in _NOT_FILES if test(mode)), "not a file")


class InputFile:
    """One input, open: ``head`` (its first :data:`HEAD_BYTES`, fewer if it is shorter),
    then ``stream``, which starts at its first byte, ``head`` included, and is read once.
    ``regular`` is False for a pipe (no size, no seeking: a zip cannot be read from one)."""

    def __init__(self, name: str, raw: io.FileIO, regular: bool) -> None:
        self.name = name
        self.regular = regular
        self.size = os.fstat(raw.fileno()).st_size if regular else None
        chunks: list[bytes] = []
        got = 0
        while got < HEAD_BYTES:
            chunk = raw.read(HEAD_BYTES - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        self.head = b"".join(chunks)
        if regular:
            raw.seek(0)
            self.stream: io.BufferedReader = io.BufferedReader(raw)
        else:
            self.stream = io.BufferedReader(_Replayed(self.head, raw))  # type: ignore[arg-type]

    def read_all(self, limit: int) -> bytes:
        """Everything, at most ``limit`` bytes; more is refused naming the file and the limit."""
        if self.size is not None and self.size > limit:
            raise self.too_large(limit)
        # A read of N allocates N bytes first: ask for what the file holds, not the limit
        # (64 MiB taken for every small cache entry), then on to the limit if it grew since.
        want = limit + 1 if self.size is None else self.size + 1
        data = self.stream.read(want)
        if len(data) == want and want <= limit:
            data += self.stream.read(limit + 1 - want)
        if len(data) > limit:
            raise self.too_large(limit)
        return data

    def too_large(self, limit: int) -> RunFileError:
        return RunFileError(f"{self.name} is larger than {limit >> 20} MiB; not a file compiletrace wrote")

    def close(self) -> None:
        self.stream.close()

    def __enter__(self) -> InputFile:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _Replayed(io.RawIOBase):
    """A pipe with the bytes already taken from it put back in front."""

    def __init__(self, head: bytes, raw: io.FileIO) -> None:
        self._head = memoryview(head)
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._raw.readinto(buffer) or 0

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def open_input(path: str | os.PathLike[str], *, pipes: bool = True, links: bool = True) -> InputFile:
    """Open ``path`` to read it once: a regular file, or (with ``pipes``) a pipe; a symbolic
    link to one only with ``links`` (a file found in a directory someone else made is read
    only if it is one itself). Raises :class:`RunFileError` naming the file for one that
    does not exist or cannot be read, and for anything that is not a file or a pipe, before
    reading from it.

    A pipe named on the command line is opened as ``cat`` opens it (waiting for its writer);
    a path that was a file when looked at is opened without waiting, so one swapped for a
    pipe meanwhile never blocks.
    """
    name = os.fspath(path)
    try:
        mode = (os.stat if links else os.lstat)(name).st_mode
        what = _kind(mode) if pipes or not stat.S_ISFIFO(mode) else "a pipe"
        if what is not None:
            raise RunFileError(_refusal(name, what))
        wait = stat.S_ISFIFO(mode)
        flags = os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC | (0 if wait else os.O_NONBLOCK)
        fd = os.open(name, flags | (0 if links else os.O_NOFOLLOW))
    except FileNotFoundError:
        raise RunFileError(f"{name} does not exist") from None
    except OSError as exc:
        raise RunFileError(f"cannot read {name}: {exc.strerror or exc}") from None
    raw = io.FileIO(fd, "rb", closefd=True)
    try:
        mode = os.fstat(fd).st_mode  # what was opened, whatever the path names now
        regular = stat.S_ISREG(mode)
        what = _kind(mode) if pipes or regular else "a pipe"
        if what is not None:
            raise RunFileError(_refusal(name, what))
        os.set_blocking(fd, True)
        return InputFile(name, raw, regular)
    except OSError as exc:
        raw.close()
        raise RunFileError(f"cannot read {name}: {exc.strerror or exc}") from None
    except BaseException:
        raw.close()
        raise


def _refusal(name: str, what: str) -> str:
    if what == "a directory":
        return f"{name} is a directory; give a file written by compiletrace"
    if what == "a pipe":
        return f"{name} is a pipe; only regular files are read here"
    return f"{name} is {what}, not a file: give a file, or a pipe"


def check_outputs_apart(outputs: Iterable[tuple[str, str]], inputs: Iterable[str | None]) -> None:
    """Refuse, before anything is written, an output that would land on what is read: one
    that is an input (the same file by any name: a link, a hard link), one that lies inside
    an input directory (torch's trace, whose logs it would replace or add to), or two outputs
    that are the same file, standard output among them (``-``, ``/dev/stdout``: two outputs
    there would run into one another). ``outputs`` are (path, option) pairs. Raises
    :class:`UsageError` naming both paths.

    >>> import tempfile
    >>> trace = tempfile.mkdtemp()
    >>> check_outputs_apart([(os.path.join(trace, "out.json"), "--json")], [trace])
    Traceback (most recent call last):
      ...
    compiletrace._io.errors.UsageError: --json '.../out.json' lies inside the input directory '...', ...
    """
    sources = [(path, _where(path)) for path in inputs if path]
    seen: list[tuple[str, tuple[str, os.stat_result | None]]] = []
    stdout: list[tuple[str, str]] = []
    for path, what in outputs:
        if is_stdout(path):
            if stdout:
                raise UsageError(
                    f"{what} {path!r} and {stdout[0][1]} {stdout[0][0]!r} are both standard output, where "
                    "one would run into the other; give one of them a file"
                )
            stdout.append((path, what))
        if path == "-":
            continue
        where = _where(path)
        for source, there in sources:
            if _same(where, there):
                raise UsageError(
                    f"{what} {path!r} is the same file as the input {source!r}; give another path"
                )
            if there[1] is not None and stat.S_ISDIR(there[1].st_mode) and _inside(where[0], there[0]):
                raise UsageError(
                    f"{what} {path!r} lies inside the input directory {source!r}, whose files are read: "
                    "give a path outside it"
                )
        for other, there in seen:
            if _same(where, there):
                raise UsageError(f"{what} {path!r} is the same file as {other}; give another path")
        seen.append((what, where))


def _where(path: str) -> tuple[str, os.stat_result | None]:
    real = os.path.realpath(path)
    try:
        return real, os.stat(real)
    except OSError:
        return real, None


def _same(a: tuple[str, os.stat_result | None], b: tuple[str, os.stat_result | None]) -> bool:
    if a[0] == b[0]:
        return True
    return a[1] is not None and b[1] is not None and os.path.samestat(a[1], b[1])


def _inside(path: str, directory: str) -> bool:
    return os.path.commonpath([path, directory]) == directory
