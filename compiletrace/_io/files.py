"""Writing output files: atomically where the path is a regular file, straight through
where it is a stream.

- A regular file (or a new path) is written to a temporary file in the same directory,
  flushed to disk, then renamed over the path: a reader (or a crash, or a full disk) sees
  the old file or the whole new one, never a part. The new file gets the permissions the
  umask gives (0644 usually), or the old file's mode when it replaces one.
- A symlink is followed: its target is replaced atomically, the link stays a link.
- ``-`` means standard output; FIFOs, character devices and other special files are
  written straight through (renaming over ``/dev/stdout`` would replace the device).

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "run.json")
>>> write_text(path, "{}\\n")
>>> open(path).read()
'{}\\n'
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import Any

from compiletrace._io.errors import OutputError, UsageError

__all__ = ["STDOUT", "check_writable", "json_bytes", "write_bytes", "write_json", "write_text"]

STDOUT = "-"  # the output path that means standard output
_NEW_FILE_MODE = 0o666  # before the umask, as open() creates files


def _is_stream(path: Path) -> bool:
    """True for an existing path that is not a regular file or directory (FIFO, device,
    socket): written through, never replaced."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` (see the module docstring for how). Raises
    :class:`OutputError` naming the path when it cannot be written; a file that was there
    before is then left as it was."""
    if os.fspath(path) == STDOUT:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    target = Path(os.path.realpath(path))  # follow a symlink to the file it names
    try:
        if _is_stream(target):
            with open(target, "wb") as stream:
                stream.write(data)
            return
        _replace_atomically(target, data)
    except OSError as exc:
        raise OutputError(exc.errno, f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from exc


def _replace_atomically(target: Path, data: bytes) -> None:
    directory = target.parent
    try:
        mode: int | None = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = None
    while True:
        tmp = directory / f".{target.name}.{secrets.token_hex(6)}.tmp"
        try:
            # O_EXCL: never open a file someone else put there; 0o666 lets the umask decide.
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), _NEW_FILE_MODE
            )
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: Path) -> None:
    # The rename is durable once the directory entry is on disk; not every platform or
    # file system lets a directory be opened for that, and the write already succeeded.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """:func:`write_bytes` for UTF-8 text."""
    write_bytes(path, text.encode("utf-8"))


def json_bytes(data: Any, name: str) -> bytes:
    """``data`` as the indented JSON every file compiletrace writes holds. Non-finite floats
    are refused (they are not JSON: a NaN would make the file unreadable elsewhere) with an
    :class:`OutputError` naming ``name``.

    >>> json_bytes({"a": 1}, "x.json")
    b'{\\n  "a": 1\\n}\\n'
    """
    try:
        return (json.dumps(data, indent=2, allow_nan=False) + "\n").encode("utf-8")
    except ValueError as exc:
        raise OutputError(None, f"cannot write {name}: {exc}") from exc


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """``data`` as :func:`json_bytes`, written like :func:`write_bytes`."""
    write_bytes(path, json_bytes(data, os.fspath(path)))


def check_writable(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Fail early, before anything compiles, when ``path`` cannot be written: raises
    :class:`UsageError` saying why.

    >>> check_writable("/no/such/dir/out.json", "--json")
    Traceback (most recent call last):
      ...
    compiletrace._io.errors.UsageError: cannot write --json '/no/such/dir/out.json': directory ...
    """
    text = os.fspath(path)
    if not text:
        raise UsageError(f"{what} needs a file name, got ''")
    p = Path(text)
    if text == STDOUT:
        return p
    real = Path(os.path.realpath(p))
    if real.is_dir():
        raise UsageError(f"{what} path {text!r} is a directory; give a file name")
    if _is_stream(real):
        if not os.access(real, os.W_OK):
            raise UsageError(f"cannot write {what} {text!r}: permission denied")
        return p
    parent = real.parent
    if not parent.is_dir():
        raise UsageError(f"cannot write {what} {text!r}: directory {str(p.parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write {what} {text!r}: directory {str(p.parent)!r} is not writable")
    if real.exists() and not os.access(real, os.W_OK):
        raise UsageError(f"cannot write {what} {text!r}: permission denied")
    return p
