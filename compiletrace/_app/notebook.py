"""The notebook: ``%load_ext compiletrace`` adds the cell magic ``%%compiletrace``, which
runs one cell with passive recording on (as ``compiletrace run`` records a process: every
``torch.compile`` in it, whatever the backend) and then shows what the cell compiled as the
report, the doctor's findings first. The run is also kept as ``_compiletrace`` (a
:class:`~compiletrace.ProfileRun`) in the user's namespace.

In a notebook::

    %load_ext compiletrace

    %%compiletrace --component 'vision_tower=encoder'
    model.vision_tower = torch.compile(model.vision_tower)
    out = model(pixels, tokens)

The cell runs in the user's namespace, as a plain cell does (what it defines stays; the value
of a last expression is its output). An error in the cell is the cell's own error: the
recording stops, what it recorded is shown and kept, then the error propagates.

IPython is imported only here, and this module only when the extension is loaded: notebook
support costs nothing where it is not used.
"""

from __future__ import annotations

import ast
import datetime
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compiletrace._io.errors import OutputError, UsageError
from compiletrace._io.text import ascii_int

if TYPE_CHECKING:
    from compiletrace._app.profile import ProfileRun
    from compiletrace._data.records import GraphRecord
    from compiletrace._data.registry import Registry

__all__ = ["MAGIC_NAME", "NOTHING_COMPILED", "RESULT_NAME", "CellOptions", "cell_run", "register_magic"]

MAGIC_NAME = "compiletrace"  # %%compiletrace
RESULT_NAME = "_compiletrace"  # the last cell's run, in the user's namespace
NOTHING_COMPILED = "compiletrace: this cell compiled nothing (no torch.compile graph was recorded)"
SOURCE = "%%compiletrace"  # the run's meta.source, as "compiletrace run" names its own

USAGE = """\
%%compiletrace [--component PATTERN=NAME] [--trace-cost] [--json PATH] [--html PATH]

Run the cell, recording every torch.compile it triggers (any backend: the passive
recording of `compiletrace run`), then show its compiles as the report, the doctor's
findings first. A cell that compiles nothing says so in one line.

The cell runs in the notebook's namespace, as a plain cell does; an error in it is
raised as the cell's error, after what was recorded is shown. The run (a
compiletrace.ProfileRun: .records(), .diagnose(), .summary(), .html(), .save(path))
is kept as `_compiletrace`.

options:
  --component PATTERN=NAME  name the compiles whose module path, class or file match
                            PATTERN (shell-style) NAME; tried before the built-in
                            naming; repeatable
  --trace-cost              also record Dynamo's tracing time per user function
  --json PATH               save the run to PATH (read it back with compiletrace.load)
  --html PATH               write the self-contained HTML report to PATH
"""


@dataclass(frozen=True)
class CellOptions:
    """The magic's options, checked.

    >>> CellOptions.parse("--component 'vision*=encoder' --trace-cost").components
    ('vision*=encoder',)
    """

    components: tuple[str, ...] = ()
    trace_cost: bool = False
    json_path: str | None = None
    html_path: str | None = None

    @classmethod
    def parse(cls, line: str) -> CellOptions:
        """The options of a ``%%compiletrace`` line. Bad options raise IPython's
        ``UsageError``, which the shell shows as one line."""
        from compiletrace._core.components import parse_component_rules
        from compiletrace._io.files import check_writable

        parser = _parser()
        try:
            argv = shlex.split(line)  # as a shell would: quotes removed
        except ValueError as exc:
            parser.error(f"cannot read the options {line.strip()!r}: {exc}")
        args = parser.parse_args(argv)
        options = cls(tuple(args.component), args.trace_cost, args.json, args.html)
        try:
            parse_component_rules(options.components)
            for path, what in ((options.json_path, "--json"), (options.html_path, "--html")):
                if path is not None:
                    check_writable(path, what)
        except UsageError as exc:
            # The parser's own error, so it shows as every other bad option does: one line.
            parser.error(str(exc))
        if options.json_path is not None and options.json_path == options.html_path:
            parser.error(f"--json and --html are the same file {options.json_path!r}; give two paths")
        return options


