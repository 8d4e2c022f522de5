"""Torch's own metrics: the metrics context of the frame compile in progress on this
thread, and the per-compile rows of those finished.

What is used, and why:

- ``torch._dynamo.utils.get_metrics_context()``: holds the recompile reason that Dynamo
  computed just before the start callback fires, the reasons it restarted its analysis,
  and, for the doctor, the ``fail_*`` entries (why Dynamo gave up on a whole frame).
- ``torch._dynamo.utils.get_compilation_metrics()``: torch's own per-frame figures, used
  by tests and benchmarks as an independent oracle.
"""

from __future__ import annotations

from typing import Any

from compiletrace._core.torch_compat.frames import MAX_REASON_CHARS


def restart_reasons() -> list[str] | None:
    """Why Dynamo restarted its analysis of the frame compile ending on this thread (a
    graph break, a float turned into a tensor ...): torch's own set, filled in by the time
    its frame region ends. None when torch does not say."""
    try:
        from torch._dynamo.utils import get_metrics_context

        reasons = getattr(get_metrics_context(), "_metrics", {}).get("restart_reasons")
    except Exception:
        return None
    return None if reasons is None else sorted(str(r) for r in reasons)


def recompile_reason() -> str | None:
    """Dynamo's recompile reason for the frame compile in progress on this thread."""
    try:
        from torch._dynamo.utils import get_metrics_context

        metrics = getattr(get_metrics_context(), "_metrics", {})
        reason = metrics.get("recompile_reason")
    except Exception:
        return None
    return None if reason is None else str(reason)


def frame_failure() -> tuple[str, str, int] | None:
    """Why Dynamo gave up on the whole frame compile ending now (torch's ``Unsupported``:
    a graph break inside a loop, say), as (reason, user file, line); None when it did not.
    Read at the end of torch's frame region, once torch has filled in its metrics."""
    try:
        from torch._dynamo import exc as dynamo_exc
        from torch._dynamo.utils import get_metrics_context

        metrics = getattr(get_metrics_context(), "_metrics", {})
        fail_type = getattr(dynamo_exc, str(metrics.get("fail_type")), None)
        if not (isinstance(fail_type, type) and issubclass(fail_type, dynamo_exc.Unsupported)):
            return None
        return (
            str(metrics.get("fail_reason") or "")[:MAX_REASON_CHARS],
            str(metrics.get("fail_user_frame_filename") or ""),
            int(metrics.get("fail_user_frame_lineno") or 0),
        )
    except Exception:
        return None


def frame_failure_type() -> str | None:
    """The qualified name of the exception that ended the frame compile ending now
    (``torch._dynamo.exc.Unsupported``), from torch's metrics; None when it succeeded."""
    try:
        from torch._dynamo.utils import get_metrics_context

        fail_type = getattr(get_metrics_context(), "_metrics", {}).get("fail_type")
    except Exception:
        return None
    if not fail_type:
        return None
    name = str(fail_type)
    return name if "." in name else f"torch._dynamo.exc.{name}"


def compilation_metrics() -> list[Any]:
    """Torch's own per-compile metrics (``CompilationMetrics``), oldest first."""
    try:
        from torch._dynamo.utils import get_compilation_metrics

        return list(get_compilation_metrics())
    except Exception:
        return []
