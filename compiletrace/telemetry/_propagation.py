"""One trace across processes: the W3C trace context travels to child processes in their
environment (``TRACEPARENT``/``TRACESTATE``, the OpenTelemetry convention for environment
carriers), so a launcher's span parents every rank's warm-up and compile spans.

A launcher writes the variables into the environment it starts its children with; each
child reads them back when it starts its telemetry and uses the result as the parent of
spans that have no other parent.

>>> from opentelemetry.sdk.trace import TracerProvider
>>> tracer = TracerProvider().get_tracer("doc")
>>> with tracer.start_as_current_span("launch") as span:
...     env = inject_into_environ({})
>>> sorted(env)
['TRACEPARENT']
>>> parent = trace.get_current_span(context_from_environ(env)).get_span_context()
>>> parent.trace_id == span.get_span_context().trace_id
True
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["TRACEPARENT", "TRACESTATE", "context_from_environ", "inject_into_environ", "parent_context"]

TRACEPARENT = "TRACEPARENT"
TRACESTATE = "TRACESTATE"

# The propagator's carrier keys (lower case, as in HTTP headers) -> environment variables.
_ENV_NAMES = {"traceparent": TRACEPARENT, "tracestate": TRACESTATE}
_PROPAGATOR = TraceContextTextMapPropagator()


def inject_into_environ(
    env: MutableMapping[str, str], context: Context | None = None
) -> MutableMapping[str, str]:
    """Write the trace context of ``context`` (the current one by default) into ``env`` as
    ``TRACEPARENT``/``TRACESTATE``, and return ``env``.

    Without a recording span in the context nothing is written, so variables inherited from
    this process's own parent pass through unchanged and the trace still continues.

    >>> import os, subprocess
    >>> env = inject_into_environ(dict(os.environ))  # then subprocess.run(..., env=env)
    """
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=context)
    if "traceparent" not in carrier:
        return env
    env.pop(TRACESTATE, None)  # an inherited tracestate belongs to the inherited parent
    for key, value in carrier.items():
        name = _ENV_NAMES.get(key)
        if name is not None and value:
            env[name] = value
    return env


def context_from_environ(environ: Mapping[str, str] | None = None) -> Context:
    """The parent context a launcher passed to this process through ``environ``
    (``os.environ`` by default); an empty context (spans become roots) when none was passed
    or the value is malformed.

    >>> from opentelemetry import trace
    >>> env = {"TRACEPARENT": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    >>> ctx = context_from_environ(env)
    >>> format(trace.get_current_span(ctx).get_span_context().trace_id, "032x")
    '0af7651916cd43dd8448eb211c80319c'
    """
    environ = os.environ if environ is None else environ
    carrier = {key: environ[name] for key, name in _ENV_NAMES.items() if environ.get(name)}
    if not carrier:
        return Context()
    return _PROPAGATOR.extract(carrier, context=Context())


def parent_context(environ: Mapping[str, str] | None = None) -> Context:
    """The context new spans should start in: the current one when a span is active in it,
    otherwise the launcher's context from the environment. Telemetry calls this wherever it
    starts a span that may be a process's first (a warm-up, a compile on a fresh thread).

    >>> from opentelemetry import trace
    >>> env = {"TRACEPARENT": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    >>> trace.get_current_span(parent_context(env)).get_span_context().span_id == 0xB7AD6B7169203331
    True
    """
    current = otel_context.get_current()
    if trace.get_current_span(current).get_span_context().is_valid:
        return current
    return context_from_environ(environ)
