"""``compiletrace run -- COMMAND``: run any command with no edit to it, record every compile
of every Python process it starts, and merge them into one job.

The command runs as a child of this process with the bootstrap first on ``PYTHONPATH``
(``compiletrace/_bootstrap``), so every Python process it starts records its compiles
(``compiletrace._app.job_process``) into a job directory; when the command ends, the
processes' runs are merged into a :class:`~compiletrace._data.job.Job`. The command's
stdin, stdout, stderr and exit status are its own: a program killed by a signal makes
this process die of the same signal, after the job is written.

>>> import sys
>>> outcome = run_command([sys.executable, "-c", "raise SystemExit(3)"])
>>> outcome.exit_status, len(outcome.job.processes)
(3, 0)
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import py_compile
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any

from compiletrace._app import program_fixes
from compiletrace._app.job_process import (
    JOB_DIR_ENV,
    LAUNCHER_PID_ENV,
    OPTIONS_ENV,
    PROGRAM_FIXES_ENV,
    RUN_SUFFIX,
    STARTED_KIND,
    STARTED_SUFFIX,
)
from compiletrace._core.components import parse_component_rules
from compiletrace._data.files import read
from compiletrace._data.findings import Finding
from compiletrace._data.job import Job, JobProcess, ProcessInfo
from compiletrace._data.kinds import FileKind
from compiletrace._data.run import Run
from compiletrace._io.envelope import Fields, read_json_file
from compiletrace._io.errors import CompiletraceError, UsageError
from compiletrace._io.signals import owned_temporary_directory
from compiletrace._io.text import first_line, printable

__all__ = [
    "BOOTSTRAP_DIR",
    "COMMAND_NOT_FOUND_STATUS",
    "CommandNotFound",
    "ProfileJob",
    "RunOutcome",
    "child_environment",
    "collect_job",
    "run_command",
]

BOOTSTRAP_DIR = str(Path(__file__).resolve().parent.parent / "_bootstrap")
BOOTSTRAP_MODULE = "sitecustomize.py"
# Forwarded to the command: a signal sent to this process alone (kill PID) is meant for it.
# SIGINT is not: Ctrl-C reaches the whole foreground process group, the command included.
_FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
COMMAND_NOT_FOUND_STATUS = 127  # what a shell gives for a command it cannot find


class CommandNotFound(UsageError):
    """The command to run does not exist or is not executable (exit 127, as in a shell)."""


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
        return cls(job.command, job.exit_status, job.processes, job.missing, job.cwd)

    def diagnose(self) -> list[Finding]:
        """The doctor's findings, process by process (a finding's evidence names its
        process), and across the ranks of a distributed job (ranks whose graphs or cache
        outcomes differ from the others'), most seconds at stake first."""
        from compiletrace._app.doctor import diagnose_ranks, diagnose_run
        from compiletrace._data.gather import RankTimes
        from compiletrace._data.registry import Registry

        findings = []
        for process in self.processes:
            run = process.run
            for finding in diagnose_run(run.graph_records, run.warmup, run.timeline, run.meta):
                evidence = {**finding.evidence, "process": process.info.label}
                findings.append(replace(finding, evidence=evidence))
        ranks = []
        for rank, process in self.ranks().items():
            registry = Registry()
            for record in process.run.graph_records:
                registry.add(record)
            ranks.append(replace(RankTimes.of(registry, rank), pid=process.info.pid, host=""))
        findings.extend(diagnose_ranks(ranks))
        return sorted(findings, key=lambda f: -f.seconds)

    def summary(self) -> str:
        """The job's summary lines, then each compiling process's own tables."""
        from compiletrace._app.profile import ProfileRun
        from compiletrace.reports._job import job_summary_lines

        parts = ["\n".join(job_summary_lines(self))]
        for process in self.compiling():
            parts.append(f"== {process.info.label}\n{ProfileRun.of(process.run).summary()}")
        return "\n\n".join(parts)

    def html(self, title: str = "compiletrace job") -> str:
        """The one-file HTML report of every process's compiles, with the doctor's findings
        and the job's start-up timeline: a track per process on one wall-clock axis, then
        each process's own timeline."""
        from compiletrace.reports._html import job_html_report

        return job_html_report(self, title=title, findings=self.diagnose())

    def chrome_trace(self) -> dict[str, Any]:
        """One Chrome/Perfetto trace, a track group per process."""
        from compiletrace.reports._job import job_chrome_trace_dict

        return job_chrome_trace_dict(self)


@dataclass(frozen=True)
class RunOutcome:
    """What ``compiletrace run`` ends with: the merged job and the command's exit status
    (128 + N when a signal N killed it, as a shell reports it)."""

    job: ProfileJob
    exit_status: int
    signal: int | None = None  # the signal that killed the command, if one did


def compiled_bootstrap(directory: str) -> str:
    """A copy of the bootstrap in ``directory`` (one this process owns), with its bytecode
    beside it: every Python process of the command imports it, and without bytecode each
    would compile it first (milliseconds, where bytecode is not written, as under
    PYTHONDONTWRITEBYTECODE). A Python of another version compiles the source itself."""
    source = os.path.join(BOOTSTRAP_DIR, BOOTSTRAP_MODULE)
    copy = os.path.join(directory, BOOTSTRAP_MODULE)
    shutil.copyfile(source, copy)
    with contextlib.suppress(OSError, py_compile.PyCompileError):
        py_compile.compile(copy, cfile=importlib.util.cache_from_source(copy), doraise=True)
    return directory


def check_fix_names(fixes: Sequence[str]) -> None:
    """A fix name in neither table (torch's settings, the program fixes) is bad input,
    before anything runs."""
    if not fixes:  # the tables live beside torch's internals: torch is imported only when asked
        return
    from compiletrace._core import torch_compat as tc

    program_fixes.check_program_fixes(fixes)
    for name in fixes:
        if not program_fixes.is_program_fix(name) and name not in tc.CONFIG_FIXES:
            known = ", ".join(fix_names())
            raise UsageError(f"unknown fix {name!r}; the fixes that apply with no edit: {known}")


def fix_names() -> list[str]:
    """Every fix ``run --apply`` takes, as a user writes it (``regional-compile=CLASS``)."""
    from compiletrace._core import torch_compat as tc

    names = [*tc.CONFIG_FIXES, *program_fixes.PROGRAM_FIXES]
    return sorted(f"{n}=CLASS" if n == program_fixes.REGIONAL_COMPILE else n for n in names)


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
    job_dir: str,
    components: Sequence[str],
    trace_cost: bool,
    *,
    bootstrap_dir: str = BOOTSTRAP_DIR,
    fixes: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
    otlp_endpoint: str | None = None,
) -> dict[str, str]:
    """The environment the command runs in: this one (with ``extra_env`` over it), the
    bootstrap first on ``PYTHONPATH`` and the job's directory and options for every process
    to read."""
    env = {**os.environ, **(extra_env or {})}
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = bootstrap_dir if not path else bootstrap_dir + os.pathsep + path
    env[JOB_DIR_ENV] = job_dir
    options: dict[str, Any] = {"components": list(components), "trace_cost": trace_cost, "fixes": list(fixes)}
    if otlp_endpoint is not None:
        options["otlp_endpoint"] = otlp_endpoint
    env[OPTIONS_ENV] = json.dumps(options)
    env[LAUNCHER_PID_ENV] = str(os.getpid())
    if any(program_fixes.is_program_fix(name) for name in fixes):
        env[PROGRAM_FIXES_ENV] = "1"  # the bootstrap installs them once torch is imported
    else:
        env.pop(PROGRAM_FIXES_ENV, None)
    return env


