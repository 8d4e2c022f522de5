"""The ``compiletrace`` command: ``profile``, ``bench startup``, ``report``, ``cache``, ``compare``
and ``doctor``.

A thin layer: argument parsing and output here; the work in ``compiletrace._app.profile``,
``compiletrace.bench`` and ``compiletrace.reports``.

>>> main(["report", "/no/such/run.json"])
2
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from compiletrace._app.job import COMMAND_NOT_FOUND_STATUS, CommandNotFound, ProfileJob, fix_names
from compiletrace._app.profile import DEFAULT_MODEL, ProfileRun, load_factory, parse_component
from compiletrace._core.startup import unix_now_ns
from compiletrace._data.timeline import ORIGIN_EXEC, ORIGIN_FORK, ORIGIN_PROCESS, Timeline
from compiletrace._io.errors import ChildFailed, LaunchError, OutputError, UsageError
from compiletrace._io.files import check_writable, write_json, write_text
from compiletrace._io.inputs import check_outputs_apart
from compiletrace._io.signals import Terminated, terminate_on_signals
from compiletrace._io.text import first_line, printable
from compiletrace._version import __version__

__all__ = ["build_parser", "main"]

PROG = "compiletrace"
REPORT_PHASE = "report"  # profile's last phase: printing the tables and writing the files
HELP_WIDTH = 100  # fixed, so --help reads the same everywhere (docs/reference.md quotes it)

EXIT_OK = 0
EXIT_FAILED = 1  # the model failed to compile or run; a benchmark child failed
EXIT_USAGE = 2  # bad input (nothing was compiled), or an output that could not be written
EXIT_INTERRUPTED = 130  # Ctrl-C; SIGTERM and SIGHUP exit 128 + their number: 143, 129
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of stdout went away

# When the command began, for its wall time where the process start cannot be read from /proc.
_LOADED_UNIX_S = time.time()

_FIX_NAMES = fix_names()  # run --apply: the fixes that apply with no edit


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, width=HELP_WIDTH, max_help_position=32)


def _add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model",
        nargs="?",
        metavar="MODEL",
        help="factory as package.module:factory, imported as 'python -m' does (the current directory "
        f"first); it returns a compiletrace.models.Demo or the like (default: {DEFAULT_MODEL})",
    )
    p.add_argument("--backend", default="inductor", help="backend to wrap (default: inductor)")
    p.add_argument("--mode", default=None, help="inductor mode, e.g. reduce-overhead, max-autotune")
    p.add_argument(
        "--compilation-mode",
        choices=("none", "stock"),
        default="stock",
        help="stock: torch.compile through compiletrace; none: run eagerly (default: stock)",
    )
    p.add_argument("--device", default="cpu", help="device to build the model on (default: cpu)")
    p.add_argument(
        "--component",
        action="append",
        default=[],
        metavar="PATH=NAME",
        help="compile submodule PATH as component NAME (repeatable; replaces the factory's mapping)",
    )


def _add_trace_components(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--component",
        action="append",
        default=[],
        metavar="PATTERN=NAME",
        help="for torch's trace: name NAME the compiles whose code file or function match PATTERN\n"
        "(shell-style; repeatable; default: the function and its file, 'forward (model.py)')",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (its ``--help`` texts are quoted in docs/reference.md)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        formatter_class=_formatter,
        description="Where torch.compile start-up time goes, per component and per graph.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    # What every command takes, defined once.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    prof = sub.add_parser(
        "profile",
        parents=[common],
        formatter_class=_formatter,
        help="compile a model, warm it up, and show where the compile time went",
        description="Build MODEL, compile its components through compiletrace, run the warm-up, and print\n"
        "a table per component and per graph, the totals and the one-line summary.",
    )
    _add_model_options(prof)
    prof.add_argument("--json", metavar="PATH", help="write the run (registry + warm-up) as versioned JSON")
    prof.add_argument("--chrome-trace", metavar="PATH", help="write a Chrome/Perfetto trace of the compiles")
    prof.add_argument("--html", metavar="PATH", help="write the self-contained HTML report")
    prof.add_argument(
        "--trace-cost",
        action="store_true",
        help="time Dynamo's tracing of each user function (a tree per frame compile)",
    )
    prof.add_argument(
        "--steady-calls",
        type=int,
        default=0,
        metavar="N",
        help="after the warm-up, time N more calls and report the median (the compiled model's speed)",
    )
    prof.add_argument(
        "--speedscope", metavar="PATH", help="with --trace-cost: write the tracing cost as speedscope JSON"
    )
    prof.add_argument(
        "--collapsed",
        metavar="PATH",
        help="with --trace-cost: write the tracing cost as collapsed stacks (microseconds)",
    )
    prof.add_argument(
        "--cache-artifacts",
        metavar="PATH",
        help="load compile-cache artifacts saved by 'cache save' before compiling",
    )
    prof.add_argument(
        "--trust",
        action="store_true",
        help="load --cache-artifacts unchecked (the file is code: only your own)",
    )
    prof.add_argument(
        "--nproc",
        type=int,
        default=1,
        metavar="N",
        help="run N ranks with torch.distributed.run on loopback (gloo); rank 0 prints per-rank figures",
    )
    spans = prof.add_mutually_exclusive_group()
    spans.add_argument("--otlp-endpoint", metavar="URL", help="send spans to an OTLP/HTTP collector at URL")
    spans.add_argument("--console-spans", action="store_true", help="print spans to stderr")

    run = sub.add_parser(
        "run",
        parents=[common],
        formatter_class=_formatter,
        help="run any command and record every compile of every Python process it starts",
        description="Run COMMAND with no edit to it ('python train.py', 'torchrun ...', a shell script):\n"
        "every Python process it starts records its torch.compile calls, whatever their backend, and\n"
        "when the command ends a summary goes to stderr. Its stdin, stdout and exit status are its own.",
        epilog="examples:\n"
        "  compiletrace run -- python train.py --epochs 1\n"
        "  compiletrace run --json job.json -- torchrun --standalone --nproc-per-node 2 train.py\n"
        "  compiletrace run --component 'vision_tower*=encoder' -- python serve.py\n"
        "  compiletrace report job.json; compiletrace doctor job.json",
    )
    run.add_argument("--json", metavar="PATH", help="write the job (every process's run) as versioned JSON")
    run.add_argument("--html", metavar="PATH", help="write the self-contained HTML report of every compile")
    run.add_argument(
        "--chrome-trace", metavar="PATH", help="write a Chrome/Perfetto trace, a track per process"
    )
    run.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="every process sends its compiles' spans and metrics to an OTLP/HTTP collector at URL as\n"
        "they happen (its own providers: the program's OpenTelemetry set-up stays its own)",
    )
    run.add_argument(
        "--component",
        action="append",
        default=[],
        metavar="PATTERN=NAME",
        help="record compiles whose module path, class or file matches PATTERN as component NAME\n"
        "(repeatable; tried before the built-in naming)",
    )
    run.add_argument(
        "--trace-cost",
        action="store_true",
        help="time Dynamo's tracing of each user function (a tree per frame compile)",
    )
    run.add_argument(
        "--apply",
        action="append",
        default=[],
        metavar="FIX",
        help="apply a fix in every process before its first compile, with no edit to the program\n"
        f"(repeatable): {', '.join(_FIX_NAMES)}; 'doctor --verify' measures what each does",
    )
    run.add_argument(
        "--job-dir",
        metavar="DIR",
        help="keep each process's run file in DIR: a new directory, or an empty one of yours that no one\n"
        "else can write (default: a private temporary directory, removed after)",
    )
    run.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS...]",
        help="the command to run and its arguments, after --",
    )

    bench = sub.add_parser(
        "bench",
        formatter_class=_formatter,
        help="benchmarks",
        description="Benchmarks of compile start-up.",
    )
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="BENCHMARK")
    bench_sub.required = True
    startup = bench_sub.add_parser(
        "startup",
        parents=[common],
        formatter_class=_formatter,
        help="cold vs warm start-up, each iteration a fresh process",
        description="Start MODEL in fresh Python processes: cold ones each on a fresh empty compile cache,\n"
        "warm ones on a cache filled by untimed warm-up iterations. Prints the average and the\n"
        "10/25/50/75/90/99th percentiles (of one iteration, its value) of start-up, non-encoder\n"
        "compilation and encoder compilation time. Without a terminal, a line per stage on stderr.",
    )
    _add_model_options(startup)
    startup.add_argument(
        "--num-iters-cold", type=int, default=3, metavar="N", help="cold iterations (default: 3)"
    )
    startup.add_argument(
        "--num-iters-warmup",
        type=int,
        default=1,
        metavar="N",
        help="untimed cache-filling iterations (default: 1)",
    )
    startup.add_argument(
        "--num-iters-warm", type=int, default=3, metavar="N", help="warm iterations (default: 3)"
    )
    startup.add_argument(
        "--cache-artifacts",
        metavar="PATH",
        help="add PORTABLE iterations: a fresh empty cache with these artifacts loaded first",
    )
    startup.add_argument(
        "--trust",
        action="store_true",
        help="load --cache-artifacts unchecked (the file is code: only your own)",
    )
    startup.add_argument(
        "--num-iters-portable",
        type=int,
        default=None,
        metavar="N",
        help="portable iterations (default: as many as cold)",
    )
    startup.add_argument("--output-json", metavar="PATH", help="write the figures as JSON")
    startup.add_argument(
        "--pytorch-records",
        action="store_true",
        help="with --output-json PATH: also write PyTorch's benchmark-database records beside it, one\n"
        "file per metric (PATH without its extension + .<metric>.pytorch.json)",
    )

    report = sub.add_parser(
        "report",
        parents=[common],
        formatter_class=_formatter,
        help="render a run saved by 'profile --json', a job saved by 'run --json', or torch's trace",
        description="Print the tables of a run saved by 'compiletrace profile --json' (or of each process\n"
        "of a job saved by 'compiletrace run --json', or of torch's own trace: a TORCH_TRACE directory,\n"
        "a log, or a .gz/.zip of them), and write it as HTML or as a Chrome/Perfetto trace.",
    )
    report.add_argument(
        "run",
        metavar="RUN",
        help="a run saved by 'compiletrace profile --json', a job ('run --json'), or a TORCH_TRACE\n"
        "directory, log, .gz or .zip",
    )
    _add_trace_components(report)
    report.add_argument("--html", metavar="OUT", help="write the self-contained HTML report")
    report.add_argument("--chrome-trace", metavar="OUT", help="write a Chrome/Perfetto trace")
    report.add_argument(
        "--json",
        metavar="OUT",
        help="write it as compiletrace's own run (or job) JSON: torch's trace, read once, kept as\n"
        "a file every command and compiletrace.load read",
    )

    cache = sub.add_parser(
        "cache",
        formatter_class=_formatter,
        help="portable compile caches: save, inspect and load torch's cache artifacts",
        description="Save the compile-cache artifacts of a model's start-up to one file, to load on another\n"
        "machine or in a fresh container; report what such a file holds without running it; load\n"
        "one into the compile caches. An artifacts file is code: load only files you trust.",
    )
    cache_sub = cache.add_subparsers(dest="cache_command", metavar="ACTION")
    cache_sub.required = True
    save = cache_sub.add_parser(
        "save",
        parents=[common],
        formatter_class=_formatter,
        help="compile and warm up MODEL, then save the cache artifacts to PATH",
        description="Compile and warm up MODEL (inductor), then save torch's cache artifacts to PATH and\n"
        "their SHA-256 to PATH.sha256 (what 'cache load' and 'cache inspect' check the file against).",
    )
    save.add_argument("path", metavar="PATH", help="file to write the artifacts to")
    _add_model_options(save)
    inspect = cache_sub.add_parser(
        "inspect",
        parents=[common],
        formatter_class=_formatter,
        help="report what the artifacts in PATH hold, running nothing from the file",
        description="Report what the cache artifacts in PATH hold: artifacts per kind, keys and sizes,\n"
        "the torch that saved them, the SHA-256. Nothing in the file is run and nothing is written;\n"
        "a file that 'cache load' would refuse is refused here too, saying why.",
    )
    inspect.add_argument("path", metavar="PATH", help="a file written by 'compiletrace cache save'")
    load = cache_sub.add_parser(
        "load",
        parents=[common],
        formatter_class=_formatter,
        help="check the artifacts in PATH, then load them into the compile caches",
        description="Check the cache artifacts in PATH (their digest, every class their pickles name, every\n"
        "path they would write) and load them into the compile caches (TORCHINDUCTOR_CACHE_DIR).\n"
        "A file the check cannot vouch for is refused; --trust loads it unchecked.",
    )
    load.add_argument("path", metavar="PATH", help="a file written by 'compiletrace cache save'")
    load.add_argument(
        "--trust", action="store_true", help="load PATH unchecked (the file is code: only your own)"
    )

    compare = sub.add_parser(
        "compare",
        parents=[common],
        formatter_class=_formatter,
        help="compare two saved runs; exit 1 when anything regressed",
        description="Compare two runs saved by 'profile --json' (the total, then per component, phase\n"
        "and graph) or by 'bench startup --output-json' (per metric). A figure slowed down when it\n"
        "grew by more than --threshold percent and --min-seconds; a graph only in NEW (a new graph\n"
        "break or recompile) slowed down too. Every change is shown; those in the --gate scopes\n"
        "are regressions (bench metrics always are). Exit status: 0 none, 1 regressed, 2 bad input.",
    )
    compare.add_argument("base", metavar="BASE.json", help="the reference run")
    compare.add_argument("new", metavar="NEW.json", help="the run to check")
    compare.add_argument(
        "--threshold", type=float, default=10.0, metavar="PCT", help="allowed growth in percent (default: 10)"
    )
    compare.add_argument(
        "--min-seconds",
        type=float,
        default=0.05,
        metavar="S",
        help="ignore changes smaller than S seconds (default: 0.05)",
    )
    compare.add_argument(
        "--gate",
        action="append",
        default=None,
        metavar="SCOPE",
        help="gate on SCOPE: total, component, phase, graph or function (a traced function's Dynamo "
        "time, runs with --trace-cost); repeatable, or a comma-separated list "
        "(default: total,component)",
    )
    doctor = sub.add_parser(
        "doctor",
        parents=[common],
        formatter_class=_formatter,
        help="say why a saved run's compile time went where it went, and what to change",
        description="Diagnose a run saved by 'profile --json' (recompiles and their failed guards, graph\n"
        "breaks, repeated graphs, cache misses and expensive hits, compiles after warm-up, shared\n"
        "frames), a job saved by 'run --json' (each process's findings, named by process) or a\n"
        "gathered multi-rank result (ranks that diverge). Prints each finding with its\n"
        "evidence and fix, most seconds at stake first. Exit status: 0, or 1 when a finding of a\n"
        "--fail-on kind is present; 2 for bad input.",
    )
    doctor.add_argument(
        "run",
        metavar="RUN",
        help="a run saved by 'profile --json', a job saved by 'run --json', a gathered result, or\n"
        "torch's trace (a TORCH_TRACE directory, log, .gz or .zip)",
    )
    _add_trace_components(doctor)
    doctor.add_argument("--json", metavar="OUT", help="write the findings as versioned JSON ('-': stdout)")
    doctor.add_argument(
        "--html",
        metavar="OUT",
        help="write the findings (and, with --verify, the before/after table) as a self-contained\nHTML page",
    )
    doctor.add_argument(
        "--verify",
        action="store_true",
        help="prove the advice: re-run the job's command (or a profile run's MODEL, with its steady-\n"
        "state call timed) as it is and once per fix that applies with no edit (run --apply), each\n"
        "in fresh processes on an empty compile cache, and print per finding frame compiles, compile\n"
        "seconds and wall time before and after, and the verdict. It runs what the file names:\n"
        "give --trust for a file of your own",
    )
    doctor.add_argument(
        "--trust",
        action="store_true",
        help="with --verify: run the command or MODEL the file names (a file can name any code)",
    )
    doctor.add_argument(
        "--fail-on",
        metavar="KIND[,KIND]",
        help="exit 1 when a finding of one of these kinds is present (e.g. recompiles,graph_break)",
    )
    sub.add_parser(
        "env",
        parents=[common],
        formatter_class=_formatter,
        help="show the versions and which torch internals compiletrace can measure with",
        description="Print the versions of Python, torch, compiletrace and OpenTelemetry, and which\n"
        "torch internals this torch gives compiletrace (a missing one names what records lack).",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 1 failed, 2 bad input or an output that
    could not be written, 130 interrupted, 143 SIGTERM, 129 SIGHUP).

    While the command runs, SIGTERM and SIGHUP raise :class:`Terminated` (from the main
    thread only; the previous handlers come back afterwards), so the clean-up that Ctrl-C
    runs runs for them too: child processes stopped, temporary directories removed.
    """
    _ended.signal = None  # what an earlier in-process call's command died of is not this one's
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or argparse's own usage error (status 2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "profile": _profile,
        "run": _run,
        "bench": _bench,
        "report": _report,
        "cache": _cache,
        "compare": _compare,
        "doctor": _doctor,
        "env": _env,
    }
    try:
        with terminate_on_signals():
            return handlers[args.command](args)
    except CommandNotFound as exc:  # run's command: what a shell gives for one it cannot find
        _error(args, first_line(exc))
        return COMMAND_NOT_FOUND_STATUS
    except UsageError as exc:
        _error(args, first_line(exc))
        return EXIT_USAGE
    except OutputError as exc:  # a full disk, say: one line naming the path ("cannot write P: why")
        _error(args, first_line(exc.strerror or exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``compiletrace ... | head``): stop quietly, as a shell tool does,
        # and keep the interpreter's final flush from failing on the closed pipe.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Terminated as exc:
        # After SIGHUP the terminal may be gone: the exit status matters, the line does not.
        with contextlib.suppress(OSError):
            print(f"{PROG}: {exc} (exit status {exc.exit_status})", file=sys.stderr, flush=True)
        return exc.exit_status
    except Exception as exc:
        first = first_line(exc)
        _error(args, f"{type(exc).__name__}: {first}" if first else type(exc).__name__)
        return EXIT_FAILED


def _error(args: argparse.Namespace, message: str) -> None:
    if getattr(args, "debug", False):
        traceback.print_exc()
    hint = "" if getattr(args, "debug", False) else " (--debug shows the traceback)"
    print(f"{PROG}: error: {printable(message)}{hint}", file=sys.stderr)


def _outputs(pairs: Sequence[tuple[str | None, str]], inputs: Sequence[str] = ()) -> None:
    """Check every output path before any work: writable, not one of the inputs nor inside
    an input directory, and no two outputs the same file (one would overwrite the other)."""
    named = [(path, what) for path, what in pairs if path is not None]
    for path, what in named:
        check_writable(path, what)
    check_outputs_apart(named, inputs)


def _components(args: argparse.Namespace) -> list[tuple[str, str]]:
    return [parse_component(c) for c in args.component]


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


def _write_outputs(run: ProfileRun, html_path: str | None, trace_path: str | None) -> None:
    if html_path is not None:
        write_text(html_path, run.html())
        print(f"wrote HTML report to {html_path}")
    if trace_path is not None:
        from compiletrace.reports import export_chrome_trace

        export_chrome_trace(trace_path, run)
        print(f"wrote Chrome trace to {trace_path}")


def _profile(args: argparse.Namespace) -> int:
    from compiletrace._app.profile import profile
    from compiletrace._app.progress import Progress
    from compiletrace._app.timeline import OwnPhase, open_startup_trace, startup_timeline
    from compiletrace._data.registry import Registry, get_registry
    from compiletrace.reports._timeline import timeline_text

    command_start = unix_now_ns()
    _outputs(
        [
            (args.json, "--json"),
            (args.chrome_trace, "--chrome-trace"),
            (args.html, "--html"),
            (args.speedscope, "--speedscope"),
            (args.collapsed, "--collapsed"),
        ]
    )
    if (args.speedscope or args.collapsed) and not args.trace_cost:
        raise UsageError("--speedscope and --collapsed export the tracing cost: add --trace-cost")
    components = _components(args)
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
        return _profile_ranks(args)
    registry = Registry()
    compiling = args.compilation_mode != "none"
    # Without a terminal, profile keeps stderr for errors (one line each): its report is on
    # stdout at the end. bench startup, minutes of silence otherwise, logs a line per stage.
    with _telemetry(args), Progress(plain=False) as progress:
        open_startup_trace()  # this command is a start-up: its phases nest under one root span

        def compiled(record: Any) -> None:
            progress.note(
                f"compiled {printable(record.component)} {record.compile_id} ({printable(record.code_name)})"
                f" in {record.total_s:.2f} s, cache {record.cache_outcome.value}"
            )

        registry.add_listener(compiled)
        progress.set("building the model")
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
            _print_profile(run)
            if args.json:
                run.save(args.json)
                print(f"wrote run to {args.json}")
            _write_outputs(run, args.html, args.chrome_trace)
            _write_flame(run, args.speedscope, args.collapsed)
    # The command's own start-up, from its process's start to these last lines: the phases
    # of the run and of this command (any the model declared in the process registry too).
    mine = [p for p in get_registry().phase_records() if p.start_unix_ns >= command_start]
    timeline = startup_timeline(registry, extra_phases=mine)
    print()
    print(timeline_text(timeline))
    what = "imports, model building, " + ("compiling, warm-up" if compiling else "the eager run")
    _print_wall_time(what, timeline)
    return EXIT_OK


def _write_flame(run: ProfileRun, speedscope: str | None, collapsed: str | None) -> None:
    from compiletrace.reports import write_collapsed, write_speedscope

    if speedscope:
        write_speedscope(run.records(), speedscope)
        print(f"wrote speedscope profile to {speedscope}")
    if collapsed:
        write_collapsed(run.records(), collapsed)
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
    print(f"wall time: {seconds:.2f} s since {since} ({what})")


def _print_profile(run: ProfileRun) -> None:
    """The report in reading order: header, tables, summary line (``run.summary()``), then
    the warm-up, then the notes (expensive cache hits) and the doctor's top findings."""
    from compiletrace.reports._text import steady_state_line, warmup_lines

    print(run.summary())
    print("\n".join(warmup_lines(run.warmup.to_dict())))
    steady = steady_state_line(run.meta)
    if steady is not None:
        print(steady)
    _print_expensive_hits(run)
    _print_top_findings(run)


TOP_FINDINGS = 3  # 'profile' shows the first few; 'compiletrace doctor RUN.json' shows all


def _print_top_findings(run: ProfileRun) -> None:
    from compiletrace.reports import findings_text

    findings = run.diagnose()
    if findings:
        print()
        print(findings_text(findings, limit=TOP_FINDINGS))


def _print_expensive_hits(run: ProfileRun) -> None:
    from compiletrace._app.analysis import find_expensive_hits

    flagged = find_expensive_hits(run.records())
    if flagged:
        print("\nExpensive cache hits (a hit that still compiles):")
        for hit in flagged:
            print(f"  {printable(hit.explanation())}")


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


def _profile_ranks(args: argparse.Namespace) -> int:
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
    print(job.result.table())
    if args.json:
        write_json(args.json, job.result.to_dict())
        print(f"wrote per-rank figures to {args.json}")
    _print_wall_time(f"imports and the {args.nproc}-rank job")
    return EXIT_OK


def _cache(args: argparse.Namespace) -> int:
    from compiletrace._app.cache import inspect_cache_artifacts, load_cache_artifacts, save_cache_artifacts
    from compiletrace._app.profile import profile
    from compiletrace._io.artifacts import digest_path

    if args.cache_command == "inspect":
        print(inspect_cache_artifacts(args.path).report())
        return EXIT_OK
    if args.cache_command == "load":
        info = load_cache_artifacts(args.path, trust=args.trust)
        how = "unchecked (--trust)" if args.trust else f"checked against {digest_path(info.path).name}"
        print(f"loaded {printable(info.describe())} in {info.seconds:.2f} s, {how}")
        _warn_torch_version(info.torch_version)
        return EXIT_OK
    if args.path == "-":
        raise UsageError("cache save needs a file PATH: the digest is written beside it (PATH.sha256)")
    _outputs([(args.path, "PATH"), (str(digest_path(args.path)), "PATH.sha256")])
    if args.backend != "inductor":
        raise UsageError(f"cache artifacts come from inductor; --backend {args.backend} saves none")
    run = profile(
        args.model,
        backend=args.backend,
        mode=args.mode,
        device=args.device,
        components=_components(args) or None,
    )
    print(run.summary().splitlines()[-1])
    info = save_cache_artifacts(args.path)
    print(f"saved {printable(info.describe())}, its digest in {digest_path(info.path).name}")
    return EXIT_OK


def _warn_torch_version(saved_with: str | None) -> None:
    import torch

    if saved_with is not None and saved_with != str(torch.__version__):
        print(
            f"note: the artifacts were saved with torch {saved_with}; this is torch {torch.__version__}, "
            "whose caches will not use them",
            file=sys.stderr,
        )


def _env(args: argparse.Namespace) -> int:
    import platform
    from importlib import metadata

    import torch

    from compiletrace._core import torch_compat as tc
    from compiletrace.reports import render_table

    # torch's own version string, as the profile header prints it: a CUDA wheel's metadata
    # says "2.15.0" where torch.__version__ says "2.15.0+cu132".
    versions = [["python", platform.python_version()], ["torch", str(torch.__version__)]]
    for package in ("compiletrace", "opentelemetry-api", "opentelemetry-sdk", "transformers"):
        try:
            versions.append([package, metadata.version(package)])
        except metadata.PackageNotFoundError:
            versions.append([package, "not installed"])
    print("\n".join(render_table(["package", "version"], versions)))
    print()
    rows = [
        [c.name, "yes" if c.available else "MISSING", "" if c.available else c.lacking]
        for c in tc.capabilities()
    ]
    print("\n".join(render_table(["torch capability", "available", "records lack"], rows)))
    print()
    hooks = [[c.name, "yes" if c.available else "no", c.lacking] for c in tc.capabilities(hooks=True)]
    header = ["hooks this torch gives", "available", "compiletrace uses instead"]
    print("\n".join(render_table(header, hooks)))
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from compiletrace._app.job import job_run
    from compiletrace._core.components import parse_component_rules
    from compiletrace.reports._job import job_summary_lines

    command = list(args.argv)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("compiletrace run needs a command: compiletrace run [OPTIONS] -- COMMAND [ARGS...]")
    _outputs([(args.json, "--json"), (args.html, "--html"), (args.chrome_trace, "--chrome-trace")])
    for path, what in ((args.json, "--json"), (args.html, "--html"), (args.chrome_trace, "--chrome-trace")):
        if path == "-":
            raise UsageError(f"{what} -: stdout is the command's own; give a file path")
    parse_component_rules(args.component)
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
    ) as outcome:
        job = outcome.job
        for line in job_summary_lines(job):
            print(line, file=sys.stderr)
        # Each output on its own: one that cannot be written (a full disk) is one line, the
        # others are still written, the processes' run files are kept, and the exit status
        # stays the command's own.
        failed = False
        if args.json:
            failed |= not _written(lambda: job.save(args.json), f"wrote the job to {args.json}")
        if args.html:
            title = "compiletrace run: " + printable(" ".join(job.command))
            failed |= not _written(
                lambda: write_text(args.html, job.html(title=title)), f"wrote the HTML report to {args.html}"
            )
        if args.chrome_trace:
            failed |= not _written(
                lambda: write_json(args.chrome_trace, job.chrome_trace()),
                f"wrote the Chrome trace to {args.chrome_trace}",
            )
        if failed:
            print(f"{PROG}: the processes' run files are kept in {outcome.keep_run_files()}", file=sys.stderr)
    _ended.signal = outcome.signal
    return outcome.exit_status


