"""Whether a value a ``.item()`` reads feeds a branch in the user's code: an ``if``, a
``while``, a conditional expression or an ``assert`` tests it, at once or through the name
it is assigned to. Dynamo breaks the graph at ``.item()``; capturing scalar outputs keeps a
value used in arithmetic in the graph, but a branch on it breaks the graph again (a
data-dependent jump), and inside a loop Dynamo then gives up on the whole frame (an
early-exit loop): the doctor offers that fix only where no branch tests the value.

Read from the source file of the break, in the process that compiled it (the file is there
then), once per file and line; a file that cannot be read or parsed says no branch.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp(), "m.py")
>>> _ = path.write_text("def f(x):\\n    v = x.sum().item()\\n    if v > 1:\\n        return x\\n"
...                     "    return x * x.max().item()\\n")
>>> item_feeds_branch(str(path), 2), item_feeds_branch(str(path), 5)
(True, False)
"""

from __future__ import annotations

import ast
import functools
import linecache

__all__ = ["item_feeds_branch"]


def _tested_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every expression some branch tests."""
    tests: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            tests.append(node.test)
        elif isinstance(node, ast.comprehension):
            tests.extend(node.ifs)
    return tests


def _item_calls(node: ast.AST) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("item", "tolist")
    ]


def _enclosing_function(tree: ast.AST, lineno: int) -> ast.AST:
    best: ast.AST = tree
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        inside = node.lineno <= lineno <= (node.end_lineno or node.lineno)
        if inside and (best is tree or node.lineno >= getattr(best, "lineno", 0)):
            best = node  # the innermost function around the line
    return best


@functools.lru_cache(maxsize=64)
def _parsed(filename: str) -> ast.AST | None:
    source = "".join(linecache.getlines(filename))
    if not source:
        return None
    try:
        return ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return None


def item_feeds_branch(filename: str, lineno: int) -> bool:
    """Whether a ``.item()`` on line ``lineno`` of ``filename`` is tested by a branch of the
    function it is in, directly or through the names it is assigned to."""
    try:
        tree = _parsed(filename)
        if tree is None:
            return False
        function = _enclosing_function(tree, lineno)
        tests = _tested_nodes(function)
        calls = [c for c in _item_calls(function) if c.lineno <= lineno <= (c.end_lineno or c.lineno)]
        if not calls:
            return False
        tested_ids = {id(n) for test in tests for n in ast.walk(test)}
        if any(id(call) in tested_ids for call in calls):
            return True
        # Assigned to a name, then tested: v = x.item(); if v > 0.5: ...
        names = set()
        call_ids = {id(call) for call in calls}
        for node in ast.walk(function):
            if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) or node.value is None:
                continue
            if call_ids & {id(n) for n in ast.walk(node.value)}:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
        return any(isinstance(n, ast.Name) and n.id in names for test in tests for n in ast.walk(test))
    except Exception:  # reading the user's source never breaks a compile
        return False
