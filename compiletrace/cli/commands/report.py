"""``compiletrace report``: the tables of a saved run, a saved job, or torch's own trace,
and the same as HTML, a Chrome trace or compiletrace's own JSON. Torch-free: a file is read
and rendered without it."""

from __future__ import annotations

import argparse

from compiletrace.cli.exit_codes import EXIT_OK
from compiletrace.cli.options import add_trace_components, check_outputs, prints_text
from compiletrace.cli.outputs import write_job_outputs, write_outputs
from compiletrace.cli.parsing import add_common_options

__all__ = ["DESCRIPTION", "EPILOG", "add_options", "run"]

DESCRIPTION = (
    "Print the tables of a run saved by 'compiletrace profile --json' (or of each process\n"
    "of a job saved by 'compiletrace run --json', or of torch's own trace: a TORCH_TRACE directory,\n"
    "a log, or a .gz/.zip of them), and write it as HTML or as a Chrome/Perfetto trace."
)
EPILOG = None


def add_options(parser: argparse.ArgumentParser) -> None:
    add_common_options(parser)
    parser.add_argument(
        "run",
        metavar="RUN",
        nargs="+",
        help="a run saved by 'compiletrace profile --json', a job ('run --json'), or a TORCH_TRACE\n"
        "directory, log, .gz or .zip; several jobs (each node's of one job), or a directory of them,\n"
        "are read as one job",
    )
    add_trace_components(parser)
    parser.add_argument("--html", metavar="OUT", help="write the self-contained HTML report")
    parser.add_argument("--chrome-trace", metavar="OUT", help="write a Chrome/Perfetto trace")
    parser.add_argument(
        "--ledger",
        action="store_true",
        help="print each process's warm-start ledger: what its start still paid, line by line, up to\n"
        "its ready mark (a TORCH_TRACE's: its compiles and first-call work)",
    )
    parser.add_argument(
        "--json",
        metavar="OUT",
        help="write it as compiletrace's own run (or job) JSON: torch's trace, read once, kept as\n"
        "a file every command and compiletrace.load read",
    )


def run(args: argparse.Namespace) -> int:
    from compiletrace._app.profile_run import ProfileRun
    from compiletrace._data.kinds import FileKind
    from compiletrace._load import load
    from compiletrace.reports import run_ledger_lines, timeline_text

    outputs = [(args.html, "--html"), (args.chrome_trace, "--chrome-trace"), (args.json, "--json")]
    check_outputs(outputs, inputs=args.run)
    run = load(
        args.run,
        accept={FileKind.RUN, FileKind.JOB},
        command="compiletrace report",
        components=args.component,
    )
    # An output on standard output is all it holds: the text is held back.
    say = prints_text(outputs)
    if not isinstance(run, ProfileRun):
        return _report_job(args, run, say)
    if args.json:
        run.save(args.json)
    if say:
        print(run.summary())
        if run.timeline is not None:
            print()
            print(timeline_text(run.timeline))
        if args.ledger:
            print()
            print("\n".join(run_ledger_lines(run)))
    write_outputs(run, args.html, args.chrome_trace, say=say)
    if args.json and say:
        print(f"wrote the run to {args.json}")
    return EXIT_OK


def _report_job(args: argparse.Namespace, job: object, say: bool) -> int:
    # A job's views sit beside the launcher, which load() imported to give it them.
    from compiletrace._app.job import ProfileJob
    from compiletrace.reports import job_ledger_lines

    assert isinstance(job, ProfileJob)  # what accept= lets through besides a run
    if args.json:
        job.save(args.json)
    if say:
        print(job.summary())
        if args.ledger:
            print()
            print("\n".join(job_ledger_lines(job)))
    if args.html or args.chrome_trace:
        write_job_outputs(job, args.html, args.chrome_trace, say=say)
    if args.json and say:
        print(f"wrote the job to {args.json}")
    return EXIT_OK
