"""``compiletrace profile``: build a model, compile its components through compiletrace, warm
it up, and print where the compile time went (with ``--nproc N``, in N ranks)."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from compiletrace._app.model_spec import DEFAULT_MODEL, load_factory
from compiletrace._core.import_timing import core_import_timed
from compiletrace._core.startup import unix_now_ns
from compiletrace._data.timeline import ORIGIN_EXEC, ORIGIN_FORK, ORIGIN_PROCESS, Timeline
from compiletrace._io.errors import LaunchError, UsageError
from compiletrace._io.files import write_json
from compiletrace._io.text import first_line, printable
from compiletrace.cli.exit_codes import EXIT_FAILED, EXIT_OK
from compiletrace.cli.options import add_model_options, check_outputs, component_pairs, prints_text
from compiletrace.cli.outputs import write_outputs
from compiletrace.cli.parsing import PROG, add_common_options, whole_number

if TYPE_CHECKING:
    from compiletrace._app.profile_run import ProfileRun

__all__ = ["DESCRIPTION", "EPILOG", "add_options", "print_profile", "run"]

REPORT_PHASE = "report"  # profile's last phase: printing the tables and writing the files
TOP_FINDINGS = 3  # 'profile' shows the first few; 'compiletrace doctor RUN.json' shows all

# When the command began, for its wall time where the process start cannot be read from /proc.
_LOADED_UNIX_S = time.time()

DESCRIPTION = (
    "Build MODEL, compile its components through compiletrace, run the warm-up, and print\n"
    "a table per component and per graph, the totals and the one-line summary."
)
EPILOG = None


def add_options(parser: argparse.ArgumentParser) -> None:
    add_common_options(parser)
    add_model_options(parser)
    parser.add_argument("--json", metavar="PATH", help="write the run (registry + warm-up) as versioned JSON")
    parser.add_argument(
        "--chrome-trace", metavar="PATH", help="write a Chrome/Perfetto trace of the compiles"
    )
    parser.add_argument("--html", metavar="PATH", help="write the self-contained HTML report")
    parser.add_argument(
        "--trace-cost",
        action="store_true",
        help="time Dynamo's tracing of each user function (a tree per frame compile)",
    )
    parser.add_argument(
        "--steady-calls",
        type=whole_number,
        default=0,
        metavar="N",
        help="after the warm-up, time N more calls and report the median (the compiled model's speed)",
    )
    parser.add_argument(
        "--speedscope", metavar="PATH", help="with --trace-cost: write the tracing cost as speedscope JSON"
    )
    parser.add_argument(
        "--collapsed",
        metavar="PATH",
        help="with --trace-cost: write the tracing cost as collapsed stacks (microseconds)",
    )
    parser.add_argument(
        "--cache-artifacts",
        metavar="PATH",
        help="load compile-cache artifacts saved by 'cache save' before compiling",
    )
    parser.add_argument(
        "--trust",
        action="store_true",
        help="load --cache-artifacts unchecked (the file is code: only your own)",
    )
    parser.add_argument(
        "--nproc",
        type=whole_number,
        default=1,
        metavar="N",
        help="run N ranks with torch.distributed.run on loopback (gloo); rank 0 prints per-rank figures",
    )
    spans = parser.add_mutually_exclusive_group()
    spans.add_argument("--otlp-endpoint", metavar="URL", help="send spans to an OTLP/HTTP collector at URL")
    spans.add_argument("--console-spans", action="store_true", help="print spans to stderr")


def run(args: argparse.Namespace) -> int:
    with core_import_timed():  # torch and compiletrace's core: their own entries in the timeline
        from compiletrace._app.profile import profile
    from compiletrace._app.progress import Progress, compile_lines
    from compiletrace._app.timeline import OwnPhase, open_startup_trace, startup_timeline
    from compiletrace._core.observers import process_observers
    from compiletrace._data.registry import Registry, get_registry
    from compiletrace.reports import timeline_text

    command_start = unix_now_ns()
    outputs = [
        (args.json, "--json"),
        (args.chrome_trace, "--chrome-trace"),
        (args.html, "--html"),
        (args.speedscope, "--speedscope"),
        (args.collapsed, "--collapsed"),
    ]
    check_outputs(outputs)
    # An output on standard output is all it holds: the report's text is held back.
    say = prints_text(outputs)
    if (args.speedscope or args.collapsed) and not args.trace_cost:
        raise UsageError("--speedscope and --collapsed export the tracing cost: add --trace-cost")
    components = component_pairs(args)
    if args.trust and not args.cache_artifacts:
        raise UsageError("--trust applies to --cache-artifacts; there is no file to trust")
    if args.nproc < 1:
        raise UsageError(f"--nproc must be >= 1, got {args.nproc}")
    if args.nproc > 1 and args.trace_cost:
        raise UsageError("--trace-cost records one process: use it with --nproc 1")
    if args.steady_calls < 0:
        raise UsageError(f"--steady-calls must be >= 0, got {args.steady_calls}")
    if args.nproc > 1 and args.steady_calls:
        raise UsageError("--steady-calls times one process: use it with --nproc 1")
    if args.nproc > 1:
        return _profile_ranks(args, say)
    registry = Registry()
    compiling = args.compilation_mode != "none"
    # Without a terminal, profile keeps stderr for errors (one line each): its report is on
    # stdout at the end. bench startup, minutes of silence otherwise, logs a line per stage.
    with _telemetry(args), Progress(plain=False) as progress:
        open_startup_trace()  # this command is a start-up: its phases nest under one root span

        # A line per compile of this run, from the process tracker's observers (the tracker
        # itself is made at the first compile, inside the run's own phases).
        lines = compile_lines(progress)
        progress.set("building the model")
        with process_observers().observing(lines, registry=registry, name="the progress lines"):
            run = profile(
                args.model,
                backend=args.backend,
                mode=args.mode,
                compilation_mode=args.compilation_mode,
                device=args.device,
                components=components or None,
                registry=registry,
                on_compile=(lambda name: progress.set(f"compiling {printable(name)}")) if compiling else None,
                cache_artifacts=args.cache_artifacts,
                trust=args.trust,
                trace_cost=args.trace_cost,
                steady_calls=args.steady_calls,
            )
        progress.close()
        with OwnPhase(REPORT_PHASE, registry=registry):
            if say:
                print_profile(run)
            if args.json:
                run.save(args.json)
                if say:
                    print(f"wrote run to {args.json}")
            write_outputs(run, args.html, args.chrome_trace, say=say)
            _write_flame(run, args.speedscope, args.collapsed, say)
    # The command's own start-up, from its process's start to these last lines: the phases
    # of the run and of this command (any the model declared in the process registry too).
    mine = [p for p in get_registry().phase_records() if p.start_unix_ns >= command_start]
    timeline = startup_timeline(registry, extra_phases=mine)
    if say:
        print()
        print(timeline_text(timeline))
        what = "imports, model building, " + ("compiling, warm-up" if compiling else "the eager run")
        _print_wall_time(what, timeline)
    return EXIT_OK


@contextlib.contextmanager
def _telemetry(args: argparse.Namespace) -> Iterator[None]:
    if not (args.otlp_endpoint or args.console_spans):
        yield
        return
    from compiletrace import telemetry

    if args.otlp_endpoint:
        handle = telemetry.configure(exporter="otlp", endpoint=args.otlp_endpoint, service_name=PROG)
    else:
        # Spans to stderr: stdout is the report.
        handle = telemetry.configure(exporter="console", service_name=PROG, out=sys.stderr)
    try:
        yield
    finally:
        from compiletrace._core.recorder import recording

        # Exporting can take a while: the timeline shows it (a phase without a span: the
        # spans are being flushed).
        with recording("flush telemetry", "phase"):
            handle.shutdown()


def _write_flame(run: ProfileRun, speedscope: str | None, collapsed: str | None, say: bool) -> None:
    from compiletrace.reports import write_collapsed, write_speedscope

    if speedscope:
        write_speedscope(run.records(), speedscope)
        if say:
            print(f"wrote speedscope profile to {speedscope}")
    if collapsed:
        write_collapsed(run.records(), collapsed)
        if say:
            print(f"wrote collapsed stacks to {collapsed}")


def _print_wall_time(what: str, timeline: Timeline | None = None) -> None:
    """The command's last line: how long its process has run (``what`` says what that holds);
    with a ``timeline``, its total (the two are one figure)."""
    from compiletrace._app.progress import wall_time_s

    if timeline is not None:
        seconds, since_process_start = timeline.total_s, timeline.origin in (ORIGIN_PROCESS, ORIGIN_FORK)
    else:
        seconds, since_process_start = wall_time_s(_LOADED_UNIX_S)
    since = "the process started" if since_process_start else "the command started"
    if timeline is not None and timeline.origin == ORIGIN_EXEC:
        since = "the exec of this program"  # the timeline's last line gives the time before it
    from compiletrace.reports import wrap_prose

    print("\n".join(wrap_prose([f"wall time: {seconds:.2f} s since {since} ({what})"])))


def print_profile(run: ProfileRun) -> None:
    """The report in reading order: header, tables, summary line (``run.summary()``), then
    the warm-up, then the notes (expensive cache hits) and the doctor's top findings."""
    from compiletrace._data.cache_hits import find_expensive_hits
    from compiletrace.reports import profile_text

    hits = [hit.explanation() for hit in find_expensive_hits(run.records())]
    print(profile_text(run, run.diagnose(), hits, top_findings=TOP_FINDINGS))


