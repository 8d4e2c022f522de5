"""One profiled start-up as plain data: :class:`Run` holds the graph records, the warm-up
(:class:`WarmupResult`), how it was run (``meta``, a :class:`RunMeta`) and the start-up
timeline, and saves to and loads from the run file (``compiletrace.run``). The applications'
``ProfileRun`` is a ``Run`` with its views (text, HTML, the doctor) attached.

>>> from compiletrace._data.records import CompilationTimes
>>> run = Run((), WarmupResult(False, 1.0, CompilationTimes()), RunMeta(model="m"))
>>> Run.from_dict(run.to_dict()) == run
True
>>> run.meta.model, Run((), run.warmup, {"model": "m"}) == run  # a dict is read as a RunMeta
('m', True)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from compiletrace._data.kinds import FileKind
from compiletrace._data.records import NS_PER_S, CompilationTimes, GraphRecord, RuntimeEvent, component_totals
from compiletrace._data.registry import Registry, registry_dict
from compiletrace._data.run_meta import CompilationMode, RunMeta
from compiletrace._data.timeline import Timeline, build_timeline
from compiletrace._io.envelope import Fields
from compiletrace._io.files import write_json

__all__ = [
    "RUN_KIND",
    "RUN_SCHEMA_VERSION",
    "CompilationMode",
    "Run",
    "RunMeta",
    "RunOrRecords",
    "WarmupResult",
    "run_parts",
]

RUN_KIND = FileKind.RUN.value
RUN_SCHEMA_VERSION = FileKind.RUN.schema_version


@dataclass(frozen=True)
class WarmupResult:
    """What a warm-up did."""

    skipped: bool  # True in CompilationMode.NONE: nothing compiles, so nothing to warm up
    duration_s: float  # wall time of the warm-up run (0.0 when skipped)
    compilation_times: CompilationTimes  # compile seconds recorded during the warm-up
    by_component: dict[str, float] = field(default_factory=dict)  # the same, for any component
    mode: CompilationMode = CompilationMode.STOCK_TORCH_COMPILE
    device: str = "cpu"

    def to_dict(self) -> dict[str, Any]:
        return {
            "skipped": self.skipped,
            "duration_s": self.duration_s,
            "compilation_times": self.compilation_times._asdict(),
            "by_component": dict(self.by_component),
            "mode": self.mode.value,
            "device": self.device,
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "warm-up", where: str = "") -> WarmupResult:
        """Read :meth:`to_dict` output back, checking every field."""
        f = Fields(data, source, where)
        by_component = f.seconds_by_name("by_component")
        return cls(
            skipped=f.boolean("skipped"),
            duration_s=f.number("duration_s", minimum=0.0),
            compilation_times=CompilationTimes.from_components(by_component),
            by_component=by_component,
            mode=f.choice("mode", CompilationMode),
            device=f.string("device"),
        )


@dataclass(frozen=True, init=False)
class Run:
    """One profiled start-up: the graph records, the warm-up result, how it was run, and the
    start-up timeline (from the process's start to the end of the run; None where none was
    recorded: a notebook cell's run, torch's trace). Holds records, not a live registry.

    ``meta`` may be given as a dict, as before it was typed: it is read as a file's meta is
    (:meth:`RunMeta.from_dict`, every field checked)."""

    graph_records: tuple[GraphRecord, ...]  # every graph of this run, in the order compiles finished
    warmup: WarmupResult
    meta: RunMeta  # what ran, where, with which torch, what else it measured, who recorded it
    timeline: Timeline | None  # the start-up timeline, up to the end of the run
    # Work torch did on compiled graphs' first calls (autotuning, CUDA-graph recording)
    runtime_events: tuple[RuntimeEvent, ...]

    def __init__(
        self,
        graph_records: tuple[GraphRecord, ...],
        warmup: WarmupResult,
        meta: RunMeta | Mapping[str, Any] | None = None,
        timeline: Timeline | None = None,
        runtime_events: tuple[RuntimeEvent, ...] = (),
    ) -> None:
        object.__setattr__(self, "graph_records", graph_records)
        object.__setattr__(self, "warmup", warmup)
        object.__setattr__(self, "meta", RunMeta.of(meta, f"{type(self).__name__}(meta=...)"))
        object.__setattr__(self, "timeline", timeline)
        object.__setattr__(self, "runtime_events", tuple(runtime_events))

    def records(self) -> tuple[GraphRecord, ...]:
        return self.graph_records

    def by_component(self) -> dict[str, float]:
        """Compile seconds per component."""
        return {name: ns / NS_PER_S for name, ns in component_totals(self.graph_records).items()}

    def compilation_times(self) -> CompilationTimes:
        return CompilationTimes.from_components(self.by_component())

    @property
    def registry(self) -> Registry:
        """A new registry holding this run's records and phases (for code that takes a registry)."""
        registry = Registry()
        for record in self.graph_records:
            registry.add(record)
        for phase_record in self.timeline.phases if self.timeline is not None else ():
            registry.add_phase(phase_record)
        for event in self.runtime_events:
            registry.add_runtime_event(event)
        return registry

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "meta": self.meta.to_dict(),
            "registry": registry_dict(
                self.graph_records,
                self.timeline.phases if self.timeline is not None else (),
                self.runtime_events,
            ),
            "warmup": self.warmup.to_dict(),
        }
        if self.timeline is not None:
            # The window alone: the phases are in the registry, the entries are derived.
            body["timeline"] = self.timeline.window_dict()
        return FileKind.RUN.envelope(body)

    @classmethod
    def from_dict(cls, data: Any, source: str = "run") -> Self:
        """Read :meth:`to_dict` output, checking every field; raises
        :class:`~compiletrace.RunFileError` naming the first bad one."""
        f = Fields(data, source)
        version = FileKind.RUN.check(f)
        registry = Registry.from_dict(f.obj("registry").data, source, "registry", version)
        warmup = WarmupResult.from_dict(f.obj("warmup").data, source, "warmup")
        meta = RunMeta.from_dict(f.obj("meta").data, source, "meta")
        timeline = None
        if "timeline" in f.data:  # absent when the run has none (a notebook cell's, torch's trace)
            start, end, origin, before_exec = Timeline.read_window(f.data["timeline"], source)
            timeline = build_timeline(
                registry.phase_records(),
                registry.records(),
                start,
                end,
                origin=origin,
                before_exec_ns=before_exec,
            )
        return cls(registry.records(), warmup, meta, timeline, registry.runtime_events())

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the run as JSON, atomically."""
        write_json(path, self.to_dict())


# What a view takes: a run, or records from one (a registry's, say: no warm-up, meta or
# timeline to show).
RunOrRecords = Run | Sequence[GraphRecord]


def run_parts(
    run: RunOrRecords,
) -> tuple[tuple[GraphRecord, ...], WarmupResult | None, RunMeta, Timeline | None]:
    """(records, warm-up, meta, timeline) of what a view was given (records alone: no
    warm-up, an empty meta, no timeline).

    >>> run_parts([])
    ((), None, RunMeta(), None)
    """
    if isinstance(run, Run):
        return run.graph_records, run.warmup, run.meta, run.timeline
    return tuple(run), None, RunMeta(), None
