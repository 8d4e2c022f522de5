"""What ``compiletrace doctor --verify`` measured, as plain data: one run of the program
(:class:`TrialFigures`), and a finding with its fix, the runs without and with it, and the
verdict (:class:`VerifyRow`). Measuring and judging is ``compiletrace._app.verify``'s; the
before/after table is a view (``compiletrace.reports``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TrialFigures", "VerifyRow"]


@dataclass(frozen=True)
class TrialFigures:
    """What one run of the program measured."""

    frame_compiles: int
    graph_nodes: int
    compile_s: float
    wall_s: float
    steady_call_s: float | None = None  # median seconds per call after the warm-up (profile runs)
    compile_cpu_s: float | None = None  # compile CPU seconds (the rounds' median, where several ran)


@dataclass(frozen=True)
class VerifyRow:
    """One finding, its fix, the runs without and with it, and the verdict."""

    finding: str  # "recompiles (lm)": the finding's kind and component
    fix: str | None  # as run --apply spells it; None for a fix that needs an edit
    before: TrialFigures
    after: TrialFigures | None  # None when the fix was not applied
    verdict: str
    slower_per_call: float | None = None  # 0.3: the fix made the steady call 30% slower, beyond noise
    at_stake_s: float | None = None  # what the doctor said the fix can save (CPU seconds)
    saved_cpu: tuple[float, float] | None = None  # (median, spread) of the rounds' CPU savings
    saved_wall: tuple[float, float] | None = None  # ... and of their compile wall savings
    calibration: float | None = None  # saved over at stake, CPU
    rounds: int = 1  # runs per arm, interleaved
    alternative: bool = False  # another fix the finding names, measured beside its own
    why: str = ""  # why the verdict is not "verified" ("" for verified)
    gate: bool = False  # the fix is a gate (the program stopped at a compile after ready), not a fix