def _written(write: Callable[[], None], done: str) -> bool:
    """Write one of run's outputs; say what was written, or why not (one line each)."""
    try:
        write()
    except OutputError as exc:
        print(f"{PROG}: error: {printable(first_line(exc))}", file=sys.stderr)
        return False
    print(f"{PROG}: {done}", file=sys.stderr)
    return True


class _Ended:
    """How the command 'run' ran ended, for the command line's own exit (console_main)."""

    signal: int | None = None  # the signal that killed it


_ended = _Ended()

# Signals whose default action ends a process without a core dump: a command killed by one
# of them has the launcher die of it too. One that dumps core (SIGSEGV, SIGABRT) is reported
# as 128 + N: the launcher did not crash, and its core would mislead.
_RE_ENACTED = frozenset(
    {signal.SIGHUP, signal.SIGINT, signal.SIGKILL, signal.SIGPIPE, signal.SIGALRM, signal.SIGTERM,
     signal.SIGUSR1, signal.SIGUSR2}
)  # fmt: skip


def console_main() -> None:
    """The ``compiletrace`` command (and ``python -m compiletrace``): :func:`main`, then the
    exit a caller expects. When ``compiletrace run``'s command was killed by a signal, the
    launcher dies of the same signal, its outputs written first: a shell, a supervisor or
    a parent's ``waitpid`` sees the program's own death, not an exit status."""
    status = main()
    killed_by, _ended.signal = _ended.signal, None
    if killed_by in _RE_ENACTED:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
            signal.signal(killed_by, signal.SIG_DFL)
        os.kill(os.getpid(), killed_by)
    sys.exit(status)


