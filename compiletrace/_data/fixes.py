"""The fixes ``compiletrace run --apply`` makes with no edit to the program, by name: one
vocabulary for the doctor (which names the fix that applies its advice), ``doctor --verify``
(which re-runs the program with it), and the two places that make them: torch's settings
(``torch_compat.CONFIG_FIXES``) and the changes to how a program calls a public API
(``_app.program_fixes``). Each member says what it does and how to keep it in code.

A member's value is its spelling on the command line and in the doctor's JSON
(``evidence["auto_fix"]``); a fix that takes an argument is written ``NAME=ARGUMENT``.

>>> Fix.DYNAMIC_SHAPES.value, Fix.REGIONAL_COMPILE.spelled("LlamaDecoderLayer")
('dynamic-shapes', 'regional-compile=LlamaDecoderLayer')
>>> parse_fix("regional-compile=LlamaDecoderLayer")
(<Fix.REGIONAL_COMPILE: 'regional-compile'>, 'LlamaDecoderLayer')
>>> Fix.STATIC_CACHE.usage
'static-cache'
"""

from __future__ import annotations

import enum
import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from compiletrace._io.errors import UsageError
from compiletrace._io.text import shell_line

__all__ = [
    "DYNAMIC_SOURCES_ENV",
    "RAISED_RECOMPILE_LIMIT",
    "Fix",
    "apply_line",
    "check_fixes",
    "dynamic_source_entries",
    "fix_names",
    "fixes_help",
    "is_dynamic_source",
    "parse_fix",
]

RAISED_RECOMPILE_LIMIT = 64  # what raise-recompile-limit sets; torch's default is 8
# torch's own setting of the inputs to compile dynamic from the first call (read at import)
DYNAMIC_SOURCES_ENV = "TORCH_COMPILE_DYNAMIC_SOURCES"
# One entry of it, as torch names a source: L['x'], L['kwargs']['input_ids'], G['buf'],
# L['self'].layers[0].keys, L['self']._modules['0'], and an optional dimension (":1"). Built
# to match only that: no spaces (torch removes them), no commas (torch splits the list on
# them), and inside quotes a key of word characters and hyphens only (a name, a dict's or
# a ModuleDict's key): no bracket, quote or backslash, so that torch's second reading of an
# entry, as a regular expression, finds nothing to repeat; and nothing a shell reads (a run
# file's "L['$(...)']" is no source, and never reaches a command line the doctor prints).
_QUOTED = r"[\w-]+"  # what may stand between a key's quotes
_KEY = f"'{_QUOTED}'|\"{_QUOTED}\""
# Matched whole (fullmatch): "$" would also match before a final line break.
_SOURCE_ENTRY = re.compile(
    rf"[LG]\[(?:{_KEY}|[0-9]+)\](?:\.[A-Za-z_]\w*|\[(?:{_KEY}|-?[0-9]+)\])*(?::[0-9]+)?"
)


class Fix(str, enum.Enum):
    """A fix that applies from outside the program (``compiletrace run --apply``)."""

    DYNAMIC_SHAPES = "dynamic-shapes"  # torch's setting: every dimension dynamic from the first compile
    CAPTURE_SCALAR_OUTPUTS = "capture-scalar-outputs"  # torch's setting: a .item() stays in the graph
    REORDERABLE_PRINT = "reorderable-print"  # torch's setting: print moved out of the graph
    RAISE_RECOMPILE_LIMIT = "raise-recompile-limit"  # torch's setting: more variants per frame
    REGIONAL_COMPILE = "regional-compile"  # the program's torch.compile: each CLASS block on its own
    STATIC_CACHE = "static-cache"  # the program's generate: a static generation cache
    FAIL_AFTER_READY = "fail-after-ready"  # torch's stance at the ready mark: a compile raises
    EAGER_AFTER_READY = "eager-after-ready"  # torch's stance at the ready mark: a compile runs eagerly
    MARK_DYNAMIC = "mark-dynamic"  # torch's setting, from the job's environment: these inputs dynamic

    def __str__(self) -> str:  # "dynamic-shapes", in messages and f-strings alike
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @property
    def does(self) -> str:
        """What the fix changes, in a line."""
        return _ABOUT[self].does

    @property
    def in_code(self) -> str:
        """How to keep the fix in the program's own code."""
        return _ABOUT[self].in_code

    @property
    def argument(self) -> str | None:
        """What the fix's ``=ARGUMENT`` names (``CLASS``), or None for a fix that takes none."""
        return _ABOUT[self].argument

    @property
    def usage(self) -> str:
        """The fix as a user writes it: ``regional-compile=CLASS``, ``static-cache``."""
        return self.value if self.argument is None else f"{self.value}={self.argument}"

    def spelled(self, argument: str | None = None) -> str:
        """The fix's name with its argument, as ``run --apply`` takes it and the doctor's
        JSON carries it (``regional-compile=LlamaDecoderLayer``). Raises
        :class:`~compiletrace.UsageError` for an argument :func:`parse_fix` refuses."""
        spelled = self.value if argument is None else f"{self.value}={argument}"
        parse_fix(spelled)
        return spelled

    def offered(self, argument: str | None = None) -> str | None:
        """:meth:`spelled`, or None where the argument is not what torch writes (a class
        name that is no Python identifier, an input torch would not name so): what a
        finding read from a file may offer, so that no run file's text reaches a command.

        >>> Fix.REGIONAL_COMPILE.offered("Block"), Fix.REGIONAL_COMPILE.offered("Block$(id)")
        ('regional-compile=Block', None)
        """
        try:
            return self.spelled(argument)
        except UsageError:
            return None


