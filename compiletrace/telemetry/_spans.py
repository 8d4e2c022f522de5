"""Graph records -> OpenTelemetry spans and metrics (the tracker's frame observer).

Each finished frame compile becomes a "Compile graph" span with its real start and end
times, parented to the context that was current when the compile began (so compiles
nest under "Warmup (CPU)" or a user's span), with child spans "Dynamo tracing" and
"Backend compile". A lazy backward compile becomes a "Compile backward" span.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Status, StatusCode

from compiletrace._data.phases import lay_out
from compiletrace._data.records import NS_PER_S, CacheOutcome, CompileStatus, GraphRecord
from compiletrace.telemetry import _providers
from compiletrace.telemetry._propagation import parent_context

__all__ = ["CompileSpanObserver", "record_attributes"]

COMPILE_GRAPH = "Compile graph"
DYNAMO_TRACING = "Dynamo tracing"
BACKEND_COMPILE = "Backend compile"
COMPILE_BACKWARD = "Compile backward"
COMPILE_AFTER_WARMUP = "compile after warm-up"  # the span event on a compile after warm-up returned


def record_attributes(record: GraphRecord) -> dict[str, Any]:
    """The ``compiletrace.*`` span attributes of one graph record. Attributes that would
    only repeat a default (no recompile, status ok, a cache not consulted) are left out:
    each attribute costs time on every compile."""
    attrs: dict[str, Any] = {
        "compiletrace.component": record.component,
        "compiletrace.compile_id": record.compile_id,
        "compiletrace.backend": record.backend,
        "compiletrace.code_name": record.code_name,
        "compiletrace.graph.node_count": record.graph_node_count,
        "compiletrace.cache.outcome": record.cache_outcome.value,
        "compiletrace.rank": record.rank,
        "compiletrace.world_size": record.world_size,
    }
    if record.fx_graph_cache is not CacheOutcome.NONE:
        attrs["compiletrace.cache.fx_graph"] = record.fx_graph_cache.value
    if record.aot_autograd_cache is not CacheOutcome.NONE:
        attrs["compiletrace.cache.aot_autograd"] = record.aot_autograd_cache.value
    if record.is_recompile:
        attrs["compiletrace.is_recompile"] = True
    if record.recompile_reason is not None:
        attrs["compiletrace.recompile_reason"] = record.recompile_reason
    if record.status is not CompileStatus.OK:
        attrs["compiletrace.status"] = record.status.value
        attrs["error.type"] = record.error_type or "unknown"
    if record.after_warmup:
        attrs["compiletrace.after_warmup"] = True
    return attrs


class CompileSpanObserver:
    """Implements the tracker's ``FrameObserver``: spans and metrics for every compile.

    ``tracer_provider``/``meter_provider`` default to those :func:`set_providers` chose,
    else the global ones, read at each compile. With no SDK provider set it returns at
    once (the OpenTelemetry no-op path).
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider

    def frame_started(self) -> Any:
        # The current context, or a launcher's passed through TRACEPARENT when no span is
        # active (a rank's first compile, a compile on a fresh thread).
        return parent_context()

    def record_finished(self, record: GraphRecord, token: Any) -> None:
        if not _providers.recording_possible(self._tracer_provider, self._meter_provider):
            return
        ins = _providers.instruments(self._tracer_provider, self._meter_provider)
        parent_ctx = token if isinstance(token, otel_context.Context) else None
        span = ins.tracer.start_span(
            COMPILE_GRAPH,
            context=parent_ctx,
            start_time=record.start_unix_ns,
            attributes=record_attributes(record),
        )
        if record.status is not CompileStatus.OK:
            span.set_status(Status(StatusCode.ERROR, f"compile failed: {record.error_type}"))
        if record.after_warmup:
            # A serving latency spike: an event a trace viewer marks on the span.
            span.add_event(COMPILE_AFTER_WARMUP, timestamp=record.start_unix_ns)
        child_ctx = trace.set_span_in_context(span, parent_ctx)
        backend_start = record.backend_start_unix_ns
        if record.dynamo_ns is not None:
            # Tracing runs from the frame start to the first backend call (guards follow it).
            dynamo_end = record.end_unix_ns if backend_start is None else backend_start
            ins.tracer.start_span(DYNAMO_TRACING, context=child_ctx, start_time=record.start_unix_ns).end(
                end_time=dynamo_end
            )
        if backend_start is not None:
            backend_end = min(backend_start + record.backend_ns, record.end_unix_ns)
            backend_span = ins.tracer.start_span(BACKEND_COMPILE, context=child_ctx, start_time=backend_start)
            if record.phases:
                # One child span per backend phase: its total, laid end to end (see lay_out).
                phase_ctx = trace.set_span_in_context(backend_span, child_ctx)
                for phase, ph_start, ph_end in lay_out(backend_start, record.phase_ns):
                    ins.tracer.start_span(
                        f"Backend phase: {phase}",
                        context=phase_ctx,
                        start_time=ph_start,
                        attributes={"compiletrace.phase": phase},
                    ).end(end_time=min(ph_end, backend_end))
            backend_span.end(end_time=backend_end)
        span.end(end_time=record.end_unix_ns)

        metric_attrs: dict[str, Any] = {"compiletrace.component": record.component}
        if record.dynamo_ns is not None:
            ins.duration.record(record.dynamo_ns / NS_PER_S, {**metric_attrs, "compiletrace.phase": "dynamo"})
        ins.duration.record(record.backend_ns / NS_PER_S, {**metric_attrs, "compiletrace.phase": "backend"})
        # Compiles after warm-up count under their own attribute: alert on it, no new instrument.
        graph_attrs = (
            {**metric_attrs, "compiletrace.after_warmup": True} if record.after_warmup else metric_attrs
        )
        ins.graphs.add(1, graph_attrs)
        if record.is_recompile:
            ins.recompiles.add(1, metric_attrs)

    def backward_finished(
        self, record: GraphRecord, start_unix_ns: int, end_unix_ns: int, token: Any
    ) -> None:
        if not _providers.recording_possible(self._tracer_provider, self._meter_provider):
            return
        ins = _providers.instruments(self._tracer_provider, self._meter_provider)
        parent_ctx = token if isinstance(token, otel_context.Context) else None
        ins.tracer.start_span(
            COMPILE_BACKWARD,
            context=parent_ctx,
            start_time=start_unix_ns,
            attributes={
                "compiletrace.component": record.component,
                "compiletrace.compile_id": record.compile_id,
                "compiletrace.backend": record.backend,
                "compiletrace.rank": record.rank,
                "compiletrace.world_size": record.world_size,
            },
        ).end(end_time=end_unix_ns)
        ins.duration.record(
            (end_unix_ns - start_unix_ns) / NS_PER_S,
            {"compiletrace.component": record.component, "compiletrace.phase": "backward"},
        )
