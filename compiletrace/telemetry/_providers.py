"""Which OpenTelemetry providers compiletrace's spans and metrics go to.

By default the global ones (``opentelemetry.trace.get_tracer_provider()`` and its metrics
twin), read at each use, so a provider set after import still works. :func:`set_providers`
(called by :func:`~compiletrace.telemetry.configure`) points compiletrace at providers of
its own instead. Tracers and instruments are cached per provider pair.
"""

from __future__ import annotations

import os
import random
import threading
from typing import Any, NamedTuple

from opentelemetry import metrics, trace

from compiletrace._io.state import STATE, Slot
from compiletrace._version import __version__

__all__ = ["Instruments", "instruments", "recording_possible", "set_providers", "tracing_possible"]

SCOPE = "compiletrace"

# Compile times span 10 ms (a small graph on a warm cache) to 10 min (a cold LLM on CPU).
DURATION_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 150.0, 300.0, 600.0)


class Instruments(NamedTuple):
    """A tracer and the metric instruments, all from one provider pair."""

    tracer: trace.Tracer
    duration: metrics.Histogram  # compiletrace.compile.duration, seconds, by component and phase
    graphs: metrics.Counter  # compiletrace.compile.graphs, by component
    recompiles: metrics.Counter  # compiletrace.compile.recompiles, by component
    phase_duration: metrics.Histogram  # compiletrace.startup.phase.duration, seconds, by phase


# The tracer and instruments built for the last provider pair used, with that pair.
_INSTRUMENTS: Slot[tuple[trace.TracerProvider, metrics.MeterProvider, Instruments] | None] = STATE.slot(
    "telemetry instruments", None
)


def set_providers(
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
) -> None:
    """Send compiletrace's spans and metrics to these providers; ``None`` means the global one.

    >>> from compiletrace.telemetry import set_providers
    >>> set_providers()  # back to the global providers
    """
    with STATE.lock:
        STATE.tracer_provider = tracer_provider
        STATE.meter_provider = meter_provider


def current_providers(
    tracer_provider: trace.TracerProvider | None = None, meter_provider: metrics.MeterProvider | None = None
) -> tuple[trace.TracerProvider, metrics.MeterProvider]:
    """The providers to use: those passed, else those :func:`set_providers` chose, else
    the global ones."""
    tp = tracer_provider if tracer_provider is not None else STATE.tracer_provider
    mp = meter_provider if meter_provider is not None else STATE.meter_provider
    return (
        tp if tp is not None else trace.get_tracer_provider(),
        mp if mp is not None else metrics.get_meter_provider(),
    )


def _is_unset_meter_provider(mp: metrics.MeterProvider) -> bool:
    # The API's stand-in before any provider is set has no public class name.
    return isinstance(mp, metrics.NoOpMeterProvider) or type(mp).__name__ == "_ProxyMeterProvider"


def recording_possible(
    tracer_provider: trace.TracerProvider | None = None, meter_provider: metrics.MeterProvider | None = None
) -> bool:
    """False while no SDK provider is set: every span and metric would be a no-op."""
    tp, mp = current_providers(tracer_provider, meter_provider)
    no_traces = isinstance(tp, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))
    return not (no_traces and _is_unset_meter_provider(mp))


_NO_TRACES = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)  # no SDK: every span a no-op
_UNREAD = object()
# A memo, not state: whether the API was asked once (after that, its own global is read;
# see tracing_possible).
_api_asked = False


def tracing_possible(tracer_provider: trace.TracerProvider | None = None) -> bool:
    """False while no SDK tracer provider is set: every span would be a no-op (the check a
    phase makes: phases make spans, no metrics).

    The global provider is read at a fraction of the API's cost: while none is set,
    ``opentelemetry.trace.get_tracer_provider()`` looks ``OTEL_PYTHON_TRACER_PROVIDER`` up
    in the environment on every call (a microsecond or two: as much as the rest of a
    phase). The first call here goes through the API (which loads a provider that variable
    names); later ones read the API's own global, falling back to the API where it has none
    (another OpenTelemetry release). The one private name of OpenTelemetry compiletrace reads.

    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> tracing_possible(TracerProvider())
    True
    """
    global _api_asked
    tp: object = tracer_provider if tracer_provider is not None else STATE.tracer_provider
    if tp is None:
        if _api_asked:
            tp = getattr(trace, "_TRACER_PROVIDER", _UNREAD)
            if tp is None:
                return False
        if tp is None or tp is _UNREAD:
            _api_asked = True
            tp = trace.get_tracer_provider()
    return not isinstance(tp, _NO_TRACES)


class _PrivateRandomIds:
    """Span and trace ids from a private generator. Dynamo saves Python's global ``random``
    state before a frame compile and restores it after, callbacks included, so ids drawn
    from it there (the SDK's default) repeat from one compile to the next."""

    def __init__(self) -> None:
        self._rng = random.Random(os.urandom(16))
        self._lock = threading.Lock()

    def is_trace_id_random(self) -> bool:
        return True

    def generate_span_id(self) -> int:
        with self._lock:
            while True:
                value = self._rng.getrandbits(64)
                if value:
                    return value

    def generate_trace_id(self) -> int:
        with self._lock:
            while True:
                value = self._rng.getrandbits(128)
                if value:
                    return value


def _own_ids(tracer: Any) -> None:
    # Only the SDK's default generator is replaced, and only on compiletrace's own tracer.
    gen = getattr(tracer, "id_generator", None)
    cls = type(gen)
    if cls.__name__ == "RandomIdGenerator" and cls.__module__.startswith("opentelemetry.sdk"):
        tracer.id_generator = _PrivateRandomIds()


def instruments(
    tracer_provider: trace.TracerProvider | None = None, meter_provider: metrics.MeterProvider | None = None
) -> Instruments:
    """The tracer and instruments of these providers (default: :func:`current_providers`);
    the last pair's are cached. The tracer and meter carry compiletrace's version, as
    OpenTelemetry instrumentations' do."""
    tp, mp = current_providers(tracer_provider, meter_provider)
    cached = _INSTRUMENTS.value
    if cached is not None and cached[0] is tp and cached[1] is mp:
        return cached[2]
    built = _build_instruments(tp, mp)
    with STATE.lock:
        _INSTRUMENTS.value = (tp, mp, built)
    return built


def _build_instruments(tp: trace.TracerProvider, mp: metrics.MeterProvider) -> Instruments:
    meter = mp.get_meter(SCOPE, __version__)
    tracer = tp.get_tracer(SCOPE, __version__)
    _own_ids(tracer)
    built = Instruments(
        tracer=tracer,
        duration=meter.create_histogram(
            "compiletrace.compile.duration",
            unit="s",
            description="Compile time of one graph, by component and phase (dynamo, backend, backward)",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS_S,
        ),
        graphs=meter.create_counter(
            "compiletrace.compile.graphs", unit="{graph}", description="Graphs compiled, by component"
        ),
        recompiles=meter.create_counter(
            "compiletrace.compile.recompiles",
            unit="{graph}",
            description="Recompiles (a frame compiled again after a guard failed), by component",
        ),
        # Named as OpenTelemetry names durations (http.server.request.duration): a histogram
        # in seconds, ".duration" last; its sum per compiletrace.phase is each phase's time.
        phase_duration=meter.create_histogram(
            "compiletrace.startup.phase.duration",
            unit="s",
            description="Wall time of one start-up phase, by phase (compiletrace.phase)",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS_S,
        ),
    )
    return built


def tracer(tracer_provider: trace.TracerProvider | None = None) -> trace.Tracer:
    return instruments(tracer_provider).tracer
