"""The ``compiletrace`` command: ``profile``, ``bench startup``, ``report``, ``cache`` and ``compare``.

A thin layer: argument parsing and output here; the work in ``compiletrace._app.profile``,
``compiletrace.bench`` and ``compiletrace.reports``.

>>> main(["report", "/no/such/run.json"])
2
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from compiletrace._app.profile import DEFAULT_MODEL, ProfileRun, load_factory, parse_component
from compiletrace._io.errors import ChildFailed, LaunchError, UsageError
from compiletrace._io.files import check_writable, write_json, write_text
from compiletrace._io.text import first_line

__all__ = ["build_parser", "main"]

PROG = "compiletrace"
HELP_WIDTH = 100  # fixed, so --help reads the same everywhere (docs/reference.md quotes it)

EXIT_OK = 0
EXIT_FAILED = 1  # the model failed to compile or run; a benchmark child failed
EXIT_USAGE = 2  # bad input: nothing was compiled
EXIT_INTERRUPTED = 130


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, width=HELP_WIDTH, max_help_position=32)


def _add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model",
        nargs="?",
        metavar="MODEL",
        help=f"factory as package.module:factory (default: the built-in model, {DEFAULT_MODEL})",
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
    p.add_argument("--debug", action="store_true", help="show tracebacks on errors")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (its ``--help`` texts are quoted in docs/reference.md)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        formatter_class=_formatter,
        description="Where torch.compile start-up time goes, per component and per graph.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    prof = sub.add_parser(
        "profile",
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
        "--cache-artifacts",
        metavar="PATH",
        help="load compile-cache artifacts saved by 'cache save' before compiling",
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
    spans.add_argument("--console-spans", action="store_true", help="print spans to stdout")

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
        formatter_class=_formatter,
        help="cold vs warm start-up, each iteration a fresh process",
        description="Start MODEL in fresh Python processes: cold ones each on a fresh empty compile cache,\n"
        "warm ones on a cache filled by untimed warm-up iterations. Prints the average and the\n"
        "10/25/50/75/90/99th percentiles of start-up, compilation and encoder compilation time.",
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
        "--num-iters-portable",
        type=int,
        default=None,
        metavar="N",
        help="portable iterations (default: as many as cold)",
    )
    startup.add_argument("--output-json", metavar="PATH", help="write the figures as JSON")

    report = sub.add_parser(
        "report",
        formatter_class=_formatter,
        help="render a run saved by 'profile --json'",
        description="Print the tables of a run saved by 'compiletrace profile --json', and write it as\n"
        "HTML or as a Chrome/Perfetto trace.",
    )
    report.add_argument("run", metavar="RUN.json", help="a run saved by 'compiletrace profile --json'")
    report.add_argument("--html", metavar="OUT", help="write the self-contained HTML report")
    report.add_argument("--chrome-trace", metavar="OUT", help="write a Chrome/Perfetto trace")
    report.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    cache = sub.add_parser(
        "cache",
        formatter_class=_formatter,
        help="portable compile caches: save and inspect torch's cache artifacts",
        description="Save the compile-cache artifacts of a model's start-up to one file, to load on another\n"
        "machine or in a fresh container, and report what such a file holds.",
    )
    cache_sub = cache.add_subparsers(dest="cache_command", metavar="ACTION")
    cache_sub.required = True
    save = cache_sub.add_parser(
        "save",
        formatter_class=_formatter,
        help="compile and warm up MODEL, then save the cache artifacts to PATH",
        description="Compile and warm up MODEL (inductor), then save torch's cache artifacts to PATH.",
    )
    save.add_argument("path", metavar="PATH", help="file to write the artifacts to")
    _add_model_options(save)
    load = cache_sub.add_parser(
        "load",
        formatter_class=_formatter,
        help="load the artifacts in PATH and report what they hold",
        description="Load the cache artifacts in PATH into this process's compile caches and report\n"
        "what they hold.",
    )
    load.add_argument("path", metavar="PATH", help="a file written by 'compiletrace cache save'")
    load.add_argument("--debug", action="store_true", help="show tracebacks on errors")

    compare = sub.add_parser(
        "compare",
        formatter_class=_formatter,
        help="compare two saved runs; exit 1 when anything regressed",
        description="Compare two runs saved by 'profile --json' (per component, phase and graph) or by\n"
        "'bench startup --output-json' (per metric). A figure regressed when it grew by more than\n"
        "--threshold percent and --min-seconds; a graph only in NEW (a new graph break or\n"
        "recompile) is a regression. Exit status: 0 none, 1 regressed, 2 bad input.",
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
    compare.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 1 failed, 2 bad input, 130 interrupted)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or argparse's own usage error (status 2)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "profile": _profile,
        "bench": _bench,
        "report": _report,
        "cache": _cache,
        "compare": _compare,
    }
    try:
        return handlers[args.command](args)
    except UsageError as exc:
        _error(args, first_line(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        first = first_line(exc)
        _error(args, f"{type(exc).__name__}: {first}" if first else type(exc).__name__)
        return EXIT_FAILED


def _error(args: argparse.Namespace, message: str) -> None:
    if getattr(args, "debug", False):
        traceback.print_exc()
    hint = "" if getattr(args, "debug", False) else " (--debug shows the traceback)"
    print(f"{PROG}: error: {message}{hint}", file=sys.stderr)


def _outputs(pairs: Sequence[tuple[str | None, str]]) -> None:
    for path, what in pairs:
        if path is not None:
            check_writable(path, what)


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
        handle = telemetry.configure(exporter="console", service_name=PROG)
    try:
        yield
    finally:
        handle.shutdown()


def _write_outputs(run: ProfileRun, html_path: str | None, trace_path: str | None) -> None:
    if html_path is not None:
        write_text(html_path, run.html())
        print(f"wrote HTML report to {html_path}")
    if trace_path is not None:
        from compiletrace.reports import export_chrome_trace

        export_chrome_trace(trace_path, registry=run.registry)
        print(f"wrote Chrome trace to {trace_path}")


def _profile(args: argparse.Namespace) -> int:
    from compiletrace._app.profile import profile
    from compiletrace._app.progress import Progress
    from compiletrace._core.registry import Registry

    _outputs([(args.json, "--json"), (args.chrome_trace, "--chrome-trace"), (args.html, "--html")])
    components = _components(args)
    if args.nproc < 1:
        raise UsageError(f"--nproc must be >= 1, got {args.nproc}")
    if args.nproc > 1:
        return _profile_ranks(args)
    registry = Registry()
    with _telemetry(args), Progress() as progress:

        def compiled(record: Any) -> None:
            progress.note(
                f"compiled {record.component} {record.compile_id} ({record.code_name}) in "
                f"{record.total_s:.2f} s, cache {record.cache_outcome.value}"
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
            on_compile=lambda name: progress.set(f"compiling {name}"),
            cache_artifacts=args.cache_artifacts,
        )
        progress.close()
        print(run.summary())
        _print_expensive_hits(run)
        w = run.warmup
        print(
            "warm-up skipped (compilation mode none)" if w.skipped else f"warm-up took {w.duration_s:.2f} s"
        )
    if args.json:
        run.save(args.json)
        print(f"wrote run to {args.json}")
    _write_outputs(run, args.html, args.chrome_trace)
    return EXIT_OK


def _print_expensive_hits(run: ProfileRun) -> None:
    from compiletrace._app.analysis import find_expensive_hits

    flagged = find_expensive_hits(run.records())
    if flagged:
        print("\nExpensive cache hits (a hit that still compiles):")
        for hit in flagged:
            print(f"  {hit.explanation()}")


def _profile_ranks(args: argparse.Namespace) -> int:
    from compiletrace.distributed import launch

    if args.html or args.chrome_trace or args.cache_artifacts or args.component:
        raise UsageError("--nproc > 1 takes --json, --backend, --mode and --device only")
    worker = ["--backend", args.backend, "--device", args.device, "--quiet"]
    if args.model:
        worker += ["--model", args.model]
    if args.mode:
        worker += ["--mode", args.mode]
    with _telemetry(args):
        try:
            job = launch(args.nproc, worker)
        except LaunchError as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            return EXIT_FAILED
    print(job.result.table())
    if args.json:
        write_json(args.json, job.result.to_dict())
        print(f"wrote per-rank figures to {args.json}")
    return EXIT_OK


def _cache(args: argparse.Namespace) -> int:
    from compiletrace._app.cache import load_cache_artifacts, save_cache_artifacts
    from compiletrace._app.profile import profile

    if args.cache_command == "load":
        info = load_cache_artifacts(args.path)
        print(f"loaded {info.describe()} in {info.seconds:.2f} s")
        return EXIT_OK
    _outputs([(args.path, "PATH")])
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
    print(f"saved {info.describe()}")
    return EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from compiletrace._app.compare import compare_files

    result = compare_files(args.base, args.new, threshold_pct=args.threshold, min_seconds=args.min_seconds)
    print(result.table())
    return EXIT_FAILED if result.regressions else EXIT_OK


def _report(args: argparse.Namespace) -> int:
    _outputs([(args.html, "--html"), (args.chrome_trace, "--chrome-trace")])
    run = ProfileRun.load(args.run)
    print(run.summary())
    _write_outputs(run, args.html, args.chrome_trace)
    return EXIT_OK


def _bench(args: argparse.Namespace) -> int:
    from compiletrace._app.progress import Progress
    from compiletrace._core.backend import inductor_config_patches, validate_backend
    from compiletrace.bench.startup import BenchOptions, format_results, run_startup_bench

    _outputs([(args.output_json, "--output-json")])
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
    )
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
    return EXIT_OK
