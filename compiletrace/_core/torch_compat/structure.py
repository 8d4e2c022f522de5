"""A structural hash of an FX graph, so that the same block compiled more than once (two
layers of a model, one per frame) is recognised.

What is used, and why:

- The ``example_value`` Dynamo leaves on FX nodes (``val`` where it does not): each
  node's output shape and dtype, for the doctor's structural hash.
- The ``nn_module_stack`` Dynamo leaves on them: which module call each operation was in,
  so that a graph that is one block's call (``blocks.1``, a ``Block``) is told from a piece
  of a function that a graph break cut off, and a graph that holds N calls of one block
  (a model of N identical layers compiled whole) is seen as that. On 2.13 it maps an id to
  ``(path, class)``, outermost module first (``("L['args'][0].model.layers.3", Qwen2DecoderLayer)``).
- The ``stack_trace`` Dynamo leaves on them: whether a repeated block's calls update a cache
  layer of their own (the trace passes through transformers' ``cache_utils.py``), which a
  block compiled on its own would specialise on, a graph per call. Absent, the block is
  taken to read none (the doctor's earlier word).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

import torch

from compiletrace._data.records import RepeatedBlock


def graph_structure_hash(gm: Any) -> str | None:
    """A short hash of an FX graph's structure: each node's kind, target, output shape and
    dtype, and which earlier nodes and constants it takes. Node names, input names and
    parameter values are left out, so the same block compiled twice (two layers of a
    model, one per frame) hashes alike. None for something that is not an FX graph."""
    try:
        index: dict[Any, int] = {}
        # One flat token list, hashed once: far cheaper than text per node (~1 us a node).
        tokens: list[Any] = []
        for i, node in enumerate(gm.graph.nodes):
            index[node] = i
            op = node.op
            if op == "call_module":
                target = type(gm.get_submodule(node.target)).__qualname__
            elif op in ("placeholder", "get_attr", "output"):
                target = ""  # a name: two layers' inputs differ in name only
            elif isinstance(node.target, str):
                target = node.target
            else:
                target = getattr(node.target, "__qualname__", None) or type(node.target).__name__
                target = f"{getattr(node.target, '__module__', '')}.{target}"
            meta = node.meta
            tokens.append(op)
            tokens.append(target)
            _value_tokens(meta.get("example_value", meta.get("val")), tokens, 0)
            _arg_tokens(node.args, index, tokens)
            _arg_tokens(node.kwargs, index, tokens)
        return hashlib.blake2b(repr(tokens).encode(), digest_size=8).hexdigest()
    except Exception:
        return None


_OPERATIONS = frozenset({"call_function", "call_method", "call_module"})
# torch's own modules (Linear, LayerNorm, ...) are called many times in any model: the block
# a user can compile on its own is a class of theirs or a library's.
_TORCH_MODULES = "torch."


def graph_block(gm: Any) -> str | None:
    """The class of the one submodule call every operation of an FX graph is in (the graph
    is that block's forward: ``Block`` for a graph of ``blocks.1``), else None: operations
    of the compiled function's own, or of several calls, or of one of torch's own modules
    (a ``Linear`` on each side of a graph break is no block to compile on its own)."""
    try:
        outermost: set[tuple[str, str]] = set()
        for node in gm.graph.nodes:
            if node.op not in _OPERATIONS:
                continue
            stack = node.meta.get("nn_module_stack")
            if not stack:
                return None
            path, cls = next(iter(stack.values()))
            name, module = _class_key(cls)
            if module.startswith(_TORCH_MODULES):
                return None
            outermost.add((str(path), name))
            if len(outermost) > 1:
                return None
        return next(iter(outermost))[1] if outermost else None
    except Exception:
        return None


# Where a node's stack trace (Dynamo's node.meta["stack_trace"]) passes through a cache's own
# update: transformers' cache layers (cache_utils.py), one per decoder layer.
_CACHE_UPDATE_FILES = (f"{os.sep}transformers{os.sep}cache_utils.py",)


def _reads_own_cache(gm: Any, key: tuple[str, str]) -> bool:
    """Whether the block's calls update a cache (a layer of it each, as transformers' decoder
    layers do with use_cache=True): the stack trace of one of their operations passes
    through the cache's update."""
    for node in gm.graph.nodes:
        if node.op not in _OPERATIONS:
            continue
        classes = (node.meta.get("nn_module_stack") or {}).values()
        if not any(_class_key(cls) == key for _, cls in classes):
            continue
        trace = node.meta.get("stack_trace")
        if isinstance(trace, str) and any(name in trace for name in _CACHE_UPDATE_FILES):
            return True
    return False


