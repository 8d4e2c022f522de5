"""``compiletrace cache save|inspect|load``: portable compile caches, torch's cache
artifacts saved to one file, reported without running them, and loaded; the work is
:mod:`compiletrace._app.cache`'s."""

from __future__ import annotations

import argparse
import sys

from compiletrace._io.errors import UsageError
from compiletrace._io.text import printable
from compiletrace.cli.exit_codes import EXIT_OK
from compiletrace.cli.options import add_model_options, check_outputs, component_pairs
from compiletrace.cli.parsing import add_common_options, formatter

__all__ = ["DESCRIPTION", "EPILOG", "add_options", "run"]

DESCRIPTION = (
    "Save the compile-cache artifacts of a model's start-up to one file, to load on another\n"
    "machine or in a fresh container; report what such a file holds without running it; load\n"
    "one into the compile caches. An artifacts file is code: load only files you trust."
)
EPILOG = None


def add_options(parser: argparse.ArgumentParser) -> None:
    cache_sub = parser.add_subparsers(dest="cache_command", metavar="ACTION")
    cache_sub.required = True
    save = cache_sub.add_parser(
        "save",
        formatter_class=formatter,
        help="compile and warm up MODEL, then save the cache artifacts to PATH",
        description="Compile and warm up MODEL (inductor), then save torch's cache artifacts to PATH and\n"
        "their SHA-256 to PATH.sha256 (what 'cache load' and 'cache inspect' check the file against).",
    )
    add_common_options(save)
    save.add_argument("path", metavar="PATH", help="file to write the artifacts to")
    add_model_options(save)
    inspect = cache_sub.add_parser(
        "inspect",
        formatter_class=formatter,
        help="report what the artifacts in PATH hold, running nothing from the file",
        description="Report what the cache artifacts in PATH hold: artifacts per kind, keys and sizes,\n"
        "the torch that saved them, the SHA-256. Nothing in the file is run and nothing is written;\n"
        "a file that 'cache load' would refuse is refused here too, saying why.",
    )
    add_common_options(inspect)
    inspect.add_argument("path", metavar="PATH", help="a file written by 'compiletrace cache save'")
    load = cache_sub.add_parser(
        "load",
        formatter_class=formatter,
        help="check the artifacts in PATH, then load them into the compile caches",
        description="Check the cache artifacts in PATH (their digest, every class their pickles name, every\n"
        "path they would write) and load them into the compile caches (TORCHINDUCTOR_CACHE_DIR).\n"
        "A file the check cannot vouch for is refused; --trust loads it unchecked.",
    )
    add_common_options(load)
    load.add_argument("path", metavar="PATH", help="a file written by 'compiletrace cache save'")
    load.add_argument(
        "--trust", action="store_true", help="load PATH unchecked (the file is code: only your own)"
    )


def run(args: argparse.Namespace) -> int:
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
    check_outputs([(args.path, "PATH"), (str(digest_path(args.path)), "PATH.sha256")])
    if args.backend != "inductor":
        raise UsageError(f"cache artifacts come from inductor; --backend {args.backend} saves none")
    run = profile(
        args.model,
        backend=args.backend,
        mode=args.mode,
        device=args.device,
        components=component_pairs(args) or None,
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
