"""One process of a ``compiletrace run`` job: record every compile (passive recording) and
write this process's run into the job's directory when it ends.

The bootstrap (``compiletrace/_bootstrap/sitecustomize.py``) calls :func:`start` once
``torch._dynamo`` has been imported, in every Python process the command starts (spawned,
forked, ``subprocess``, torchrun ranks). The job directory's files are named by the
process's key (``compiletrace._data.job_dir``: pid, start time, a random part):

- ``KEY.started.json``: written at start, so a process killed before it could write its
  run is still known to the job (the report names it); a forked child that compiles
  nothing removes its own at its end (a DataLoader worker is not a lost process);
- ``KEY.run.json``: the process's run (a run file; its ``meta`` says which process, and
  when it became ready: ``compiletrace run --ready``), written atomically at exit (a
  normal exit, an uncaught exception, ``sys.exit``, ``os._exit``), before ``os.exec*``
  replaces the program, on SIGTERM (the process then dies of SIGTERM, as it would have),
  and at the end of a multiprocessing child; and, while it runs, soon after its records
  change (:mod:`~compiletrace._app.checkpoints`), so a process killed before its end (vLLM's
  engine core, torn down by its parent; SIGKILL) keeps what it compiled.

Every file goes through :class:`~compiletrace._io.private_dir.PrivateDirectory`: the
directory the launcher made, checked by identity, owner and mode at every write, so a
process that outlives its job never writes into a directory someone else made at the
same path.

Nothing here may break the program: every failure is one warning on stderr.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, Any

from compiletrace._app import program_fixes
from compiletrace._app.checkpoints import Checkpoints
from compiletrace._app.engine_phases import install as install_engine_phases
from compiletrace._app.environment_fixes import is_environment_fix
from compiletrace._app.ready_watch import watch_port, watch_steps
from compiletrace._app.timeline import startup_timeline
from compiletrace._core import recorder
from compiletrace._core import torch_compat as tc
from compiletrace._core.passive import observe
from compiletrace._core.ready import current_mark, mark_ready, on_ready
from compiletrace._data.job_dir import (
    JOB_DIR_ENV,
    JOB_DIR_ID_ENV,
    LAUNCHER_PID_ENV,
    OPTIONS_ENV,
    RANK_PID_ENV,
    READY_ENV,
    READY_SUFFIX,
    RUN_SUFFIX,
    STARTED_SUFFIX,
    job_resource_attributes,
    process_key,
    ready_marker,
    started_marker,
)
from compiletrace._data.ready import (
    PHASE,
    PORT,
    READY_ARTIFACT,
    STEP,
    WARM_UP,
    ReadyMark,
    ReadySpec,
    is_warm_up_phase,
    parse_ready,
)
from compiletrace._data.records import CompilationTimes
from compiletrace._data.registry import Registry, get_registry
from compiletrace._data.run import Run, WarmupResult
from compiletrace._data.run_meta import MAX_TEXT_CHARS, ProcessInfo, RunMeta
from compiletrace._data.timeline import PhaseRecord
from compiletrace._data.torch_text import STANCE_REFUSED
from compiletrace._io.files import json_bytes
from compiletrace._io.private_dir import NotPrivate, PrivateDirectory
from compiletrace._io.state import STATE, Slot
from compiletrace._io.text import ascii_int, clip
from compiletrace._version import __version__

if TYPE_CHECKING:
    from compiletrace.telemetry import Telemetry

__all__ = ["install_program_fixes", "process_role", "start"]


class _Recording:
    """This process's recording: started once, written once per pid."""

    def __init__(
        self,
        job_dir: PrivateDirectory,
        components: list[str],
        trace_cost: bool,
        fixes: list[str] | None = None,
    ) -> None:
        self.job_dir = job_dir
        self.components = components
        self.trace_cost = trace_cost
        self.fixes = fixes or []  # the fixes applied in this process (compiletrace run --apply)
        # Re-entrant: SIGTERM arriving while this thread writes must neither deadlock nor
        # write twice. Held by the checkpoint thread while it writes, and across a fork (a
        # child must not inherit it, or a registry's lock, held by a thread it lacks).
        self.lock = threading.RLock()
        self.pid = -1
        self.key = ""  # this process's name in the job directory
        self.marked = False  # its start marker is there
        self.written = False  # its final run is written (a checkpoint is not)
        self.writing = False
        self.checkpoints: Checkpoints | None = None
        self.pending_signal: int | None = None  # a SIGTERM that came while writing
        self.forked_at_ns = 0  # a forked child keeps only the records it made after this
        self.registry = Registry()
        self.observer: observe | None = None
        self.info: ProcessInfo | None = None
        self.refused: str | None = None  # torch's stance refused a compile after ready, and said this

    def begin(self) -> None:
        """Start recording as this process."""
        self.pid = os.getpid()
        self.key = process_key()
        self.observer = observe(
            components=self.components, registry=self.registry, trace_cost=self.trace_cost
        )
        self.observer.recording.own_backends = True  # compiletrace.compile's, in any registry
        self.name_process()

    def forked(self) -> None:
        """In a forked child, between fork and (maybe) exec: no lock taken, no file written
        (``subprocess`` forks this way before it execs another program). The records made
        from now on are this child's."""
        self.pid = os.getpid()
        self.key = process_key()
        self.lock = threading.RLock()  # the parent's is held across the fork
        self.checkpoints = None  # the parent's thread is not here: a multiprocessing child starts its own
        self.marked = False
        self.written = self.writing = False
        self.pending_signal = None
        self.forked_at_ns = time.time_ns()
        self.info = None  # named when it writes, or by multiprocessing once it knows its name

    def name_process(self) -> None:
        """(Re)write the start marker, with the role as the process knows it now: a forked
        multiprocessing child learns its name after the fork."""
        self.info = ProcessInfo.this_process(process_role())
        self.job_dir.write(self.key + STARTED_SUFFIX, started_marker(self.info))
        self.marked = True

    def write(self) -> None:
        """Write this process's final run (once; a forked child writes its own). A
        checkpoint being written by the other thread is waited for, briefly."""
        if not self.lock.acquire(timeout=_LOCK_WAIT_S):
            return  # held past the wait: the last checkpoint stands for the run
        try:
            if self.written or self.writing or self.pid != os.getpid():
                return
            self.writing = True
            self._write()
            self.written = True
        finally:
            self.writing = False
            self.lock.release()

    def checkpoint(self) -> bool:
        """Write this process's run as it stands, while it runs (the checkpoint thread);
        True when written. Never after the final write, never beside another write."""
        if not self.lock.acquire(blocking=False):
            return False
        try:
            if self.written or self.writing or self.pid != os.getpid():
                return False
            self.writing = True
            return self._write(checkpoint=True)
        except Exception as exc:
            _warn(f"a checkpoint of this process's run (pid {os.getpid()}) was not written", exc)
            return False
        finally:
            self.writing = False
            self.lock.release()

    def state(self) -> tuple[int, ...] | None:
        """What changes when this process's records do (None: it recorded nothing yet), for
        the checkpoint thread: a few counts."""
        process_registry = get_registry()
        counts = (
            len(self.registry),
            len(self.registry.phase_records()),
            len(self.registry.runtime_events()),
            len(process_registry) if process_registry is not self.registry else 0,
            current_mark() is not None,
        )
        return counts if counts[0] or counts[3] else None

    def start_checkpoints(self) -> None:
        """Start this process's checkpoint thread (:mod:`~compiletrace._app.checkpoints`)."""
        self.checkpoints = Checkpoints(self.state, self.checkpoint).start()

    def _write(self, checkpoint: bool = False) -> bool:
        # The passive records, and those of compiletrace.compile into the process registry
        # (not the copies the program's own observe() put there: the job has those already).
        own = self.registry.records()
        seen = {(r.compile_id, r.start_unix_ns) for r in own}
        records = sorted(
            (
                r
                for r in (
                    *own,
                    *(r for r in get_registry().records() if (r.compile_id, r.start_unix_ns) not in seen),
                )
                if r.start_unix_ns >= self.forked_at_ns
            ),
            key=lambda r: r.end_unix_ns,
        )
        if checkpoint and not records:
            return False  # nothing compiled yet: nothing to keep
        if self.forked_at_ns and not records:
            # A forked child that compiled nothing (a DataLoader worker, or a child about
            # to exec another program) leaves nothing, its start marker included.
            if self.marked:
                self.job_dir.remove(self.key + STARTED_SUFFIX)
                self.marked = False
            return False
        info = self.info or ProcessInfo.this_process(process_role())
        reg = Registry()
        for record in records:
            reg.add(record)
        # The engines' phases (engine_phases), and the program's own (compiletrace.phase,
        # warm_up: the process registry's, where they go by default).
        process_registry = get_registry()
        phases = [*self.registry.phase_records()]
        if process_registry is not self.registry:
            phases += process_registry.phase_records()
        for phase in sorted(phases, key=lambda p: p.end_unix_ns):
            if phase.start_unix_ns >= self.forked_at_ns:
                reg.add_phase(phase)
        for event in self.registry.runtime_events():  # autotuning, CUDA-graph recordings
            if event.start_unix_ns >= self.forked_at_ns:
                reg.add_runtime_event(event)
        by_component = reg.by_component()
        warmup = WarmupResult(
            skipped=True,  # no warm-up was run by compiletrace: the program ran as it does
            duration_s=0.0,
            compilation_times=CompilationTimes.from_components(by_component),
            by_component=by_component,
        )
        backends = sorted({r.backend for r in records})
        mark = current_mark()
        meta = RunMeta(
            source="compiletrace run",
            model=clip(" ".join(info.argv), MAX_TEXT_CHARS - 100) or "?",  # what the header names the run by
            backend=", ".join(backends) if backends else None,
            compiletrace_version=__version__,
            torch_version=_torch_version(),
            created_unix_s=time.time(),
            applied_fixes=tuple(self.fixes),
            process=info,
            cache_keys=tc.run_cache_keys(records),
            ready=mark if mark is not None and mark.unix_ns >= self.forked_at_ns else None,
            refused_after_ready=self.refused,
            checkpoint_unix_s=time.time() if checkpoint else None,
        )
        run = Run(reg.records(), warmup, meta, startup_timeline(reg), reg.runtime_events())
        self.job_dir.write(self.key + RUN_SUFFIX, json_bytes(run.to_dict(), self.key + RUN_SUFFIX))
        return True