@dataclass(frozen=True)
class _About:
    does: str
    in_code: str
    argument: str | None = None  # what NAME=ARGUMENT names, for a fix that takes one


_ABOUT: dict[Fix, _About] = {
    Fix.DYNAMIC_SHAPES: _About(
        "compiles every dimension of every input dynamic from the first call, as dynamic=True does",
        "torch.compile(..., dynamic=True), or torch._dynamo.config.assume_static_by_default = False",
    ),
    Fix.CAPTURE_SCALAR_OUTPUTS: _About(
        "keeps a .item() in the graph as a symbolic number, instead of breaking the graph there",
        "torch._dynamo.config.capture_scalar_outputs = True",
    ),
    Fix.REORDERABLE_PRINT: _About(
        "moves print() calls out of the compiled graph, instead of breaking the graph at each",
        "torch._dynamo.config.reorderable_logging_functions.add(print)",
    ),
    Fix.RAISE_RECOMPILE_LIMIT: _About(
        f"lets each frame compile {RAISED_RECOMPILE_LIMIT} variants (torch's default: 8) before it "
        "runs eagerly",
        f"torch._dynamo.config.recompile_limit = {RAISED_RECOMPILE_LIMIT}",
    ),
    Fix.REGIONAL_COMPILE: _About(
        "torch.compile(model) compiles each CLASS block inside the model on its own, once, and runs "
        "the model around the blocks as it is",
        "torch.compile each CLASS block on its own (block.compile(...)) instead of the model",
        "CLASS",
    ),
    Fix.STATIC_CACHE: _About(
        "transformers' generate gets a static cache (cache_implementation='static') when the call "
        "sets no cache of its own",
        "model.generate(..., cache_implementation='static')",
    ),
    Fix.FAIL_AFTER_READY: _About(
        "at the ready mark (--ready), torch refuses every new compile in the process: the call that "
        "would compile raises instead (a gate in the process, not a fix; lazy backwards, CUDA-graph "
        "recordings and autotuning still happen)",
        'torch.compiler.set_stance("fail_on_recompile") after the warm-up',
    ),
    Fix.EAGER_AFTER_READY: _About(
        "at the ready mark (--ready), a call that would compile runs eagerly instead: no compile "
        "spike, but that call runs uncompiled, and no hook sees it",
        'torch.compiler.set_stance("eager_on_recompile") after the warm-up',
    ),
    Fix.MARK_DYNAMIC: _About(
        "compiles the named inputs' dimensions dynamic from the first call (what torch does on the "
        "recompile), nothing else: TORCH_COMPILE_DYNAMIC_SOURCES, in every process; names apply to "
        "every compiled frame that has such an input",
        'TORCH_COMPILE_DYNAMIC_SOURCES="SOURCE:DIM,..." in the environment, or '
        "torch._dynamo.maybe_mark_dynamic(tensor, dim) before the first call",
        "SOURCE:DIM,...",
    ),
}


def fix_names() -> list[str]:
    """Every fix ``run --apply`` takes, as a user writes it, sorted.

    >>> fix_names()[:2]
    ['capture-scalar-outputs', 'dynamic-shapes']
    """
    return sorted(fix.usage for fix in Fix)


