"""One command's job as plain data (``compiletrace run -- COMMAND``): every Python process
it started that compiled, each with its own run, its pid, parent and role, plus the
processes that started recording but left no run file (killed with SIGKILL, say). Saves
to and loads from the job file (``compiletrace.job``).

>>> from compiletrace._data.run import Run, WarmupResult
>>> from compiletrace._data.records import CompilationTimes
>>> run = Run((), WarmupResult(False, 0.0, CompilationTimes()), {})
>>> info = ProcessInfo(41, 40, "main", ("python", "train.py"))
>>> job = Job(("python", "train.py"), 0, (JobProcess(info, run),))
>>> Job.from_dict(job.to_dict()) == job
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Self

from compiletrace._data.kinds import FileKind
from compiletrace._data.ready import JobAfterReady, job_after_ready, parse_ready
from compiletrace._data.records import NS_PER_S, CompilationTimes, GraphRecord, component_totals
from compiletrace._data.run import Run
from compiletrace._data.run_meta import MAX_NAMES, MAX_TEXT_CHARS, ProcessInfo
from compiletrace._io.envelope import Fields
from compiletrace._io.errors import UsageError
from compiletrace._io.files import write_json

__all__ = ["JOB_KIND", "Job", "JobProcess", "ProcessInfo", "rank_of_role"]

JOB_KIND = FileKind.JOB.value


def rank_of_role(role: str) -> int | None:
    """The global rank a process's role names (``rank 3``; in a job of several nodes,
    ``node 1 rank 3``), or None for a process that is no rank.

    >>> rank_of_role("rank 3"), rank_of_role("node gpu-7 rank 12"), rank_of_role("Process-1 of rank 0")
    (3, 12, None)
    """
    if role.startswith("node "):
        role = role[5:].partition(" ")[2]
    number = role[5:]
    # ASCII digits, and few: "rank ²" or a rank of 5,000 digits is no rank.
    if role.startswith("rank ") and number.isascii() and number.isdecimal() and len(number) <= 10:
        return int(number)
    return None


@dataclass(frozen=True)
class JobProcess:
    """One process that recorded: who it was, and its run."""

    info: ProcessInfo
    run: Run

    @property
    def compiled(self) -> bool:
        return bool(self.run.graph_records)


@dataclass(frozen=True)
class Job:
    """Every process of one command: the command, its exit status (as a shell gives it:
    128 + N for a program killed by signal N), the processes that recorded, in the order
    they started, and those that started recording but left no run."""

    command: tuple[str, ...]
    exit_status: int
    processes: tuple[JobProcess, ...]
    missing: tuple[ProcessInfo, ...] = ()
    cwd: str = ""  # the directory the command ran in ("": not known, a trace's processes)
    ready: str = ""  # compiletrace run --ready, as given ("": the end of a warm-up, by default)
    # compiletrace run --traffic: the command that sent it requests once it was ready, its words
    # ({port}: the port of the ready mark); doctor --verify replays it in each trial (--trust)
    traffic: tuple[str, ...] = ()

    def records(self) -> tuple[GraphRecord, ...]:
        """Every process's records, process by process."""
        return tuple(r for p in self.processes for r in p.run.graph_records)

    def compiling(self) -> tuple[JobProcess, ...]:
        """The processes that compiled something."""
        return tuple(p for p in self.processes if p.compiled)

    def ranks(self) -> dict[int, JobProcess]:
        """The processes that are ranks of a torch.distributed job (torchrun's), by rank."""
        found = {}
        for process in self.processes:
            rank = rank_of_role(process.info.role)
            if rank is not None:
                found[rank] = process
        return dict(sorted(found.items()))

    def by_component(self) -> dict[str, float]:
        """Compile seconds per component, over the whole job."""
        return {name: ns / NS_PER_S for name, ns in component_totals(self.records()).items()}

    def compilation_times(self) -> CompilationTimes:
        return CompilationTimes.from_components(self.by_component())

    def after_ready(self) -> JobAfterReady:
        """What compiled after each process became ready (``compiletrace run --ready``; by
        default, after its warm-up), and whether any did."""
        return job_after_ready(
            self.ready,
            (
                (
                    p.info.label,
                    p.run.graph_records,
                    p.run.runtime_events,
                    p.run.timeline.phases if p.run.timeline is not None else (),
                    p.run.meta.ready,
                )
                for p in self.processes
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return FileKind.JOB.envelope(
            {
                "command": list(self.command),
                "exit_status": self.exit_status,
                "processes": [{"process": p.info.to_dict(), "run": p.run.to_dict()} for p in self.processes],
                "missing": [m.to_dict() for m in self.missing],
                "cwd": self.cwd,
                "ready": self.ready,
                **({"traffic": list(self.traffic)} if self.traffic else {}),
                # Derived (not read back): what CI holds at zero, and when each process was ready.
                "after_ready": self.after_ready().to_dict(),
            },
        )

    @classmethod
    def from_dict(cls, data: Any, source: str = "job") -> Self:
        """Read :meth:`to_dict` output, checking every field (each process's run too)."""
        f = Fields(data, source)
        version = FileKind.JOB.check(f)
        processes = []
        for item in f.items("processes"):
            info = ProcessInfo.from_dict(item.obj("process").data, source, f"{item.where}.process")
            processes.append(
                JobProcess(info, Run.from_dict(item.obj("run").data, f"{source} ({info.label})"))
            )
        missing = tuple(ProcessInfo.from_dict(m.data, source, m.where) for m in f.items("missing"))
        ready = f.string("ready") if version >= 2 else ""
        if ready:
            # doctor --verify runs the job again with this mark in every process's environment.
            try:
                parse_ready(ready)
            except UsageError:
                raise f.fail(
                    "ready",
                    "a ready mark as 'run --ready' takes it "
                    "(MODULE:FUNCTION, phase:NAME, port:PORT or step:N)",
                    ready,
                ) from None
        traffic = tuple(f.strings("traffic", [], limit=MAX_TEXT_CHARS, max_items=MAX_NAMES))
        return cls(
            command=tuple(f.strings("command")),
            exit_status=f.integer("exit_status"),
            processes=tuple(processes),
            missing=missing,
            cwd=f.string("cwd"),
            ready=ready,
            traffic=traffic,
        )

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the job as JSON, atomically."""
        write_json(path, self.to_dict())
