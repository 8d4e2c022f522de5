"""``compiletrace compare``: two saved runs (or start-up benchmarks) side by side; exit 1
when anything regressed. The comparison is :mod:`compiletrace._app.compare`'s."""

from __future__ import annotations

import argparse

from compiletrace._io.errors import UsageError
from compiletrace.cli.exit_codes import EXIT_FAILED, EXIT_OK
from compiletrace.cli.parsing import add_common_options, decimal

__all__ = ["DESCRIPTION", "EPILOG", "add_options", "run", "sides"]

DESCRIPTION = (
    "Compare two runs saved by 'profile --json' (the total, then per component, phase and\n"
    "graph), two jobs saved by 'run --json' or torch's traces (TORCH_TRACE: in total, then\n"
    "process by process; a single run stands for a job's one process), or two saved by 'bench\n"
    "startup --output-json' (per metric); or several runs per side: 'compare BASE... --\n"
    "CURRENT...' (options before --). Counts are judged first, exactly: more graphs, frames,\n"
    "recompiles, cache misses (per tier) or compiles after ready than BASE fails, whatever\n"
    "the seconds. A figure slowed down when it grew by more than --threshold percent and\n"
    "--min-seconds (by default, for one run per side: 60% and 0.25 s in CPU seconds, 150% and\n"
    "0.25 s in wall seconds, above the noise measured between identical warm starts on a busy\n"
    "machine, benchmarks/gate_noise.py; for several runs per side: each side's median, beyond\n"
    "the larger side's spread, 3% and 0.05 s); a graph only in NEW slowed down too. Seconds\n"
    "are the compile work's CPU seconds where every run has them, else wall seconds\n"
    "(--clock). Every change is shown; those in the --gate scopes are regressions (bench\n"
    "metrics always are); the last line says why it passed or failed. Exit status: 0 passed,\n"
    "1 a count rose or a figure regressed, 2 bad input."
)
EPILOG = None


def add_options(parser: argparse.ArgumentParser) -> None:
    add_common_options(parser)
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="the reference run, job or trace (or a directory of a job's nodes' files), then the one\n"
        "to check; or several reference runs, then -- and several runs to check",
    )
    parser.add_argument(
        "--threshold",
        type=decimal,
        default=None,
        metavar="PCT",
        help="allowed growth in percent (default: 60 in CPU seconds, 150 in wall seconds for one\n"
        "run per side; 3 with several; 10 for bench runs)",
    )
    parser.add_argument(
        "--min-seconds",
        type=decimal,
        default=None,
        metavar="S",
        help="ignore changes smaller than S seconds (default: 0.25 for one run per side; 0.05 with\n"
        "several, and for bench runs)",
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


def sides(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The base runs and the new ones: BASE NEW, or BASE... -- CURRENT...; else a usage error."""
    current: list[str] | None = getattr(args, "current", None)
    if current is None:
        if len(args.runs) != 2:
            raise UsageError(
                f"compare takes BASE NEW, got {len(args.runs)} run(s); for several runs per side: "
                "compare BASE... -- CURRENT..."
            )
        return [args.runs[0]], [args.runs[1]]
    if not current:
        raise UsageError("compare BASE... -- CURRENT...: no run after --; name the runs to check after it")
    options = [word for word in current if word.startswith("-")]
    if options:
        raise UsageError(f"compare: {options[0]} after --, where every word is a run; put options before --")
    return list(args.runs), current


def run(args: argparse.Namespace) -> int:
    from compiletrace._app.compare import compare_files, parse_gates

    gates = parse_gates(args.gate)  # a bad --gate is bad input: exit 2 before reading a file
    bases, news = sides(args)
    result = compare_files(
        bases,
        news,
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
        print(why_text(explain_files(bases[0], news[0], [], "compiletrace compare --why")))
    return EXIT_FAILED if result.failed else EXIT_OK