def fixes_help(width: int = 100) -> str:
    """Each fix and what it does, aligned and wrapped to ``width`` columns (``run --help``).

    >>> print(fixes_help(width=72).splitlines()[0])
      capture-scalar-outputs       keeps a .item() in the graph as a
    """
    names = sorted(Fix, key=lambda f: f.usage)
    column = 2 + max(len(fix.usage) for fix in names) + 2
    lines = []
    for fix in names:
        wrapped = textwrap.wrap(fix.does, width=max(width - column, 20))
        lines.append(f"  {fix.usage.ljust(column - 4)}  {wrapped[0]}")
        lines.extend(" " * column + rest for rest in wrapped[1:])
    return "\n".join(lines)


def parse_fix(name: str) -> tuple[Fix, str | None]:
    """The fix ``name`` spells and its argument. Raises :class:`~compiletrace.UsageError` for
    a name that is no fix, an argument a fix does not take, or a missing or malformed one.

    >>> parse_fix("static-cache")
    (<Fix.STATIC_CACHE: 'static-cache'>, None)
    """
    base, sep, argument = name.partition("=")
    try:
        fix = Fix(base)
    except ValueError:
        raise UsageError(
            f"unknown fix {name!r}; the fixes that apply with no edit: {', '.join(fix_names())}"
        ) from None
    if fix is Fix.MARK_DYNAMIC:
        if not sep or not argument:
            raise UsageError(
                f"{name!r}: mark-dynamic needs the inputs' names as torch writes them, e.g. "
                "mark-dynamic=L['kwargs']['input_ids']:1 (the recompiles finding names them)"
            )
        dynamic_source_entries(argument)
        return fix, argument
    if fix is Fix.REGIONAL_COMPILE:
        if not sep or not argument or not all(part.isidentifier() for part in argument.split(".")):
            raise UsageError(
                f"{name!r}: regional-compile needs the block's class name, e.g. "
                "regional-compile=LlamaDecoderLayer (the class the repeated_graph finding names)"
            )
        return fix, argument
    if sep:
        raise UsageError(f"{name!r}: the fix {base!r} takes no '=' argument")
    return fix, None


def dynamic_source_entries(argument: str) -> list[str]:
    """The entries of a ``mark-dynamic`` argument, each checked to be a source as torch names
    one, with an optional dimension; raises :class:`~compiletrace.UsageError` at the first
    that is not.

    >>> dynamic_source_entries("L['kwargs']['input_ids']:1,L['x']:0")
    ["L['kwargs']['input_ids']:1", "L['x']:0"]
    """
    entries = argument.split(",")
    for entry in entries:
        if not is_dynamic_source(entry):
            raise UsageError(
                f"mark-dynamic: {entry!r} is not an input as torch names it, with an optional "
                "dimension (L['x']:0, L['kwargs']['input_ids']:1; no spaces, and a quoted key of letters, "
                "digits, '_' and '-' only)"
            )
    return entries


def is_dynamic_source(entry: str) -> bool:
    """Whether ``entry`` is one input as torch names it, with an optional dimension: what
    ``mark-dynamic`` takes (:func:`dynamic_source_entries`).

    >>> is_dynamic_source("L['kwargs']['input_ids']:1"), is_dynamic_source("L['$(id)']:0")
    (True, False)
    """
    return _SOURCE_ENTRY.fullmatch(entry) is not None


def apply_line(fixes: Iterable[str], command: Sequence[str] = ()) -> str:
    """The ``compiletrace run`` that applies ``fixes`` (to ``command``, when given), as the
    doctor prints it for pasting: every word quoted for a shell
    (:func:`~compiletrace._io.text.shell_line`), so that pasted it runs exactly that.

    >>> print(apply_line(["mark-dynamic=L['x']:0"]))
    compiletrace run --apply "mark-dynamic=L['x']:0"
    >>> print(apply_line(["regional-compile=Block"], ["python", "serve.py", "--name", "a b"]))
    compiletrace run --apply regional-compile=Block -- python serve.py --name 'a b'
    """
    words = ["compiletrace", "run"]
    for fix in fixes:
        words += ["--apply", fix]
    return shell_line([*words, "--", *command] if command else words)


def check_fixes(names: Iterable[str]) -> list[tuple[Fix, str | None]]:
    """:func:`parse_fix` on each name, and at most one ``regional-compile`` (torch.compile is
    replaced once); raises :class:`~compiletrace.UsageError` at the first bad one."""
    names = list(names)
    parsed = [parse_fix(name) for name in names]
    pairs = zip(names, parsed, strict=True)
    regional = sorted({name for name, (fix, _) in pairs if fix is Fix.REGIONAL_COMPILE})
    if len(regional) > 1:
        raise UsageError(f"one regional-compile at a time: {', '.join(regional)}")
    return parsed
