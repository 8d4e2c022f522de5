"""The one reader of every file compiletrace writes: :func:`read` parses the JSON once, tells
its kind from the envelope, checks every field with the reader of that kind, and returns
the typed data. A command names the kinds it can use (``accept``), and a file of another
kind is one line that says what the file is and what the command reads.

>>> import json, os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "findings.json")
>>> with open(path, "w") as out:
...     json.dump({"kind": "compiletrace.doctor", "schema_version": 1, "findings": []}, out)
>>> read(path)
[]
>>> read(path, accept={FileKind.RUN}, command="report")
Traceback (most recent call last):
  ...
compiletrace._io.errors.RunFileError: ... is the doctor's findings (...); report reads a profile run (...)
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from compiletrace._data.bench import BenchResult
from compiletrace._data.cache_keys import KeyPart
from compiletrace._data.findings import Finding, findings_from_dict
from compiletrace._data.gather import GatherResult
from compiletrace._data.job import Job, JobProcess
from compiletrace._data.kinds import FileKind
from compiletrace._data.nodes import merge_jobs
from compiletrace._data.run import Run
from compiletrace._data.run_meta import ProcessInfo
from compiletrace._io.envelope import read_json
from compiletrace._io.errors import CompiletraceError, RunFileError, UsageError
from compiletrace._io.inputs import InputFile, open_input
from compiletrace._io.text import first_line, shorten

if TYPE_CHECKING:
    from compiletrace._data.torch_trace import ComponentNamer

__all__ = ["MAX_JOB_FILES", "FileData", "expand_inputs", "job_files", "read", "read_data", "read_jobs"]

FileData = Run | BenchResult | GatherResult | Job | list[Finding]


def read(
    path: str | os.PathLike[str],
    *,
    accept: Collection[FileKind] | None = None,
    command: str = "this command",
    components: ComponentNamer | None = None,
    links: bool = True,
) -> FileData:
    """The typed contents of the compiletrace file at ``path``: a :class:`Run`, a
    :class:`BenchResult`, a :class:`GatherResult`, a :class:`Job` or the doctor's findings;
    or torch's own trace (a ``TORCH_TRACE`` directory, one of its logs, a ``.gz`` or ``.zip``
    of them), read by :mod:`compiletrace._data.torch_trace` into a :class:`Run` (one log) or
    a :class:`Job` (a process per log: the ranks of a distributed job). ``components``
    names a traced compile's component from its code file and name, where a rule matches
    (given for a file compiletrace wrote, it is a :class:`~compiletrace.UsageError`).

    ``path`` may be a pipe (``report <(zcat trace.log.gz)``): it is read once, through the
    buffer its format was told from. Anything else that is not a file (``/dev/zero``, a
    terminal) is refused before a byte is read.

    Raises :class:`~compiletrace.RunFileError` (exit 2 on the command line) naming the file
    for anything that is not such a file, a field that is wrong, a kind not in ``accept``,
    or an input past the readers' limits; never a bare ``ValueError``.
    """
    name = os.fspath(path)
    if links and os.path.isdir(name):
        return _accepted(_trace_data(name, name, components), name, accept, command)
    # Opened once and read once: a pipe's first bytes tell its format and stay in its buffer.
    # links=False: a file found in a directory is read only if it is one, never a link's target.
    with open_input(name, pipes=links, links=links) as source:
        if _maybe_trace(source.head):
            return _accepted(_trace_data(source, name, components), name, accept, command)
        if components is not None:
            raise UsageError(
                f"--component names the compiles of torch's trace (TORCH_TRACE); {name} is a file "
                "compiletrace wrote, whose components were named when it was recorded"
            )
        document = read_json(source)
    return read_data(document, name, accept=accept, command=command)


MAX_JOB_FILES = 1 << 14  # a directory of a job's files: 2,048 nodes of 8 ranks


def job_files(path: str | os.PathLike[str]) -> list[str] | None:
    """The compiletrace files in a directory gathered from the nodes of one job: its ``.json``
    files (job files, or a ``--job-dir``'s run files; start markers left out), by name. None
    where ``path`` is no directory, or one of torch's trace (its ``.log`` files, ``.gz``
    or ``.zip``, and no ``.json``): that is read as torch's trace. Logs beside the ``.json``
    files that are not torch's trace (each node's console, what its ranks printed) are passed
    over; a directory that holds both torch's trace and compiletrace's files is refused
    (:class:`~compiletrace.UsageError`), saying what it holds and what to give. Links are
    not followed: a ``.json`` one is refused (:class:`~compiletrace.RunFileError`), as is a
    directory of more than :data:`MAX_JOB_FILES`.

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> for name in ("node1.json", "node0.json", "1.started.json", "node0.log"):
    ...     open(os.path.join(folder, name), "w").close()
    >>> [os.path.basename(p) for p in job_files(folder)]
    ['node0.json', 'node1.json']
    """
    name = os.fspath(path)
    if not os.path.isdir(name):
        return None
    found: list[str] = []
    logs: list[str] = []
    with os.scandir(name) as entries:
        for entry in entries:
            if entry.is_symlink() and entry.name.endswith(".json"):
                raise RunFileError(
                    f"{os.path.join(name, entry.name)} is a symbolic link; a directory of a job's files is "
                    "read without following links: copy the file there"
                )
            if not entry.is_file(follow_symlinks=False):
                continue
            # torch's trace: its logs, compressed or not, or an archive of them (or a console's log).
            if ".log" in entry.name or entry.name.endswith((".gz", ".zip")):
                logs.append(os.path.join(name, entry.name))
            if entry.name.endswith(".json") and not entry.name.endswith(".started.json"):
                found.append(os.path.join(name, entry.name))
            if len(found) + len(logs) > MAX_JOB_FILES:
                raise UsageError(f"{name} holds more than {MAX_JOB_FILES:,} files; give a job's files alone")
    if not found:
        return None
    if logs:
        from compiletrace._data.torch_trace import holds_trace

        trace = next((log for log in sorted(logs) if holds_trace(log)), None)
        if trace is not None:
            raise UsageError(
                f"{name} holds both torch's trace ({os.path.basename(trace)}, of {len(logs)} logs) and "
                f"{len(found)} .json file(s) ({os.path.basename(min(found))}, ...): give the job files "
                f"({os.path.join(name, '*.json')}) or the trace's logs alone (a directory of their own)"
            )
    return sorted(found)


def read_jobs(named: Sequence[tuple[str, bool]], command: str) -> Job:
    """Several nodes' jobs (or one job's processes' run files) read as one job (see
    :func:`compiletrace._data.nodes.merge_jobs`). ``named``: each file, and whether it was
    found in a directory (then read only if it is a regular file, never a link's target)."""
    jobs: list[tuple[str, Job]] = []
    shared: dict[str, Mapping[str, KeyPart]] = {}
    for name, found in named:
        data = read(name, accept={FileKind.JOB, FileKind.RUN}, command=command, links=not found)
        if isinstance(data, Run):
            info, trace = data.meta.process, data.meta.trace
            if info is None and trace is not None:  # torch's trace of one process: a node of one rank
                role = f"rank {trace.rank}" if trace.rank is not None else f"pid {trace.pid}"
                info = ProcessInfo(trace.pid, 0, role, ())
            if info is None:
                raise RunFileError(
                    f"{name} is one process's profile run, not a node's job; give the job files "
                    "'compiletrace run --json' wrote on each node"
                )
            data = Job(command=(), exit_status=0, processes=(JobProcess(info, data),))
        assert isinstance(data, Job)
        jobs.append((name, _sharing_key_sets(data, shared)))
    return merge_jobs(jobs)


def _sharing_key_sets(job: Job, shared: dict[str, Mapping[str, KeyPart]]) -> Job:
    """``job`` with each process's cache-key config sets that equal one already read (most of
    a process's run: every rank of a job has the same) replaced by that one, so that a job of
    hundreds of ranks holds each set once. Equal by content, not by name alone: a file names
    its sets itself."""
    processes = []
    for process in job.processes:
        run, keys = process.run, process.run.meta.cache_keys
        if keys is not None and keys.config_sets:
            sets = {}
            for sid, parts in keys.config_sets.items():
                seen = shared.setdefault(sid, parts)
                sets[sid] = seen if seen == parts else parts
            run = replace(run, meta=replace(run.meta, cache_keys=replace(keys, config_sets=sets)))
        processes.append(JobProcess(process.info, run))
    return replace(job, processes=tuple(processes))


def expand_inputs(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[str, bool]]:
    """Each input named, a directory of job files as its files (:func:`job_files`), each with
    whether it was found in a directory."""
    named: list[tuple[str, bool]] = []
    for given in paths:
        found = job_files(given)
        named += [(name, True) for name in found] if found is not None else [(os.fspath(given), False)]
    return named


# What the trace reader raises where its checks missed something a crafted log holds: still
# bad input (exit 2), never a crash.
_DAMAGE = (ValueError, TypeError, LookupError, AttributeError, ArithmeticError, RecursionError)


def _maybe_trace(head: bytes) -> bool:
    """Whether a file that starts with ``head`` is torch's trace. compiletrace's own files
    are JSON documents: those are told apart without loading the trace reader (what
    ``compiletrace run`` reads back is only ever its own)."""
    if head.lstrip()[:1] == b"{":
        return False
    from compiletrace._data.torch_trace import is_trace_head

    return is_trace_head(head)


def _trace_data(source: str | InputFile, name: str, components: ComponentNamer | None) -> Run | Job:
    from compiletrace._data.torch_trace import read_torch_trace

    try:
        found = read_torch_trace(source, components=components)
    except CompiletraceError:
        raise
    except _DAMAGE as exc:
        why = shorten(f"{type(exc).__name__}: {first_line(exc)}", 200)
        raise RunFileError(f"{name} is not a trace compiletrace can read ({why})") from None
    if isinstance(found, Run):
        return found
    processes = []
    for info, run in found:
        role = f"rank {info.rank}" if info.rank is not None else f"pid {info.pid}"
        processes.append(JobProcess(ProcessInfo(info.pid, 0, role, ()), run))
    return Job(command=(), exit_status=0, processes=tuple(processes), cwd="")


def _accepted(data: Run | Job, source: str, accept: Collection[FileKind] | None, command: str) -> Run | Job:
    kind = FileKind.RUN if isinstance(data, Run) else FileKind.JOB
    if accept is not None and kind not in accept:
        what = (
            "torch's trace of one process" if kind is FileKind.RUN else "torch's trace of several processes"
        )
        reads = " or ".join(k.description for k in FileKind if k in accept)
        raise RunFileError(f"{source} is {what}; {command} reads {reads}")
    return data


def read_data(
    data: Any,
    source: str,
    *,
    accept: Collection[FileKind] | None = None,
    command: str = "this command",
) -> FileData:
    """:func:`read` of a document already parsed from ``source``."""
    kind = FileKind.of(data)
    if kind is FileKind.WHY:  # a report for people and programs, not an input of compiletrace's
        raise RunFileError(f"{source} is {kind.description}; give the runs it compared instead")
    wanted = [k for k in FileKind if k.loadable and (accept is None or k in accept)]
    if kind is None or kind not in wanted:
        what = kind.description if kind is not None else "not a compiletrace run or any other file it writes"
        reads = " or ".join(k.description for k in wanted)
        raise RunFileError(f"{source} is {what}; {command} reads {reads}")
    try:
        if kind is FileKind.RUN:
            return Run.from_dict(data, source)
        if kind is FileKind.BENCH:
            return BenchResult.from_dict(data, source)
        if kind is FileKind.GATHER:
            return GatherResult.from_dict(data, source=source)
        if kind is FileKind.JOB:
            return Job.from_dict(data, source)
        return findings_from_dict(data, source)
    except CompiletraceError:
        raise
    except Exception as exc:
        # Whatever a field check missed is still a damaged file: bad input, never a crash.
        why = f"{type(exc).__name__}: {exc}"
        raise RunFileError(f"{source} is not a valid {kind.value} file ({why})") from None
