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
    """One fix, the findings it answers, the runs without and with it, and the verdict."""

    finding: str  # "recompiles (lm)": the finding's kind and component ("a + b": every one it answers)
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
    answers: tuple[str, ...] = ()  # every finding the fix answers first, as ``finding`` names them

    def to_dict(self) -> dict[str, object]:
        """The fix's row for the doctor's JSON (``"fixes"``): what it answers, the stake,
        the saving and the verdict.

        >>> row = VerifyRow("recompiles (lm)", "dynamic-shapes", TrialFigures(2, 40, 1.0, 2.0),
        ...                 TrialFigures(1, 30, 0.5, 1.5), "verified", at_stake_s=0.42,
        ...                 saved_cpu=(0.4, 0.05), calibration=0.952, rounds=3, answers=("recompiles (lm)",))
        >>> row.to_dict()  # doctest: +NORMALIZE_WHITESPACE
        {'fix': 'dynamic-shapes', 'answers': ['recompiles (lm)'], 'verdict': 'verified', 'at_stake_s': 0.42,
         'saved_cpu_s': {'median': 0.4, 'spread': 0.05}, 'saved_wall_s': None, 'calibration': 0.952,
         'rounds': 3, 'alternative': False, 'gate': False}
        """

        def pair(value: tuple[float, float] | None) -> dict[str, float] | None:
            return None if value is None else {"median": round(value[0], 4), "spread": round(value[1], 4)}

        return {
            "fix": self.fix,
            "answers": list(self.answers or (self.finding,)),
            "verdict": self.verdict,
            "at_stake_s": None if self.at_stake_s is None else round(self.at_stake_s, 4),
            "saved_cpu_s": pair(self.saved_cpu),
            "saved_wall_s": pair(self.saved_wall),
            "calibration": None if self.calibration is None else round(self.calibration, 3),
            "rounds": self.rounds,
            "alternative": self.alternative,
            "gate": self.gate,
        }
