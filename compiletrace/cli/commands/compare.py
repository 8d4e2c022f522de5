"""``compiletrace compare``: two saved runs (or start-up benchmarks) side by side; exit 1
when anything regressed. The comparison is :mod:`compiletrace._app.compare`'s."""

from __future__ import annotations

import argparse

from compiletrace._io.errors import UsageError
from compiletrace.cli.exit_codes import EXIT_FAILED, EXIT_OK
from compiletrace.cli.parsing import add_common_options, decimal

__all__ = ["DESCRIPTION", "EPILOG", "add_options", "run"]

DESCRIPTION = (
    "Compare two runs saved by 'profile --json' (the total, then per component, phase\n"
    "and graph), two jobs saved by 'run --json' or torch's traces (TORCH_TRACE: in total, then\n"
    "process by process; a single run stands for a job's one process), or two saved by 'bench\n"
    "startup --output-json' (per metric). A figure slowed down when it grew by more than\n"
    "--threshold percent and --min-seconds; a graph only in NEW (a new graph break or\n"
    "recompile) slowed down too. Seconds are the compile work's CPU seconds where both runs\n"
    "have them, else wall seconds (--clock). Every change is shown; those in the --gate scopes\n"
    "are regressions (bench metrics always are). Exit status: 0 none, 1 regressed, 2 bad input."
)
EPILOG = None


def add_options(parser: argparse.ArgumentParser) -> None:
    add_common_options(parser)
    parser.add_argument(
        "base",
        metavar="BASE",
        help="the reference run, job or trace (or a directory of a job's nodes' files)",
    )
    parser.add_argument("new", metavar="NEW", help="the run, job or trace to check (or a directory, as BASE)")
    parser.add_argument(
        "--threshold",
        type=decimal,
        default=10.0,
        metavar="PCT",
        help="allowed growth in percent (default: 10)",
    )
    parser.add_argument(
        "--min-seconds",
        type=decimal,
        default=0.05,
        metavar="S",
        help="ignore changes smaller than S seconds (default: 0.05)",
    )
    parser.add_argument(
        "--gate",
        action="append",
        default=None,
        metavar="SCOPE",
        help="gate on SCOPE: total, component, phase, graph or function (a traced function's Dynamo "
        "time, runs with --trace-cost); repeatable, or a comma-separated list "
        "(default: total,component)",
    )
    parser.add_argument(
        "--clock",
        choices=("auto", "cpu", "wall"),
        default="auto",
        metavar="CLOCK",
        help="the seconds judged: cpu (the compile work's CPU seconds, which a busy machine moves\n"
        "far less than wall seconds), wall, or auto (default: CPU seconds where both runs have\n"
        "them for every graph, else wall seconds)",
    )
    parser.add_argument(
        "--why",
        action="store_true",
        help="then say why each graph NEW missed the compile cache, by the part of its key that\n"
        "changed ('compiletrace why BASE NEW')",
    )


def run(args: argparse.Namespace) -> int:
    from compiletrace._app.compare import compare_files, parse_gates

    gates = parse_gates(args.gate)  # a bad --gate is bad input: exit 2 before reading a file
    result = compare_files(
        args.base,
        args.new,
        threshold_pct=args.threshold,
        min_seconds=args.min_seconds,
        gates=gates,
        clock=None if args.clock == "auto" else args.clock,
    )
    print(result.table())
    if args.why:
        from compiletrace.cli.commands.why import explain_files
        from compiletrace.reports import why_text

        if result.base.kind != "profile" or result.new.kind != "profile":
            raise UsageError("--why explains two runs' cache misses; these are start-up benchmarks")
        # Read again as 'why' reads them: a job's every process, each with its own cache keys.
        print()
        print(why_text(explain_files(args.base, args.new, [], "compiletrace compare --why")))
    return EXIT_FAILED if result.regressions else EXIT_OK
