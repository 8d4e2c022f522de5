"""What a signal to compiletrace leaves behind: nothing, as far as each signal allows.

- SIGTERM and SIGHUP as an exception, so a stopped command cleans up as it does on Ctrl-C.
- SIGKILL cannot be caught: the children compiletrace starts die with their parent instead
  (:func:`die_with_parent`), and the temporary directories a killed run could not remove
  are removed by the next run (:func:`owned_temporary_directory`).

``timeout``, CI runners and container stops end a process with SIGTERM; a closed terminal
sends SIGHUP. Python's default for both is to die on the spot, which skips every
``finally``: child processes keep running and temporary directories stay behind. Inside
:func:`terminate_on_signals` either signal raises :class:`Terminated` in the main thread
instead, so the clean-up paths that already handle Ctrl-C (``finally`` and
``except BaseException``) run, and the command exits ``128 + signal number``.

A SIGKILLed process runs nothing: its children (the ``--nproc`` launcher, each rank, each
``bench startup`` child) would keep compiling for minutes, orphaned. On Linux each of them
asks the kernel for SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``), so a kill
of the command reaches the whole tree; elsewhere there is no such request, and one warning
says so. A directory made by :func:`owned_temporary_directory` holds a marker naming its
owner process; the next one of the same prefix removes those whose owner is gone.

>>> with terminate_on_signals():
...     pass
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from compiletrace._io.private_dir import scratch_root
from compiletrace._io.state import warn_once

__all__ = [
    "OWNER_FILE",
    "TERMINATING_SIGNALS",
    "Terminated",
    "die_with_parent",
    "disown",
    "owned_temporary_directory",
    "parent_death_preexec",
    "process_alive",
    "process_start_ticks",
    "remove_stale_directories",
    "terminate_on_signals",
]

# SIGHUP does not exist on Windows.
TERMINATING_SIGNALS: tuple[int, ...] = tuple(
    int(s) for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)


class Terminated(BaseException):
    """A terminating signal arrived (SIGTERM, SIGHUP). A BaseException, like
    KeyboardInterrupt: ``except Exception`` does not swallow it on its way out.

    >>> Terminated(15).exit_status
    143
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by {_name(signum)}")

    @property
    def signal_name(self) -> str:
        """``SIGTERM``, ``SIGHUP``, ..."""
        return _name(self.signum)

    @property
    def exit_status(self) -> int:
        """What a shell reports for a process that this signal ended: 128 + its number."""
        return 128 + self.signum


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@contextlib.contextmanager
def terminate_on_signals(signums: Sequence[int] = TERMINATING_SIGNALS) -> Iterator[None]:
    """For the duration of the block, raise :class:`Terminated` when one of ``signums``
    arrives; the previous handlers come back afterwards.

    Only the first signal raises: a second one (``timeout`` signals the process and then
    its process group, so two often come together) arrives while the clean-up runs and
    must not cut it short; it is ignored. Outside the main thread, where Python cannot
    install handlers, the block runs with the handlers as they are.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal raised
        if raised:
            return
        raised = True
        raise Terminated(signum)

    previous: dict[int, Any] = {}
    try:
        for signum in signums:
            previous[signum] = signal.signal(signum, handler)
        yield
    finally:
        for signum, old in previous.items():
            # None: a handler installed from C; the default is the nearest we can restore.
            signal.signal(signum, old if old is not None else signal.SIG_DFL)


# -- children that die with their parent -------------------------------------------------------

_PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent thread ends


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, looked up once (before any fork: a pre-exec hook must not load
    libraries); None off Linux or where it cannot be found."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        # The C library is loaded into every Python already: its symbols are the program's
        # own (ctypes.util.find_library would start /sbin/ldconfig to look for it).
        libc = ctypes.CDLL(None, use_errno=True)
        fn: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):
        return None
    return fn


def die_with_parent(expected_parent: int | Callable[[int], bool], sig: int = signal.SIGKILL) -> bool:
    """Linux: have the kernel send this process ``sig`` (SIGKILL by default) when its
    parent dies, however it dies (SIGKILL included); call it first thing in a child. The
    request covers only a parent that is alive when it is made, so afterwards the parent is
    checked: ``expected_parent`` is its pid, or a test of the current parent's pid. When the
    check fails the parent died before the request (this process was handed to init or a
    subreaper) and this process sends itself ``sig``. Returns False, having done nothing,
    where the request does not exist (not Linux).

    The kernel's "parent" is the thread that started the process: start children from a
    thread that outlives them (``subprocess.Popen`` followed by ``wait`` in the same
    thread, as compiletrace does).

    >>> die_with_parent(os.getppid())  # doctest: +SKIP
    True
    """
    prctl = _prctl()
    arg = ctypes.c_ulong  # prctl reads its four arguments after the option as unsigned long
    if prctl is None or prctl(_PR_SET_PDEATHSIG, arg(sig), arg(0), arg(0), arg(0)) != 0:
        return False
    ppid = os.getppid()
    if not (expected_parent(ppid) if callable(expected_parent) else ppid == expected_parent):
        os.kill(os.getpid(), sig)
    return True


def parent_death_preexec(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen`` that makes the child get ``sig`` when this
    process dies (:func:`die_with_parent`, from the fork on, so a kill during the child's
    imports reaches it too); None where that is not possible, with one warning per process.
    SIGTERM suits a child that stops its own children on it (torchrun does).

    >>> subprocess.Popen(cmd, preexec_fn=parent_death_preexec())  # doctest: +SKIP
    """
    if _prctl() is None:
        warn_once(
            f"child processes cannot be tied to their parent on {sys.platform} "
            "(PR_SET_PDEATHSIG is Linux only): a SIGKILL of compiletrace leaves them running",
            key="no_pdeathsig",
        )
        return None
    parent = os.getpid()

    def preexec() -> None:  # in the child between fork and exec: no imports, no locks
        die_with_parent(parent, sig)

    return preexec