# How long the final write waits for a checkpoint the other thread is writing.
_LOCK_WAIT_S = 10.0


# This process's recording for its job, once started. Written when the process starts
# recording, read by its exit, signal and fork handlers: the handlers take no lock (one
# held by another thread when the process forked would never be released in the child).
_RECORDING: Slot[_Recording | None] = STATE.slot("job recording", None)


def process_role() -> str:
    """What this process is in its job: a torchrun rank, a named multiprocessing child
    (vLLM names its engine core and workers), the command the user ran, or its pid. A
    rank's own children inherit its ``RANK``: they are named as children of the rank
    (``Process-1 of rank 0``), never as the rank."""
    pid = str(os.getpid())
    rank = os.environ.get("RANK")
    if rank is None or ascii_int(rank) is None or "LOCAL_RANK" not in os.environ:  # not "²"
        rank = None
    elif os.environ.get(RANK_PID_ENV, pid) == pid:
        return f"rank {rank}"
    of_rank = f" of rank {rank}" if rank is not None else ""
    mp = sys.modules.get("multiprocessing")
    if mp is not None:
        try:
            name = mp.current_process().name
            if name != "MainProcess":
                return f"{name}{of_rank}"
        except Exception:
            pass
    if not of_rank and str(os.getppid()) == os.environ.get(LAUNCHER_PID_ENV):
        return "main"
    return f"pid {pid}{of_rank}"


