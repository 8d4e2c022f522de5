"""Directories that no other local user can change, and files written and read inside them
through a directory descriptor: what ``compiletrace run`` promises against another user
of the same machine.

Two kinds of path need that promise:

- a directory on a process's import path (``compiletrace run``'s bootstrap on
  ``PYTHONPATH``): whoever can create or replace an entry there runs code in every Python
  process that starts with it, as the user; :func:`unsafe_reason` says why a directory
  fails the test (the directory, or one of its parents, or an entry in it, writable by
  someone else), and :func:`private_cache_directory` makes one that passes;
- a job directory (:class:`PrivateDirectory`), where each process of a job writes its files:
  it must be the user's own and writable by nobody else, and every file in it is named
  relative to a descriptor of that very directory (checked by device and inode, owner and
  mode at every use), created exclusively and never through a link. A directory removed
  and made again by someone else at the same path, or a link put in its place, is refused:
  nothing is written there.

>>> import tempfile
>>> job = PrivateDirectory.create(tempfile.gettempdir(), "compiletrace-doc-")
>>> job.write("a.json", b"{}")
>>> job.read_regular("a.json", max_bytes=10)
b'{}'
>>> PrivateDirectory.from_identity(job.path, job.identity).names()
['a.json']
>>> job.remove_tree()
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from compiletrace._io.errors import UsageError

__all__ = [
    "NotPrivate",
    "PrivateDirectory",
    "private_cache_directory",
    "scratch_root",
    "unsafe_reason",
]

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


class NotPrivate(UsageError):
    """A directory another local user could change (or that is not the one it was): nothing
    is written in it."""


def _trusted_owner(uid: int) -> bool:
    # The superuser can change anything anyway; any other owner but this user is someone else.
    return uid in (0, os.getuid())


def unsafe_reason(path: str, entries: Iterable[str] = ()) -> str | None:
    """Why another local user could create, replace or change a file in the directory
    ``path`` (or in one of ``entries`` inside it, where they exist), or None when no one
    but this user and the superuser can. ``path`` is resolved first; then every directory
    from the root down must be owned by this user or the superuser, and writable by others
    only when sticky (as ``/tmp`` is: others may add their own entries there, but never
    rename or remove this user's); ``path`` itself and the ``entries`` must be writable by
    no one else at all.

    >>> unsafe_reason(tempfile.gettempdir()) is not None  # /tmp: anyone may add an entry
    True
    """
    real = os.path.realpath(path)
    chain = [real]
    while True:
        parent = os.path.dirname(chain[-1])
        if parent == chain[-1]:
            break
        chain.append(parent)
    for directory in reversed(chain[1:]):
        try:
            info = os.lstat(directory)
        except OSError as exc:
            return f"{directory} cannot be checked: {exc.strerror or exc}"
        if not _trusted_owner(info.st_uid):
            return f"{directory} belongs to another user (uid {info.st_uid})"
        if info.st_mode & _OTHERS_WRITE and not info.st_mode & stat.S_ISVTX:
            return f"{directory} is writable by other users"
    for item in (real, *(os.path.join(real, entry) for entry in entries)):
        try:
            info = os.lstat(item)
        except FileNotFoundError:
            if item == real:
                return f"{real} does not exist"
            continue
        except OSError as exc:
            return f"{item} cannot be checked: {exc.strerror or exc}"
        if stat.S_ISLNK(info.st_mode):
            return f"{item} is a symbolic link"
        if not _trusted_owner(info.st_uid):
            return f"{item} belongs to another user (uid {info.st_uid})"
        if info.st_mode & _OTHERS_WRITE:
            return f"{item} is writable by other users"
    return None


def private_cache_directory(*parts: str) -> str:
    """``$XDG_CACHE_HOME/compiletrace/PARTS`` (``~/.cache`` by default), made mode 0700
    where missing, and checked with :func:`unsafe_reason`; raises :class:`NotPrivate`
    saying why when it cannot be made private."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(os.path.abspath(base), "compiletrace", *parts)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise NotPrivate(f"cannot make the directory {path}: {exc.strerror or exc}") from None
    reason = unsafe_reason(path)
    if reason is not None:
        raise NotPrivate(
            f"{path} is not private ({reason}); set XDG_CACHE_HOME to a directory only you can write"
        )
    return path


def scratch_root() -> str:
    """The parent of every temporary directory compiletrace hands to other processes (a
    job's directory, the compile caches of ``doctor --verify`` and ``bench startup``):
    ``TMPDIR/compiletrace-UID``, made mode 0700 and never removed, so that once one of
    those directories is removed, no one else can make it again at its path for a process
    that outlived its job to use. Where someone else holds that name, or it is not private,
    ``$XDG_CACHE_HOME/compiletrace/tmp`` instead (:func:`private_cache_directory`).

    >>> stat.S_IMODE(os.stat(scratch_root()).st_mode)
    448
    """
    path = os.path.join(tempfile.gettempdir(), f"compiletrace-{os.getuid()}")
    with contextlib.suppress(OSError):
        os.mkdir(path, 0o700)
    try:
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
            if stat.S_IMODE(info.st_mode) & 0o077:
                os.chmod(path, 0o700, follow_symlinks=False)
            return path
    except OSError:
        pass
    return private_cache_directory("tmp")


def _identity(info: os.stat_result) -> str:
    return f"{info.st_dev}:{info.st_ino}"


def _check_private(info: os.stat_result, path: str) -> None:
    if not stat.S_ISDIR(info.st_mode):
        raise NotPrivate(f"{path} is not a directory")
    if info.st_uid != os.getuid():
        raise NotPrivate(f"{path} belongs to another user (uid {info.st_uid}); give a directory of your own")
    if info.st_mode & _OTHERS_WRITE:
        raise NotPrivate(
            f"{path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}); "
            "give a directory only you can write (chmod go-w)"
        )


@dataclass(frozen=True)
class PrivateDirectory:
    """A directory that is this user's own and writable by no one else, known by its path
    and its identity (device and inode) as it was when it was made or claimed. Every use
    opens the path without following a link, and refuses it (:class:`NotPrivate`) unless
    it is still that directory, still this user's and still writable by no one else."""

    path: str  # absolute
    identity: str  # "device:inode" when it was made or claimed

    @classmethod
    def create(cls, parent: str, prefix: str) -> PrivateDirectory:
        """A new directory under ``parent``, mode 0700 (``tempfile.mkdtemp``)."""
        path = tempfile.mkdtemp(prefix=prefix, dir=parent)
        return cls(path, _identity(os.lstat(path)))

    @classmethod
    def claim(cls, path: str, what: str = "directory") -> PrivateDirectory:
        """The directory the user named: made (mode 0700) when missing, else accepted only
        when it is a real directory (not a link), the user's own, writable by no one else
        and empty. Raises :class:`~compiletrace.UsageError` saying what is wrong and what
        to do.

        >>> PrivateDirectory.claim("/dev/null", "--job-dir")
        Traceback (most recent call last):
          ...
        compiletrace._io.private_dir.NotPrivate: --job-dir '/dev/null' is not a directory; ...
        """
        if not path:
            raise UsageError(f"{what} needs a directory name, got ''")
        absolute = os.path.abspath(path)
        try:
            os.mkdir(absolute, 0o700)
        except FileExistsError:
            pass
        except NotADirectoryError:
            raise NotPrivate(f"{what} {path!r}: a parent of it is not a directory") from None
        except FileNotFoundError:
            raise NotPrivate(f"{what} {path!r}: its parent directory does not exist; make it first") from None
        except OSError as exc:
            raise NotPrivate(f"{what} {path!r} cannot be made: {exc.strerror or exc}") from None
        try:
            info = os.lstat(absolute)
        except OSError as exc:
            raise NotPrivate(f"{what} {path!r} cannot be read: {exc.strerror or exc}") from None
        if stat.S_ISLNK(info.st_mode):
            raise NotPrivate(f"{what} {path!r} is a symbolic link; give the directory itself")
        if not stat.S_ISDIR(info.st_mode):
            raise NotPrivate(f"{what} {path!r} is not a directory; give a new or empty directory")
        _check_private(info, f"{what} {path!r}")
        directory = cls(absolute, _identity(info))
        if directory.names():
            raise UsageError(f"{what} {path!r} is not empty; give a new or empty directory")
        return directory

    @classmethod
    def from_identity(cls, path: str, identity: str) -> PrivateDirectory:
        """The directory a parent process made or claimed, as it passed it on."""
        return cls(path, identity)

    @contextlib.contextmanager
    def _fd(self) -> Iterator[int]:
        try:
            fd = os.open(self.path, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC)
        except OSError as exc:
            raise NotPrivate(f"{self.path} cannot be opened: {exc.strerror or exc}") from None
        try:
            info = os.fstat(fd)
            if _identity(info) != self.identity:
                raise NotPrivate(f"{self.path} is not the directory it was (removed, or replaced)")
            _check_private(info, self.path)
            yield fd
        finally:
            os.close(fd)

    def names(self) -> list[str]:
        """The entries' names, sorted."""
        with self._fd() as fd:
            return sorted(os.listdir(fd))

    def write(self, name: str, data: bytes, *, exclusive: bool = False) -> None:
        """Write the file ``name`` whole: a new temporary file (created exclusively, mode
        0600), flushed, then renamed over ``name`` (``exclusive``: only where no ``name``
        exists yet). A reader sees no file or the whole file."""
        _check_name(name)
        with self._fd() as fd:
            tmp = f".{name}.{secrets.token_hex(6)}.tmp"
            out = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o600, dir_fd=fd
            )
            try:
                with os.fdopen(out, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                if exclusive:
                    os.link(tmp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
                    os.unlink(tmp, dir_fd=fd)
                else:
                    os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=fd)
                raise

    def remove(self, name: str) -> None:
        """Remove the file ``name`` if it is there."""
        _check_name(name)
        with self._fd() as fd, contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=fd)

    def read_regular(self, name: str, max_bytes: int) -> bytes | None:
        """The bytes of the regular file ``name``, or None when it is not one (a link, a
        FIFO, a device: opened without following or blocking, and never read) or is larger
        than ``max_bytes``."""
        _check_name(name)
        with self._fd() as fd:
            try:
                handle = os.open(name, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=fd)
            except OSError:
                return None
            with os.fdopen(handle, "rb") as f:
                info = os.fstat(f.fileno())
                if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
                    return None
                data = f.read(max_bytes + 1)
            return data if len(data) <= max_bytes else None

    def remove_tree(self) -> None:
        """Remove the directory and what is in it, if it is still this one."""
        try:
            with self._fd():
                pass
        except NotPrivate:
            return  # not ours any more: leave it alone
        shutil.rmtree(self.path, ignore_errors=True)


def _check_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise UsageError(f"not a file name in a job directory: {name!r}")
