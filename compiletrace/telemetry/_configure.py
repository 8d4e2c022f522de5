"""``configure``: an opt-in OpenTelemetry SDK set-up for CLIs, notebooks and tests.

With ``_exporters``, the only module that imports the SDK (and, for OTLP, the exporter
package); the rest of compiletrace uses the API alone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from opentelemetry import metrics, trace

from compiletrace._io.errors import ArgumentTypeError, MissingDependencyError, UsageError
from compiletrace.telemetry import _providers
from compiletrace.telemetry._handle import Telemetry

__all__ = ["EXPORTERS", "Telemetry", "check_url", "configure"]

EXPORTERS = ("console", "file", "memory", "otlp")
DEFAULT_SERVICE_NAME = "compiletrace"


def check_url(endpoint: object) -> str:
    """``endpoint`` if it is an http(s) URL; else a usage error saying what one looks like.

    >>> check_url("http://127.0.0.1:4318")
    'http://127.0.0.1:4318'
    """
    if not isinstance(endpoint, str):
        raise ArgumentTypeError(f"endpoint must be a URL string, got {type(endpoint).__name__}")
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(
            f"endpoint must be an http(s) URL such as 'http://127.0.0.1:4318/v1/traces', got {endpoint!r}"
        )
    return endpoint


def _signal_endpoints(endpoint: str) -> tuple[str, str]:
    """(traces URL, metrics URL) from a base URL or a ``.../v1/traces`` URL."""
    base = endpoint.rstrip("/")
    if base.endswith("/v1/traces"):
        base = base[: -len("/v1/traces")]
        return endpoint, base + "/v1/metrics"
    return base + "/v1/traces", base + "/v1/metrics"


def _export_timeout(default_s: float) -> float | None:
    # The standard variables win; else a short timeout, so an unreachable collector
    # cannot hold up flushes and shutdown.
    for var in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        if os.environ.get(var):
            return None
    return default_s


def _otlp_modules() -> tuple[Any, Any]:
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise MissingDependencyError(
            "exporter='otlp' needs the OTLP exporter package: pip install 'compiletrace[otlp]'"
        ) from exc
    return OTLPSpanExporter, OTLPMetricExporter


def _sdk_missing(exc: ImportError) -> MissingDependencyError:
    return MissingDependencyError(
        f"compiletrace.telemetry.configure needs the OpenTelemetry SDK ({exc.name} is missing): "
        "pip install 'compiletrace[sdk]'"
    )


def configure(
    exporter: str | None = None,
    *,
    endpoint: str | None = None,
    path: str | os.PathLike[str] | None = None,
    service_name: str | None = None,
    resource_attributes: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    metrics_enabled: bool = True,
    export_timeout_s: float = 2.0,
    set_global: bool = True,
    out: TextIO | None = None,
) -> Telemetry:
    """Set up the OpenTelemetry SDK and send compiletrace's spans and metrics to ``exporter``:

    - "console": print spans (and metrics, periodically) to ``out`` (default stdout);
    - "otlp": OTLP over HTTP/protobuf to ``endpoint`` (a base URL or its ``/v1/traces``
      URL; default from ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``, else localhost:4318);
      needs ``pip install 'compiletrace[otlp]'``;
    - "file": spans as OTLP JSON, one export request per line, appended to ``path``;
    - "memory": kept in memory for tests and notebooks (``.spans()``, ``.metrics()``).

    ``exporter=None`` reads ``OTEL_TRACES_EXPORTER`` (default "console"). The service name is
    ``service_name``, else ``OTEL_SERVICE_NAME``, else "compiletrace"; ``OTEL_RESOURCE_ATTRIBUTES``,
    ``OTEL_EXPORTER_OTLP_*``, ``OTEL_BSP_*`` and ``OTEL_METRIC_EXPORT_INTERVAL`` apply as usual.
    With ``set_global`` the providers also become the global ones if none is set yet.
    Call ``shutdown()`` on the result to flush (bounded in time).

    >>> from compiletrace import telemetry
    >>> tel = telemetry.configure(exporter="memory", set_global=False)
    >>> tel.exporter
    'memory'
    >>> tel.shutdown()
    True
    """
    name = exporter if exporter is not None else os.environ.get("OTEL_TRACES_EXPORTER", "console")
    if not isinstance(name, str):
        raise ArgumentTypeError(
            f"exporter must be a str, one of {', '.join(EXPORTERS)}; got {type(name).__name__}"
        )
    name = name.strip().lower()
    if name not in EXPORTERS:
        raise UsageError(f"unknown exporter {name!r}; valid exporters: {', '.join(EXPORTERS)}")
    if endpoint is not None:
        check_url(endpoint)
        if name != "otlp":
            raise UsageError(f"endpoint applies to exporter='otlp' only, got exporter={name!r}")
    if name == "file" and path is None:
        raise UsageError("exporter='file' needs path=, the file to append OTLP JSON lines to")
    if path is not None and name != "file":
        raise UsageError(f"path applies to exporter='file' only, got exporter={name!r}")
    if out is not None and name != "console":
        raise UsageError(f"out applies to exporter='console' only, got exporter={name!r}")
    if service_name is not None and not isinstance(service_name, str):
        raise ArgumentTypeError(f"service_name must be a str, got {type(service_name).__name__}")
    if not (isinstance(export_timeout_s, (int, float)) and export_timeout_s > 0):
        raise UsageError(f"export_timeout_s must be a positive number of seconds, got {export_timeout_s!r}")
    if name == "otlp":
        otlp_span_exporter, otlp_metric_exporter = _otlp_modules()
    if name == "file":
        _otlp_json_encoder_available()

    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import (
            ConsoleMetricExporter,
            InMemoryMetricReader,
            MetricReader,
            PeriodicExportingMetricReader,
        )
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from compiletrace.telemetry._exporters import GuardedSpanExporter, OtlpJsonFileExporter
    except ImportError as exc:
        raise _sdk_missing(exc) from exc

    attrs: dict[str, Any] = dict(resource_attributes or {})
    if service_name is not None:
        attrs["service.name"] = service_name
    resource = Resource.create(attrs)
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": DEFAULT_SERVICE_NAME}))

    processor: SpanProcessor
    readers: list[MetricReader] = []
    memory: tuple[Any, Any] | None = None
    timeout = _export_timeout(float(export_timeout_s))
    if name == "memory":
        span_exporter = InMemorySpanExporter()
        metric_reader = InMemoryMetricReader()
        memory = (span_exporter, metric_reader)
        processor = SimpleSpanProcessor(span_exporter)
        readers.append(metric_reader)
    elif name == "console":
        stream = out if out is not None else sys.stdout
        processor = SimpleSpanProcessor(ConsoleSpanExporter(out=stream))
        if metrics_enabled:
            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter(out=stream)))
    elif name == "file":
        assert path is not None
        processor = BatchSpanProcessor(GuardedSpanExporter(OtlpJsonFileExporter(Path(path)), str(path)))
    else:
        traces_url, metrics_url = _signal_endpoints(endpoint) if endpoint else (None, None)
        span_exp = otlp_span_exporter(endpoint=traces_url, headers=headers, timeout=timeout)
        processor = BatchSpanProcessor(GuardedSpanExporter(span_exp, traces_url or "the OTLP endpoint"))
        if metrics_enabled:
            metric_exp = otlp_metric_exporter(endpoint=metrics_url, headers=headers, timeout=timeout)
            readers.append(
                PeriodicExportingMetricReader(metric_exp, export_timeout_millis=export_timeout_s * 1000)
            )

    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    tracer_provider.add_span_processor(processor)
    meter_provider = MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
    if set_global:
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            trace.set_tracer_provider(tracer_provider)
        if _providers._is_unset_meter_provider(metrics.get_meter_provider()):
            metrics.set_meter_provider(meter_provider)
    _providers.set_providers(tracer_provider, meter_provider)
    return Telemetry(name, tracer_provider, meter_provider, memory)


def _otlp_json_encoder_available() -> None:
    try:
        import google.protobuf.json_format  # noqa: F401
        import opentelemetry.exporter.otlp.proto.common.trace_encoder  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            "exporter='file' writes OTLP/JSON with the OTLP exporter package: "
            "pip install 'compiletrace[otlp]'"
        ) from exc