def _torch_version() -> str:
    torch = sys.modules.get("torch")
    return str(getattr(torch, "__version__", "?"))


def _warn(what: str, exc: BaseException) -> None:
    # One line on stderr, never an exception: the program runs on.
    with contextlib.suppress(Exception):
        sys.stderr.write(f"compiletrace: {what}: {type(exc).__name__}: {exc}\n")


def _write_quietly() -> None:
    recording = _RECORDING.value
    if recording is None:
        return
    try:
        recording.write()
    except Exception as exc:
        _warn(f"this process's run (pid {os.getpid()}) was not written", exc)
    if recording.pending_signal is not None:
        _die_of(recording.pending_signal)


# This process's span and metric export (compiletrace run --otlp-endpoint), and where it
# sends them (a forked child starts its own export there). Written as _RECORDING is.
_TELEMETRY: Slot[Telemetry | None] = STATE.slot("job telemetry", None)
_TELEMETRY_ENDPOINT: Slot[str | None] = STATE.slot("job telemetry endpoint", None)


def _start_telemetry(endpoint: str) -> None:
    """Send this process's compiles to ``endpoint`` as they happen, on providers of its own:
    the program's global OpenTelemetry providers stay its own (set_global=False). A forked
    child starts its own (its pid and role on the resource) and flushes it at its end."""
    first = _TELEMETRY_ENDPOINT.value is None
    _TELEMETRY_ENDPOINT.value = endpoint
    try:
        from compiletrace import telemetry

        _TELEMETRY.value = telemetry.configure(
            exporter="otlp",
            endpoint=endpoint,
            resource_attributes={
                "process.pid": os.getpid(),
                "compiletrace.process.role": process_role(),
                **job_resource_attributes(os.environ),
            },
            set_global=False,
        )
    except Exception as exc:  # no SDK or exporter here: the program runs, its spans are off
        _warn(f"spans are off in this process (pid {os.getpid()})", exc)
        _TELEMETRY.value = None
        return
    if first:  # a forked child inherits this registration
        atexit.register(_flush_telemetry)


