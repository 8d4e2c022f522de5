"""The process state: everything compiletrace keeps for the life of a process, in one
object under one lock.

Torch's callbacks and hooks are installed once per process and the tracker that receives
them is shared by every compiled model, so they cannot live in any one object the user
holds. They live here, with the warnings already given, so tests (and a reader) find all
of it in one place. Torch-free: the torch-facing core stores its objects in the slots.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the slots' types, never imported at run time: this module is the leaf
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from compiletrace._core.backend import CompiletraceBackend
    from compiletrace._core.tracker import Tracker
    from compiletrace._data.registry import Registry

__all__ = ["STATE", "ProcessState", "warn_once"]


class ProcessState:
    """One per process (:data:`STATE`). Every slot is read and written under :attr:`lock`
    (re-entrant: installing the tracker installs torch's callbacks, which take it again)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.tracker: Tracker | None = None  # the process Tracker, installed into torch on first use
        self.callbacks: Any = None  # the callback pair registered with Dynamo (see torch_compat)
        self.region_hook_installed = False  # torch's timed-region logger is teed (see torch_compat)
        self.region_listener: Any = None  # receives the frame and lazy-backward region ends
        self.limit_listener: Any = None  # told when Dynamo refuses a frame past its recompile limit
        # Every Dynamo backend call goes through it once passive recording is on (observe()).
        self.backend_call_handler: Any = None
        self.aot_listener: Any = None  # told of torch's ahead-of-time compiles (aot_compile)
        self.active_observer: Any = None  # the compiletrace.observe() recording now, if any
        self.reset_listeners: list[Callable[[], None]] = []  # called after torch._dynamo.reset()
        # Builds the tracker's observer when the tracker is created: the front door registers
        # telemetry's here, so the core never imports telemetry.
        self.observer_factory: Callable[[], Any] | None = None
        self.default_registry: Registry | None = None  # the Registry compiletrace.compile records into
        self.entry_point_backend: CompiletraceBackend | None = None  # torch.compile(backend="compiletrace")
        # compiletrace.compile's backends, one per configuration (weakly held): compiling many
        # blocks the same way must be one backend, or Dynamo recompiles their shared code.
        self.shared_backends: weakref.WeakValueDictionary[Any, CompiletraceBackend] = (
            weakref.WeakValueDictionary()
        )
        # Where telemetry sends spans and metrics (None: the global providers), and the
        # tracer and instruments built for the current pair (see telemetry._providers).
        self.tracer_provider: TracerProvider | None = None
        self.meter_provider: MeterProvider | None = None
        self.instruments: Any = None
        # The open "Start-up" root span (see telemetry._startup) and whether its exit hook,
        # which ends it before the providers flush, is registered.
        self.startup_root: Any = None
        self.startup_exit_hook = False
        self.warned: set[str] = set()  # causes already warned about

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
        """What is not at rest between two uses of compiletrace: providers left set, a
        start-up root span left open. Empty when the process state is clean (the test suite
        checks it before and after every test)."""
        with self.lock:
            found = []
            if self.tracer_provider is not None or self.meter_provider is not None:
                found.append("telemetry providers are set (telemetry.set_providers without a reset)")
            if self.startup_root is not None:
                found.append("the start-up root span is open")
            if self.tracker is not None and self.tracker.passive is not None:
                found.append("passive recording is on (compiletrace.observe() not stopped)")
            if self.tracker is not None and self.tracker.open_frames():
                found.append(f"{self.tracker.open_frames()} frame compiles are open")
            return found

    def register_observer_factory(self, factory: Callable[[], Any] | None) -> None:
        """Build the tracker's observer with ``factory()`` when the tracker is created (and
        now, if it exists already); None removes it. The front door registers telemetry's
        span observer here: the core never imports telemetry, and registering loads no torch."""
        with self.lock:
            self.observer_factory = factory
            if self.tracker is not None:
                self.tracker.observer = self.build_observer()

    def build_observer(self) -> Any:
        """What the registered factory builds: None without one, or when it fails (say
        OpenTelemetry is missing or broken: measure without spans, and warn once)."""
        factory = self.observer_factory
        if factory is None:
            return None
        try:
            return factory()
        except Exception as exc:
            self.warn_once(f"telemetry is off: its observer could not be built: {exc!r}", stacklevel=4)
            return None

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
