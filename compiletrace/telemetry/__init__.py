"""OpenTelemetry spans and metrics for every compile, and an opt-in SDK set-up.

compiletrace's core uses the OpenTelemetry API only: with no SDK provider set, every span
is a no-op and costs next to nothing. An application that already configures OpenTelemetry
gets compiletrace's spans in its traces with no further step; a CLI or a notebook can call
:func:`configure`. The phases of a start-up (``compiletrace.phase``) nest under one root
span per start-up, "Start-up", from the process's own start (see :func:`end_startup`):

>>> from compiletrace import telemetry
>>> tel = telemetry.configure(exporter="memory", set_global=False)
>>> import torch, compiletrace
>>> f = compiletrace.compile(lambda x: x + 1, backend="eager", registry=compiletrace.Registry())
>>> _ = f(torch.ones(2))
>>> [s.name for s in tel.spans()]
['Dynamo tracing', 'Backend compile', 'Compile graph']
>>> tel.shutdown()
True
"""

from __future__ import annotations

from compiletrace.telemetry._configure import EXPORTERS, Telemetry, configure
from compiletrace.telemetry._instrument import instrument
from compiletrace.telemetry._providers import DURATION_BUCKETS_S, set_providers
from compiletrace.telemetry._spans import CompileSpanObserver
from compiletrace.telemetry._startup import STARTUP_SPAN, end_startup

__all__ = [
    "DURATION_BUCKETS_S",
    "EXPORTERS",
    "STARTUP_SPAN",
    "CompileSpanObserver",
    "Telemetry",
    "configure",
    "end_startup",
    "instrument",
    "set_providers",
]
