"""Span exporters that ``configure`` builds on the SDK: a guard around any exporter (a
collector that fails costs one warning, not a stall per batch) and the OTLP/JSON file
exporter. The only module besides ``_configure`` that imports the SDK.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from compiletrace._io.state import warn_once

__all__ = ["GuardedSpanExporter", "OtlpJsonFileExporter", "otlp_json_request"]

QUIET_AFTER_FAILURE_S = 30.0  # after a failed export, drop batches this long instead of retrying

# OTLP/JSON differs from protobuf's JSON mapping in one way: trace and span ids are hex,
# not base64. These are the id fields of a trace export request.
_ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})


class GuardedSpanExporter(SpanExporter):
    """Wraps a span exporter: a failed export warns once, then batches are dropped for
    :data:`QUIET_AFTER_FAILURE_S` instead of waiting on an unreachable collector again.
    The model never waits on telemetry."""

    def __init__(self, inner: SpanExporter, where: str) -> None:
        self._inner = inner
        self._where = where
        self._quiet_until = 0.0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if time.monotonic() < self._quiet_until:
            return SpanExportResult.FAILURE
        try:
            result = self._inner.export(spans)
        except Exception:
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self._quiet_until = time.monotonic() + QUIET_AFTER_FAILURE_S
            warn_once(
                f"could not export spans to {self._where}; spans are dropped while it fails "
                f"(retried every {QUIET_AFTER_FAILURE_S:.0f} s). The model is unaffected."
            )
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


def otlp_json_request(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """An OTLP/JSON ``ExportTraceServiceRequest`` for ``spans``, encoded by the OTLP
    exporter package (links, flags and all), with ids in hex as OTLP/JSON requires."""
    # Present: configure(exporter="file") checked for the package before building this.
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    request = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    return _hex_ids(request)  # type: ignore[no-any-return]


def _hex_ids(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: base64.b64decode(v).hex() if k in _ID_FIELDS and isinstance(v, str) else _hex_ids(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


class OtlpJsonFileExporter(SpanExporter):
    """Appends one OTLP/JSON export request per batch to a file, one per line (the OTLP
    file exporter format, which collectors' file receivers read)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        line = json.dumps(otlp_json_request(spans), separators=(",", ":"))
        try:
            with self._lock, self._path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None
