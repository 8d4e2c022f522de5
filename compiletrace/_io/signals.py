"""SIGTERM and SIGHUP as an exception, so a stopped command cleans up as it does on Ctrl-C.

``timeout``, CI runners and container stops end a process with SIGTERM; a closed terminal
sends SIGHUP. Python's default for both is to die on the spot, which skips every
``finally``: child processes keep running and temporary directories stay behind. Inside
:func:`terminate_on_signals` either signal raises :class:`Terminated` in the main thread
instead, so the clean-up paths that already handle Ctrl-C (``finally`` and
``except BaseException``) run, and the command exits ``128 + signal number``.

>>> with terminate_on_signals():
...     pass
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import Any

__all__ = ["TERMINATING_SIGNALS", "Terminated", "terminate_on_signals"]

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
