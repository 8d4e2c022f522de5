"""benchmarks/verify_cases.py's reading of the doctor's goals from every case's fixes: the
calibration of each fix kind, the first fixes that made start-up slower, the share within
0.5-2x of their stake (alternatives and gates are not first fixes)."""

from __future__ import annotations

import doctest
import importlib.util
from pathlib import Path
from types import ModuleType

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "verify_cases.py"


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("verify_cases", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_its_examples_hold() -> None:
    failed, attempted = doctest.testmod(_benchmark())
    assert attempted > 0 and failed == 0


def test_the_goals_read_first_fixes_only_and_each_kinds_median() -> None:
    cases = _benchmark()
    fixes = [
        {"fix": "regional-compile=Block", "calibration": 0.8, "verdict": "verified"},
        {"fix": "regional-compile=GPT2Block", "calibration": -0.14, "verdict": "made it slower"},
        {"fix": "regional-compile=Layer", "calibration": 1.9, "verdict": "verified"},
        {"fix": "reorderable-print", "calibration": 1.2, "verdict": "verified"},
        {"fix": "dynamic-shapes", "calibration": -2.0, "verdict": "made it slower", "alternative": True},
        {"fix": "fail-after-ready", "verdict": "gate held", "gate": True},
        {"fix": "mark-dynamic=L['x']:0", "verdict": "not judged"},  # no calibration: not counted
    ]
    lines = cases.goals(fixes, plans=2)
    assert lines == [
        "regional-compile: median calibration 0.80 over 3 first fixes",
        "reorderable-print: median calibration 1.20 over 1 first fix",
        "first fixes that made start-up slower: 1 (regional-compile=GPT2Block)",
        "first fixes within 0.5-2x of their stake: 3 of 4 (75%; the goal: 80%)",
        "cases with a plan: 2",
    ]
    assert [f["fix"] for f in cases.first_fixes(fixes)][-1] == "mark-dynamic=L['x']:0"
