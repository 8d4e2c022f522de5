"""Distributed jobs: every rank's compile figures, gathered over torch.distributed.

Each rank of a job compiles its own graphs at the same time as the others, so the job's
compile time is the slowest rank's, per component. :func:`gather` moves every rank's
figures to every rank with torch.distributed's own collectives and returns a
:class:`GatherResult`: the per-rank figures in rank order, the per-component maximum and
the slowest rank. :func:`launch` starts a job on this machine with ``torch.distributed.run``
and :func:`main` is each rank's entry (``python -m compiletrace.distributed``).

The parts: ``results`` (the data), ``transport`` (:func:`gather`), ``rank`` (one rank's
work and command line), ``launch`` (starting a job).

>>> import compiletrace
>>> from compiletrace import distributed
>>> result = distributed.gather(compiletrace.Registry())  # no process group: one rank
>>> result.world_size, result.slowest_rank
(1, 0)
"""

from compiletrace._io.errors import GatherError, LaunchError
from compiletrace.distributed.launch import LaunchResult, launch
from compiletrace.distributed.rank import main, model_work, run_rank
from compiletrace.distributed.results import GatherResult, RankTimes
from compiletrace.distributed.transport import gather
from compiletrace.telemetry._propagation import context_from_environ, inject_into_environ

__all__ = [
    "GatherError",
    "GatherResult",
    "LaunchError",
    "LaunchResult",
    "RankTimes",
    "context_from_environ",
    "gather",
    "inject_into_environ",
    "launch",
    "main",
    "model_work",
    "run_rank",
]