def _check_device(spec: str, nproc: int) -> None:
    """Raise UsageError unless ``spec`` names a device every rank can use."""
    import torch

    try:
        device = torch.device(spec)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise UsageError(f"--device {spec!r} is not a device torch knows: {first_line(exc)}") from None
    is_available = getattr(getattr(torch, device.type, None), "is_available", None)
    if callable(is_available) and not is_available():
        raise UsageError(f"--device {spec}: no {device.type} device is available on this machine")
    if device.type == "cuda":
        # "cuda" gives each rank its local GPU: N ranks need N GPUs; "cuda:I" needs GPU I.
        needed = nproc if device.index is None else device.index + 1
        count = torch.cuda.device_count()
        if count < needed:
            raise UsageError(f"--device {spec} with --nproc {nproc} needs {needed} GPUs; {count} visible")


def _check_ranks(args: argparse.Namespace) -> None:
    """What would make every rank fail, checked here first: each rank would otherwise start,
    import torch and fail with the same error (exit 2, one line, no process started)."""
    from compiletrace._core.backend import INDUCTOR, inductor_config_patches, validate_backend

    if args.html or args.chrome_trace or args.cache_artifacts or args.component:
        raise UsageError("--nproc > 1 takes --json, --backend, --mode and --device only")
    load_factory(args.model or DEFAULT_MODEL)
    validate_backend(args.backend)
    if args.mode is not None and args.mode != "default":
        if args.backend != INDUCTOR:
            raise UsageError(f"--mode {args.mode} applies to the inductor backend only, not {args.backend}")
        inductor_config_patches(args.mode, None, None)
    _check_device(args.device, args.nproc)