def _parser() -> Any:
    # IPython's argument parser: its errors are IPython's UsageError (one line, no traceback).
    from IPython.core.magic_arguments import MagicArgumentParser

    parser = MagicArgumentParser(prog=SOURCE, usage=USAGE.splitlines()[0])
    parser.add_argument("--component", action="append", default=[], metavar="PATTERN=NAME")
    parser.add_argument("--trace-cost", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--html", metavar="PATH")
    return parser


def cell_run(
    registry: Registry, start_unix_ns: int, label: str, cell_of: Callable[[str], int | None] | None = None
) -> ProfileRun:
    """The run of one cell: what its passive recording put in ``registry``, and what
    ``compiletrace.compile`` recorded into the process registry since ``start_unix_ns``
    (those compiles keep their own registry, not passive recording's), in the order the
    compiles finished. No warm-up ran and a cell is no start-up: the run has no timeline.
    ``cell_of`` tells the notebook cell a file is the code of (the kernel's temporary file
    is named ``In [3]``, as the notebook shows it).

    >>> import time
    >>> from compiletrace._data.registry import Registry
    >>> run = cell_run(Registry(), time.time_ns(), "cell In[1]")
    >>> run.meta.source, run.records(), run.timeline
    ('%%compiletrace', (), None)
    """
    import torch

    from compiletrace._app.profile import ProfileRun
    from compiletrace._core import torch_compat as tc
    from compiletrace._data.records import CompilationTimes
    from compiletrace._data.registry import Registry, get_registry
    from compiletrace._data.run import WarmupResult
    from compiletrace._data.run_meta import RunMeta
    from compiletrace._version import __version__

    own = registry.records()
    seen = {(r.compile_id, r.start_unix_ns) for r in own}
    # A record already in ``registry`` is this cell's own observe() copy: counted once.
    others = (
        r
        for r in get_registry().records()
        if r.start_unix_ns >= start_unix_ns and (r.compile_id, r.start_unix_ns) not in seen
    )
    reg = Registry()
    for record in sorted((*own, *others), key=lambda r: r.end_unix_ns):
        reg.add(record if cell_of is None else _in_cells(record, cell_of))
    records = reg.records()
    by_component = reg.by_component()
    warmup = WarmupResult(
        skipped=True,  # compiletrace ran no warm-up: the cell ran as it does
        duration_s=0.0,
        compilation_times=CompilationTimes.from_components(by_component),
        by_component=by_component,
    )
    backends = sorted({r.backend for r in records})
    meta = RunMeta(
        source=SOURCE,
        model=label,  # what the report's header names the run by
        backend=", ".join(backends) if backends else None,
        created_unix_s=time.time(),
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        torch_version=str(torch.__version__),
        compiletrace_version=__version__,
        cache_keys=tc.run_cache_keys(records),
    )
    return ProfileRun(records, warmup, meta, None)


def _in_cells(record: GraphRecord, cell_of: Callable[[str], int | None]) -> GraphRecord:
    """``record`` with the files that are notebook cells named as the notebook names them."""
    from dataclasses import replace

    from compiletrace._data.records import notebook_cell

    def named(filename: str) -> str:
        number = cell_of(filename) if filename else None
        return filename if number is None else notebook_cell(number)

    breaks = tuple(b._replace(filename=named(b.filename)) for b in record.graph_breaks)
    return replace(record, code_filename=named(record.code_filename), graph_breaks=breaks)


class _CellMagic:
    """``%%compiletrace`` for one shell."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell

    def __call__(self, line: str, cell: str) -> Any:
        __tracebackhide__ = True  # IPython leaves this frame out of the cell's traceback
        options = CellOptions.parse(line)
        body, last = self._compile(cell)  # a syntax error is raised before anything records

        from compiletrace._core.passive import observe
        from compiletrace._data.registry import Registry

        label = f"cell In[{self._cell_number()}]"
        start_unix_ns = time.time_ns()
        recording = observe(components=options.components, registry=Registry(), trace_cost=options.trace_cost)
        try:
            exec(body, self.shell.user_global_ns, self.shell.user_ns)
            value = eval(last, self.shell.user_global_ns, self.shell.user_ns) if last is not None else None
        except BaseException:
            recording.stop()
            # Shown and kept before the cell's own error reaches the shell, which shows it; a
            # failure in showing it never takes the cell's error's place.
            try:
                self._finish(
                    cell_run(recording.registry, start_unix_ns, label, self._cell_of), options, failed=True
                )
            except Exception as exc:
                print(f"compiletrace: the cell's report could not be shown: {exc!r}", file=sys.stderr)
            raise
        recording.stop()
        self._finish(cell_run(recording.registry, start_unix_ns, label, self._cell_of), options, failed=False)
        return value

    def _cell_of(self, filename: str) -> int | None:
        """The number of the cell ``filename`` is the shell's file for, if it is one (the
        shell names its cells' files itself: ``In[3]`` in its tracebacks)."""
        try:
            found = self.shell.compile.format_code_name(filename)
        except Exception:  # an older shell: the file keeps its own name
            return None
        if not found or not isinstance(found[1], str):
            return None
        number = found[1].removeprefix("In[").removesuffix("]")
        return ascii_int(number)

    def _cell_number(self) -> int:
        """The number of the cell running now (``In[n]``)."""
        # IPython 9 moves the shell's count on to the next cell's before a cell runs; the
        # running cell's result keeps its own.
        running = getattr(self.shell.displayhook, "exec_result", None)
        number = getattr(running, "execution_count", None)
        return int(number if isinstance(number, int) else self.shell.execution_count)

    def _compile(self, cell: str) -> tuple[Any, Any]:
        """The cell as the shell would run it (its IPython syntax and AST transformers
        applied), split as a plain cell is: the statements, and a last expression whose
        value is the cell's output."""
        shell = self.shell
        source = shell.transform_cell(cell)
        # Cached under a name of its own, so a traceback shows the cell's lines.
        filename = shell.compile.cache(source, self._cell_number(), raw_code=cell)
        tree = shell.transform_ast(shell.compile.ast_parse(source, filename=filename))
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = shell.compile(ast.Expression(tree.body.pop().value), filename, "eval")
        return shell.compile(tree, filename, "exec"), last

    def _finish(self, run: ProfileRun, options: CellOptions, *, failed: bool) -> None:
        self.shell.user_ns[RESULT_NAME] = run
        if run.records():
            from IPython.display import display

            from compiletrace.reports import report_fragment

            # The notebook shows the HTML report; a terminal, the text tables.
            bundle = {"text/html": report_fragment(run, findings=run.diagnose()), "text/plain": run.summary()}
            display(bundle, raw=True)
        else:
            print(NOTHING_COMPILED)
        try:
            _write_outputs(run, options)
        except OutputError as exc:
            if not failed:
                raise
            # The cell's own error comes next; this one must not replace it.
            print(f"compiletrace: {exc}", file=sys.stderr)


def _write_outputs(run: ProfileRun, options: CellOptions) -> None:
    from compiletrace._io.files import write_text

    if options.json_path is not None:
        run.save(options.json_path)
        print(f"wrote run to {options.json_path}")
    if options.html_path is not None:
        write_text(options.html_path, run.html(title=f"compiletrace: {run.meta.model or 'cell'}"))
        print(f"wrote HTML report to {options.html_path}")


def register_magic(shell: Any) -> None:
    """Add the cell magic ``%%compiletrace`` to ``shell`` (an IPython shell); its help
    (``%%compiletrace?``) is the usage text. Registering again replaces it."""

    def compiletrace(line: str, cell: str) -> Any:
        __tracebackhide__ = True
        return magic(line, cell)

    magic = _CellMagic(shell)
    compiletrace.__doc__ = USAGE
    shell.register_magic_function(compiletrace, magic_kind="cell", magic_name=MAGIC_NAME)