def _class_key(cls: Any) -> tuple[str, str]:
    """(qualified name, module) of a module-stack entry's class (a "module.Class" string where
    a release gives one)."""
    if isinstance(cls, type):
        return (cls.__qualname__, cls.__module__)
    module, _, name = str(cls).rpartition(".")
    return (name, module)


def repeated_block(gm: Any, min_instances: int = 2) -> RepeatedBlock | None:
    """The module class whose calls cover most of an FX graph's operations, when it was
    called at least ``min_instances`` times in it (``Qwen2DecoderLayer`` x10: 610 of 654
    operations), else None. Of classes covering as much, the outermost. About 3 ms for 800
    nodes, read once per backend call."""
    try:
        calls: dict[tuple[str, str], dict[str, int]] = {}  # class -> path -> its operations
        depth: dict[tuple[str, str], int] = {}
        ops = 0
        for node in gm.graph.nodes:
            if node.op not in _OPERATIONS:
                continue
            ops += 1
            for level, (path, cls) in enumerate((node.meta.get("nn_module_stack") or {}).values()):
                key = _class_key(cls)
                per_path = calls.setdefault(key, {})
                per_path[str(path)] = per_path.get(str(path), 0) + 1
                depth[key] = min(level, depth.get(key, level))
        found = [
            (sum(paths.values()), -depth[key], key, paths)
            for key, paths in calls.items()
            if len(paths) >= min_instances and not key[1].startswith(_TORCH_MODULES)
        ]
        if not found:
            return None
        nodes, _, (name, module), paths = max(found, key=lambda f: (f[0], f[1]))
        sizes = paths.values()
        cached = _reads_own_cache(gm, (name, module))
        return RepeatedBlock(name, module, len(paths), nodes, min(sizes), max(sizes), ops, cached)
    except Exception:
        return None


_CONSTANTS = (bool, int, float, str, type(None), torch.dtype, torch.device)


def _value_tokens(value: Any, tokens: list[Any], depth: int) -> None:
    if isinstance(value, torch.Tensor):
        tokens.append(value.dtype)
        tokens.append(tuple(value.shape))
    elif isinstance(value, (tuple, list)) and depth < 2:
        tokens.append(len(value))
        for v in value:
            _value_tokens(v, tokens, depth + 1)
    else:
        tokens.append(type(value).__name__)


def _arg_tokens(arg: Any, index: Mapping[Any, int], tokens: list[Any]) -> None:
    kind = type(arg)
    if kind is torch.fx.Node:
        tokens.append("%")  # an earlier node, by its position: never a constant
        tokens.append(index.get(arg, -1))
    elif kind is tuple or kind is list:
        tokens.append("(")
        for a in arg:
            _arg_tokens(a, index, tokens)
        tokens.append(")")
    elif isinstance(arg, dict):
        tokens.append("{")
        for k, v in arg.items():
            tokens.append(k)
            _arg_tokens(v, index, tokens)
        tokens.append("}")
    elif isinstance(arg, _CONSTANTS):
        tokens.append(arg)
    elif isinstance(arg, (tuple, list)):  # immutable_list and the like
        _arg_tokens(list(arg), index, tokens)
    else:
        tokens.append(type(arg).__name__)
