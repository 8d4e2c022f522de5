"""``configure``: an opt-in OpenTelemetry SDK set-up for CLIs, notebooks and tests.

The only module that imports the SDK (and, for OTLP, the exporter package); the rest of
compiletrace uses the API alone.
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry import metrics, trace

from compiletrace.telemetry import _providers

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricsData
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["EXPORTERS", "Telemetry", "configure"]

EXPORTERS = ("console", "file", "memory", "otlp")
DEFAULT_SERVICE_NAME = "compiletrace"
_QUIET_AFTER_FAILURE_S = 30.0  # after a failed export, drop batches this long instead of retrying


def _check_url(endpoint: object) -> str:
    if not isinstance(endpoint, str):
        raise TypeError(f"endpoint must be a URL string, got {type(endpoint).__name__}")
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(
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
        raise ImportError(
            "exporter='otlp' needs the OTLP exporter package: pip install 'compiletrace[otlp]'"
        ) from exc
    return OTLPSpanExporter, OTLPMetricExporter


def _sdk_missing(exc: ImportError) -> ImportError:
    return ImportError(
        f"compiletrace.telemetry.configure needs the OpenTelemetry SDK ({exc.name} is missing): "
        "pip install 'compiletrace[sdk]'"
    )


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

    def spans(self) -> tuple[ReadableSpan, ...]:
        """Finished spans so far (exporter "memory" only)."""
        if self._memory is None:
            raise RuntimeError(f"spans() needs exporter='memory', this one is {self.exporter!r}")
        return tuple(self._memory[0].get_finished_spans())

    def metrics(self) -> MetricsData | None:
        """Metrics collected now (exporter "memory" only)."""
        if self._memory is None:
            raise RuntimeError(f"metrics() needs exporter='memory', this one is {self.exporter!r}")
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


def _guarded(inner: SpanExporter, where: str) -> SpanExporter:
    """Wrap a span exporter: a failed export warns once, then batches are dropped for a
    while instead of waiting on an unreachable collector again."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class GuardedSpanExporter(SpanExporter):
        def __init__(self) -> None:
            self._quiet_until = 0.0
            self._warned = False

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            if time.monotonic() < self._quiet_until:
                return SpanExportResult.FAILURE
            try:
                result = inner.export(spans)
            except Exception:
                result = SpanExportResult.FAILURE
            if result is not SpanExportResult.SUCCESS:
                self._quiet_until = time.monotonic() + _QUIET_AFTER_FAILURE_S
                if not self._warned:
                    self._warned = True
                    warnings.warn(
                        f"compiletrace: could not export spans to {where}; spans are dropped while "
                        f"it fails (retried every {_QUIET_AFTER_FAILURE_S:.0f} s). The model is unaffected.",
                        RuntimeWarning,
                        stacklevel=1,
                    )
            return result

        def shutdown(self) -> None:
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return inner.force_flush(timeout_millis)

    return GuardedSpanExporter()


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
) -> Telemetry:
    """Set up the OpenTelemetry SDK and send compiletrace's spans and metrics to ``exporter``:

    - "console": print spans (and metrics, periodically) to stdout;
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
        raise TypeError(f"exporter must be a str, one of {', '.join(EXPORTERS)}; got {type(name).__name__}")
    name = name.strip().lower()
    if name not in EXPORTERS:
        raise ValueError(f"unknown exporter {name!r}; valid exporters: {', '.join(EXPORTERS)}")
    if endpoint is not None:
        _check_url(endpoint)
        if name != "otlp":
            raise ValueError(f"endpoint applies to exporter='otlp' only, got exporter={name!r}")
    if name == "file" and path is None:
        raise ValueError("exporter='file' needs path=, the file to append OTLP JSON lines to")
    if path is not None and name != "file":
        raise ValueError(f"path applies to exporter='file' only, got exporter={name!r}")
    if service_name is not None and not isinstance(service_name, str):
        raise TypeError(f"service_name must be a str, got {type(service_name).__name__}")
    if not (isinstance(export_timeout_s, (int, float)) and export_timeout_s > 0):
        raise ValueError(f"export_timeout_s must be a positive number of seconds, got {export_timeout_s!r}")
    if name == "otlp":
        otlp_span_exporter, otlp_metric_exporter = _otlp_modules()

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
        processor = SimpleSpanProcessor(ConsoleSpanExporter())
        if metrics_enabled:
            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
    elif name == "file":
        assert path is not None
        processor = BatchSpanProcessor(_guarded(_file_exporter(Path(path)), str(path)))
    else:
        traces_url, metrics_url = _signal_endpoints(endpoint) if endpoint else (None, None)
        span_exp = otlp_span_exporter(endpoint=traces_url, headers=headers, timeout=timeout)
        processor = BatchSpanProcessor(_guarded(span_exp, traces_url or "the OTLP endpoint"))
        if metrics_enabled:
            metric_exp = otlp_metric_exporter(endpoint=metrics_url, headers=headers, timeout=timeout)
            readers.append(
                PeriodicExportingMetricReader(metric_exp, export_timeout_millis=export_timeout_s * 1000)
            )

    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(processor)
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    if set_global:
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            trace.set_tracer_provider(tracer_provider)
        if _providers._is_unset_meter_provider(metrics.get_meter_provider()):
            metrics.set_meter_provider(meter_provider)
    _providers.set_providers(tracer_provider, meter_provider)
    return Telemetry(name, tracer_provider, meter_provider, memory)


def _any_value(value: Any) -> dict[str, Any]:
    # OTLP/JSON: 64-bit ints are strings, bytes are base64 (none here).
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _key_values(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any_value(v)} for k, v in (attributes or {}).items()]


def otlp_json_request(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """An OTLP/JSON ``ExportTraceServiceRequest`` for ``spans`` (ids as hex, as the spec says)."""
    by_resource: dict[int, tuple[Any, dict[tuple[str, str], list[dict[str, Any]]]]] = {}
    for span in spans:
        res = span.resource
        scopes = by_resource.setdefault(id(res), (res, {}))[1]
        scope = span.instrumentation_scope
        key = (scope.name if scope else "", (scope.version or "") if scope else "")
        ctx = span.context
        assert ctx is not None
        item: dict[str, Any] = {
            "traceId": f"{ctx.trace_id:032x}",
            "spanId": f"{ctx.span_id:016x}",
            "name": span.name,
            "kind": span.kind.value + 1,  # OTLP numbers kinds from 1 (INTERNAL)
            "startTimeUnixNano": str(span.start_time),
            "endTimeUnixNano": str(span.end_time),
            "attributes": _key_values(span.attributes),
            "status": {"code": span.status.status_code.value, "message": span.status.description or ""},
            "events": [
                {"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": _key_values(e.attributes)}
                for e in span.events
            ],
        }
        if span.parent is not None:
            item["parentSpanId"] = f"{span.parent.span_id:016x}"
        scopes.setdefault(key, []).append(item)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _key_values(res.attributes)},
                "scopeSpans": [
                    {"scope": {"name": n, "version": v}, "spans": items} for (n, v), items in scopes.items()
                ],
            }
            for res, scopes in by_resource.values()
        ]
    }


def _file_exporter(path: Path) -> SpanExporter:
    """A span exporter that appends one OTLP/JSON export request per batch, one per line."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    lock = threading.Lock()

    class OtlpJsonFileExporter(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            line = json.dumps(otlp_json_request(spans), separators=(",", ":"))
            try:
                with lock, path.open("a", encoding="utf-8") as f:
                    f.write(line + "\n")
            except OSError:
                return SpanExportResult.FAILURE
            return SpanExportResult.SUCCESS

    return OtlpJsonFileExporter()