@contextlib.contextmanager
def _forwarding_signals(child: subprocess.Popen[bytes]) -> Iterator[None]:
    """Pass terminating signals sent to this process on to the command, and outlive
    Ctrl-C (the command gets it too), so the job is still collected and written."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def forward(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    def interrupted(signum: int, frame: FrameType | None) -> None:
        pass  # the command got it from the terminal; its exit decides

    previous: dict[signal.Signals, Any] = {}
    try:
        for signum in _FORWARDED:
            previous[signum] = signal.signal(signum, forward)
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, interrupted)
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old if old is not None else signal.SIG_DFL)


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
    otlp_endpoint: str | None = None,
) -> RunOutcome:
    """Run ``command`` with every compile of every Python process recorded, and merge
    what each process wrote. ``fixes`` are settings applied in every process before its
    first compile (names in ``torch_compat.CONFIG_FIXES``: ``compiletrace run --apply``).
    With ``otlp_endpoint``, every process also sends its compiles' spans and metrics there
    as they happen (OTLP/HTTP; its own providers, never the program's global ones).
    Raises :class:`CommandNotFound` (nothing run) for a command that does not exist,
    :class:`~compiletrace.UsageError` for a bad rule or fix."""
    command = [str(part) for part in command]
    executable = _resolve(command, cwd)
    parse_component_rules(components)  # bad rules fail before anything runs
    check_fix_names(fixes)
    with contextlib.ExitStack() as stack:
        if job_dir is None:
            directory = stack.enter_context(owned_temporary_directory("compiletrace-run-"))
        else:
            # Absolute: the program may change directory (Hydra does) before it writes.
            directory = os.path.abspath(os.fspath(job_dir))
            os.makedirs(directory, exist_ok=True)
        bootstrap = compiled_bootstrap(
            stack.enter_context(owned_temporary_directory("compiletrace-bootstrap-"))
        )
        env = child_environment(
            directory,
            components,
            trace_cost,
            bootstrap_dir=bootstrap,
            fixes=fixes,
            extra_env=extra_env,
            otlp_endpoint=otlp_endpoint,
        )
        try:
            child = subprocess.Popen([executable, *command[1:]], env=env, cwd=cwd, stdout=stdout)
        except OSError as exc:
            raise CommandNotFound(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None
        with _forwarding_signals(child):
            returncode = child.wait()
        status = 128 - returncode if returncode < 0 else returncode
        job = collect_job(directory, command, status, cwd=cwd)
    return RunOutcome(job, status, -returncode if returncode < 0 else None)


def collect_job(
    directory: str | os.PathLike[str], command: Sequence[str], exit_status: int, *, cwd: str | None = None
) -> ProfileJob:
    """Merge the run files the processes of a job wrote into ``directory`` (each read
    through the one reader, every field checked); processes that started recording but
    left no run are listed as missing. A damaged run file raises
    :class:`~compiletrace.RunFileError` naming it."""
    root = Path(directory)
    started: dict[int, ProcessInfo] = {}
    for marker in sorted(root.glob(f"*{STARTED_SUFFIX}")):
        try:
            info = _read_started(marker)
        except CompiletraceError:
            continue  # a marker cut short by a kill: its run, if any, still names the process
        started[info.pid] = info
    processes = []
    for path in sorted(root.glob(f"*{RUN_SUFFIX}")):
        try:
            run = read(path, accept={FileKind.RUN}, command="compiletrace run")
            assert isinstance(run, Run)
            info = ProcessInfo.from_dict(run.meta, str(path), "meta")
        except CompiletraceError as exc:
            # One process's damaged file must not cost the others theirs, nor the command
            # its exit status: it is named, and the process counts as leaving no run.
            print(f"compiletrace: {printable(first_line(exc))}", file=sys.stderr)
            continue
        processes.append(JobProcess(info, run))
    recorded = {p.info.pid for p in processes}
    processes.sort(key=lambda p: (p.run.timeline.start_unix_ns if p.run.timeline else 0, p.info.pid))
    missing = tuple(
        replace(info, role=f"{info.role}, still running when the command ended") if _alive(pid) else info
        for pid, info in sorted(started.items())
        if pid not in recorded
    )
    return ProfileJob(
        tuple(command), exit_status, tuple(processes), missing, os.path.abspath(cwd or os.getcwd())
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # not ours to signal: it exists
        return True
    return True


def _read_started(path: Path) -> ProcessInfo:
    f = Fields(read_json_file(str(path)), str(path))
    f.check_kind(STARTED_KIND, {1}, "a job process's start marker")
    return ProcessInfo.from_dict(f.obj("process").data, str(path), "process")
