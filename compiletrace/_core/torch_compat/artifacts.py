"""What torch's cache-artifact files (``torch.compiler.save_cache_artifacts`` /
``load_cache_artifacts``) may hold, and where torch writes each of their entries:
``compiletrace._app.cache`` checks a file against these before torch unpickles any of it.

What is used, and why:

- The globals torch's artifact pickles name (``CACHE_ARTIFACT_GLOBALS``), what torch does
  with the fields of the allowed classes (``CACHE_ARTIFACT_FIELD_USES``), the grammar of
  the guard expressions it evaluates, and the shapes of the allowed classes, read off the
  installed torch's own classes.
- Where each kind of artifact is written under the inductor cache directory, and torch's
  ``torch.compiler._cache`` logger.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

# Every global the pickles inside torch 2.13's cache artifacts name, per artifact kind:
# the globals that real artifacts referenced when saved from CPU inductor compiles
# (functions, modules with parameters and buffers, conv + batch norm, bf16, dynamic shapes,
# max-autotune, a training step with its backward, the built-in demo model), listed with a
# stand-in unpickler; for "pgo", a job_id run with automatic dynamic shapes, plus the
# sentinels its dataclass fields hold (AutoUnset, InferStride). Nothing here runs code
# from the file while it is unpickled; see REFUSED_ARTIFACT_GLOBALS for what does.
_AOT = "torch._functorch._aot_autograd"
CACHE_ARTIFACT_GLOBALS: dict[str, frozenset[tuple[str, str]]] = {
    "inductor": frozenset(
        {
            ("collections", "Counter"),
            ("torch._inductor.cudagraph_utils", "BoxedDeviceIndex"),
            ("torch._inductor.decomposition", "select_decomp_table"),
            ("torch._inductor.metrics", "CachedMetricsDeltas"),
            ("torch._inductor.output_code", "CompiledFxGraph"),
            ("torch._inductor.triton_bundler", "TritonBundle"),
            ("torch._inductor.utils", "BoxedBool"),
            ("torch.utils._ordered_set", "OrderedSet"),
        }
    ),
    "aot_autograd": frozenset(
        {
            ("builtins", "list"),
            ("collections", "OrderedDict"),
            ("collections", "defaultdict"),
            ("torch", "Tensor"),
            ("torch._utils", "torch.contiguous_format"),
            ("torch._subclasses.functional_tensor", "FunctionalTensor"),
            *(
                ("torch._dynamo.source", name)
                for name in (
                    "AttrSource",
                    "DictGetItemSource",
                    "GetItemSource",
                    "LocalSource",
                    "TensorProperty",
                    "TensorPropertySource",
                    "UnspecializedBuiltinNNModuleSource",
                    "UnspecializedNNModuleSource",
                    "UnspecializedParamBufferSource",
                )
            ),
            *(
                (f"{_AOT}.aot_autograd_result", name)
                for name in (
                    "AOTAutogradResult",
                    "CompiledBackward",
                    "CompiledForward",
                    "SerializedGraphModule",
                )
            ),
            (f"{_AOT}.descriptors", "PlainAOTOutput"),
            (f"{_AOT}.descriptors", "TangentAOTInput"),
            (f"{_AOT}.runtime_wrappers", "AOTDedupeWrapper"),
            (f"{_AOT}.runtime_wrappers", "AOTSyntheticBaseWrapper"),
            *(
                (f"{_AOT}.schemas", name)
                for name in (
                    "CacheableAOTConfig",
                    "InputAliasInfo",
                    "MemoryFormatMeta",
                    "MutationType",
                    "OutputAliasInfo",
                    "OutputType",
                    "PlainTensorMeta",
                    "ViewAndMutationMeta",
                )
            ),
        }
    ),
    "pgo": frozenset(
        {
            ("collections", "defaultdict"),
            *(
                ("torch._dynamo.pgo", name)
                for name in (
                    "AutoDynamic",
                    "AutoUnset",
                    "CodeId",
                    "CodeState",
                    "FrameStateSizeEntry",
                    "InferStride",
                )
            ),
        }
    ),
}

# Artifact kinds whose content is JSON (read with json.loads, never unpickled).
CACHE_ARTIFACT_JSON_KINDS = frozenset({"autotune"})

# Globals torch's own artifacts use that are refused all the same, and why.
REFUSED_ARTIFACT_GLOBALS: dict[tuple[str, str], str] = {
    # A saved backward graph (CompiledBackward) is rebuilt by exec-ing Python source that
    # the file carries, the moment it is unpickled.
    ("torch.fx.graph_module", "reduce_graph_module"): (
        "which rebuilds a graph module by running Python source from the file (torch saves "
        "backward graphs this way)"
    ),
}


# What torch *does* with the fields of the classes above, beyond keeping them as data: each
# field it turns into a path, a directory, an expression it evaluates, or code it runs, or
# must find empty because what it would hold is not on the list. compiletrace._app.cache
# checks every one of them (the "use"), so an allowed class cannot carry a hostile value
# into any of these. A field absent here is data torch only keeps, compares or prints.
class FieldUse(enum.Enum):
    FILE_NAME = "a file name torch joins under the cache directory"
    GUARD_EXPRESSION = "a Python expression torch evaluates (eval) when a compile looks the entry up"
    CODE = "source code torch writes and imports when a compile hits the entry"
    MUST_BE_EMPTY = "a list whose entries torch would unpack into files and directories"


_OUTPUT_CODE = ("torch._inductor.output_code", "CompiledFxGraph")
_TRITON_BUNDLE = ("torch._inductor.triton_bundler", "TritonBundle")
CACHE_ARTIFACT_FIELD_USES: dict[tuple[tuple[str, str], str], FieldUse] = {
    # CompiledFxGraph.write_to_disk: get_path(cache_key, "py") -> <cache>/<key[1:3]>/<key>.py
    (_OUTPUT_CODE, "cache_key"): FieldUse.FILE_NAME,
    # GuardedCache.iterate_over_candidates -> ShapeEnv.evaluate_guards_expression -> eval
    (_OUTPUT_CODE, "guards_expr"): FieldUse.GUARD_EXPRESSION,
    # after_deserialization writes it to the .py above and PyCodeCache imports it
    (_OUTPUT_CODE, "source_code"): FieldUse.CODE,
    # TritonBundler.read_and_emit: os.path.join(triton dir, kernel_hash), then each
    # artifact's filename under it (the Triton kernel classes are not on the list: CPU only)
    (_TRITON_BUNDLE, "kernel_artifacts"): FieldUse.MUST_BE_EMPTY,
    # TritonBundler.load_autotuners rebuilds kernels from them
    (_TRITON_BUNDLE, "static_autotuners"): FieldUse.MUST_BE_EMPTY,
    # FxGraphCacheLoadable.load: FxGraphCache.load_with_key(fx_graph_cache_info[0]) ->
    # <cache>/fxgraph/<key[1:3]>/<key>
    ((f"{_AOT}.aot_autograd_result", "CompiledForward"), "fx_graph_cache_info"): FieldUse.FILE_NAME,
    ((f"{_AOT}.aot_autograd_result", "CompiledBackward"), "fx_graph_cache_info"): FieldUse.FILE_NAME,
    # AOTAutogradResult.wrap_post_compile / AOTAutogradCache lookups evaluate it as above
    ((f"{_AOT}.aot_autograd_result", "AOTAutogradResult"), "guards_expr"): FieldUse.GUARD_EXPRESSION,
}

# The guard expressions torch writes (ShapeEnv.produce_guards_expression with the Python
# printer of torch.utils._sympy.printers): arguments L['t0'], L['t1'], ..., these calls
# and constants, and operators. It evaluates them with the globals of SYMPY_INTERP, which
# hold the modules ``torch`` and ``math``, so any other name or attribute could reach any
# code: the check admits these and nothing else.
GUARD_ARGUMENT = re.compile(r"t[0-9]{1,6}")
GUARD_CALLS = frozenset(
    {
        "IsNonOverlappingAndDenseIndicator",
        "cast_symbool_to_symint_guardless",
        "abs",
        "max",
        "min",
        "round",
        "torch.sym_float",
        "torch._sym_sqrt",
        *(
            f"math.{name}"
            for name in ("floor", "ceil", "trunc", "cos", "cosh", "acos", "sin", "sinh", "asin", "tan")
        ),
        *(f"math.{name}" for name in ("tanh", "atan", "log2")),
    }
)
GUARD_CONSTANTS = frozenset({"math.inf", "math.nan"})


@dataclass(frozen=True)
class ArtifactClassShape:
    """What an object of an allowed global may look like in a pickle, read off the class
    the installed torch defines (not written down by hand, so it moves with torch)."""

    attributes: frozenset[str] | None  # names its state may set; None: it takes no state
    max_args: int  # positional arguments a REDUCE or NEWOBJ may pass it
    items: bool  # it is a container that APPENDS / SETITEMS may fill


_CONTAINERS = frozenset(
    {
        ("builtins", "list"),
        ("collections", "Counter"),
        ("collections", "OrderedDict"),
        ("collections", "defaultdict"),
        ("torch.utils._ordered_set", "OrderedSet"),
    }
)


def _resolve_global(ref: tuple[str, str]) -> Any:
    """The object ``module.name`` names in the installed torch (imports torch's or the
    standard library's own module, never anything from a file), or None."""
    import importlib

    module, name = ref
    try:
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except Exception:
        return None
    return obj


def _attributes_assigned_in(klass: type) -> set[str]:
    """The attributes a class's own methods set on ``self`` (``self.x = ...``,
    ``object.__setattr__(self, "x", ...)``), read from its source: what ``__post_init__``
    or ``__init__`` adds beyond the declared fields."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
    except (OSError, TypeError, SyntaxError, ValueError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                found.add(node.attr)
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            func = node.func
            is_setattr = (isinstance(func, ast.Name) and func.id == "setattr") or (
                isinstance(func, ast.Attribute) and func.attr == "__setattr__"
            )
            target, name = node.args[0], node.args[1]
            if (
                is_setattr
                and isinstance(target, ast.Name)
                and target.id == "self"
                and isinstance(name, ast.Constant)
                and isinstance(name.value, str)
            ):
                found.add(name.value)
    return found


@functools.cache
def cache_artifact_class_shape(ref: tuple[str, str]) -> ArtifactClassShape | None:
    """The shape objects of the allowed global ``ref`` take in a pickle, derived from the
    installed torch's own class: a dataclass's fields, a class's annotated and slotted
    attributes, a function's parameters. None when this torch has no such global (an
    artifact naming it cannot be checked, so it is refused).

    >>> cache_artifact_class_shape(("torch._inductor.utils", "BoxedBool")).attributes
    frozenset({'value'})
    >>> cache_artifact_class_shape(("collections", "Counter")).items
    True
    """
    import dataclasses
    import inspect

    obj = _resolve_global(ref)
    if obj is None:
        return None
    if ref in _CONTAINERS:
        return ArtifactClassShape(None, 1, True)
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        return ArtifactClassShape(None, 1, False)
    if isinstance(obj, type):
        names: set[str] = set()
        for klass in obj.__mro__:
            if klass is object:
                continue
            names.update(inspect.get_annotations(klass))
            slots = klass.__dict__.get("__slots__", ())
            names.update((slots,) if isinstance(slots, str) else slots)
            names.update(_attributes_assigned_in(klass))
            # a cached_property keeps its value in the instance dict, under its own name
            names.update(k for k, v in klass.__dict__.items() if isinstance(v, functools.cached_property))
        if dataclasses.is_dataclass(obj):
            names.update(f.name for f in dataclasses.fields(obj))
        try:
            params = inspect.signature(obj).parameters.values()
            max_args = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        except (TypeError, ValueError):
            max_args = len(names)
        return ArtifactClassShape(frozenset(n for n in names if not n.startswith("__")), max_args, False)
    if callable(obj):  # a function torch calls with arguments from the file
        try:
            params = inspect.signature(obj).parameters.values()
            max_args = sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        except (TypeError, ValueError):
            max_args = 0
        return ArtifactClassShape(None, max_args, False)
    return ArtifactClassShape(None, 0, False)  # a constant (a memory format, say)


def cache_artifact_location(kind: str, key: str) -> tuple[str, ...] | None:
    """The path, as parts under the inductor cache directory, where torch 2.13 writes an
    artifact of ``kind`` with ``key`` when it loads it; None for a kind compiletrace does
    not know (``precompile`` writes under a prefix of its own).

    >>> cache_artifact_location("inductor", "fabcdef")
    ('fxgraph', 'ab', 'fabcdef')
    >>> cache_artifact_location("autotune", "ab/cd.best_config")
    ('ab', 'cd.best_config')
    """
    if kind == "inductor":  # FxGraphCache._get_tmp_dir_for_key
        return ("fxgraph", key[1:3], key)
    if kind == "aot_autograd":  # AOTAutogradCache._get_tmp_dir_for_key
        return ("aotautograd", key)
    if kind == "autotune":  # AutotuneCacheArtifact.populate_cache joins the key as a path
        return tuple(key.split("/"))
    if kind == "pgo":  # pgo.code_state_path sanitises the key into one file name
        return ("dynamo", re.sub(r'[<>:"/\\|?*]', "_", f"code_state_{key}.pkl"))
    return None


def cache_artifact_object_paths(
    cls: tuple[str, str], fields: Mapping[str, Any]
) -> list[tuple[str, str, tuple[str, ...]]]:
    """Paths under the inductor cache directory that torch builds from the fields of an
    unpickled artifact object ``cls``, as (field, value, parts): a compiled graph writes its source
    to ``<key[1:3]>/<cache_key>.py`` (``CompiledFxGraph.write_to_disk``); a compiled forward
    or backward looks its graph up in ``fxgraph/<key[1:3]>/<key>``."""
    found: list[tuple[str, str, tuple[str, ...]]] = []
    if cls == ("torch._inductor.output_code", "CompiledFxGraph"):
        key = fields.get("cache_key")
        if isinstance(key, str):
            found.append(("cache_key", key, (key[1:3], f"{key}.py")))
    elif cls[0] == f"{_AOT}.aot_autograd_result" and cls[1] in ("CompiledForward", "CompiledBackward"):
        info = fields.get("fx_graph_cache_info")
        key = info[0] if isinstance(info, tuple) and info else None
        if isinstance(key, str):
            found.append(("fx_graph_cache_info", key, ("fxgraph", key[1:3], key)))
    return found


@contextmanager
def quiet_cache_artifact_logs() -> Iterator[None]:
    """Keep torch's cache-artifact logger from printing a traceback for a file it cannot
    read (it logs one and returns None): compiletrace reports the failure on one line."""
    import logging

    logger = logging.getLogger("torch.compiler._cache")
    previous = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = previous