def _write_job_outputs(
    job: ProfileJob, html_path: str | None, trace_path: str | None, *, on_stderr: bool = False
) -> None:
    # run's own lines go to stderr (stdout is the command's), named as compiletrace's.
    out, prefix = (sys.stderr, f"{PROG}: ") if on_stderr else (sys.stdout, "")
    if html_path:
        write_text(html_path, job.html(title="compiletrace run: " + printable(" ".join(job.command))))
        print(f"{prefix}wrote the HTML report to {html_path}", file=out)
    if trace_path:
        write_json(trace_path, job.chrome_trace())
        print(f"{prefix}wrote the Chrome trace to {trace_path}", file=out)


def _doctor(args: argparse.Namespace) -> int:
    from compiletrace._app.doctor import FindingKind
    from compiletrace._data.kinds import FileKind
    from compiletrace._load import load
    from compiletrace.reports._findings import findings_text

    known = [k.value for k in FindingKind]
    fail_on = {k.strip() for k in (args.fail_on or "").split(",") if k.strip()}
    if (args.fail_on is not None and not fail_on) or fail_on - set(known):
        bad = ", ".join(sorted(fail_on - set(known))) or repr(args.fail_on)
        raise UsageError(f"--fail-on: unknown finding kind {bad}; kinds: {', '.join(known)}")
    _outputs([(args.json, "--json"), (args.html, "--html")], inputs=[args.run])
    if args.trust and not args.verify:
        raise UsageError("--trust is for --verify, which runs the job's command")
    job = load(
        args.run,
        accept={FileKind.RUN, FileKind.GATHER, FileKind.JOB},
        command="compiletrace doctor",
        components=args.component,
    )
    assert not isinstance(job, list) and hasattr(job, "diagnose")
    if args.verify:
        return _verify(args, job, fail_on)
    findings = job.diagnose()
    if args.json != "-":
        print(findings_text(findings))
    _write_findings(args, findings)
    return EXIT_FAILED if any(f.kind in fail_on for f in findings) else EXIT_OK


