"""Benchmarks run by the CLI: ``compiletrace bench startup`` (cold vs warm start-up)."""

from compiletrace._io.errors import ChildFailed
from compiletrace.bench.startup import (
    BenchOptions,
    IterationResult,
    StartupBenchResult,
    run_startup_bench,
)

__all__ = ["BenchOptions", "ChildFailed", "IterationResult", "StartupBenchResult", "run_startup_bench"]
