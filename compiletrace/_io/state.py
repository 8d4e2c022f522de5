"""The process state: everything compiletrace keeps for the life of a process, in one
object under one lock.

Torch's callbacks and hooks are installed once per process and the tracker that receives
them is shared by every compiled model, so they cannot live in any one object the user
holds. They live here, with the warnings already given, so tests (and a reader) find all
of it in one place: ``STATE.slots`` lists every piece, and :meth:`ProcessState.unsettled`
says what is not at rest.

This module is the torch-free leaf: it names no type of the layers above it. A piece of
state that holds one of their objects (the tracker, a backend, the default registry, the
telemetry's open root span) is a :class:`Slot`, declared by the module whose objects it
holds, with its type there:

>>> from compiletrace._io.state import STATE, Slot
>>> answers: Slot[int | None] = STATE.slot("doctest: the answer", None)
>>> with STATE.lock:
...     answers.value = 42
>>> STATE.slots["doctest: the answer"].value
42
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:  # OpenTelemetry's API types, never imported here at run time
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

__all__ = ["STATE", "ProcessState", "Slot", "warn_once"]

T = TypeVar("T")


class Slot(Generic[T]):
    """One piece of the process state, of the type its declaring module gives it. Read
    ``slot.value`` anywhere (one attribute read: hot paths read it); write it, or read and
    then write it, under ``STATE.lock`` wherever threads may race (a slot written only where
    no other thread runs, as in a fork handler, says so where it is declared). ``unsettled``
    says what about a value is not at rest between two uses of compiletrace (the test suite
    checks it around every test)."""

    __slots__ = ("name", "unsettled", "value")

    def __init__(self, name: str, value: T, unsettled: Callable[[T], Iterable[str]] | None = None) -> None:
        self.name = name
        self.value = value
        self.unsettled = unsettled

    def __repr__(self) -> str:
        return f"<Slot {self.name}: {self.value!r}>"


class ProcessState:
    """One per process (:data:`STATE`). Every slot is read and written under :attr:`lock`
    (re-entrant: installing the tracker installs torch's callbacks, which take it again)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        # Every slot declared, by name. Any: each holds the type its module declared.
        self.slots: dict[str, Slot[Any]] = {}
        # Where telemetry sends spans and metrics (None: the global providers). Here, not in
        # telemetry: a phase asks whether compiletrace has providers of its own before it
        # loads OpenTelemetry (see telemetry._providers).
        self.tracer_provider: TracerProvider | None = None
        self.meter_provider: MeterProvider | None = None
        self.warned: set[str] = set()  # causes already warned about

    def slot(self, name: str, value: T, *, unsettled: Callable[[T], Iterable[str]] | None = None) -> Slot[T]:
        """Declare a piece of the process state, starting at ``value`` (the module that
        holds its objects declares it once, when it is imported). A module imported anew
        (a reload) declares its slot anew, in the old one's place."""
        made = Slot(name, value, unsettled)
        with self.lock:
            self.slots[name] = made
        return made

    def warn_once(self, message: str, *, key: str | None = None, stacklevel: int = 3) -> bool:
        """Issue ``message`` as a RuntimeWarning once per process per cause. The cause is
        ``key``, else the message itself: two different failures of one kind each warn
        once, the same failure repeated warns once. Returns True when it warned."""
        cause = message if key is None else key
        with self.lock:
            if cause in self.warned:
                return False
            self.warned.add(cause)
        warnings.warn(f"compiletrace: {message}", RuntimeWarning, stacklevel=stacklevel)
        return True

    def unsettled(self) -> list[str]:
        """What is not at rest between two uses of compiletrace: providers left set, and
        what each slot says of its value (a start-up root span left open, passive recording
        left on, frame compiles left open). Empty when the process state is clean (the test
        suite checks it before and after every test)."""
        with self.lock:
            found = []
            if self.tracer_provider is not None or self.meter_provider is not None:
                found.append("telemetry providers are set (telemetry.set_providers without a reset)")
            for piece in self.slots.values():
                if piece.unsettled is not None:
                    found.extend(piece.unsettled(piece.value))
            return found

    def forget_warnings(self) -> None:
        """Let every warning be given again (tests that check a warning is given)."""
        with self.lock:
            self.warned.clear()


STATE = ProcessState()


def warn_once(message: str, *, key: str | None = None) -> bool:
    """:meth:`ProcessState.warn_once` on the process state.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     first = warn_once("doctest: the collector is unreachable")
    ...     again = warn_once("doctest: the collector is unreachable")
    >>> first, again, len(caught)
    (True, False, 1)
    """
    return STATE.warn_once(message, key=key, stacklevel=4)
