"""compiletrace's own entries in torch's structured trace (``TORCH_TRACE``), so that a trace
read elsewhere (``compiletrace report DIR`` on another machine) knows what only the live
recording knew: the process's ready mark.

Internals used: ``torch._logging.trace_structured`` and the trace's logger
(``torch._logging._internal.trace_log``, which has a handler only while a trace is being
written). An entry is torch's ``artifact`` kind, written with no compile id
(``expect_trace_id=False``): one line, then its JSON payload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["trace_artifacts_available", "write_trace_artifact"]


def write_trace_artifact(name: str, payload: Mapping[str, Any]) -> bool:
    """Write ``payload`` into the trace torch is writing, as the artifact ``name``; False
    when no trace is being written (or this torch writes none the same way)."""
    try:
        from torch._logging._internal import trace_log, trace_structured

        if not trace_log.handlers:
            return False
        trace_structured(
            "artifact",
            metadata_fn=lambda: {"name": name, "encoding": "json"},
            payload_fn=lambda: json.dumps(dict(payload)),
            expect_trace_id=False,
        )
    except Exception:
        return False
    return True


def trace_artifacts_available() -> bool:
    """Whether this torch has the structured trace's writer and logger where they were."""
    try:
        from torch._logging._internal import trace_log, trace_structured

        return callable(trace_structured) and hasattr(trace_log, "handlers")
    except Exception:
        return False