def _profile_ranks(args: argparse.Namespace, say: bool) -> int:
    from compiletrace.distributed import launch

    _check_ranks(args)
    worker = ["--backend", args.backend, "--device", args.device, "--quiet"]
    if args.model:
        worker += ["--model", args.model]
    if args.mode:
        worker += ["--mode", args.mode]
    with _telemetry(args):
        try:
            # Captured: a failing rank is shown as one line, its traceback under --debug.
            job = launch(args.nproc, worker, capture_output=True)
        except LaunchError as exc:
            if args.debug and exc.output:
                sys.stderr.write(exc.output.rstrip() + "\n")
            hint = "" if args.debug or not exc.output else " (--debug shows the job's whole output)"
            head, sep, rest = str(exc).partition("\n")  # the rest: the failed rank's last lines
            rest = "\n".join(map(printable, rest.split("\n")))
            print(f"{PROG}: error: {printable(head)}{hint}{sep}{rest}", file=sys.stderr)
            return EXIT_FAILED
    if args.debug and job.output:
        sys.stderr.write(job.output.rstrip() + "\n")
    if say:
        print(job.result.table())
    if args.json:
        write_json(args.json, job.result.to_dict())
        if say:
            print(f"wrote per-rank figures to {args.json}")
    if say:
        _print_wall_time(f"imports and the {args.nproc}-rank job")
    return EXIT_OK
