"""``compiletrace why``: why a compile cache did not apply. Two runs of one program, BASE
(which filled or used the cache) and CURRENT (which missed it), compared graph by graph:
which tier missed, which part of its key changed (both values), the seconds it cost, graphs
that missed for one reason grouped; where the keys are equal, what else kept the entry
from applying. The comparison is :mod:`compiletrace._app.why`'s."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from compiletrace._data.kinds import FileKind
from compiletrace.cli.exit_codes import EXIT_OK
from compiletrace.cli.options import add_trace_components, check_outputs, prints_text
from compiletrace.cli.parsing import add_common_options

if TYPE_CHECKING:
    from compiletrace._data.why import WhyReport

__all__ = ["DESCRIPTION", "EPILOG", "add_options", "run"]

DESCRIPTION = (
    "Say why a compile cache did not apply. BASE and CURRENT are two runs of one program:\n"
    "runs saved by 'profile --json', jobs saved by 'run --json', or torch's traces (a TORCH_TRACE\n"
    "directory, log, .gz or .zip). Graphs are matched by their code's location and what they\n"
    "are, then by order. For each graph CURRENT missed: the cache tier that missed, the part of\n"
    "its key that changed with both values, the seconds the miss cost, graphs that missed for\n"
    "one reason grouped, and the fix the part calls for; where the keys are equal, what else kept\n"
    "the entry from applying (another cache directory, an evicted or unreadable entry, failed\n"
    "guards). Given alone, BASE is a directory of the job files of one job's nodes (several\n"
    "machines), and its nodes are compared: the node that hit the cache most as BASE, the node\n"
    "that missed most as CURRENT. Exit status: 0, or 2 for bad input."
)
EPILOG = (
    "Runs recorded by compiletrace keep each key's parts and the process's facts (cache\n"
    "directory, environment, versions); torch's traces keep the FX graph key's parts only."
)


def add_options(parser: argparse.ArgumentParser) -> None:
    add_common_options(parser)
    parser.add_argument(
        "base",
        metavar="BASE",
        help="the run that filled or used the cache (alone: a directory of a job's nodes)",
    )
    parser.add_argument("current", metavar="CURRENT", nargs="?", help="the run that missed it")
    add_trace_components(parser)
    parser.add_argument("--json", metavar="OUT", help="write the explanation as versioned JSON ('-': stdout)")
    parser.add_argument("--html", metavar="OUT", help="write the explanation as a self-contained HTML page")


def run(args: argparse.Namespace) -> int:
    inputs = [args.base] if args.current is None else [args.base, args.current]
    check_outputs([(args.json, "--json"), (args.html, "--html")], inputs=inputs)
    if args.current is None:
        report = explain_nodes(args.base, args.component)
    else:
        report = explain_files(args.base, args.current, args.component)
    write_why(report, args.json, args.html)
    return EXIT_OK


def explain_files(
    base: str, current: str, components: list[str], command: str = "compiletrace why"
) -> WhyReport:
    """Read BASE and CURRENT (each a run, a job or torch's trace) and explain CURRENT's misses."""
    from compiletrace._app.why import ACCEPTED, why
    from compiletrace._load import load

    loaded = [
        (path, load(path, accept=ACCEPTED, command=command, components=components))
        for path in (base, current)
    ]
    return why(loaded[0], loaded[1])  # type: ignore[arg-type]  # accept= lets runs and jobs through


def explain_nodes(path: str, components: list[str], command: str = "compiletrace why") -> WhyReport:
    """Read ``path``, a job of several nodes (their job files in a directory, or a trace's),
    and explain the coldest node's misses against the warmest's."""
    from compiletrace._app.why import why_nodes
    from compiletrace._data.job import Job
    from compiletrace._io.errors import UsageError
    from compiletrace._load import load

    loaded = load(path, accept={FileKind.RUN, FileKind.JOB}, command=command, components=components)
    if not isinstance(loaded, Job):
        raise UsageError(
            f"{path} is one process's run; why compares two: give BASE (which filled or used the cache) "
            "and CURRENT (which missed it), or a job of several nodes alone"
        )
    return why_nodes(path, loaded)


def write_why(report: object, json_path: str | None, html_path: str | None) -> None:
    """The report as text (unless an output goes to stdout), and its --json and --html files."""
    from compiletrace._data.why import WhyReport
    from compiletrace._io.files import write_json, write_text
    from compiletrace.reports import why_html, why_text

    assert isinstance(report, WhyReport)
    say = prints_text([(json_path, "--json"), (html_path, "--html")])
    if say:
        print(why_text(report))
    if json_path:
        write_json(json_path, report.to_json())
        if say:
            print(f"wrote the explanation to {json_path}")
    if html_path:
        write_text(html_path, why_html(report))
        if say:
            print(f"wrote the HTML page to {html_path}")
