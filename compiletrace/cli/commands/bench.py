"""``compiletrace bench startup``: cold vs warm start-up of a model, each iteration a fresh
process; the benchmark itself is :mod:`compiletrace.bench`'s."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from compiletrace._app.model_spec import DEFAULT_MODEL, load_factory
from compiletrace._io.errors import ChildFailed, UsageError
from compiletrace._io.files import write_json
from compiletrace.cli.exit_codes import EXIT_FAILED, EXIT_OK
from compiletrace.cli.options import add_model_options, check_outputs, component_pairs, prints_text
from compiletrace.cli.parsing import PROG, add_common_options, decimal, formatter, whole_number

__all__ = ["DESCRIPTION", "EPILOG", "add_options", "run"]

# What MODEL's start-ups are built and compiled with, each option's default: a command chooses
# its own, so these are refused beside it and its records never claim them.
_MODEL_OPTIONS: dict[str, object] = {
    "backend": "inductor",
    "mode": None,
    "compilation_mode": "stock",
    "device": "cpu",
    "component": [],
}
_MODEL_ONLY = (*_MODEL_OPTIONS, "cache_artifacts", "trust", "num_iters_portable")

DESCRIPTION = "Benchmarks of compile start-up."
EPILOG = None


def add_options(parser: argparse.ArgumentParser) -> None:
    bench_sub = parser.add_subparsers(dest="bench_command", metavar="BENCHMARK")
    bench_sub.required = True
    startup = bench_sub.add_parser(
        "startup",
        formatter_class=formatter,
        help="cold vs warm start-up, each iteration a fresh process",
        description="Start MODEL in fresh Python processes: cold ones each on a fresh empty compile cache,\n"
        "warm ones on a cache filled by untimed warm-up iterations. Prints the average and the\n"
        "10/25/50/75/90/99th percentiles (of one iteration, its value) of start-up, non-encoder\n"
        "compilation and encoder compilation time. Without a terminal, a line per stage on stderr.\n\n"
        "With '-- COMMAND' instead of MODEL: start any command (a server, a training job) the same\n"
        "way, each run under 'compiletrace run' and only until it is ready (--ready WHEN), a grace,\n"
        "then stopped (SIGINT, SIGTERM, SIGKILL to its process group); its start-up is from its start\n"
        "to the last ready mark of its processes (the critical path). A command that ends by itself\n"
        "(a script) needs no --ready: its start-up is its whole run.",
        usage="%(prog)s [OPTIONS] [MODEL]\n       %(prog)s [OPTIONS] -- COMMAND [ARGS...]",
    )
    add_common_options(startup)
    add_model_options(startup)
    startup.add_argument(
        "--num-iters-cold", type=whole_number, default=3, metavar="N", help="cold iterations (default: 3)"
    )
    startup.add_argument(
        "--num-iters-warmup",
        type=whole_number,
        default=1,
        metavar="N",
        help="untimed cache-filling iterations (default: 1; 0: the last cold iteration fills it)",
    )
    startup.add_argument(
        "--num-iters-warm", type=whole_number, default=3, metavar="N", help="warm iterations (default: 3)"
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
        type=whole_number,
        default=None,
        metavar="N",
        help="portable iterations (default: as many as cold)",
    )
    startup.add_argument(
        "--ready",
        metavar="WHEN",
        help="with -- COMMAND: when it is ready, as 'run --ready' takes it: port:PORT, step:N,\n"
        "MODULE:FUNCTION or phase:NAME (default: the end of its warm-up, or compiletrace.ready(); a\n"
        "command that ends with neither is measured to its end)",
    )
    startup.add_argument(
        "--grace",
        type=decimal,
        default=3.0,
        metavar="S",
        help="with -- COMMAND: seconds it runs after ready before it is stopped (default 3)",
    )
    startup.add_argument(
        "--traffic",
        metavar="COMMAND",
        help="with -- COMMAND: the requests each run gets once it is ready, as 'run --traffic' takes\n"
        "them ({port}: the port of --ready port:PORT); what they compile counts, the grace follows them",
    )
    startup.add_argument(
        "--ready-timeout",
        type=decimal,
        default=900.0,
        metavar="S",
        help="with -- COMMAND: a run not ready in S seconds fails the benchmark (default 900)",
    )
    startup.add_argument("--output-json", metavar="PATH", help="write the figures as JSON")
    startup.add_argument(
        "--pytorch-records",
        action="store_true",
        help="with --output-json PATH: also write PyTorch's benchmark-database records beside it, one\n"
        "file per metric (PATH without its extension + .<metric>.pytorch.json)",
    )


def run(args: argparse.Namespace) -> int:
    from compiletrace._app.progress import Progress
    from compiletrace._core.backend import inductor_config_patches, validate_backend
    from compiletrace.bench.startup import BenchOptions, format_results, run_startup_bench

    check_outputs([(args.output_json, "--output-json")])
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
    command = getattr(args, "command_argv", None)
    if command is not None:
        return _run_command(args, command)
    for option, given in (
        ("--ready", args.ready is not None),
        ("--grace", args.grace != 3.0),
        ("--traffic", args.traffic is not None),
    ):
        if given:
            raise UsageError(
                f"{option} is for '-- COMMAND', which runs until it is ready; MODEL ends by itself"
            )
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
        components=tuple(component_pairs(args)),
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
    say = prints_text([(args.output_json, "--output-json")])  # JSON on stdout is all it holds
    if say:
        print(format_results(data))
    if args.output_json:
        write_json(args.output_json, data)
        if say:
            print(f"wrote figures to {args.output_json}")
    if args.pytorch_records:
        from compiletrace.bench.pytorch_records import write_pytorch_records

        written = write_pytorch_records(data, args.output_json, args=vars(args))
        print(f"wrote {len(written)} PyTorch benchmark record file(s) beside {args.output_json}")
    return EXIT_OK


def _run_command(args: argparse.Namespace, command: list[str]) -> int:
    """``bench startup [OPTIONS] -- COMMAND``: :func:`compiletrace.bench.command.run_command_bench`."""
    from compiletrace._app.job import UntilReady, traffic_words
    from compiletrace._data.ready import parse_ready
    from compiletrace.bench.command import run_command_bench
    from compiletrace.cli.options import check_seconds
    from compiletrace.reports import bench_text

    if not command:
        raise UsageError("bench startup -- COMMAND needs a command after '--'")
    if args.model is not None:
        raise UsageError(f"give MODEL ({args.model}) or '-- COMMAND', not both")
    if args.cache_artifacts or args.num_iters_portable:
        raise UsageError("--cache-artifacts (portable start-ups) is for MODEL; a command loads no artifacts")
    for name, default in _MODEL_OPTIONS.items():
        if getattr(args, name) != default:
            raise UsageError(
                f"--{name.replace('_', '-')} is for MODEL; '-- COMMAND' compiles as the command chooses "
                "(the figures name the backend its runs used)"
            )
    if args.ready is not None:
        parse_ready(args.ready)  # bad input, before anything runs
    check_seconds(args.grace, "--grace", minimum=0.0)
    check_seconds(args.ready_timeout, "--ready-timeout", minimum=1.0)
    traffic = traffic_words(args.traffic, args.ready) if args.traffic is not None else ()
    until = UntilReady(grace_s=args.grace, timeout_s=args.ready_timeout, traffic=traffic)

    def note(line: str) -> None:
        print(f"{PROG}: {line}", file=sys.stderr)

    try:
        result = run_command_bench(
            command,
            ready=args.ready,
            num_iters_cold=args.num_iters_cold,
            num_iters_warmup=args.num_iters_warmup,
            num_iters_warm=args.num_iters_warm,
            until_ready=until,
            note=note,
        )
    except ChildFailed as exc:
        print(f"{PROG}: error: {exc}: {exc.stderr_tail}", file=sys.stderr)
        return EXIT_FAILED
    data = result.to_dict()
    say = prints_text([(args.output_json, "--output-json")])  # JSON on stdout is all it holds
    if say:
        print(bench_text(data))
    if args.output_json:
        write_json(args.output_json, data)
        if say:
            print(f"wrote figures to {args.output_json}")
    if args.pytorch_records:
        from compiletrace.bench.pytorch_records import write_pytorch_records

        # The command's own arguments, not MODEL's defaults: model.name is the command, and the
        # backend is the one its runs compiled with (none where nothing compiled).
        named = {k: v for k, v in vars(args).items() if k not in _MODEL_ONLY}
        named["model"] = " ".join(command)
        if "backend" in data["options"]:
            named["backend"] = data["options"]["backend"]
        written = write_pytorch_records(data, args.output_json, args=named)
        print(f"wrote {len(written)} PyTorch benchmark record file(s) beside {args.output_json}")
    return EXIT_OK