def _flush_telemetry() -> None:
    handle = _TELEMETRY.value
    if handle is not None:
        try:
            handle.shutdown()  # bounded in time (the exporter's timeout)
        except Exception as exc:
            _warn("flushing this process's spans failed", exc)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # The program had no handler of its own: write what was recorded, then die of SIGTERM
    # as it would have without compiletrace. A SIGTERM that lands while the run is being
    # written (at exit, or a second one during this handler's write) lets that write end.
    recording = _RECORDING.value
    if recording is not None and recording.writing:
        recording.pending_signal = signum
        return
    _write_quietly()
    _flush_telemetry()
    _die_of(signum)


def _die_of(signum: int) -> None:
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


# Whether this process's fork handler holds the recording's lock across a fork.
_HELD_ACROSS_FORK: Slot[bool] = STATE.slot("job recording: lock held across a fork", False)


def _before_fork() -> None:
    # No checkpoint may be half written, with a registry's lock held, when the process forks.
    recording = _RECORDING.value
    _HELD_ACROSS_FORK.value = recording is not None and recording.lock.acquire(timeout=_LOCK_WAIT_S)


def _after_fork_in_parent() -> None:
    recording = _RECORDING.value
    if _HELD_ACROSS_FORK.value and recording is not None:
        _HELD_ACROSS_FORK.value = False
        recording.lock.release()


def _after_fork_in_child() -> None:
    _HELD_ACROSS_FORK.value = False
    recording = _RECORDING.value
    if recording is not None:
        recording.forked()
    endpoint = _TELEMETRY_ENDPOINT.value
    if endpoint is not None:
        _start_telemetry(endpoint)


