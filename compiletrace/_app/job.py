"""``compiletrace run -- COMMAND``: run any command with no edit to it, record every compile
of every Python process it starts, and merge them into one job.

The command runs as a child of this process with the bootstrap first on ``PYTHONPATH``
(:func:`bootstrap_directory`: a directory no other user can change, never a temporary
one), so every Python process it starts records its compiles
(``compiletrace._app.job_process``) into a job directory only this user can write
(``compiletrace._io.private_dir``); when the command ends, the processes' runs are merged
into a :class:`~compiletrace._data.job.Job`. The launcher imports no torch. The command's
stdin, stdout, stderr and exit status are its own: a program killed by a signal makes
this process die of the same signal, after the job is written.

>>> import sys
>>> outcome = run_command([sys.executable, "-c", "raise SystemExit(3)"])
>>> outcome.exit_status, len(outcome.job.processes)
(3, 0)
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import py_compile
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any

from compiletrace._app import program_fixes
from compiletrace._app.environment_fixes import environment_for
from compiletrace._core.components import parse_component_rules
from compiletrace._data.files import read_data
from compiletrace._data.findings import Finding
from compiletrace._data.job import Job, JobProcess, ProcessInfo
from compiletrace._data.job_dir import (
    JOB_DIR_ENV,
    JOB_DIR_ID_ENV,
    JOB_ID_ENV,
    LAUNCHER_PID_ENV,
    MAX_MARKER_BYTES,
    OPTIONS_ENV,
    PROGRAM_FIXES_ENV,
    READY_ENV,
    READY_SUFFIX,
    RUN_SUFFIX,
    STARTED_SUFFIX,
    check_job_id,
    parse_key,
    read_ready,
    read_started,
)
from compiletrace._data.kinds import FileKind
from compiletrace._data.nodes import critical_path, rank_figures
from compiletrace._data.ready import PORT, ReadyMark, parse_ready
from compiletrace._data.run import Run
from compiletrace._io.envelope import MAX_FILE_BYTES, parse_json
from compiletrace._io.errors import CommandNotFound, CompiletraceError, RunFileError, UsageError
from compiletrace._io.files import write_bytes
from compiletrace._io.private_dir import NotPrivate, PrivateDirectory, private_cache_directory, unsafe_reason
from compiletrace._io.signals import disown, owned_temporary_directory, parent_death_preexec, process_alive
from compiletrace._io.text import first_line, printable

__all__ = [
    "BOOTSTRAP_DIR",
    "CommandNotFound",
    "ProfileJob",
    "RunOutcome",
    "UntilReady",
    "bootstrap_directory",
    "child_environment",
    "collect_job",
    "job_run",
    "run_command",
    "traffic_argv",
    "traffic_words",
]

BOOTSTRAP_DIR = str(Path(__file__).resolve().parent.parent / "_bootstrap")
BOOTSTRAP_MODULE = "sitecustomize.py"
JOB_DIR_PREFIX = "compiletrace-run-"
# Forwarded to the command: a signal sent to this process alone (kill PID) is meant for it.
# SIGINT is not: Ctrl-C reaches the whole foreground process group, the command included.
_FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


class ProfileJob(Job):
    """A job (every process of one command, ``compiletrace run``) with its views: the
    summary, each process's tables, the doctor over every process, the HTML report, the
    Chrome trace. ``compiletrace.load`` gives one back for a job file.

    >>> import sys, compiletrace
    >>> job = compiletrace.ProfileJob.of(run_command([sys.executable, "-c", "pass"]).job)
    >>> job.summary()
    'compiletrace: no process of this command compiled anything (exit status 0)'
    """

    @classmethod
    def of(cls, job: Job) -> ProfileJob:
        return cls(job.command, job.exit_status, job.processes, job.missing, job.cwd, job.ready, job.traffic)

    def diagnose(self) -> list[Finding]:
        """The doctor's findings, process by process (a finding's evidence names its
        process), and across the ranks of a distributed job (ranks whose graphs or cache
        outcomes differ from the others'), most seconds at stake first."""
        from compiletrace._doctor import diagnose_job

        return diagnose_job(self)

    def summary(self) -> str:
        """The job's summary lines, then each compiling process's own tables."""
        # The tables need no torch: profile_run's ProfileRun, not profile's (which imports it).
        from compiletrace._app.profile_run import ProfileRun
        from compiletrace.reports import job_summary_lines

        parts = ["\n".join(job_summary_lines(self))]
        shown = self.compiling()
        ranks = rank_figures(self)
        if len({r.node for r in ranks}) > 1:
            # A job of several nodes: the critical path's tables (hundreds of ranks' would bury it).
            slowest = critical_path(ranks)
            shown = (self.ranks()[slowest.rank],)
        for process in shown:
            parts.append(f"== {process.info.label}\n{ProfileRun.of(process.run).summary()}")
        return "\n\n".join(parts)

    def html(self, title: str = "compiletrace job") -> str:
        """The one-file HTML report of every process's compiles, with the doctor's findings
        and the job's start-up timeline: a track per process on one wall-clock axis, then
        each process's own timeline."""
        from compiletrace.reports import job_html_report

        return job_html_report(self, title=title, findings=self.diagnose())

    def chrome_trace(self) -> dict[str, Any]:
        """One Chrome/Perfetto trace, a track group per process."""
        from compiletrace.reports import job_chrome_trace_dict

        return job_chrome_trace_dict(self)


def _compile_bytecode(directory: str) -> None:
    # Every Python process of the command imports the bootstrap: with its bytecode beside
    # it, none compiles it first (milliseconds each where bytecode is not written, as under
    # PYTHONDONTWRITEBYTECODE). Where the directory is not writable this does nothing.
    source = os.path.join(directory, BOOTSTRAP_MODULE)
    with contextlib.suppress(OSError, py_compile.PyCompileError):
        py_compile.compile(source, cfile=importlib.util.cache_from_source(source), doraise=True)


def _entries(directory: str) -> list[str]:
    names = []
    with contextlib.suppress(OSError):
        for name in os.listdir(directory):
            names.append(name)
            if name == "__pycache__":
                names.extend(os.path.join(name, n) for n in os.listdir(os.path.join(directory, name)))
    return names


def bootstrap_directory() -> str:
    """The directory put first on the command's ``PYTHONPATH``, so that every Python process
    it starts imports the bootstrap. Never a temporary one: a process that outlives the
    command (a server started with ``&``, a daemon) keeps the entry for life, and so do the
    processes it starts later, so no one else may ever be able to create or change a file
    there (they would run code as you). The installed package's own ``_bootstrap`` when
    only you or the superuser can change it and every directory above it; else a copy in
    your private cache directory (``~/.cache/compiletrace/bootstrap-HASH``, mode 0700),
    named by its content and never removed. Raises
    :class:`~compiletrace._io.private_dir.NotPrivate` (exit 2) when neither is private.

    >>> unsafe_reason(bootstrap_directory(), [BOOTSTRAP_MODULE]) is None
    True
    """
    _compile_bytecode(BOOTSTRAP_DIR)
    if unsafe_reason(BOOTSTRAP_DIR, _entries(BOOTSTRAP_DIR)) is None:
        return BOOTSTRAP_DIR
    source = Path(BOOTSTRAP_DIR, BOOTSTRAP_MODULE).read_bytes()
    directory = private_cache_directory(f"bootstrap-{hashlib.sha256(source).hexdigest()[:16]}")
    copy = os.path.join(directory, BOOTSTRAP_MODULE)
    reason = unsafe_reason(directory, [BOOTSTRAP_MODULE])
    if reason is None and not (os.path.isfile(copy) and Path(copy).read_bytes() == source):
        write_bytes(copy, source)
    _compile_bytecode(directory)
    reason = reason or unsafe_reason(directory, _entries(directory))
    if reason is not None:
        raise NotPrivate(f"no private directory for compiletrace run's bootstrap: {reason}")
    return directory


def check_fix_names(fixes: Sequence[str]) -> None:
    """A name that is no :class:`~compiletrace._data.fixes.Fix`, or a malformed one, is bad
    input, before anything runs."""
    from compiletrace._data.fixes import check_fixes

    check_fixes(fixes)


def fix_names() -> list[str]:
    """Every fix ``run --apply`` takes, as a user writes it (``regional-compile=CLASS``)."""
    from compiletrace._data import fixes

    return fixes.fix_names()


def _resolve(command: Sequence[str], cwd: str | None = None) -> str:
    if not command or not command[0]:
        raise UsageError("compiletrace run needs a command: compiletrace run [OPTIONS] -- COMMAND [ARGS...]")
    program = command[0]
    if os.sep in program:
        path = os.path.join(cwd, program) if cwd else program
        found = path if os.access(path, os.X_OK) else None
    else:
        found = shutil.which(program)
    if found is None or os.path.isdir(found):
        raise CommandNotFound(
            f"command not found: {program!r} (not an executable file"
            + ("" if os.sep in program else " on PATH")
            + "); check its spelling, or give its path"
        )
    return found


def child_environment(
    job_dir: PrivateDirectory,
    components: Sequence[str],
    trace_cost: bool,
    *,
    bootstrap_dir: str | None = None,
    fixes: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    otlp_endpoint: str | None = None,
    ready: str | None = None,
    job_id: str | None = None,
) -> dict[str, str]:
    """The environment the command runs in: this one (with ``extra_env`` over it), the
    bootstrap (:func:`bootstrap_directory` unless given) first on ``PYTHONPATH`` and the job's
    directory (its path and identity) and options for every process to read (``ready``: the
    ready mark, checked by :func:`~compiletrace._data.ready.parse_ready`), and the job's id
    for its spans (``job_id``, else a new one: one per run)."""
    env = {**os.environ, **(extra_env or {})}
    bootstrap = bootstrap_dir if bootstrap_dir is not None else bootstrap_directory()
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = bootstrap if not path else bootstrap + os.pathsep + path
    env[JOB_DIR_ENV] = job_dir.path
    env[JOB_DIR_ID_ENV] = job_dir.identity
    options: dict[str, Any] = {"components": list(components), "trace_cost": trace_cost, "fixes": list(fixes)}
    if otlp_endpoint is not None:
        options["otlp_endpoint"] = otlp_endpoint
    env[OPTIONS_ENV] = json.dumps(options)
    env[LAUNCHER_PID_ENV] = str(os.getpid())
    env[JOB_ID_ENV] = check_job_id(job_id) if job_id is not None else uuid.uuid4().hex
    if any(program_fixes.is_program_fix(name) for name in fixes):
        env[PROGRAM_FIXES_ENV] = "1"  # the bootstrap installs them once torch is imported
    else:
        env.pop(PROGRAM_FIXES_ENV, None)
    env.update(environment_for(fixes, env))  # torch reads them at its import, in every process
    if ready:
        env[READY_ENV] = parse_ready(ready).text  # the bootstrap wraps MODULE:FUNCTION
    else:
        env.pop(READY_ENV, None)  # an outer job's mark is not this one's
    return env


@contextlib.contextmanager
def _forwarding_signals(
    child: subprocess.Popen[bytes], group: bool = False, on_interrupt: threading.Event | None = None
) -> Iterator[None]:
    """Pass terminating signals sent to this process on to the command, and outlive
    Ctrl-C (the command gets it too), so the job is still collected and written. With
    ``group`` (a command in a process group of its own, out of the terminal's reach), Ctrl-C
    is passed on to that group, and ``on_interrupt`` set: a trial's caller stops there."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def forward(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    def interrupted(signum: int, frame: FrameType | None) -> None:
        if on_interrupt is not None:
            on_interrupt.set()
        if group:  # else the command got it from the terminal; its exit decides
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signum)

    previous: dict[signal.Signals, Any] = {}
    try:
        for signum in _FORWARDED:
            previous[signum] = signal.signal(signum, forward)
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, interrupted)
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old if old is not None else signal.SIG_DFL)


# How a trial to ready ended (RunOutcome.stopped).
STOPPED_READY = "ready"  # it became ready, ran its grace, and was stopped
NEVER_READY = "never ready"  # it ran past UntilReady.timeout_s without a mark, and was stopped
INTERRUPTED = "interrupted"  # Ctrl-C (UntilReady.interrupted set): stopped, and no verdict on it
# Its processes kept writing ready marks (a supervisor restarting a crashing worker) for
# UntilReady.timeout_s after the first, each of which would start the grace again: stopped.
KEPT_MARKING = "kept becoming ready"
OUT_OF_BUDGET = "out of budget"  # it ran to UntilReady.stop_at (the end of --budget): stopped


@dataclass(frozen=True)
class UntilReady:
    """Run a command only until it is ready, as a trial does (``doctor --verify``, ``bench
    startup -- COMMAND``): once a process of it writes its ready mark, it runs ``grace_s``
    more (a compile right after ready is still seen; each further mark starts the grace
    again, so every rank of a job gets there), then it is stopped as a user stops it:
    SIGINT to its process group, then SIGTERM, then SIGKILL, ``stop_timeout_s`` apart,
    until no process of it is left. A command that never becomes ready is stopped the same
    way after ``timeout_s``; one that ends by itself before is left to end. Every run ends:
    one whose marks keep coming (a worker restarted again and again, each restart a new
    mark) is stopped at the first mark more than ``timeout_s`` after its first
    (:data:`KEPT_MARKING`), and any run at ``stop_at`` (:data:`OUT_OF_BUDGET`).

    >>> UntilReady(grace_s=2).grace_s
    2
    """

    grace_s: float = 3.0  # seconds run after the last ready mark (with traffic: after the traffic)
    timeout_s: float = 900.0  # never ready in this long: stopped, and said so; the traffic's bound too
    # A command started at the first ready mark (its words as traffic_words gives them: {port}
    # becomes the port of the ready mark), whose end starts the grace: the requests that make
    # a server compile (run --traffic).
    traffic: tuple[str, ...] = ()
    stop_timeout_s: float = 10.0  # each signal's wait before the next, harder one
    poll_s: float = 0.05  # how often the job directory is read for ready marks
    clock: Callable[[], float] = time.monotonic  # injectable: tests drive the timeouts
    # Set by Ctrl-C (or by the caller, for trials side by side): the command is passed the
    # interrupt, stopped, and its run ends INTERRUPTED; the trials of a proof share one.
    interrupted: threading.Event | None = None
    # A time on ``clock`` at which the run is stopped, whatever it is doing (the end of
    # doctor --verify's --budget); None: no such time.
    stop_at: float | None = None


@dataclass(frozen=True)
class RunOutcome:
    """What ``compiletrace run`` ends with: the merged job and the command's exit status
    (128 + N when a signal N killed it, as a shell reports it)."""

    job: ProfileJob
    exit_status: int
    signal: int | None = None  # the signal that killed the command, if one did
    job_dir: str = ""  # where the processes wrote their run files
    temporary: bool = False  # job_dir is job_run's own, removed when its block ends
    # With UntilReady: STOPPED_READY or NEVER_READY when the launcher stopped the command
    # (None: it ended by itself), the seconds from its start to its first ready mark, and
    # the ready marks its processes wrote, as they wrote them.
    stopped: str | None = None
    ready_after_s: float | None = None
    marks: tuple[ReadyMark, ...] = ()
    # The traffic command's exit status (128 + N for a signal; None: no traffic was started).
    traffic_status: int | None = None

    def keep_run_files(self) -> str:
        """Keep a temporary job directory past the end of :func:`job_run` (when an output
        could not be written, the processes' run files are all that is left of the job),
        and no later run removes it: its path."""
        if self.temporary:
            disown(self.job_dir)
        return self.job_dir


def run_command(
    command: Sequence[str],
    *,
    components: Sequence[str] = (),
    trace_cost: bool = False,
    job_dir: str | os.PathLike[str] | None = None,
    fixes: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stdout: Any = None,
    stderr: Any = None,
    otlp_endpoint: str | None = None,
    ready: str | None = None,
    until_ready: UntilReady | None = None,
    job_id: str | None = None,
) -> RunOutcome:
    """Run ``command`` with every compile of every Python process recorded, and merge
    what each process wrote: :func:`job_run`, with its temporary job directory removed
    at once."""
    with job_run(
        command,
        components=components,
        trace_cost=trace_cost,
        job_dir=job_dir,
        fixes=fixes,
        extra_env=extra_env,
        cwd=cwd,
        stdout=stdout,
        stderr=stderr,
        otlp_endpoint=otlp_endpoint,
        ready=ready,
        until_ready=until_ready,
        job_id=job_id,
    ) as outcome:
        return outcome


@contextlib.contextmanager
def job_run(
    command: Sequence[str],
    *,
    components: Sequence[str] = (),
    trace_cost: bool = False,
    job_dir: str | os.PathLike[str] | None = None,
    fixes: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stdout: Any = None,
    stderr: Any = None,
    otlp_endpoint: str | None = None,
    ready: str | None = None,
    until_ready: UntilReady | None = None,
    job_id: str | None = None,
) -> Iterator[RunOutcome]:
    """Run ``command`` with every compile of every Python process recorded, merge what each
    process wrote, and give the outcome to the block; a temporary job directory is removed
    when the block ends, unless :meth:`RunOutcome.keep_run_files` was called in it.
    ``job_dir`` (``--job-dir``) is made, or must be an empty directory of yours that no one
    else can write. ``fixes`` are settings applied in every process before its first
    compile (``compiletrace run --apply``). With ``otlp_endpoint``, every process also sends
    its compiles' spans and metrics there as they happen (OTLP/HTTP; its own providers,
    never the program's global ones). ``ready`` (``--ready``): when each process is ready
    to serve, ``MODULE:FUNCTION`` or ``phase:NAME`` (default: the end of its warm-up);
    what compiles after it is the job's :meth:`~compiletrace._data.job.Job.after_ready`.
    ``until_ready``: run it only until it is ready (:class:`UntilReady`), in a process group
    of its own. ``{port}`` in the command's arguments is the port of ``--ready port:PORT``
    (as in a traffic command): a trial given a port of its own gets it there
    (:mod:`compiletrace._app.trial_ports`). ``stdout``, ``stderr``: the command's (default:
    this process's).
    ``job_id`` (``--job-id``): the id every process's spans carry as ``compiletrace.job.id``
    where the launcher gives none (torchrun's run id, Slurm's job id); else one per run.
    Raises :class:`CommandNotFound` (nothing run) for a command that does not exist,
    :class:`~compiletrace.UsageError` for a bad rule, fix, ready mark or job directory."""
    command = [str(part) for part in command]
    executable = _resolve(command, cwd)
    if until_ready is not None and until_ready.traffic:
        _resolve(list(until_ready.traffic), cwd)  # a traffic command that does not exist: nothing runs
    parse_component_rules(components)  # bad rules fail before anything runs
    check_fix_names(fixes)
    spec = parse_ready(ready).text if ready else ""
    if job_id is not None:
        check_job_id(job_id)
    with contextlib.ExitStack() as stack:
        if job_dir is None:
            path = stack.enter_context(_temporary_job_directory())
            directory = PrivateDirectory(path, _identity_of(path))
        else:
            # Absolute: the program may change directory (Hydra does) before it writes.
            directory = PrivateDirectory.claim(os.fspath(job_dir), "--job-dir")
        env = child_environment(
            directory,
            components,
            trace_cost,
            fixes=fixes,
            extra_env=extra_env,
            otlp_endpoint=otlp_endpoint,
            ready=spec,
            job_id=job_id,
        )
        # A trial runs in a process group of its own: it is stopped as a whole, and no
        # signal meant for it reaches compiletrace.
        group = 0 if until_ready is not None else None
        started = until_ready.clock() if until_ready is not None else 0.0
        try:
            child = subprocess.Popen(
                # {port} in its words is the port of --ready port:PORT, as in the traffic's.
                [executable, *traffic_argv(command[1:], spec or None)],
                env=env,
                cwd=cwd,
                stdout=stdout,
                stderr=stderr,
                process_group=group,
                preexec_fn=_trial_preexec() if until_ready is not None else None,
            )
        except OSError as exc:
            raise CommandNotFound(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None
        stopped: str | None = None
        ready_after: float | None = None
        marks: tuple[ReadyMark, ...] = ()
        traffic = _Traffic(until_ready.traffic if until_ready is not None else (), spec, cwd, stdout)
        interrupt = until_ready.interrupted if until_ready is not None else None
        with _forwarding_signals(child, group=until_ready is not None, on_interrupt=interrupt):
            if until_ready is None:
                returncode = child.wait()
            else:
                try:
                    stopped, ready_after, marks = _run_until_ready(
                        child, directory, until_ready, started, traffic
                    )
                finally:
                    # Whatever happened here (Ctrl-C included), nothing of the command is left,
                    # nor of its traffic.
                    traffic.stop(until_ready)
                    _stop_group(child, directory, until_ready)
                returncode = child.wait()
        status = 128 - returncode if returncode < 0 else returncode
        job = collect_job(directory, command, status, cwd=cwd, ready=spec)
        if until_ready is not None and until_ready.traffic:
            job = replace(job, traffic=until_ready.traffic)
        killed_by = -returncode if returncode < 0 and stopped is None else None
        yield RunOutcome(
            job,
            status,
            killed_by,
            directory.path,
            job_dir is None,
            stopped,
            ready_after,
            marks,
            traffic.status,
        )


PORT_FIELD = "{port}"  # in a traffic command: the port the program listens on (--ready port:PORT)


def traffic_words(traffic: str | Sequence[str], ready: str | None) -> tuple[str, ...]:
    """A traffic command's words (``--traffic 'COMMAND'``: split as a shell splits it; no
    shell runs it), checked: :class:`~compiletrace.UsageError` for an empty command, or one
    that uses ``{port}`` where ``ready`` is no ``port:PORT``. ``{port}`` stays in the words:
    each run puts its own port there (:func:`traffic_argv`).

    >>> traffic_words("curl -s http://127.0.0.1:{port}/v1/models", "port:8000")
    ('curl', '-s', 'http://127.0.0.1:{port}/v1/models')
    """
    words = shlex.split(traffic) if isinstance(traffic, str) else [str(w) for w in traffic]
    if not words:
        raise UsageError("--traffic needs a command: --traffic 'python load.py --port {port}'")
    if any(PORT_FIELD in word for word in words) and _port_of(ready) is None:
        raise UsageError(
            f"--traffic uses {PORT_FIELD}, which is the port of --ready port:PORT: give --ready port:PORT"
        )
    return tuple(words)


def traffic_argv(words: Sequence[str], ready: str | None) -> list[str]:
    """The traffic command (or the command's own arguments) as run: ``{port}`` replaced by
    the port of ``ready``, where it is ``port:PORT``.

    >>> traffic_argv(("curl", "http://127.0.0.1:{port}/"), "port:8000")
    ['curl', 'http://127.0.0.1:8000/']
    """
    port = _port_of(ready)
    return [word.replace(PORT_FIELD, port) if port is not None else word for word in words]


def _port_of(ready: str | None) -> str | None:
    spec = parse_ready(ready) if ready else None
    return spec.name if spec is not None and spec.how == PORT else None


class _Traffic:
    """The traffic command of a run to ready (:attr:`UntilReady.traffic`): started once, at
    the first ready mark, in a process group of its own, with this process's environment
    (it is the program's client, not the program: nothing of it is recorded)."""

    def __init__(self, words: Sequence[str], ready: str, cwd: str | None, stdout: Any) -> None:
        self.argv = traffic_argv(words, ready or None)
        self.cwd = cwd
        self.stdout = stdout
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0

    def start(self, now: float) -> None:
        self.started = now
        try:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                stdout=self.stdout,
                process_group=0,
                preexec_fn=parent_death_preexec(),
            )
        except OSError as exc:
            what = f"cannot run the traffic command {self.argv[0]!r}: {exc.strerror or exc}"
            raise CommandNotFound(what) from None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def status(self) -> int | None:
        if self.proc is None or self.proc.returncode is None:
            return None
        code = self.proc.returncode
        return 128 - code if code < 0 else code

    def stop(self, until: UntilReady) -> None:
        """End what is left of it: SIGTERM to its group, then SIGKILL."""
        if self.proc is None:
            return
        for signum in (signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signum)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(until.stop_timeout_s)
        self.proc.poll()


def _trial_preexec() -> Callable[[], None]:
    """A trial's ``preexec_fn``: it dies with this process (its group is out of a terminal's
    reach), and Ctrl-C reaches it even where this process was started with SIGINT ignored
    (a background job of a script, ``nohup``), which a child would inherit: its stop begins
    with SIGINT. The standard library only, and no lock: it runs between fork and exec."""
    parent_death = parent_death_preexec()
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN

    def preexec() -> None:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        if parent_death is not None:
            parent_death()

    return preexec


def _ready_marks(directory: PrivateDirectory) -> list[ReadyMark]:
    """The ready marks the job's processes have written so far (a damaged one is skipped:
    its process's run keeps the mark too)."""
    marks = []
    for name in directory.names():
        if name.endswith(READY_SUFFIX):
            data = directory.read_regular(name, MAX_MARKER_BYTES)
            with contextlib.suppress(CompiletraceError):
                if data is not None:
                    marks.append(read_ready(data, name))
    return sorted(marks, key=lambda m: m.unix_ns)


def _run_until_ready(
    child: subprocess.Popen[bytes],
    directory: PrivateDirectory,
    until: UntilReady,
    started: float,
    traffic: _Traffic | None = None,
) -> tuple[str | None, float | None, tuple[ReadyMark, ...]]:
    """Wait for the command's ready marks, then its traffic (if any), then its grace: how it
    ended (None: by itself), the seconds to its first mark, and its marks. Bounded whatever
    the command does: ``timeout_s`` to its first mark, then a mark more than ``timeout_s``
    after the first ends it (:data:`KEPT_MARKING`), and ``stop_at`` ends it whatever it is
    doing (:data:`OUT_OF_BUDGET`)."""
    seen = 0
    first: float | None = None
    deadline: float | None = None
    marks: list[ReadyMark] = []
    while child.poll() is None:
        if until.interrupted is not None and until.interrupted.is_set():
            return INTERRUPTED, first - started if first is not None else None, tuple(marks)
        now = until.clock()
        marks = _ready_marks(directory)
        if len(marks) > seen:
            seen = len(marks)
            if first is not None and now - first >= until.timeout_s:
                # Marks still coming this long after the first (a supervisor restarting a
                # crashing worker): each would start the grace again, for ever.
                return KEPT_MARKING, first - started, tuple(marks)
            first = now if first is None else first
            deadline = now + until.grace_s  # each new mark: the grace again
            if traffic is not None and traffic.argv and traffic.proc is None:
                traffic.start(now)
        if traffic is not None and traffic.proc is not None:
            if traffic.running and now - traffic.started < until.timeout_s:
                deadline = None  # the grace starts when the traffic ends
            elif deadline is None:
                traffic.stop(until)  # ended, or ran past its bound
                deadline = now + until.grace_s
        after = first - started if first is not None else None
        if until.stop_at is not None and now >= until.stop_at:
            return OUT_OF_BUDGET, after, tuple(marks)
        if deadline is not None and now >= deadline:
            return STOPPED_READY, after, tuple(marks)
        if first is None and now - started >= until.timeout_s:
            return NEVER_READY, None, tuple(marks)
        time.sleep(until.poll_s)
    marks = _ready_marks(directory)
    if marks and first is None:
        first = until.clock()
    # It ended of the Ctrl-C passed on to it: not by itself.
    stopped = INTERRUPTED if until.interrupted is not None and until.interrupted.is_set() else None
    return stopped, first - started if first is not None else None, tuple(marks)


def _signal_all(pgid: int, directory: PrivateDirectory, signum: int) -> bool:
    """Send ``signum`` to the process group, and to each recorded process still running that
    left the group (never twice to one process: a second Ctrl-C would cut short the run it
    writes as it exits); whether any was there to get it."""
    any_left = False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
        any_left = True
    for pid, _ in _live_processes(directory.names()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) != pgid:
                os.kill(pid, signum)
                any_left = True
    return any_left


def _group_left(child: subprocess.Popen[bytes], directory: PrivateDirectory) -> bool:
    if child.poll() is None:
        return True
    try:
        os.killpg(child.pid, 0)
    except (ProcessLookupError, PermissionError):
        return bool(_live_processes(directory.names()))
    return True


def _stop_group(child: subprocess.Popen[bytes], directory: PrivateDirectory, until: UntilReady) -> None:
    """Stop the command as a user does: SIGINT (Ctrl-C) to its whole process group, then
    SIGTERM, then SIGKILL, each given ``stop_timeout_s``, until none of it is left."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        if not _group_left(child, directory):
            return
        _signal_all(child.pid, directory, signum)
        end = until.clock() + until.stop_timeout_s
        while _group_left(child, directory) and until.clock() < end:
            child.poll()  # reap the leader: a zombie still counts in its group
            time.sleep(until.poll_s)


def _identity_of(path: str) -> str:
    info = os.lstat(path)
    return f"{info.st_dev}:{info.st_ino}"


@contextlib.contextmanager
def _temporary_job_directory() -> Iterator[str]:
    # Owned by this launcher, and removed by the next one if this one is killed: but only
    # once no process of its job still runs (one may write there yet).
    with owned_temporary_directory(JOB_DIR_PREFIX, in_use=_job_still_running) as path:
        yield path


def _live_processes(names: Sequence[str]) -> list[tuple[int, int | None]]:
    live = []
    for name in names:
        if name.endswith(STARTED_SUFFIX):
            key = parse_key(name[: -len(STARTED_SUFFIX)])
            if key is not None and process_alive(*key):
                live.append(key)
    return live


def _job_still_running(path: Path) -> bool:
    """True while a process that started recording into the job directory ``path`` runs."""
    return bool(_live_processes(os.listdir(path)))


def collect_job(
    directory: PrivateDirectory | str | os.PathLike[str],
    command: Sequence[str],
    exit_status: int,
    *,
    cwd: str | None = None,
    ready: str = "",
) -> ProfileJob:
    """Merge the run files the processes of a job wrote into ``directory`` (each read
    through the one reader, every field checked); processes that started recording but
    left no run are listed as missing. Only regular files are read, through the
    directory's descriptor, never following a link and never waiting on a FIFO; a damaged
    or unreadable one is one line on stderr, and that process counts as leaving no run."""
    if not isinstance(directory, PrivateDirectory):
        path = os.path.abspath(os.fspath(directory))
        directory = PrivateDirectory(path, _identity_of(path))
    names = directory.names()
    started: dict[str, ProcessInfo] = {}
    for name in names:
        if name.endswith(STARTED_SUFFIX):
            data = directory.read_regular(name, MAX_MARKER_BYTES)
            try:
                if data is None:
                    continue
                started[name[: -len(STARTED_SUFFIX)]] = read_started(data, name)
            except CompiletraceError:
                continue  # a marker cut short by a kill: its run, if any, still names the process
    processes = []
    recorded = set()
    for name in names:
        if not name.endswith(RUN_SUFFIX):
            continue
        source = os.path.join(directory.path, name)
        try:
            data = directory.read_regular(name, MAX_FILE_BYTES)
            if data is None:
                raise UsageError(f"{source} is not a regular file of at most {MAX_FILE_BYTES >> 20} MiB")
            parsed = parse_json(data, source)
            run = read_data(parsed, source, accept={FileKind.RUN}, command="compiletrace run")
            assert isinstance(run, Run)
            info = run.meta.process
            if info is None:  # a run file, but not one a job's process wrote
                raise RunFileError(f"{source}: field 'meta.pid' is missing")
        except CompiletraceError as exc:
            # One process's damaged file must not cost the others theirs, nor the command
            # its exit status: it is named, and the process counts as leaving no run.
            print(f"compiletrace: {printable(first_line(exc))}", file=sys.stderr)
            continue
        recorded.add(name[: -len(RUN_SUFFIX)])
        processes.append(JobProcess(info, run))
    processes.sort(key=lambda p: (p.run.timeline.start_unix_ns if p.run.timeline else 0, p.info.pid))
    missing = tuple(
        replace(info, role=f"{info.role}, still running when the command ended")
        if _live_processes([key + STARTED_SUFFIX])
        else info
        for key, info in sorted(started.items(), key=lambda item: (item[1].pid, item[0]))
        if key not in recorded
    )
    return ProfileJob(
        tuple(command), exit_status, tuple(processes), missing, os.path.abspath(cwd or os.getcwd()), ready
    )
