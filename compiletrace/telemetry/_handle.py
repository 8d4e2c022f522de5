"""The handle :func:`~compiletrace.telemetry.configure` returns: the providers it built, what
the "memory" exporter kept, and a flush and shutdown bounded in time."""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from compiletrace._io.errors import UsageError
from compiletrace.telemetry import _providers, _startup

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricsData
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

__all__ = ["Telemetry"]


class Telemetry:
    """What :func:`configure` set up: the providers, and a bounded ``shutdown()``.

    >>> from compiletrace import telemetry
    >>> tel = telemetry.configure(exporter="memory", set_global=False)
    >>> tel.spans()
    ()
    >>> tel.shutdown()
    True
    """

    def __init__(
        self,
        exporter: str,
        tracer_provider: TracerProvider,
        meter_provider: MeterProvider,
        memory: tuple[Any, Any] | None = None,
    ) -> None:
        self.exporter = exporter  # "console", "file", "memory" or "otlp"
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self._memory = memory  # (InMemorySpanExporter, InMemoryMetricReader) for "memory"
        self._closed = False
        # One exit hook per handle, gone once shut down (the providers register none: they
        # are built with shutdown_on_exit=False, so a shut-down handle leaves nothing behind).
        atexit.register(self.shutdown)

    def spans(self) -> tuple[ReadableSpan, ...]:
        """Finished spans so far (exporter "memory" only)."""
        if self._memory is None:
            raise UsageError(f"spans() needs exporter='memory', this one is {self.exporter!r}")
        return tuple(self._memory[0].get_finished_spans())

    def metrics(self) -> MetricsData | None:
        """Metrics collected now (exporter "memory" only)."""
        if self._memory is None:
            raise UsageError(f"metrics() needs exporter='memory', this one is {self.exporter!r}")
        data: MetricsData | None = self._memory[1].get_metrics_data()
        return data

    def clear(self) -> None:
        """Forget the spans collected so far (exporter "memory" only)."""
        if self._memory is not None:
            self._memory[0].clear()

    def force_flush(self, timeout_s: float = 5.0) -> bool:
        """Export what is buffered; True if it finished within ``timeout_s``."""
        timeout_ms = int(timeout_s * 1000)

        def flush() -> None:
            self.tracer_provider.force_flush(timeout_ms)
            self.meter_provider.force_flush(timeout_ms)

        return _bounded(flush, timeout_s)

    def shutdown(self, timeout_s: float = 5.0) -> bool:
        """Flush and close the exporters, waiting at most ``timeout_s`` seconds; compiletrace
        goes back to the global providers. True if everything finished in time."""
        if self._closed:
            return True
        self._closed = True
        atexit.unregister(self.shutdown)
        # An open start-up root recorded here ends (where its last phase did) and is exported.
        _startup.end_startup_of(self.tracer_provider)
        if _providers.current_providers()[0] is self.tracer_provider:
            _providers.set_providers()
        timeout_ms = int(timeout_s * 1000)

        def close() -> None:
            self.tracer_provider.shutdown()
            self.meter_provider.shutdown(timeout_millis=timeout_ms)

        return _bounded(close, timeout_s)

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"<Telemetry exporter={self.exporter!r}{' closed' if self._closed else ''}>"


def _bounded(work: Callable[[], None], timeout_s: float) -> bool:
    """Run ``work()`` on a daemon thread and wait at most ``timeout_s``."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            work()
        except Exception as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="compiletrace-telemetry-flush", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return not thread.is_alive() and not errors
