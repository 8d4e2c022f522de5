"""What a ``compiletrace run`` job directory holds, and how the launcher tells its processes
where it is: shared by the launcher (``compiletrace._app.job``), which must not import
torch, and each recording process (``compiletrace._app.job_process``).

Each process that records writes two files, named by its :func:`process_key` (its pid, when
it started, and a random part, so two processes that share a pid never share a name):

- ``KEY.started.json``, a start marker (the process, as :class:`ProcessInfo`), so that a
  process killed before it could write its run is still known to the job;
- ``KEY.run.json``, the process's run, written at its end;
- ``KEY.ready.json``, its ready mark, written the moment it becomes ready, so a launcher
  that runs the command only until it is ready (``doctor --verify``, ``bench startup --
  COMMAND``) sees it while the process runs.

>>> key = process_key()
>>> parse_key(key)[0] == os.getpid()
True
>>> parse_key("../x.run") is None
True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from compiletrace._data.kinds import FileKind
from compiletrace._data.ready import ReadyMark
from compiletrace._data.run_meta import ProcessInfo, node_of
from compiletrace._io.envelope import Fields, parse_json
from compiletrace._io.errors import UsageError
from compiletrace._io.files import json_bytes
from compiletrace._io.signals import process_start_ticks

__all__ = [
    "JOB_DIR_ENV",
    "JOB_DIR_ID_ENV",
    "JOB_ID_ATTRIBUTE",
    "JOB_ID_ENV",
    "LAUNCHER_PID_ENV",
    "MAX_JOB_ID_CHARS",
    "MAX_MARKER_BYTES",
    "OPTIONS_ENV",
    "PROGRAM_FIXES_ENV",
    "RANK_PID_ENV",
    "READY_ENV",
    "READY_SUFFIX",
    "RUN_SUFFIX",
    "STARTED_KIND",
    "STARTED_SUFFIX",
    "check_job_id",
    "job_resource_attributes",
    "parse_key",
    "process_key",
    "read_ready",
    "read_started",
    "ready_marker",
    "started_marker",
]

JOB_DIR_ENV = "COMPILETRACE_JOB_DIR"  # where each process writes its files
# The job's id for its spans (compiletrace run --job-id, else one per run), where the
# launcher names none (torchrun's TORCHELASTIC_RUN_ID, Slurm's SLURM_JOB_ID)
JOB_ID_ENV = "COMPILETRACE_JOB_ID"
MAX_JOB_ID_CHARS = 255
JOB_DIR_ID_ENV = "COMPILETRACE_JOB_DIR_ID"  # "device:inode" of that directory, as the launcher made it
OPTIONS_ENV = "COMPILETRACE_RUN_OPTIONS"  # JSON: {"components": [...], "trace_cost": bool, "fixes": [...]}
LAUNCHER_PID_ENV = "COMPILETRACE_LAUNCHER_PID"  # the compiletrace run process
PROGRAM_FIXES_ENV = "COMPILETRACE_PROGRAM_FIXES"  # "1": the bootstrap calls install_program_fixes
# compiletrace run --ready WHEN, as given (checked by the launcher): MODULE:FUNCTION is wrapped
# by the bootstrap as its module is imported, phase:NAME is watched by the recording.
READY_ENV = "COMPILETRACE_READY"
# Set by the bootstrap in a process started as a torchrun rank (RANK set, this variable not):
# that process's pid. Its children inherit both, so they are not taken for the rank.
RANK_PID_ENV = "COMPILETRACE_RANK_PID"
STARTED_SUFFIX = ".started.json"
RUN_SUFFIX = ".run.json"
READY_SUFFIX = ".ready.json"
STARTED_KIND = FileKind.JOB_STARTED.value  # the marker's envelope (read by the launcher only)
MAX_MARKER_BYTES = 1 << 20  # a start marker is a few hundred bytes: argv, role, pids


def process_key() -> str:
    """This process's name in the job directory: ``PID-START-RANDOM``, where START is when
    it started (clock ticks since boot; 0 where unknown). Unique per process start."""
    pid = os.getpid()
    return f"{pid}-{process_start_ticks(pid) or 0}-{os.urandom(4).hex()}"


def parse_key(key: str) -> tuple[int, int | None] | None:
    """The pid and start ticks (None: unknown) a :func:`process_key` names, or None when
    ``key`` is not one."""
    parts = key.split("-")
    if len(parts) != 3 or not all(p.isascii() and p.isdecimal() and len(p) <= 20 for p in parts[:2]):
        return None
    if len(parts[2]) != 8 or any(c not in "0123456789abcdef" for c in parts[2]):
        return None
    pid, ticks = int(parts[0]), int(parts[1])
    return pid, ticks or None


def started_marker(info: ProcessInfo) -> bytes:
    """The start marker's bytes."""
    return json_bytes(FileKind.JOB_STARTED.envelope({"process": info.to_dict()}), STARTED_SUFFIX)