def _write_findings(args: argparse.Namespace, findings: Any, verify: Any = None) -> None:
    """The doctor's --json and --html outputs (``verify``: the before/after table)."""
    from compiletrace._app.doctor import doctor_dict
    from compiletrace.reports._html import doctor_html_report

    if args.json:
        write_json(args.json, doctor_dict(findings))
        if args.json != "-":
            print(f"wrote findings to {args.json}")
    if args.html:
        table = None if verify is None else (verify.header, verify.rows, verify.notes)
        write_text(args.html, doctor_html_report(findings, verify=table))
        if args.json != "-":
            print(f"wrote the HTML page to {args.html}")


def _verify(args: argparse.Namespace, job: Any, fail_on: set[str]) -> int:
    from compiletrace._app.profile import ProfileRun
    from compiletrace._app.verify import (
        profile_command,
        verified_findings,
        verify_job,
        verify_lines,
        verify_profile_run,
        verify_table,
    )
    from compiletrace._data.job import Job
    from compiletrace.reports._findings import findings_text

    def progress(line: str) -> None:
        print(f"{PROG}: running {line}", file=sys.stderr)

    profiled = isinstance(job, ProfileRun) and "source" not in job.meta and "model" in job.meta
    if not profiled and (not isinstance(job, Job) or not job.command):  # torch's trace, ranks
        raise UsageError(
            f"{args.run}: --verify re-runs a job's command or a profile run's MODEL, and this file names "
            "neither; give a job saved by 'compiletrace run --json JOB.json -- COMMAND' or a run saved "
            "by 'compiletrace profile --json RUN.json'"
        )
    if profiled:
        command = profile_command(job.meta)  # a run whose options profile did not write: exit 2
        shown = f"the model {printable(command[4])}, imported from {printable(os.getcwd())}"
    else:
        shown = printable(" ".join(job.command)) + (f" in {printable(job.cwd)}" if job.cwd else "")
    if not args.trust:
        raise UsageError(
            f"{args.run}: --verify would run what this file names ({shown}), and a file can "
            "name any code: give --trust if the file is your own"
        )
    verdicts = (
        verify_profile_run(job.meta, cwd=os.getcwd(), progress=progress)
        if profiled
        else verify_job(job, progress=progress)
    )
    findings = verified_findings(verdicts)
    if args.json != "-":
        print(findings_text(findings))
        print()
        print("\n".join(verify_lines(verdicts)))
    _write_findings(args, findings, verify_table(verdicts) if verdicts else None)
    return EXIT_FAILED if any(f.kind in fail_on for f in findings) else EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from compiletrace._app.compare import compare_files, parse_gates

    gates = parse_gates(args.gate)  # a bad --gate is bad input: exit 2 before reading a file
    result = compare_files(
        args.base, args.new, threshold_pct=args.threshold, min_seconds=args.min_seconds, gates=gates
    )
    print(result.table())
    return EXIT_FAILED if result.regressions else EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from compiletrace._data.kinds import FileKind
    from compiletrace._load import load

    outputs = [(args.html, "--html"), (args.chrome_trace, "--chrome-trace"), (args.json, "--json")]
    _outputs(outputs, inputs=[args.run])
    run = load(
        args.run,
        accept={FileKind.RUN, FileKind.JOB},
        command="compiletrace report",
        components=args.component,
    )
    assert isinstance(run, (ProfileRun, ProfileJob))  # what accept= lets through
    if args.json:
        run.save(args.json)
    if isinstance(run, ProfileJob):
        print(run.summary())
        if args.html or args.chrome_trace:
            _write_job_outputs(run, args.html, args.chrome_trace)
        if args.json:
            print(f"wrote the job to {args.json}")
        return EXIT_OK
    assert isinstance(run, ProfileRun)
    print(run.summary())
    if run.timeline is not None:
        from compiletrace.reports._timeline import timeline_text

        print()
        print(timeline_text(run.timeline))
    _write_outputs(run, args.html, args.chrome_trace)
    if args.json:
        print(f"wrote the run to {args.json}")
    return EXIT_OK


