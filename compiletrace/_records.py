"""The plain data compiletrace produces: one immutable record per compiled graph.

Records are built by the tracker (torch events -> records), stored in a
:class:`~compiletrace.Registry`, and read by every view (text, JSON, HTML, OTel,
Chrome trace). Views never reach back into torch.
"""

from __future__ import annotations

import enum
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, NamedTuple

__all__ = ["CacheOutcome", "CompilationTimes", "CompileStatus", "GraphRecord"]

NS_PER_S = 1_000_000_000


class CacheOutcome(str, enum.Enum):
    """What a compile cache did for one graph."""

    HIT = "hit"  # every lookup hit
    MISS = "miss"  # at least one lookup missed and was compiled afresh
    BYPASS = "bypass"  # the cache declined the graph (uncacheable content)
    NONE = "none"  # no lookup happened (cache off, or a backend without one)


class CompileStatus(str, enum.Enum):
    """How one graph's compile ended."""

    OK = "ok"
    ERROR = "error"  # the backend raised; the user saw the exception
    EAGER_FALLBACK = "eager_fallback"  # the backend raised; Dynamo ran the frame eagerly


def qualified_type_name(exc: BaseException) -> str:
    """An exception's class as recorded (``error_type``, the ``error.type`` attribute):
    ``ValueError`` for builtins, ``module.Qualname`` otherwise."""
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


class CompilationTimes(NamedTuple):
    """Compile seconds of the two standard components.

    >>> CompilationTimes(language_model=8.0, encoder=4.34).total
    12.34
    """

    language_model: float = 0.0
    encoder: float = 0.0

    @property
    def total(self) -> float:
        return self.language_model + self.encoder


@dataclass(frozen=True, slots=True)
class GraphRecord:
    """One frame compile by Dynamo (one compile id) and its backward, if compiled lazily.

    Durations are integer nanoseconds from the tracker's clock, so figures computed from
    a fake clock are exact; the ``*_s`` properties give seconds. Timestamps are Unix epoch
    nanoseconds (the clock's reading shifted by an offset taken once), usable as span times.
    """

    compile_id: str  # torch's "frame/attempt" id, e.g. "0/0", "0/1" (a recompile), "1/0"
    component: str  # "encoder", "language_model" or a user's name
    backend: str  # the inner backend's name ("inductor", "aot_eager", ...)
    code_name: str  # the compiled frame's code name ("forward", "torch_dynamo_resume_in_...")
    graph_node_count: int  # FX nodes across the frame's graphs (0 if it produced none)
    start_unix_ns: int  # frame compile start
    end_unix_ns: int  # frame compile end (guards built)
    dynamo_ns: int | None  # Dynamo tracing + guards: frame time minus backend time (None if unknown)
    backend_ns: int  # time inside the backend (AOTAutograd, inductor, cache loads)
    backend_start_unix_ns: int | None  # first backend call start, if any
    backward_ns: int = 0  # lazy backward compile at the first .backward()
    backward_start_unix_ns: int | None = None
    is_recompile: bool = False
    recompile_reason: str | None = None  # torch's reason, e.g. "tensor 'x' size mismatch ..."
    fx_graph_cache: CacheOutcome = CacheOutcome.NONE
    aot_autograd_cache: CacheOutcome = CacheOutcome.NONE
    status: CompileStatus = CompileStatus.OK
    error_type: str | None = None  # qualified exception type when status is not OK
    rank: int = 0  # torch.distributed rank that compiled this graph
    world_size: int = 1
    # Backend time split into phases (see compiletrace._phases), sorted (name, ns) pairs
    # that add up to backend_ns: aot_autograd, inductor, kernel_compile, cache, other.
    phases: tuple[tuple[str, int], ...] = ()

    @property
    def frame_ns(self) -> int:
        """Frame compile time: Dynamo + backend + guards (no lazy backward)."""
        return self.end_unix_ns - self.start_unix_ns

    @property
    def total_ns(self) -> int:
        """Everything this graph cost: the frame compile plus its lazy backward."""
        return self.frame_ns + self.backward_ns

    @property
    def frame_s(self) -> float:
        return self.frame_ns / NS_PER_S

    @property
    def total_s(self) -> float:
        return self.total_ns / NS_PER_S

    @property
    def dynamo_s(self) -> float | None:
        return None if self.dynamo_ns is None else self.dynamo_ns / NS_PER_S

    @property
    def backend_s(self) -> float:
        return self.backend_ns / NS_PER_S

    @property
    def backward_s(self) -> float:
        return self.backward_ns / NS_PER_S

    @property
    def phase_ns(self) -> dict[str, int]:
        """Backend nanoseconds per phase."""
        return dict(self.phases)

    @property
    def cache_outcome(self) -> CacheOutcome:
        """One outcome for the graph: a miss anywhere is a miss; else a hit; else bypass."""
        outcomes = (self.fx_graph_cache, self.aot_autograd_cache)
        for outcome in (CacheOutcome.MISS, CacheOutcome.HIT, CacheOutcome.BYPASS):
            if outcome in outcomes:
                return outcome
        return CacheOutcome.NONE

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["fx_graph_cache"] = self.fx_graph_cache.value
        data["aot_autograd_cache"] = self.aot_autograd_cache.value
        data["status"] = self.status.value
        data["phases"] = dict(self.phases)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GraphRecord:
        known = {f.name for f in fields(cls)}
        required = {f.name for f in fields(cls) if f.default is MISSING}
        if required - set(data):
            raise ValueError(f"graph record lacks {sorted(required - set(data))}")
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["fx_graph_cache"] = CacheOutcome(kwargs.get("fx_graph_cache", "none"))
        kwargs["aot_autograd_cache"] = CacheOutcome(kwargs.get("aot_autograd_cache", "none"))
        kwargs["status"] = CompileStatus(kwargs.get("status", "ok"))
        kwargs["phases"] = tuple(sorted((str(k), int(v)) for k, v in dict(kwargs.get("phases", {})).items()))
        return cls(**kwargs)
