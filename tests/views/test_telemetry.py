"""Spans and metrics for every compile, and the SDK set-up helper."""

from __future__ import annotations

import json
import socket
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import StatusCode

import compiletrace
from compiletrace import telemetry
from compiletrace._core.tracker import get_tracker
from compiletrace.telemetry import _providers
from tests.tiny_models import Encoder, LanguageModel


def _children(spans: tuple[ReadableSpan, ...], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def _tree(spans: tuple[ReadableSpan, ...], span: ReadableSpan) -> Any:
    """(name, sorted children) down the tree; compile spans are labelled with their component."""
    label = span.name
    if span.name == "Compile graph":
        label += f" [{(span.attributes or {})['compiletrace.component']}]"
    kids = [c for c in _children(spans, span) if not c.name.startswith("Backend phase: ")]
    return (label, sorted(_tree(spans, c) for c in kids))


def _encoder_lm_warm_up(reg: compiletrace.Registry) -> compiletrace.WarmupResult:
    enc = compiletrace.compile(Encoder(), is_encoder=True, backend="eager", registry=reg)
    lm = compiletrace.compile(LanguageModel(), backend="aot_eager", registry=reg)
    return compiletrace.warm_up(lambda: lm(enc(torch.ones(2, 8))), compilation_mode="stock", registry=reg)


def test_process_tracker_has_the_span_observer() -> None:
    assert isinstance(get_tracker().observer, telemetry.CompileSpanObserver)


def test_encoder_lm_warm_up_span_tree_is_exact(tel: telemetry.Telemetry) -> None:
    _encoder_lm_warm_up(compiletrace.Registry())
    spans = tel.spans()
    roots = [s for s in spans if s.parent is None]
    assert [r.name for r in roots] == ["Warmup (CPU)"]
    assert _tree(spans, roots[0]) == (
        "Warmup (CPU)",
        [
            ("Compile graph [encoder]", [("Backend compile", []), ("Dynamo tracing", [])]),
            ("Compile graph [language_model]", [("Backend compile", []), ("Dynamo tracing", [])]),
        ],
    )
    phase_spans = [s for s in spans if s.name.startswith("Backend phase: ")]
    assert {s.name for s in phase_spans} >= {"Backend phase: aot_autograd"}  # the aot_eager language model
    assert len(spans) - len(phase_spans) == 7
    # Each backend span's phase children add up to it (their totals, laid end to end); the
    # "eager" encoder's backend has no phases torch times, so it has none.
    for backend in (s for s in spans if s.name == "Backend compile"):
        kids = _children(spans, backend)
        if not kids:
            continue
        assert all(k.name.startswith("Backend phase: ") for k in kids)
        assert sum(k.end_time - k.start_time for k in kids) == backend.end_time - backend.start_time  # type: ignore[operator]
    # Dynamo restores Python's random state after each compile: ids must still be unique.
    assert len({s.context.span_id for s in spans if s.context}) == len(spans)
    assert len({s.context.trace_id for s in spans if s.context}) == 1


def test_compile_span_carries_the_record(tel: telemetry.Telemetry) -> None:
    reg = compiletrace.Registry()
    _encoder_lm_warm_up(reg)
    graphs = {
        (s.attributes or {})["compiletrace.component"]: s for s in tel.spans() if s.name == "Compile graph"
    }
    for rec in reg.records():
        span = graphs[rec.component]
        assert span.start_time == rec.start_unix_ns
        assert span.end_time == rec.end_unix_ns
        assert span.status.status_code is StatusCode.UNSET
        assert dict(span.attributes or {}) == {
            "compiletrace.component": rec.component,
            "compiletrace.compile_id": rec.compile_id,
            "compiletrace.backend": rec.backend,
            "compiletrace.code_name": "forward",
            "compiletrace.graph.node_count": rec.graph_node_count,
            "compiletrace.cache.outcome": "none",
            "compiletrace.rank": 0,
            "compiletrace.world_size": 1,
        }
        assert rec.graph_node_count > 0
        (backend,) = [c for c in _children(tel.spans(), span) if c.name == "Backend compile"]
        assert backend.start_time == rec.backend_start_unix_ns
        (dynamo,) = [c for c in _children(tel.spans(), span) if c.name == "Dynamo tracing"]
        assert (dynamo.start_time, dynamo.end_time) == (rec.start_unix_ns, rec.backend_start_unix_ns)


def test_recompile_span_and_metrics(tel: telemetry.Telemetry) -> None:
    reg = compiletrace.Registry()
    lm = compiletrace.compile(LanguageModel(), backend="eager", dynamic=False, registry=reg)
    lm(torch.ones(2, 8))
    lm(torch.ones(3, 8))  # a new static shape: a recompile
    (first, second) = [s for s in tel.spans() if s.name == "Compile graph"]
    assert second.attributes is not None and second.attributes["compiletrace.is_recompile"] is True
    assert "size mismatch" in str(second.attributes["compiletrace.recompile_reason"])
    assert first.attributes is not None and "compiletrace.recompile_reason" not in first.attributes
    assert "compiletrace.is_recompile" not in first.attributes

    data = tel.metrics()
    assert data is not None
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert set(metrics) == {
        "compiletrace.compile.duration",
        "compiletrace.compile.graphs",
        "compiletrace.compile.recompiles",
    }
    hist: Any = metrics["compiletrace.compile.duration"]
    assert hist.unit == "s"
    points = {p.attributes["compiletrace.phase"]: p for p in hist.data.data_points}
    assert set(points) == {"dynamo", "backend"}
    assert all(p.count == 2 for p in points.values())
    assert tuple(points["backend"].explicit_bounds) == telemetry.DURATION_BUCKETS_S
    assert telemetry.DURATION_BUCKETS_S[0] == 0.01 and telemetry.DURATION_BUCKETS_S[-1] == 600.0
    counters: dict[str, Any] = {k: m.data.data_points for k, m in metrics.items() if k != hist.name}
    (graphs,) = counters["compiletrace.compile.graphs"]
    assert (dict(graphs.attributes), graphs.value) == ({"compiletrace.component": "language_model"}, 2)
    (recompiles,) = counters["compiletrace.compile.recompiles"]
    assert recompiles.value == 1


def test_lazy_backward_span_nests_under_the_current_span(tel: telemetry.Telemetry) -> None:
    reg = compiletrace.Registry()
    lm = compiletrace.compile(LanguageModel(), backend="aot_eager", registry=reg)

    @compiletrace.instrument(span_name="Train step")
    def step() -> None:
        lm(torch.ones(2, 8, requires_grad=True)).sum().backward()

    step()
    spans = tel.spans()
    (train,) = [s for s in spans if s.name == "Train step"]
    (backward,) = [s for s in spans if s.name == "Compile backward"]
    (graph,) = [s for s in spans if s.name == "Compile graph"]
    assert {s.name for s in _children(spans, train)} == {"Compile graph", "Compile backward"}
    (rec,) = reg.records()
    assert backward.attributes is not None
    assert backward.attributes["compiletrace.compile_id"] == rec.compile_id
    assert backward.start_time == rec.backward_start_unix_ns
    assert graph.attributes is not None and graph.attributes["compiletrace.compile_id"] == rec.compile_id
    data = tel.metrics()
    assert data is not None
    phases = {
        (p.attributes or {})["compiletrace.phase"]
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "compiletrace.compile.duration"
        for p in m.data.data_points
    }
    assert phases == {"dynamo", "backend", "backward"}


def test_failed_compile_span_has_error_status(tel: telemetry.Telemetry) -> None:
    def broken(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> None:
        raise RuntimeError("backend exploded")

    f = compiletrace.compile(lambda x: x + 1, backend=broken, registry=compiletrace.Registry())
    with pytest.raises(Exception, match="backend exploded"):
        f(torch.ones(2))
    (graph,) = [s for s in tel.spans() if s.name == "Compile graph"]
    assert graph.status.status_code is StatusCode.ERROR
    assert graph.attributes is not None
    assert graph.attributes["error.type"] == "RuntimeError"
    assert graph.attributes["compiletrace.status"] == "error"


@pytest.fixture
def no_global_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if no SDK were ever set globally (OpenTelemetry lets a process set it only once,
    so this hides whatever an earlier test in the session set)."""
    import opentelemetry.metrics._internal as metrics_internal

    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(metrics_internal, "_METER_PROVIDER", None)
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)
    monkeypatch.delenv("OTEL_PYTHON_METER_PROVIDER", raising=False)


@pytest.mark.usefixtures("no_global_sdk")
def test_no_sdk_records_nothing_and_fails_nothing() -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    telemetry.set_providers()
    assert not _providers.recording_possible()
    old = telemetry.configure(exporter="memory", set_global=False)
    assert old.shutdown()  # compiletrace is back on the (unset) global providers
    reg = compiletrace.Registry()
    result = _encoder_lm_warm_up(reg)

    @compiletrace.instrument
    def user_code() -> int:
        return 3

    assert user_code() == 3
    assert not result.skipped and len(reg) == 2
    assert old.spans() == ()


class _ExplodingProcessor(SpanProcessor):
    def on_start(self, span: object, parent_context: object = None) -> None:
        raise RuntimeError("telemetry bug")


def test_exception_inside_telemetry_never_reaches_the_user(tel: telemetry.Telemetry) -> None:
    tel.tracer_provider.add_span_processor(_ExplodingProcessor())
    reg = compiletrace.Registry()

    @compiletrace.instrument(span_name="Load model")
    def load() -> str:
        return "loaded"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = _encoder_lm_warm_up(reg)
        assert load() == "loaded"
        with pytest.raises(KeyError, match="mine"):
            compiletrace.warm_up(lambda: {"other": 1}["mine"], compilation_mode="stock", registry=reg)
    assert not result.skipped
    assert {r.component for r in reg.records()} == {"encoder", "language_model"}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


SHUTDOWN_TIMEOUT_S = 3.0


def test_unreachable_collector_never_stalls_the_model() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1/traces"
    handle = telemetry.configure(exporter="otlp", endpoint=url, export_timeout_s=0.5, set_global=False)
    reg = compiletrace.Registry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _encoder_lm_warm_up(reg)
        assert handle.force_flush(timeout_s=SHUTDOWN_TIMEOUT_S)
        start = time.monotonic()
        finished = handle.shutdown(timeout_s=SHUTDOWN_TIMEOUT_S)
        elapsed = time.monotonic() - start
    assert not result.skipped and len(reg) == 2
    # finished: the exporters closed within the timeout. The wall-clock bound only catches a
    # shutdown that ignores its timeout (an exporter retrying an unreachable collector), so
    # it is generous: a busy machine never fails it.
    assert finished and elapsed < 3 * SHUTDOWN_TIMEOUT_S
    ours = [w for w in caught if "compiletrace" in str(w.message)]
    assert len(ours) == 1
    assert url in str(ours[0].message)


def test_file_exporter_writes_otlp_json_lines(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    handle = telemetry.configure(exporter="file", path=out, service_name="svc", set_global=False)
    _encoder_lm_warm_up(compiletrace.Registry())
    assert handle.shutdown()
    requests = [json.loads(line) for line in out.read_text().splitlines()]
    spans = [
        s for req in requests for rs in req["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
    ]
    resource = requests[0]["resourceSpans"][0]["resource"]["attributes"]
    assert {"key": "service.name", "value": {"stringValue": "svc"}} in resource
    by_id = {s["spanId"]: s for s in spans}
    assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)
    (warm,) = [s for s in spans if s["name"] == "Warmup (CPU)"]
    graphs = [s for s in spans if s["name"] == "Compile graph"]
    assert len(graphs) == 2 and {g["parentSpanId"] for g in graphs} == {warm["spanId"]}
    assert {by_id[s["parentSpanId"]]["name"] for s in spans if s["name"] == "Backend compile"} == {
        "Compile graph"
    }
    attrs = {a["key"]: a["value"] for a in graphs[0]["attributes"]}
    assert attrs["compiletrace.rank"] == {"intValue": "0"}


@pytest.mark.usefixtures("no_global_sdk")
def test_a_later_configure_takes_over_and_shutdown_hands_back() -> None:
    first = telemetry.configure(exporter="memory", set_global=False)
    second = telemetry.configure(exporter="memory", set_global=False)
    compiletrace.compile(lambda x: x * 2, backend="eager", registry=compiletrace.Registry())(torch.ones(1))
    assert first.spans() == ()
    assert [s.name for s in second.spans()].count("Compile graph") == 1
    assert second.shutdown()
    assert not _providers.recording_possible()
    assert first.shutdown()


def test_service_name_defaults_to_compiletrace_and_honours_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    with telemetry.configure(exporter="memory", set_global=False) as handle:
        assert handle.tracer_provider.resource.attributes["service.name"] == "compiletrace"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    with telemetry.configure(exporter="memory", set_global=False) as handle:
        assert handle.tracer_provider.resource.attributes["service.name"] == "from-env"
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "memory")
    with telemetry.configure(service_name="explicit", set_global=False) as handle:
        assert handle.exporter == "memory"
        assert handle.tracer_provider.resource.attributes["service.name"] == "explicit"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"exporter": "jaeger"}, ValueError, "valid exporters: console, file, memory, otlp"),
        ({"exporter": "otlp", "endpoint": "localhost:4318"}, ValueError, "http\\(s\\) URL"),
        ({"exporter": "otlp", "endpoint": "ftp://host/v1/traces"}, ValueError, "http\\(s\\) URL"),
        ({"exporter": "otlp", "endpoint": 4318}, TypeError, "endpoint must be a URL string"),
        ({"exporter": "memory", "endpoint": "http://h:1"}, ValueError, "exporter='otlp' only"),
        ({"exporter": "file"}, ValueError, "needs path="),
        ({"exporter": "memory", "path": "x.jsonl"}, ValueError, "exporter='file' only"),
        ({"exporter": "memory", "export_timeout_s": 0}, ValueError, "positive number"),
        ({"exporter": 3}, TypeError, "exporter must be a str"),
    ],
)
def test_configure_rejects_bad_input(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        telemetry.configure(**kwargs)  # type: ignore[arg-type]


def test_missing_otlp_extra_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(ImportError, match=r"pip install 'compiletrace\[otlp\]'"):
        telemetry.configure(exporter="otlp", endpoint="http://127.0.0.1:1/v1/traces")


def test_memory_only_accessors_refuse_other_exporters(tmp_path: Path) -> None:
    handle = telemetry.configure(exporter="file", path=tmp_path / "t.jsonl", set_global=False)
    with handle, pytest.raises(compiletrace.UsageError, match="exporter='memory'"):
        handle.spans()
