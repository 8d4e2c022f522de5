"""Writing output files: atomically where the path is a regular file, straight through
where it is a stream, and never through a link the kernel would not follow either.

- A regular file (or a new path) is written to a temporary file in the same directory,
  flushed to disk, then renamed over the name: a reader (or a crash, or a full disk) sees
  the old file or the whole new one, never a part. The new file gets the permissions the
  umask gives (0644 usually), or the old file's mode when it replaces one.
- The path is walked one name at a time through directory descriptors, as the kernel
  walks it, so what is checked is what is written: nothing can be swapped in between.
- A symlink on the way is followed, and the link stays a link (``out.json -> runs/a.json``
  writes ``runs/a.json``), unless the kernel's rule for shared directories refuses it
  (``fs.protected_symlinks``, applied here whatever the machine's setting): in a sticky
  world-writable directory such as ``/tmp``, a link is followed only when the user or the
  directory's owner owns it. Another user's link there is refused before anything is
  written: it could point at any file of the user's.
- ``-`` means standard output, and so does any path that is this process's standard
  output (``/dev/stdout``, ``/proc/self/fd/1``, or the very file it was redirected to:
  :func:`is_stdout`): the data goes after what was printed there, never over it. A FIFO,
  a character device or a socket is written straight through (renaming over a device
  would replace it), never blocking: a FIFO with no reader, or one that stops reading,
  fails after :data:`STREAM_TIMEOUT_S`. One that another user owns in a sticky
  world-writable directory is refused, as the kernel does with ``fs.protected_fifos``.
  ``/dev/stderr`` and ``/proc/self/fd/N`` name a descriptor, and are written through as
  the stream (or file) it is.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "run.json")
>>> write_text(path, "{}\\n")
>>> open(path).read()
'{}\\n'
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import select
import stat
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiletrace._io.errors import OutputError, UsageError

__all__ = [
    "STDOUT",
    "STREAM_TIMEOUT_S",
    "check_writable",
    "is_stdout",
    "json_bytes",
    "write_bytes",
    "write_json",
    "write_text",
]

STDOUT = "-"  # the output path that means standard output
STREAM_TIMEOUT_S = 30.0  # how long a FIFO may go without a reader, or without reading
_NEW_FILE_MODE = 0o666  # before the umask, as open() creates files
_MAX_LINKS = 40  # as the kernel's ELOOP limit
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# A directory held only to walk through and to create in: O_PATH needs no read permission.
_WALK = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC


class _Refused(Exception):
    """The path cannot be written; the message says why (the caller names the path)."""


@dataclass
class _Target:
    """Where an output goes: a directory held open, a name in it, what is there now."""

    dir_fd: int
    name: str
    existing: os.stat_result | None  # lstat of the name; None where there is nothing yet
    descriptor_link: bool  # a /proc/PID/fd/N link: it names a descriptor, not a path

    def close(self) -> None:
        os.close(self.dir_fd)


def _shared_sticky(directory: os.stat_result) -> bool:
    return bool(directory.st_mode & stat.S_ISVTX and directory.st_mode & stat.S_IWOTH)


def _foreign_in_shared_dir(entry: os.stat_result, directory: os.stat_result) -> bool:
    """The kernel's rule for shared directories (protected_symlinks, protected_fifos): in a
    sticky world-writable directory, an entry neither the user nor the directory's owner
    owns is not to be followed or opened."""
    return _shared_sticky(directory) and entry.st_uid not in (os.geteuid(), directory.st_uid)


def _procfs_device() -> int | None:
    try:
        return os.stat("/proc").st_dev
    except OSError:
        return None


def _resolve(path: str) -> _Target:
    """Walk ``path`` one name at a time (links expanded as the kernel would, under its
    rule for shared directories) to the directory that holds its last name."""
    names: deque[str] = deque(path.split("/"))
    dir_fd = os.open("/" if path.startswith("/") else ".", _WALK)
    walked = "/" if path.startswith("/") else ""  # for messages: the directory reached so far
    links = 0
    procfs: int | None = None
    try:
        while True:
            name = names.popleft()
            if name in ("", "."):
                if not names:
                    raise _Refused("is a directory; give a file name")
                continue
            try:
                entry: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                entry = None
            if entry is not None and stat.S_ISLNK(entry.st_mode):
                directory = os.fstat(dir_fd)
                if _foreign_in_shared_dir(entry, directory):
                    raise _Refused(
                        f"{name!r} is a link another user (uid {entry.st_uid}) made in a shared "
                        "directory, which the kernel would not follow; remove it or write elsewhere"
                    )
                if procfs is None:
                    procfs = _procfs_device() or -1
                if directory.st_dev == procfs and not names:
                    # /proc/PID/fd/N: its text is no path ("pipe:[123]"); the kernel opens it.
                    target = _Target(dir_fd, name, entry, descriptor_link=True)
                    dir_fd = -1
                    return target
                links += 1
                if links > _MAX_LINKS:
                    raise _Refused("has too many levels of symbolic links")
                text = os.readlink(name, dir_fd=dir_fd)
                names.extendleft(reversed(text.split("/")))
                if text.startswith("/"):
                    os.close(dir_fd)
                    dir_fd = os.open("/", _WALK)
                    walked = "/"
                continue
            if not names:
                target = _Target(dir_fd, name, entry, descriptor_link=False)
                dir_fd = -1
                return target
            walked = os.path.join(walked, name)
            if entry is None:
                raise _Refused(f"directory {walked!r} does not exist")
            if not stat.S_ISDIR(entry.st_mode):
                raise _Refused(f"{walked!r} is not a directory")
            # O_NOFOLLOW: a link swapped in since the lstat fails here instead of being followed.
            next_fd = os.open(name, _WALK, dir_fd=dir_fd)
            os.close(dir_fd)
            dir_fd = next_fd
    finally:
        if dir_fd >= 0:
            os.close(dir_fd)


def _open_target(path: str) -> _Target:
    """:func:`_resolve` with its refusal or failure as an :class:`OutputError`."""
    try:
        return _resolve(path)
    except _Refused as exc:
        raise OutputError(errno.EPERM, f"cannot write {path}: {exc}") from None
    except OSError as exc:
        raise OutputError(exc.errno, f"cannot write {path}: {exc.strerror or exc}") from exc


def is_stdout(path: str | os.PathLike[str] | None) -> bool:
    """Whether ``path`` is this process's standard output: ``-``, or a path to the file
    descriptor 1 is (``/dev/stdout``, ``/proc/self/fd/1``, ``out.json`` in ``> out.json``),
    the same device and inode. A command whose output goes there prints no text of its own:
    the output is all that standard output then holds.

    >>> is_stdout("-"), is_stdout(None), is_stdout("/no/such/file")
    (True, False, False)
    """
    if path is None:
        return False
    text = os.fspath(path)
    if text == STDOUT:
        return True
    if not text:
        return False
    try:
        out = os.fstat(1)
        # stat() does not block on a FIFO, and follows /dev/stdout's links to what fd 1 is.
        there = os.stat(text)
    except (OSError, ValueError):
        return False
    return (there.st_dev, there.st_ino) == (out.st_dev, out.st_ino)


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` (see the module docstring for how). Raises
    :class:`OutputError` naming the path when it cannot be written; a file that was there
    before is then left as it was."""
    text = os.fspath(path)
    if is_stdout(text):
        # Through the process's own stream, after what it holds: reopening the path would
        # write from the file's start (a redirect's file), over what was printed first.
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    if not text:
        raise OutputError(errno.ENOENT, "cannot write '': an output needs a file name")
    target = _open_target(text)
    try:
        existing = target.existing
        if target.descriptor_link or (existing is not None and _is_special(existing)):
            _write_through(target, data)
        elif existing is not None and stat.S_ISDIR(existing.st_mode):
            raise _Refused("is a directory; give a file name")
        else:
            _replace_atomically(target, data)
    except _Refused as exc:
        raise OutputError(errno.EPERM, f"cannot write {text}: {exc}") from None
    except OSError as exc:
        raise OutputError(exc.errno, f"cannot write {text}: {exc.strerror or exc}") from exc
    finally:
        target.close()