# -- temporary directories that a killed run leaves ----------------------------------------------

OWNER_FILE = ".compiletrace-owner"  # in each owned temporary directory: who made it
_OWNER_FILE_MAX_BYTES = 4096


def process_start_ticks(pid: int) -> int | None:
    """When a process started (clock ticks since boot, Linux), which tells a pid reused by
    a later process from the one that wrote a marker; None where unknown."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        return int(text.rsplit(")", 1)[1].split()[19])  # field 22; fields after "(comm)" start at 3
    except (OSError, ValueError, IndexError):
        return None


@functools.cache
def _host() -> str | None:
    """This boot and pid namespace (Linux): a marker written under another one names a pid
    this process cannot check (a /tmp shared with a container, or kept across a reboot)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot} {os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None


def process_alive(pid: int, start_ticks: int | None) -> bool:
    """True while the process ``pid`` that started at ``start_ticks`` (None: unknown) runs:
    a pid now held by a later process is not it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, someone else's
        pass
    now = process_start_ticks(pid)
    return start_ticks is None or now is None or now == start_ticks


def _owner_gone(marker: Path) -> bool:
    """True only when the marker is compiletrace's and its owner has surely ended."""
    try:
        info = marker.lstat()
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.getuid()
            or info.st_size > _OWNER_FILE_MAX_BYTES
        ):
            return False
        owner = json.loads(marker.read_text(encoding="utf-8"))
        pid, start, host = owner["pid"], owner["start"], owner["host"]
    except (OSError, ValueError, TypeError, KeyError):
        return False
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or host != _host():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, someone else's
        return False
    now = process_start_ticks(pid)
    return start is not None and now is not None and now != start  # alive, but a later process


def remove_stale_directories(
    prefix: str,
    root: str | os.PathLike[str] | None = None,
    in_use: Callable[[Path], bool] | None = None,
) -> list[str]:
    """Remove the directories under ``root`` (:func:`scratch_root` by default) named
    ``prefix*`` that :func:`owned_temporary_directory` made for a process that has ended
    without removing them (SIGKILL, a power cut). Only those: this user's real directories
    holding this user's marker, written on this boot and pid namespace, whose owner is
    gone, and that ``in_use`` (when given) does not say are still used by other live
    processes (a job's, whose launcher was killed). Never raises; returns the paths removed.

    >>> remove_stale_directories("compiletrace-launch-")  # doctest: +SKIP
    []
    """
    base = Path(scratch_root() if root is None else root)
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(base) if n.startswith(prefix)]
    except OSError:
        return removed
    for name in names:
        path = base / name
        try:
            info = path.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue  # a symlink, a file, or not ours
        if _owner_gone(path / OWNER_FILE) and not _used(in_use, path):
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(str(path))
    return removed


def _used(in_use: Callable[[Path], bool] | None, path: Path) -> bool:
    if in_use is None:
        return False
    try:
        return in_use(path)
    except Exception:  # cannot tell: keep it
        return True


@contextlib.contextmanager
def owned_temporary_directory(prefix: str, in_use: Callable[[Path], bool] | None = None) -> Iterator[str]:
    """A temporary directory like ``tempfile.TemporaryDirectory(prefix=prefix)``, made in
    this user's :func:`scratch_root` (so that no one else can make it again once it is
    removed, for a process that outlived this one), removed on leaving the block, that
    carries a marker naming this process (:data:`OWNER_FILE`),
    so that if this process is killed before it can remove it, the next call with the same
    prefix does (:func:`remove_stale_directories`, run first, with ``in_use``). A directory
    :func:`disown`-ed in the block stays, and no later call removes it.

    >>> with owned_temporary_directory("compiletrace-doc-") as tmp:
    ...     os.path.isdir(tmp)
    True
    """
    remove_stale_directories(prefix, in_use=in_use)
    tmp = tempfile.mkdtemp(prefix=prefix, dir=scratch_root())
    marker = Path(tmp, OWNER_FILE)
    try:
        owner = {"pid": os.getpid(), "start": process_start_ticks(os.getpid()), "host": _host()}
        marker.write_text(json.dumps(owner) + "\n", encoding="utf-8")
        yield tmp
    finally:
        if marker.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def disown(directory: str) -> None:
    """Keep a directory :func:`owned_temporary_directory` made: it is no longer removed
    when its block ends, nor by a later call once its owner has gone."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(directory, OWNER_FILE))
