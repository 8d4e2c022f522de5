"""Providers can be passed in, as OpenTelemetry instrumentations take them; the tracer and
the meter carry compiletrace's version; telemetry reaches the core only as an observer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import compiletrace
from compiletrace import telemetry
from compiletrace._core.tracker import register_observer_factory


class Sdk:
    """A private tracer and meter provider pair, never made global."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.metrics = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.metrics])

    def names(self) -> list[str]:
        return [s.name for s in self.spans.get_finished_spans()]


@pytest.fixture
def own_observer() -> Iterator[Sdk]:
    """The tracker's observer writing to a private provider pair; the front door's own
    observer is put back afterwards."""
    sdk = Sdk()
    register_observer_factory(
        lambda: telemetry.CompileSpanObserver(
            tracer_provider=sdk.tracer_provider, meter_provider=sdk.meter_provider
        )
    )
    yield sdk
    register_observer_factory(telemetry.CompileSpanObserver)  # what the front door registers


def test_an_observer_with_its_own_providers_gets_the_compile_spans(own_observer: Sdk) -> None:
    fn = compiletrace.compile(lambda x: x * 5, backend="eager", registry=compiletrace.Registry())
    fn(torch.ones(2))
    assert own_observer.names() == ["Dynamo tracing", "Backend compile", "Compile graph"]
    graph = own_observer.spans.get_finished_spans()[-1]
    assert graph.instrumentation_scope is not None
    assert graph.instrumentation_scope.name == "compiletrace"
    assert graph.instrumentation_scope.version == compiletrace.__version__
    data = own_observer.metrics.get_metrics_data()
    assert data is not None
    scope = data.resource_metrics[0].scope_metrics[0]
    assert (scope.scope.name, scope.scope.version) == ("compiletrace", compiletrace.__version__)
    assert "compiletrace.compile.graphs" in {m.name for m in scope.metrics}


def test_instrument_takes_a_tracer_provider() -> None:
    sdk = Sdk()

    @compiletrace.instrument(span_name="Load weights", tracer_provider=sdk.tracer_provider)
    def load() -> int:
        return 3

    assert load() == 3
    assert sdk.names() == ["Load weights"]


def test_set_providers_sends_spans_to_providers_that_are_not_global() -> None:
    sdk = Sdk()
    telemetry.set_providers(sdk.tracer_provider, sdk.meter_provider)
    try:
        compiletrace.warm_up(lambda: None, compilation_mode="none")
    finally:
        telemetry.set_providers()
    assert sdk.names() == ["Warmup (CPU)"]
    compiletrace.warm_up(lambda: None, compilation_mode="none")
    assert sdk.names() == ["Warmup (CPU)"]  # back on the global (no-op) providers
