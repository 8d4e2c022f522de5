"""The layout holds: data flows one way, from the torch-free I/O leaf through the core to the
views and the applications, with no import cycle anywhere (function-level imports included).

The graph is read from the source with ``ast``, so an import inside a function counts as
much as one at the top of a module. Imports under ``if TYPE_CHECKING:`` never run: they are
no part of the graph (nor of its cycles), but a type named from a layer above is an edge up
all the same, and the layers' direction is checked for them too.

Every private torch API lives in the package ``compiletrace._core.torch_compat``, one module
per concept. Its ``__init__`` is its one door: nothing outside the package imports one of its
modules directly (the rest of ``_core`` included), and its modules never import the package.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "compiletrace"
ROOT = "compiletrace"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name) and test.id.lstrip("_") == "TYPE_CHECKING"


def _imports(
    tree: ast.AST, module: str, *, in_functions: bool = True, type_checking: bool = False
) -> Iterator[str]:
    """Every module ``module`` imports at run time, resolved to a module name; without
    ``in_functions``, those it imports when it is itself imported (not in a function body);
    with ``type_checking``, those it imports under ``if TYPE_CHECKING:`` instead."""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            if type_checking:
                for inner in node.body:
                    yield from _imports(inner, module)
            todo.extend(node.orelse)  # the body never runs
            continue
        if type_checking:
            todo.extend(ast.iter_child_nodes(node))
            continue
        if not in_functions and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue  # its body runs when it is called (an import statement cannot be elsewhere in it)
        todo.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield sub if sub in MODULES else base


def _graph(*, in_functions: bool = True) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[name] = set(_imports(tree, name, in_functions=in_functions))
    return graph


GRAPH = _graph()
# What importing each module runs: its imports outside function bodies.
AT_IMPORT = _graph(in_functions=False)
# What each module imports under ``if TYPE_CHECKING:`` (types only: it never runs).
TYPES_FROM = {
    name: set(_imports(ast.parse(path.read_text(encoding="utf-8")), name, type_checking=True))
    for name, path in MODULES.items()
}


def _internal(name: str) -> set[str]:
    return {m for m in GRAPH[name] if m in MODULES and m != name}


def _closure(name: str) -> set[str]:
    seen: set[str] = set()
    todo = [name]
    while todo:
        for dep in _internal(todo.pop()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def _imports_torch(name: str) -> bool:
    return any(m == "torch" or m.startswith("torch.") for m in GRAPH[name])


def _in(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_the_graph_sees_function_level_imports() -> None:
    # A check that cannot fail is no check: the reader must see an import inside a function.
    assert "compiletrace.reports" in GRAPH["compiletrace._app.profile_run"]  # imported in ProfileRun.summary
    assert "compiletrace._app.profile_run" in MODULES and len(MODULES) > 30
    # ... and none under ``if TYPE_CHECKING:``, which never runs: a run names the doctor's
    # findings there, and imports them only when it diagnoses itself.
    source = MODULES["compiletrace._app.profile_run"].read_text()
    assert "from compiletrace._data.findings import Finding" in source
    assert "compiletrace._data.findings" not in GRAPH["compiletrace._app.profile_run"]


def test_no_import_cycle() -> None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        path.append(name)
        for dep in sorted(_internal(name)):
            if state.get(dep) == 1:
                cycle = [*path[path.index(dep) :], dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        path.pop()
        state[name] = 2

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for name in sorted(MODULES):
        if name not in state:
            visit(name)


def _package(name: str) -> str:
    """The top-level package a module belongs to (``compiletrace._app``), or the module
    itself for one directly under ``compiletrace`` (``compiletrace.cli``)."""
    parts = name.split(".")
    return ".".join(parts[:2])


def test_no_import_cycle_between_packages() -> None:
    # A loop between packages (say _app -> bench -> _app) shows in no single file.
    edges: dict[str, set[str]] = {}
    for name in MODULES:
        if name == ROOT:
            continue  # the front door imports every package, lazily, on purpose
        for dep in _internal(name):
            if dep != ROOT and _package(dep) != _package(name):
                edges.setdefault(_package(name), set()).add(_package(dep))
    assert "compiletrace._core" in edges.get("compiletrace._app", set())  # the check sees edges
    for start in sorted(edges):
        seen: set[str] = set()
        todo = sorted(edges[start])
        while todo:
            node = todo.pop()
            if node == start:
                pytest.fail(f"import cycle between packages through {start}: {sorted(edges[start])}")
            if node not in seen:
                seen.add(node)
                todo.extend(sorted(edges.get(node, ())))


# The layers, lowest first: a module imports from its own layer or the ones below it.
LAYERS = (
    ("compiletrace._io", "compiletrace._version"),  # the torch-free leaf
    ("compiletrace._data",),  # the data and its formats
    ("compiletrace._core", "compiletrace._doctor"),  # capture; the doctor (reading data only)
    ("compiletrace.reports", "compiletrace.telemetry"),  # the views
    ("compiletrace._app", "compiletrace.models"),  # the applications
    ("compiletrace.bench", "compiletrace.distributed", "compiletrace._bootstrap"),
    ("compiletrace._load",),  # compiletrace.load: a file given its views (runs, jobs, gathers)
    ("compiletrace.cli",),
    ("compiletrace", "compiletrace.__main__"),  # the front door
)
_LAYER = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}


def test_every_package_has_a_layer() -> None:
    assert {_package(name) for name in MODULES} == set(_LAYER)


def test_no_import_edge_up_the_layers_type_checking_ones_included() -> None:
    # A type named under ``if TYPE_CHECKING:`` never runs, but it ties a module to a layer
    # above it all the same (the process state once named the core's types that way).
    up = []
    edges = 0
    for name in MODULES:
        for kind, deps in (("imports", GRAPH[name]), ("names a type of", TYPES_FROM[name])):
            for dep in deps & set(MODULES):
                edges += kind != "imports"
                if _LAYER[_package(dep)] > _LAYER[_package(name)]:
                    up.append(f"{name} {kind} {dep}")
    assert edges > 20, "the check must see the TYPE_CHECKING imports"
    assert "compiletrace._data.findings" in TYPES_FROM["compiletrace._app.profile_run"]
    assert up == []


def _comment_lines(source: str) -> set[int]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {tok.start[0] for tok in tokens if tok.type == tokenize.COMMENT}


def test_every_module_global_a_function_rebinds_says_why() -> None:
    # Process state lives in STATE (compiletrace._io.state), in slots declared where its
    # objects live. A module variable a function rebinds (``global``) is the exception: its
    # assignment carries a comment, on its line or just above, saying why it is one (a memo
    # of what the OS or sys.modules says, ...).
    rebound, silent = [], []
    for name, path in MODULES.items():
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        names = {n for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names}
        comments = _comment_lines(source)
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                if isinstance(target, ast.Name) and target.id in names:
                    rebound.append(f"{name}.{target.id}")
                    if not {node.lineno, node.lineno - 1} & comments:
                        silent.append(f"{name}.{target.id} (line {node.lineno})")
    assert len(rebound) >= 4, "the check must see the module globals functions rebind"
    assert silent == []


def test_nothing_inside_imports_the_front_door() -> None:
    offenders = sorted(name for name in MODULES if ROOT in GRAPH[name] and name != ROOT)
    assert offenders == [], "import names from their own modules, not from the package root"


def test_the_io_leaf_imports_the_standard_library_only() -> None:
    for name in MODULES:
        if _in(name, "compiletrace._io"):
            outside = {m for m in GRAPH[name] if m.split(".")[0] not in sys.stdlib_module_names}
            assert {m for m in outside if not _in(m, "compiletrace._io")} == set(), name


def test_views_never_reach_torch_the_tracker_or_the_applications() -> None:
    forbidden = (
        "compiletrace._core.tracker",
        "compiletrace._core.torch_compat",
        "compiletrace._core.backend",
        "compiletrace._core.compile",
        "compiletrace._app",
        "compiletrace.bench",
        "compiletrace.distributed",
        "compiletrace.cli",
    )
    views = [n for n in MODULES if _in(n, "compiletrace.reports", "compiletrace.telemetry")]
    assert len(views) >= 10
    for name in views:
        reached = _closure(name) | {name}
        assert not [m for m in reached if _in(m, *forbidden)], name
        assert not [m for m in reached if _imports_torch(m)], f"{name} reaches torch"


def test_the_doctor_reads_data_only() -> None:
    # The doctor's rules read records, never torch, the capture side or an application: a
    # saved run is diagnosed on a machine without a GPU, and a rule is tested on a file.
    allowed = ("compiletrace._doctor", "compiletrace._data", "compiletrace._io")
    doctor = [name for name in MODULES if _in(name, "compiletrace._doctor")]
    assert len(doctor) >= 15 and "compiletrace._doctor.rules.recompiles" in doctor
    for name in doctor:
        for dep in GRAPH[name]:
            top = dep.split(".")[0]
            assert _in(dep, *allowed) if top == ROOT else top in sys.stdlib_module_names, f"{name} -> {dep}"
        reached = _closure(name) | {name}
        assert [m for m in reached if not _in(m, *allowed)] == [], name
        assert not [m for m in reached if _imports_torch(m)], f"{name} reaches torch"
    # Torch's text is known in one torch-free module, which needs nothing but re.
    assert GRAPH["compiletrace._data.torch_text"] <= {"re", "__future__"}


def test_the_core_never_imports_views_or_applications() -> None:
    above = ("compiletrace.reports", "compiletrace.telemetry", "compiletrace._app", "compiletrace.cli")
    above += ("compiletrace._doctor",)
    above += ("compiletrace.bench", "compiletrace.distributed", "compiletrace.models")
    for name in MODULES:
        if _in(name, "compiletrace._core"):
            assert not [m for m in _closure(name) if _in(m, *above)], name


def _touches_private_torch(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        attr = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        private = attr and node.attr.startswith("_") and not node.attr.startswith("__")  # type: ignore[attr-defined]
        if private and node.value.id == "torch":  # type: ignore[attr-defined]
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch._"):
            return True
        if isinstance(node, ast.Import) and any(a.name.startswith("torch._") for a in node.names):
            return True
    return False


TORCH_COMPAT = "compiletrace._core.torch_compat"


def test_private_torch_apis_live_in_one_package() -> None:
    # ``torch._dynamo``, ``torch._inductor``, ``torch._guards`` ...: one package touches them.
    users = {
        name
        for name, path in MODULES.items()
        if _touches_private_torch(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert len(users) >= 5, "the check must see torch_compat's own uses"
    assert sorted(name for name in users if not _in(name, TORCH_COMPAT)) == []


def test_torch_compat_is_imported_through_its_package_only() -> None:
    parts = {name for name in MODULES if name.startswith(TORCH_COMPAT + ".")}
    assert len(parts) >= 5 and TORCH_COMPAT in MODULES
    for name in MODULES:
        if _in(name, TORCH_COMPAT):
            assert TORCH_COMPAT not in _internal(name), f"{name} imports its own package"
        else:
            assert _internal(name) & parts == set(), f"{name}: import from {TORCH_COMPAT}, not its modules"


def test_every_raise_in_the_package_is_a_compiletrace_error() -> None:
    # Builtin exceptions are raised only where Python's protocols demand them.
    allowed = {("__getattr__", "AttributeError"), ("_refuse_constant", "ValueError")}  # json's hook
    builtin_errors = {n for n in dir(__import__("builtins")) if n.endswith(("Error", "Exception"))}
    bad = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            for node in ast.walk(func):
                if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                    called = node.exc.func
                    exc = called.id if isinstance(called, ast.Name) else None
                    if exc in builtin_errors and (func.name, exc) not in allowed:
                        bad.append(f"{name}:{node.lineno} raises {exc}")
    assert bad == []


def _loaded_by_importing(name: str) -> set[str]:
    """Every module of the package that ``import name`` loads (its packages' ``__init__``
    included), and every outside module they import when loaded."""
    loaded: set[str] = set()
    todo = [name]
    while todo:
        module = todo.pop()
        parts = module.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
            step = ".".join(parts[:i])
            if step not in loaded:
                loaded.add(step)
                if step in MODULES:
                    todo.extend(AT_IMPORT[step])
    return loaded


def _loads_torch(name: str) -> list[str]:
    return sorted(m for m in _loaded_by_importing(name) if m == "torch" or m.startswith("torch."))


CLI = "compiletrace.cli"


def test_no_command_module_imports_torch_when_imported() -> None:
    # Parsing a command's arguments, and its --help, import its module: torch is imported by
    # the work (inside run), never by the module. The check sees module-level torch imports.
    assert "torch" in GRAPH["compiletrace.cli.commands.env"]  # inside its run: not at import
    commands = [n for n in MODULES if _in(n, f"{CLI}.commands") and n != f"{CLI}.commands"]
    assert len(commands) >= 8
    for name in [n for n in MODULES if _in(n, CLI)]:
        assert _loads_torch(name) == [], name


def test_import_compiletrace_loads_no_torch() -> None:
    # The front door's torch-bound names load on first use (PEP 562 __getattr__).
    assert "torch" in _loads_torch("compiletrace._app.profile")  # the check sees torch imported
    assert _loads_torch(ROOT) == []
    for name in ("compiletrace._load", "compiletrace._app.profile_run", "compiletrace.reports"):
        assert _loads_torch(name) == [], name


def test_the_cli_imports_no_private_view_module() -> None:
    # The views' door is compiletrace.reports: what the CLI prints is a page it exports.
    private = [m for m in MODULES if _in(m, "compiletrace.reports") and m != "compiletrace.reports"]
    assert private, "the check must see the views' own modules"
    for name in [n for n in MODULES if _in(n, CLI)]:
        assert sorted(GRAPH[name] & set(private)) == [], name


# -- file kinds and run metadata ------------------------------------------------------------

KINDS = "compiletrace._data.kinds"


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the nodes that are docstrings (their examples may spell a kind)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _kind_declarations(tree: ast.AST, kinds: set[str]) -> list[int]:
    """Lines that spell a file kind: a string equal to a known kind (or one of its own
    kinds, ``compiletrace.run.x``), a string bound to a name ending in ``KIND``, or a
    string given as the kind of an envelope (``envelope("...")``, ``check_kind("...")``,
    ``{"kind": "..."}``)."""
    docstrings = _docstrings(tree)

    def literal(node: ast.AST | None) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings

    lines = []
    for node in ast.walk(tree):
        if literal(node) and any(node.value == k or node.value.startswith(k + ".") for k in kinds):  # type: ignore[attr-defined]
            lines.append(node.lineno)  # type: ignore[attr-defined]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named = [t.id for t in targets if isinstance(t, ast.Name)]
            if literal(node.value) and any(n.upper().endswith("KIND") for n in named):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in ("envelope", "check_kind") and node.args and literal(node.args[0]):
                lines.append(node.lineno)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "kind" and literal(value):
                    lines.append(node.lineno)
    return sorted(set(lines))


def test_every_file_kind_is_declared_in_one_module() -> None:
    from compiletrace._data.kinds import FileKind

    kinds = {k.value for k in FileKind}
    # The check sees each way a kind could be spelled elsewhere.
    for planted in (
        'BENCH_KIND = "compiletrace.bench.startup"',
        'NEW_KIND = "compiletrace.new"',
        'envelope("compiletrace.new", 1, {})',
        'f.check_kind("compiletrace.new", {1}, "a new file")',
        'out = {"kind": "compiletrace.new", "schema_version": 1}',
        'x = "compiletrace.job.started"',
    ):
        assert _kind_declarations(ast.parse(planted), kinds) == [1], planted
    assert _kind_declarations(ast.parse('"""Doctest: {"kind": "compiletrace.run"}"""'), kinds) == []
    assert _kind_declarations(ast.parse(MODULES[KINDS].read_text(encoding="utf-8")), kinds)
    offenders = {
        name: lines
        for name, path in MODULES.items()
        if name != KINDS and (lines := _kind_declarations(ast.parse(path.read_text(encoding="utf-8")), kinds))
    }
    assert offenders == {}, "declare a file kind in compiletrace/_data/kinds.py (FileKind)"


def _meta_key_reads(tree: ast.AST) -> list[int]:
    """Lines that read a run's meta by a string key: ``meta["model"]``, ``x.meta.get("model")``,
    ``"model" in meta`` (a name or attribute called ``meta``)."""

    def is_meta(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "meta") or (
            isinstance(node, ast.Attribute) and node.attr == "meta"
        )

    def text(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and isinstance(node.value, str)

    def reads(node: ast.AST) -> bool:
        if isinstance(node, ast.Subscript):
            return is_meta(node.value) and text(node.slice)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            getter = node.func.attr in ("get", "pop", "setdefault")
            return getter and is_meta(node.func.value) and text(node.args[0])
        if isinstance(node, ast.Compare):
            return text(node.left) and any(is_meta(c) for c in node.comparators)
        return False

    return sorted({node.lineno for node in ast.walk(tree) if reads(node)})  # type: ignore[attr-defined]


def test_no_module_reads_run_meta_by_a_string_key() -> None:
    # RunMeta's attributes are its fields, checked when read; a key read would skip them.
    for planted in ('meta["model"]', 'run.meta.get("model")', '"source" not in job.meta', 'meta["x"] = 1'):
        assert _meta_key_reads(ast.parse(planted)) == [1], planted
    assert _meta_key_reads(ast.parse("run.meta.model; meta[key]")) == []
    # torch's FX nodes carry a meta dict of their own, read where torch is.
    checked = {name: path for name, path in MODULES.items() if not _in(name, TORCH_COMPAT)}
    offenders = {
        name: lines
        for name, path in checked.items()
        if (lines := _meta_key_reads(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert offenders == {}, "read a run's meta by its attributes (RunMeta), never by a string key"
