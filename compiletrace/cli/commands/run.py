"""``compiletrace run``: run any command and record every compile of every Python process
it starts; when it ends, a summary on stderr and the files asked for. The launcher and the
merge are :mod:`compiletrace._app.job`'s, imported when the command runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from compiletrace._data.fixes import fixes_help
from compiletrace._data.ready import AFTER_READY_MODES, parse_ready
from compiletrace._io.errors import OutputError, UsageError
from compiletrace._io.files import is_stdout
from compiletrace._io.text import first_line, printable
from compiletrace.cli.exit_codes import EXIT_FAILED, EXIT_OK, KilledBy
from compiletrace.cli.options import check_outputs
from compiletrace.cli.outputs import write_job_outputs
from compiletrace.cli.parsing import HELP_WIDTH, PROG, add_common_options

if TYPE_CHECKING:
    from compiletrace._app.job import ProfileJob, RunOutcome

__all__ = ["DESCRIPTION", "EPILOG", "add_options", "run"]

DESCRIPTION = (
    "Run COMMAND with no edit to it ('python train.py', 'torchrun ...', a shell script):\n"
    "every Python process it starts records its torch.compile calls, whatever their backend, and\n"
    "when the command ends a summary goes to stderr. Its stdin, stdout and exit status are its own."
)
EPILOG = (
    "fixes (--apply FIX), each made in every process before its first compile:\n"
    + fixes_help(HELP_WIDTH)
    + "\n\n"
    "ready (--ready WHEN): when a process is ready to serve, and every compile after it is a latency\n"
    "spike a request paid: MODULE:FUNCTION (when that function first returns, in each process),\n"
    "phase:NAME (when that phase ends), port:PORT (when the process listens on PORT: any server),\n"
    "step:N (when its N-th optimizer step ends: any training loop), or the program's own\n"
    "compiletrace.ready(); by default the end of its first warm-up phase (compiletrace.warm_up's,\n"
    "vLLM's compile and warm-up). A job stopped with Ctrl-C after its ready mark can be verified\n"
    "('doctor --verify' runs it again only until it is ready). {port} in the command's arguments\n"
    "is the port of --ready port:PORT ('doctor --verify --jobs N' gives each trial its own).\n\n"
    "traffic (--traffic 'COMMAND'): the requests a server gets once it is ready, e.g. a load\n"
    "script: started at the first ready mark ({port} becomes the port of --ready port:PORT), and\n"
    "when it ends, after a grace of 3 s, the command is stopped as Ctrl-C stops it and run exits\n"
    "with the traffic's status. What the requests compile is after ready. 'doctor --verify' replays\n"
    "it in each trial.\n\n"
    "examples:\n"
    "  compiletrace run -- python train.py --epochs 1\n"
    "  compiletrace run --json job.json -- torchrun --standalone --nproc-per-node 2 train.py\n"
    "  compiletrace run --component 'vision_tower*=encoder' -- python serve.py\n"
    "  compiletrace run --ready myserver:warm_up --after-ready error -- python -m myserver\n"
    "  compiletrace run --json job.json --ready port:8000 -- python serve.py --port 8000\n"
    "  compiletrace run --json job.json --ready step:5 -- python train.py\n"
    "  compiletrace run --json job.json --ready port:8000 --traffic 'python load.py --port {port}' \\\n"
    "      -- python serve.py --port 8000\n"
    "  compiletrace report job.json; compiletrace doctor job.json"
)


def add_options(parser: argparse.ArgumentParser) -> None:
    add_common_options(parser)
    parser.add_argument(
        "--json", metavar="PATH", help="write the job (every process's run) as versioned JSON"
    )
    parser.add_argument(
        "--html", metavar="PATH", help="write the self-contained HTML report of every compile"
    )
    parser.add_argument(
        "--chrome-trace", metavar="PATH", help="write a Chrome/Perfetto trace, a track per process"
    )
    parser.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="every process sends its compiles' spans and metrics to an OTLP/HTTP collector at URL as\n"
        "they happen (its own providers: the program's OpenTelemetry set-up stays its own)",
    )
    parser.add_argument(
        "--job-id",
        metavar="ID",
        help="with --otlp-endpoint: the id every process's spans carry as compiletrace.job.id, the\n"
        "same on every node (default: the launcher's, TORCHELASTIC_RUN_ID or SLURM_JOB_ID, else one\n"
        "per run)",
    )
    parser.add_argument(
        "--component",
        action="append",
        default=[],
        metavar="PATTERN=NAME",
        help="record compiles whose module path, class or file matches PATTERN as component NAME\n"
        "(repeatable; tried before the built-in naming)",
    )
    parser.add_argument(
        "--trace-cost",
        action="store_true",
        help="time Dynamo's tracing of each user function (a tree per frame compile)",
    )
    parser.add_argument(
        "--apply",
        action="append",
        default=[],
        metavar="FIX",
        help="apply a fix in every process before its first compile, with no edit to the program\n"
        "(repeatable; the fixes are listed below, each with what it does; 'doctor --verify' measures it)",
    )
    parser.add_argument(
        "--ready",
        metavar="WHEN",
        help="when each process is ready to serve: MODULE:FUNCTION (its first return), phase:NAME\n"
        "(its end), port:PORT (it listens on PORT) or step:N (its N-th optimizer step ends); default:\n"
        "the end of the first warm-up phase, or compiletrace.ready()",
    )
    parser.add_argument(
        "--traffic",
        metavar="COMMAND",
        help="a command that sends the program its first requests once it is ready ({port}: the port\n"
        "of --ready port:PORT); its end, and a grace, end the run (see below)",
    )
    parser.add_argument(
        "--after-ready",
        choices=AFTER_READY_MODES,
        help="print every compile after ready (warn), and exit 1 when the command succeeded but\n"
        "something compiled after ready or ready never fired (error); the job's JSON carries the count",
    )
    parser.add_argument(
        "--ledger",
        action="store_true",
        help="print each process's warm-start ledger: what its start still paid, line by line",
    )
    parser.add_argument(
        "--job-dir",
        metavar="DIR",
        help="keep each process's run file in DIR: a new directory, or an empty one of yours that no one\n"
        "else can write (default: a private temporary directory, removed after)",
    )
    parser.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS...]",
        help="the command to run and its arguments, after --",
    )


def run(args: argparse.Namespace) -> int:
    from compiletrace._app.job import UntilReady, job_run, traffic_words
    from compiletrace._core.components import parse_component_rules
    from compiletrace.reports import job_ledger_lines, job_summary_lines

    command = list(args.argv)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("compiletrace run needs a command: compiletrace run [OPTIONS] -- COMMAND [ARGS...]")
    check_outputs([(args.json, "--json"), (args.html, "--html"), (args.chrome_trace, "--chrome-trace")])
    for path, what in ((args.json, "--json"), (args.html, "--html"), (args.chrome_trace, "--chrome-trace")):
        if is_stdout(path):  # '-', /dev/stdout, or the file stdout was redirected to
            raise UsageError(f"{what} {printable(path)}: stdout is the command's own; give a file path")
    parse_component_rules(args.component)
    if args.ready is not None:
        parse_ready(args.ready)  # a bad mark is bad input, before the command runs
    until = None
    if args.traffic is not None:
        # A run with traffic goes as a trial does: to ready, the traffic, a grace, then stopped.
        until = UntilReady(traffic=traffic_words(args.traffic, args.ready))
    if args.otlp_endpoint is not None:
        from compiletrace.telemetry._configure import check_url

        check_url(args.otlp_endpoint)  # a bad URL is bad input, before the command runs
    with job_run(
        command,
        components=args.component,
        trace_cost=args.trace_cost,
        job_dir=args.job_dir,
        fixes=args.apply,
        otlp_endpoint=args.otlp_endpoint,
        ready=args.ready,
        until_ready=until,
        job_id=args.job_id,
    ) as outcome:
        job = outcome.job
        for line in job_summary_lines(job):
            print(line, file=sys.stderr)
        if args.ledger:
            for line in job_ledger_lines(job):
                print(line, file=sys.stderr)
        gate_tripped = False
        if args.after_ready is not None:
            after = job.after_ready()
            for line in after.lines():
                print(line, file=sys.stderr)
            gate_tripped = args.after_ready == "error" and (after.count > 0 or not after.fired)
        # Each output on its own: one that cannot be written (a full disk) is one line, the
        # others are still written, the processes' run files are kept, and the exit status
        # stays the command's own.
        written = [
            _written(lambda: job.save(args.json), f"wrote the job to {args.json}") if args.json else True,
            _written(lambda: write_job_outputs(job, args.html, None, on_stderr=True)) if args.html else True,
            _written(lambda: write_job_outputs(job, None, args.chrome_trace, on_stderr=True))
            if args.chrome_trace
            else True,
        ]
        if not all(written):
            print(f"{PROG}: the processes' run files are kept in {outcome.keep_run_files()}", file=sys.stderr)
        if job.compiling():
            _print_findings(job, args.json if args.json and written[0] else None)
    if outcome.signal is not None:  # the launcher dies of it too (see console_main)
        return KilledBy(outcome.exit_status, outcome.signal)
    if until is not None:
        return _traffic_status(outcome)
    if outcome.exit_status == EXIT_OK and gate_tripped:
        print(f"{PROG}: --after-ready error: exit status {EXIT_FAILED}", file=sys.stderr)
        return EXIT_FAILED
    return outcome.exit_status


def _traffic_status(outcome: RunOutcome) -> int:
    """A run with --traffic: the traffic's exit status when the command was stopped after it;
    the command's own when it ended first; 1 when it was never ready, or kept becoming ready."""
    from compiletrace._app.job import KEPT_MARKING, NEVER_READY, UntilReady

    if outcome.stopped == NEVER_READY:
        print(f"{PROG}: the command was never ready: stopped, and its traffic never sent", file=sys.stderr)
        return EXIT_FAILED
    if outcome.stopped == KEPT_MARKING:
        print(
            f"{PROG}: the command kept becoming ready ({len(outcome.marks)} ready marks, the last over "
            f"{UntilReady().timeout_s:g} s after the first: a worker restarted again and again?): stopped",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if outcome.stopped is None:
        return outcome.exit_status  # it ended by itself, its traffic stopped with it
    status = outcome.traffic_status if outcome.traffic_status is not None else EXIT_FAILED
    if status != EXIT_OK:
        print(f"{PROG}: the traffic command ended with exit status {status}", file=sys.stderr)
    return status


def _print_findings(job: ProfileJob, saved_to: str | None) -> None:
    """How many findings the doctor has, and how to read them; never fails the command."""
    from compiletrace.reports import job_findings_line

    try:
        findings = job.diagnose()
    except Exception as exc:  # the doctor's trouble is not the command's
        print(f"{PROG}: the doctor could not read the job ({printable(first_line(exc))})", file=sys.stderr)
        return
    print(job_findings_line(findings, saved_to), file=sys.stderr)


def _written(write: Callable[[], None], done: str = "") -> bool:
    """Write one of run's outputs; say what was written (when ``done``), or why not."""
    try:
        write()
    except OutputError as exc:
        print(f"{PROG}: error: {printable(first_line(exc))}", file=sys.stderr)
        return False
    if done:
        print(f"{PROG}: {done}", file=sys.stderr)
    return True