def _finalize_multiprocessing_child() -> None:
    # A multiprocessing child (fork) ends with os._exit after its finalizers, skipping atexit.
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None:
        mp_util.Finalize(None, _write_quietly, exitpriority=-100)
        mp_util.Finalize(None, _flush_telemetry, exitpriority=-101)


def _in_multiprocessing_child(recording: _Recording) -> None:
    # Run by multiprocessing in a forked child once it knows its own name.
    try:
        recording.name_process()
        _finalize_multiprocessing_child()
        recording.start_checkpoints()
    except Exception as exc:
        _warn("recording is off in this forked process", exc)


def _write_before_leaving() -> None:
    """Write the run before ``os.exec*`` replaces this program (every one of them ends in
    ``os.execv`` or ``os.execve``) and before ``os._exit``: neither runs ``atexit``. The
    program's own call then proceeds unchanged."""
    for name in ("execv", "execve", "_exit"):
        original = getattr(os, name, None)
        if original is None or getattr(original, "_compiletrace_writes_first", False):
            continue

        def first_write(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            _write_quietly()
            try:
                return _original(*args, **kwargs)
            finally:  # reached only when the exec failed: the program goes on, its end writes again
                if _RECORDING.value is not None:
                    _RECORDING.value.written = False

        first_write._compiletrace_writes_first = True  # type: ignore[attr-defined]
        first_write.__name__ = first_write.__qualname__ = name
        first_write.__doc__ = original.__doc__
        setattr(os, name, first_write)


def _apply_fixes(names: list[str]) -> list[str]:
    """Make each fix's setting now, before this process's first compile (a program fix:
    installed already, once torch was imported, or now); the names applied. A fix that
    takes effect at the ready mark (a stance) is made then (:func:`_became_ready`)."""
    program_fixes.install(names)  # each once per process: those installed already are skipped
    installed = program_fixes.applied()
    applied = []
    for name in names:
        if is_environment_fix(name):
            applied.append(name)  # the launcher set it in the environment torch read at import
            continue
        if tc.is_stance_fix(name):
            continue
        if program_fixes.is_program_fix(name):
            if name in installed:
                applied.append(name)
            continue  # install() warned
        try:
            tc.apply_config_fix(name)
            applied.append(name)
        except Exception as exc:  # a torch without the setting: the program runs unfixed
            _warn(f"the fix {name!r} could not be applied in this process", exc)
    return applied


def _fixes_option() -> list[str]:
    raw = os.environ.get(OPTIONS_ENV)
    return [str(f) for f in json.loads(raw).get("fixes", [])] if raw else []


def _ready_spec() -> ReadySpec | None:
    raw = os.environ.get(READY_ENV)
    if not raw:
        return None
    try:
        return parse_ready(raw)
    except Exception as exc:  # the launcher checked it: another launcher's, or none
        _warn(f"{READY_ENV} is not a ready mark; this process marks its warm-up's end instead", exc)
        return None


def _watch_phases(spec: ReadySpec | None) -> None:
    """Mark this process ready when its ``--ready phase:NAME`` ends, or, with no ``--ready``,
    its first top-level warm-up phase (``MODULE:FUNCTION`` is the bootstrap's)."""
    if spec is not None and spec.how != PHASE:
        return

    def phase_ended(record: PhaseRecord) -> None:
        if current_mark() is not None:
            return
        if spec is not None:
            if record.name == spec.name:
                mark_ready(PHASE, spec.text, record.end_unix_ns)
        elif record.parent_id is None and is_warm_up_phase(record.name):
            mark_ready(WARM_UP, record.name, record.end_unix_ns)

    recorder.set_end_listener(phase_ended)


def _became_ready(recording: _Recording, fixes: list[str], mark: ReadyMark) -> None:
    """At the ready mark: make the fixes that take effect there (torch's stance), and write
    the mark into torch's trace, if one is being written."""
    for name in fixes:
        if not tc.is_stance_fix(name):
            continue
        try:
            tc.apply_stance_fix(name)
        except Exception as exc:  # inside a compiled region, or a torch without the stance
            _warn(f"the fix {name!r} could not be applied at the ready mark in this process", exc)
            continue
        recording.fixes.append(name)
        if name == "fail-after-ready":
            _note_refusals(recording)
    tc.write_trace_artifact(READY_ARTIFACT, mark.to_dict())
    if mark.pid == recording.pid:
        try:  # the launcher of a trial to ready reads it while the process runs
            recording.job_dir.write(recording.key + READY_SUFFIX, ready_marker(mark))
        except Exception as exc:
            _warn("the ready mark could not be told to the launcher", exc)


def _watch_ready(spec: ReadySpec | None) -> None:
    """Start what marks ``--ready port:PORT`` and ``--ready step:N`` (:mod:`ready_watch`)."""
    if spec is not None and spec.how == PORT:
        watch_port(spec)
    elif spec is not None and spec.how == STEP:
        watch_steps(spec)


def _note_refusals(recording: _Recording) -> None:
    """Keep, in the run, torch's message when its stance refused a compile and the program
    died of it (``doctor --verify`` tells a gate that closed from a crash so)."""
    previous = sys.excepthook

    def excepthook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        text = str(value)
        if STANCE_REFUSED in text:
            recording.refused = text.strip().splitlines()[0][:500] if text.strip() else STANCE_REFUSED
        previous(kind, value, tb)

    sys.excepthook = excepthook


def install_program_fixes() -> None:
    """Install the job's program fixes (``program_fixes``) in this process: called by the
    bootstrap once ``torch`` is imported, before the program can call ``torch.compile``."""
    try:
        program_fixes.install(_fixes_option())
    except Exception as exc:
        _warn("the fixes to the program are off in this process", exc)


def start() -> None:
    """Start recording this process for the job named by the environment (see the module
    docstring); a process outside a job, or a second call, does nothing."""
    path = os.environ.get(JOB_DIR_ENV)
    if not path or _RECORDING.value is not None:
        return
    identity = os.environ.get(JOB_DIR_ID_ENV)
    if not identity:
        raise NotPrivate(f"{JOB_DIR_ENV} is set without {JOB_DIR_ID_ENV}: its directory cannot be checked")
    job_dir = PrivateDirectory.from_identity(path, identity)
    job_dir.names()  # still the launcher's directory, else nothing at all is done here
    components: list[str] = []
    trace_cost = False
    fixes: list[str] = []
    endpoint: str | None = None
    raw = os.environ.get(OPTIONS_ENV)
    if raw:
        try:
            options = json.loads(raw)
            components = [str(c) for c in options.get("components", [])]
            trace_cost = options.get("trace_cost") is True
            fixes = [str(f) for f in options.get("fixes", [])]
            endpoint = str(options["otlp_endpoint"]) if options.get("otlp_endpoint") else None
        except Exception as exc:
            _warn(f"{OPTIONS_ENV} is not valid JSON; recording with the defaults", exc)
    if endpoint is not None:
        _start_telemetry(endpoint)
    recording = _Recording(job_dir, components, trace_cost, _apply_fixes(fixes))
    recording.begin()
    _RECORDING.value = recording
    try:
        install_engine_phases(recording.registry)  # vLLM's start-up phases, when it runs here
    except Exception as exc:
        _warn("engine start-up phases are off in this process", exc)
    try:
        spec = _ready_spec()
        _watch_phases(spec)
        on_ready(lambda mark: _became_ready(recording, fixes, mark))
        _watch_ready(spec)
    except Exception as exc:
        _warn("the ready mark is off in this process", exc)
    atexit.register(_write_quietly)
    _write_before_leaving()
    os.register_at_fork(
        before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
    )
    recording.start_checkpoints()
    if threading.current_thread() is threading.main_thread():
        try:
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError):
            pass
    try:
        import multiprocessing.util as mp_util

        mp_util.register_after_fork(recording, _in_multiprocessing_child)
    except Exception:
        pass