def _is_special(entry: os.stat_result) -> bool:
    """A FIFO, a device or a socket: written through, never replaced."""
    return not (stat.S_ISREG(entry.st_mode) or stat.S_ISDIR(entry.st_mode) or stat.S_ISLNK(entry.st_mode))


def _write_through(target: _Target, data: bytes) -> None:
    """Write ``data`` into the stream at the target, never blocking past STREAM_TIMEOUT_S:
    a FIFO with no reader yet is waited for, then each write waits for room."""
    _check_stream(target)
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC
    if not target.descriptor_link:
        flags |= _NOFOLLOW
    deadline = time.monotonic() + STREAM_TIMEOUT_S
    while True:
        try:
            fd = os.open(target.name, flags, dir_fd=target.dir_fd)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: a FIFO no one reads yet
                raise
            if time.monotonic() >= deadline:
                raise _Refused(f"no reader opened the FIFO in {STREAM_TIMEOUT_S:g} s") from None
            time.sleep(0.05)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # /dev/stdout redirected to a file
            os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            _, ready, _ = select.select([], [fd], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise _Refused(f"the reader took no data for {STREAM_TIMEOUT_S:g} s")
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue
    finally:
        os.close(fd)


def _check_stream(target: _Target) -> None:
    """Refuse a FIFO, device or socket another user made in a shared directory: it could be
    theirs to read, or to hold open and never read."""
    entry = target.existing
    if entry is None or target.descriptor_link:
        return
    if _foreign_in_shared_dir(entry, os.fstat(target.dir_fd)):
        raise _Refused(
            f"a {_kind(entry)} another user (uid {entry.st_uid}) made in a shared directory "
            "is at its name; remove it or write elsewhere"
        )


def _kind(entry: os.stat_result) -> str:
    if stat.S_ISFIFO(entry.st_mode):
        return "FIFO"
    if stat.S_ISSOCK(entry.st_mode):
        return "socket"
    return "device"


def _replace_atomically(target: _Target, data: bytes) -> None:
    dir_fd, name = target.dir_fd, target.name
    existing = target.existing
    mode = stat.S_IMODE(existing.st_mode) if existing is not None and stat.S_ISREG(existing.st_mode) else None
    while True:
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            # O_EXCL: never open a file someone else put there; 0o666 lets the umask decide.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, _NEW_FILE_MODE, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            if mode is not None:
                os.fchmod(f.fileno(), mode)
        # rename() never follows a link at the name: were one put there since the walk, it
        # is what gets replaced, not the file it points to.
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    _fsync_directory(dir_fd)


def _fsync_directory(dir_fd: int) -> None:
    # The rename is durable once the directory entry is on disk; a descriptor held only to
    # walk (O_PATH) cannot be synced, and not every file system lets a directory be: the
    # write already succeeded.
    with contextlib.suppress(OSError):
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC, dir_fd=dir_fd)
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
    :class:`UsageError` saying why. It walks the path as :func:`write_bytes` will, so a link
    another user planted in a shared directory is refused here, before the work.

    >>> check_writable("/no/such/dir/out.json", "--json")
    Traceback (most recent call last):
      ...
    compiletrace._io.errors.UsageError: cannot write --json '/no/such/dir/out.json': directory '/no' ...
    """
    text = os.fspath(path)
    if not text:
        raise UsageError(f"{what} needs a file name, got ''")
    p = Path(text)
    if text == STDOUT:
        return p
    try:
        target = _resolve(text)
    except _Refused as exc:
        raise UsageError(f"cannot write {what} {text!r}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot write {what} {text!r}: {exc.strerror or exc}") from None
    try:
        return _check_target(target, p, what)
    except _Refused as exc:
        raise UsageError(f"cannot write {what} {text!r}: {exc}") from None
    finally:
        target.close()


def _check_target(target: _Target, p: Path, what: str) -> Path:
    text = os.fspath(p)
    existing = target.existing
    if target.descriptor_link:
        return p
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise UsageError(f"{what} path {text!r} is a directory; give a file name")
    if existing is not None and _is_special(existing):
        _check_stream(target)
        return p
    if not os.access(".", os.W_OK | os.X_OK, dir_fd=target.dir_fd):
        raise UsageError(f"cannot write {what} {text!r}: its directory is not writable")
    if existing is not None and not os.access(target.name, os.W_OK, dir_fd=target.dir_fd):
        raise UsageError(f"cannot write {what} {text!r}: permission denied")
    return p