def _bench(args: argparse.Namespace) -> int:
    from compiletrace._app.progress import Progress
    from compiletrace._core.backend import inductor_config_patches, validate_backend
    from compiletrace.bench.startup import BenchOptions, format_results, run_startup_bench

    _outputs([(args.output_json, "--output-json")])
    if args.pytorch_records:
        from compiletrace.bench.pytorch_records import record_paths

        if not args.output_json:
            raise UsageError("--pytorch-records needs --output-json PATH: the records are written beside it")
        record_paths(args.output_json, [])  # refuses '-' (standard output) before anything runs
    for name in ("num_iters_cold", "num_iters_warmup", "num_iters_warm"):
        if getattr(args, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if args.num_iters_cold + args.num_iters_warm == 0:
        raise UsageError("nothing to measure: --num-iters-cold and --num-iters-warm are both 0")
    load_factory(args.model or DEFAULT_MODEL)  # a bad MODEL fails here, not in every child
    validate_backend(args.backend)
    if args.mode is not None and args.backend == "inductor":
        inductor_config_patches(args.mode, None, None)
    options = BenchOptions(
        model=args.model,
        backend=args.backend,
        mode=args.mode,
        compilation_mode=args.compilation_mode,
        device=args.device,
        components=tuple(_components(args)),
        num_iters_cold=args.num_iters_cold,
        num_iters_warmup=args.num_iters_warmup,
        num_iters_warm=args.num_iters_warm,
        cache_artifacts=str(Path(args.cache_artifacts).resolve()) if args.cache_artifacts else None,
        num_iters_portable=args.num_iters_portable,
        trust_cache_artifacts=args.trust,
    )
    if args.trust and not args.cache_artifacts:
        raise UsageError("--trust applies to --cache-artifacts; there is no file to trust")
    if args.cache_artifacts and not Path(args.cache_artifacts).is_file():
        raise UsageError(f"cache artifacts file {args.cache_artifacts!r} does not exist")
    if args.num_iters_portable is not None and args.num_iters_portable < 0:
        raise UsageError(f"--num-iters-portable must be >= 0, got {args.num_iters_portable}")
    try:
        with Progress() as progress:
            result = run_startup_bench(options, progress=progress)
    except ChildFailed as exc:
        print(f"{PROG}: error: {exc}; its stderr ends with:\n{exc.stderr_tail}", file=sys.stderr)
        return EXIT_FAILED
    data = result.to_dict()
    print(format_results(data))
    if args.output_json:
        write_json(args.output_json, data)
        print(f"wrote figures to {args.output_json}")
    if args.pytorch_records:
        from compiletrace.bench.pytorch_records import write_pytorch_records

        written = write_pytorch_records(data, args.output_json, args=vars(args))
        print(f"wrote {len(written)} PyTorch benchmark record file(s) beside {args.output_json}")
    return EXIT_OK
