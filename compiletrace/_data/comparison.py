"""Two saved runs compared, as plain data: each compared figure (:class:`Change`), the runs
reduced to what can be compared (:class:`RunFile`) and the verdict's parts
(:class:`Comparison`). Comparing is :mod:`compiletrace._app.compare`'s; the table, the
gate's rule and the warning are views (``compiletrace.reports``).

>>> Change("total", "compile time", 1.0, 1.5, slower=True).status
'REGRESSED'
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compiletrace._data.records import GraphRecord

__all__ = [
    "ABOUT",
    "BENCH",
    "CLOCKS",
    "COUNTS",
    "CPU",
    "DEFAULT_GATES",
    "GATES",
    "METRIC",
    "PROFILE",
    "TOTAL",
    "WALL",
    "Change",
    "Comparison",
    "CountChange",
    "RunFile",
]

PROFILE = "profile"
BENCH = "bench"
TOTAL = "total"
METRIC = "metric"  # a bench run's figures: always gated
GATES = (
    TOTAL,
    "component",
    "phase",
    "graph",
    "function",
)  # the scopes of a profile comparison, in table order
DEFAULT_GATES = (TOTAL, "component")
ABOUT = ("model", "backend", "torch_version")  # what two compared runs should share
# The clock a profile comparison judges seconds by: the compile work's CPU seconds (a busy
# machine barely moves them), or wall seconds (what a waiting user sees).
CPU = "cpu"
WALL = "wall"
CLOCKS = (CPU, WALL)
# What a profile run counts, which a busy machine does not move: any increase fails the gate.
COUNTS = (
    "graphs compiled",
    "frames",
    "recompiles",
    "fx_graph cache misses",
    "aot_autograd cache misses",
    "compiles after ready",
)


@dataclass(frozen=True)
class RunFile:
    """A saved run, reduced to what can be compared."""

    path: str
    kind: str  # "profile" or "bench"
    schema_version: int
    records: tuple[GraphRecord, ...] = ()  # profile runs: every process's, for a job
    metrics: dict[str, float] = field(default_factory=dict)  # bench runs: avg_* figures, phases too
    about: dict[str, str] = field(default_factory=dict)  # model, backend, torch_version, where known
    # A job's (``run --json``, or torch's trace of several processes) compiling processes,
    # each named as two runs of one command name it ("main", "rank 0"), with its records.
    processes: tuple[tuple[str, tuple[GraphRecord, ...]], ...] = ()
    # Profile runs: what they count (COUNTS), exact; empty for bench runs.
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    """One compared figure, in seconds (None where the figure exists in one run only).

    ``slower``: it grew beyond both thresholds (or is a graph only the new run has);
    ``gated``: its scope is gated, so slower means regressed.

    >>> Change("phase", "backend.cache", 0.14, 1.27, slower=True, gated=False).status
    'slower (not gated)'
    """

    scope: str  # "total", "component", "phase", "graph" or "metric"
    name: str
    base: float | None
    new: float | None
    slower: bool
    gated: bool = True
    # Several runs per side: each run's figure (base and new are their medians), and the
    # noise the growth had to beat (None: one run per side, judged by the thresholds).
    base_runs: tuple[float, ...] = ()
    new_runs: tuple[float, ...] = ()
    noise: float | None = None

    @property
    def regressed(self) -> bool:
        return self.slower and self.gated

    @property
    def delta(self) -> float:
        return (self.new or 0.0) - (self.base or 0.0)

    @property
    def status(self) -> str:
        if self.base is None and self.scope == "graph":
            return "NEW GRAPH" if self.regressed else "new graph" + ("" if self.gated else " (not gated)")
        if self.base is None:
            return "new"
        if self.new is None:
            return "gone"
        if self.slower:
            return "REGRESSED" if self.gated else "slower (not gated)"
        return "ok"


@dataclass(frozen=True)
class CountChange:
    """One count of the runs (:data:`COUNTS`): each side's median over its runs, and each
    run's count. Any increase fails the gate (``rose``): a count does not move with load.

    >>> CountChange("recompiles", 0, 1).status, CountChange("frames", 2, 2).status
    ('ROSE', 'ok')
    """

    name: str
    base: float
    new: float
    base_runs: tuple[int, ...] = ()
    new_runs: tuple[int, ...] = ()

    @property
    def rose(self) -> bool:
        return self.new > self.base

    @property
    def status(self) -> str:
        return "ROSE" if self.rose else "fewer" if self.new < self.base else "ok"


@dataclass(frozen=True)
class Comparison:
    """The changes between two runs and the rule that judged them; ``regressions`` are
    the slower changes in gated scopes (what makes ``compiletrace compare`` exit 1)."""

    base: RunFile
    new: RunFile
    changes: tuple[Change, ...]
    threshold_pct: float
    min_seconds: float
    gates: tuple[str, ...] = DEFAULT_GATES
    # What the totals, components and graphs were judged by (CPU or WALL; phases and
    # traced functions are wall seconds either way), and why that one, in words.
    clock: str = WALL
    clock_why: str = ""
    counts: tuple[CountChange, ...] = ()  # profile runs: what they count, side by side
    runs: tuple[int, int] = (1, 1)  # how many runs each side has (base, new)
    bound_why: str = ""  # where the thresholds came from, in words

    @property
    def count_rises(self) -> tuple[CountChange, ...]:
        """The counts that rose: each fails the gate, whatever the seconds."""
        return tuple(c for c in self.counts if c.rose)

    @property
    def failed(self) -> bool:
        """Whether the gate fails (``compiletrace compare`` exits 1): a count rose, or a
        gated figure regressed."""
        return bool(self.count_rises or self.regressions)

    @property
    def regressions(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.regressed)

    @property
    def differences(self) -> tuple[str, ...]:
        """What the two runs ran that is not the same (``"model: a vs b"``): their figures
        may not measure one thing. Only what both files say is compared.

        >>> a = RunFile("a.json", "profile", 1, about={"model": "m:a", "backend": "eager"})
        >>> b = RunFile("b.json", "profile", 1, about={"model": "m:b", "backend": "eager"})
        >>> Comparison(a, b, (), 10.0, 0.05).differences
        ('model: m:a vs m:b',)
        """
        return tuple(
            f"{key.replace('_version', '')}: {self.base.about[key]} vs {self.new.about[key]}"
            for key in ABOUT
            if key in self.base.about
            and key in self.new.about
            and self.base.about[key] != self.new.about[key]
        )

    @property
    def ungated_slower(self) -> tuple[Change, ...]:
        """Changes that slowed down in a scope no gate covers: shown, never failing."""
        return tuple(c for c in self.changes if c.slower and not c.gated)