def read_started(data: bytes, source: str) -> ProcessInfo:
    """The process a start marker names; :class:`~compiletrace.RunFileError` when damaged."""
    f = Fields(parse_json(data, source), source)
    FileKind.JOB_STARTED.check(f)
    process: Any = f.obj("process").data
    return ProcessInfo.from_dict(process, source, "process")


def ready_marker(mark: ReadyMark) -> bytes:
    """The ready marker's bytes: the mark, as the run keeps it."""
    return json_bytes({"ready": mark.to_dict()}, READY_SUFFIX)


def read_ready(data: bytes, source: str) -> ReadyMark:
    """The mark a ready marker holds, every field checked; :class:`~compiletrace.RunFileError`
    when damaged."""
    f = Fields(parse_json(data, source), source)
    return ReadyMark.from_dict(f.obj("ready").data, source, "ready")


# The resource attribute naming a job, as the docs' table does. Spelled in parts: a literal
# that starts with a file kind and a dot ("compiletrace.job.") is taken for a kind's
# declaration by the layout test, and this is an attribute, not a kind.
JOB_ID_ATTRIBUTE = ".".join(("compiletrace", "job", "id"))


def check_job_id(job_id: str) -> str:
    """``compiletrace run --job-id``: printable ASCII without spaces, at most
    :data:`MAX_JOB_ID_CHARS`; else :class:`~compiletrace.UsageError`.

    >>> check_job_id("train-42")
    'train-42'
    """
    if not job_id or len(job_id) > MAX_JOB_ID_CHARS or not all("!" <= c <= "~" for c in job_id):
        raise UsageError(
            f"--job-id must be 1 to {MAX_JOB_ID_CHARS} printable ASCII characters without spaces, "
            f"got {job_id[:80]!r}; give the id the job's nodes share (a scheduler's job id)"
        )
    return job_id


def _number(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = env.get(name, "")
        if value.isascii() and value.isdecimal() and len(value) <= 10:
            return int(value)
    return None


def job_resource_attributes(env: Mapping[str, str]) -> dict[str, str | int]:
    """The resource attributes that put one job's processes together in a collector: the
    job's id (the launcher's run id: ``TORCHELASTIC_RUN_ID``, Slurm's ``SLURM_JOB_ID``,
    else ``compiletrace run``'s, :data:`JOB_ID_ENV`), the node's rank, the global rank and
    the host name, where known.

    >>> attrs = job_resource_attributes({"TORCHELASTIC_RUN_ID": "r1", "GROUP_RANK": "1", "RANK": "3"})
    >>> attrs["compiletrace.job.id"], attrs["compiletrace.node.rank"], attrs["compiletrace.rank"]
    ('r1', 1, 3)
    """
    attrs: dict[str, str | int] = {}
    for name in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", JOB_ID_ENV):
        value = env.get(name, "")
        # torchrun's default run id is "none": no id at all.
        if value and value != "none" and len(value) <= MAX_JOB_ID_CHARS and value.isprintable():
            attrs[JOB_ID_ATTRIBUTE] = value
            break
    node = _number(env, "GROUP_RANK", "SLURM_NODEID")
    if node is not None:
        attrs["compiletrace.node.rank"] = node
    rank = _number(env, "RANK", "SLURM_PROCID")
    if rank is not None:
        attrs["compiletrace.rank"] = rank
    host = node_of(env)[1]
    if host:
        attrs["host.name"] = host
    return attrs
