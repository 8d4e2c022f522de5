"""``compiletrace.load``: any file compiletrace writes, read back as the object that wrote it.

The reading itself is :func:`compiletrace._data.files.read` (the one reader, which checks
every field); this gives each kind its views: a run comes back as a
:class:`~compiletrace.ProfileRun` (summary, HTML, the doctor), a multi-rank job as a
:class:`compiletrace.distributed.GatherResult` (its table, the doctor), a bench file as
its averages, a doctor file as its findings, a command's job (``compiletrace run``) as a
:class:`~compiletrace._app.job.ProfileJob`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING

from compiletrace._app.profile_run import ProfileRun
from compiletrace._core.components import CompiledTarget, ComponentRule, parse_component_rules
from compiletrace._data import gather
from compiletrace._data.bench import BenchResult
from compiletrace._data.files import expand_inputs, read, read_jobs
from compiletrace._data.findings import Finding
from compiletrace._data.job import Job
from compiletrace._data.kinds import FileKind
from compiletrace._data.records import root_code_name
from compiletrace._data.run import Run
from compiletrace._io.errors import UsageError

if TYPE_CHECKING:
    from compiletrace._app.job import ProfileJob
    from compiletrace.distributed.results import GatherResult

__all__ = ["load"]


def load(
    path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    accept: Collection[FileKind] | None = None,
    command: str = "compiletrace.load",
    components: Iterable[str] = (),
) -> ProfileRun | ProfileJob | BenchResult | GatherResult | list[Finding]:
    """Read any file compiletrace writes: a run (``profile --json``) as a
    :class:`~compiletrace.ProfileRun`, a multi-rank job (``profile --nproc N --json``) as a
    :class:`~compiletrace.distributed.GatherResult`, a command's job (``run --json``) as a
    ``ProfileJob`` (every process's run, the doctor over them all), a start-up benchmark (``bench startup
    --output-json``) as its averages, the doctor's findings (``doctor --json``) as a list of
    :class:`~compiletrace.Finding`. Every field is checked; anything else raises
    :class:`~compiletrace.RunFileError` naming the file (and the field). ``accept`` limits
    the kinds taken (a command's), ``command`` names the reader in that message.

    torch's own trace reads too: a ``TORCH_TRACE`` directory, one of its logs, or a ``.gz``
    or ``.zip`` of them, as a ``ProfileRun`` (one process's log) or a ``ProfileJob`` (a
    process per log, a rank's role ``rank N``), its records those compiletrace records
    live, each compile named by ``components`` (``"PATTERN=NAME"`` rules matched against
    the compiled code's file and function, as ``compiletrace run --component`` matches),
    else by its function and file (``"forward (model.py)"``); see
    :mod:`compiletrace._data.torch_trace`.

    Several jobs read as one: ``path`` a list of the job files each node of a job of several
    machines wrote (``compiletrace run --json`` on each node), or a directory of them (a folder
    gathered, or a ``--job-dir``'s run files): one ``ProfileJob``, its processes named by node
    and rank (``node 1 rank 3``); see :mod:`compiletrace._data.nodes`. Two files that hold one
    global rank are refused (:class:`~compiletrace.UsageError`).

    ``path`` may be a pipe (``<(zcat trace.log.gz)``, ``/dev/stdin``): it is read once. A
    device or a socket is refused, and every input is read within the readers' limits
    (``docs/security.md``).

    >>> import os, tempfile, compiletrace
    >>> path = os.path.join(tempfile.mkdtemp(), "run.json")
    >>> compiletrace.profile(backend="eager").save(path)
    >>> run = compiletrace.load(path)
    >>> type(run).__name__, sorted(run.by_component())
    ('ProfileRun', ['encoder', 'language_model'])
    """
    rules = parse_component_rules(components)
    namer = _trace_namer(rules) if rules else None
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    if not paths:
        raise UsageError(f"{command}: give a file to read")
    named = expand_inputs(paths)
    if len(named) > 1:
        return _several(named, accept, command)
    path = named[0][0]
    # read() refuses rules for a file compiletrace wrote (its components were named when it
    # was recorded), telling the format from the one read of the file (a pipe reads once).
    data = read(path, accept=accept, command=command, components=namer)
    if isinstance(data, Run):
        return ProfileRun.of(data)
    if isinstance(data, Job):
        # Here, not at the top: a job's views sit beside the launcher, which a run's reader
        # (report RUN.json, doctor RUN.json) does not load.
        from compiletrace._app.job import ProfileJob

        return ProfileJob.of(data)
    if isinstance(data, gather.GatherResult):
        from compiletrace.distributed.results import GatherResult  # the ranks' package, for them alone

        return GatherResult.of(data.ranks, data.rank)
    return data


def _several(named: list[tuple[str, bool]], accept: Collection[FileKind] | None, command: str) -> ProfileJob:
    """Several nodes' jobs (or one job's processes' run files) as one job."""
    from compiletrace._app.job import ProfileJob

    if accept is not None and FileKind.JOB not in accept:
        raise UsageError(f"{command} reads one file; several are read as one job, which it does not take")
    return ProfileJob.of(read_jobs(named, command))


def _trace_namer(rules: tuple[ComponentRule, ...]) -> Callable[[str, str], str | None]:
    def name(code_filename: str, code_name: str) -> str | None:
        # A trace knows the compiled code, not the module: file and function are matched.
        target = CompiledTarget(filename=code_filename, qualname=root_code_name(code_name))
        return next((rule.name for rule in rules if rule.matches(target)), None)

    return name
