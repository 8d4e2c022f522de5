"""Naming the component of a compile that no compiletrace backend made (passive recording:
``compiletrace.observe()``, ``compiletrace run``), from what a person would recognise.

In order, the first that applies:

1. a rule the user gave (``--component PATTERN=NAME``, ``observe(components=...)``): PATTERN
   is a shell-style pattern matched against the compiled module's attribute path
   (``vision_tower``, ``model.language_model``), its class name, or its code's file;
2. the label of ``torch.compile(model, name=...)``, where the installed torch keeps it;
3. a library's own encoder flag on its compile wrapper (vLLM sets ``_is_encoder`` on the
   object that calls ``torch.compile``);
4. ``encoder`` for vision and audio towers: an attribute path with a segment such as
   ``vision_tower``, ``visual``, ``vision_model``, ``audio_tower``, ``image_encoder`` or
   ``encoder``, or a class whose name ends in ``Encoder`` or ``VisionModel``;
5. otherwise the attribute path, else the class name, else (a function) its qualified name.

A compile belongs to the component whose module call it runs inside, however deep the code
it compiles: where the compiled code's own module (or the code itself) names no rule and no
encoder, the module calls around it are tried the same way, nearest first (a library helper
compiled inside the vision tower's call is ``encoder``), and a function is named as the
nearest module call around it. Where no module call encloses it, its own name stands.

The rest of a function after a graph break (Dynamo's resume function) is named as the
function it continues: a module's method (``forward``, ``get_image_features``) by that
module, any other function by its name. A block that ``compiletrace run --apply
regional-compile=CLASS`` compiled on its own (:func:`compiled_as_part_of`) is named as the
model it was taken from, so that the fix keeps the components.
"""

from __future__ import annotations

import fnmatch
import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from compiletrace._data.records import ENCODER, RESUME_PREFIX, root_code_name
from compiletrace._data.torch_text import RESUME_AT
from compiletrace._io.errors import UsageError

__all__ = [
    "ENCODER_ATTRIBUTES",
    "CompiledTarget",
    "ComponentRule",
    "ModuleCall",
    "compiled_as_part_of",
    "name_component",
    "parse_component_rules",
    "target_of",
]

# Attribute names of vision and audio towers in the multimodal models people compile.
ENCODER_ATTRIBUTES = frozenset(
    {
        "vision_tower",
        "vision_model",
        "vision_encoder",
        "visual",
        "vision",
        "audio_tower",
        "audio_model",
        "audio_encoder",
        "image_encoder",
        "encoder",
    }
)
_ENCODER_CLASS_SUFFIXES = ("Encoder", "VisionModel", "VisionTransformer", "AudioModel")
# torch.compile(module) wraps the module; its attribute path then ends in this.
_WRAPPED = "_orig_mod"


@dataclass(frozen=True)
class ComponentRule:
    """``PATTERN=NAME``: compiles whose module path, class or file matches PATTERN are NAME.

    >>> ComponentRule.parse("vision_tower*=encoder")
    ComponentRule(pattern='vision_tower*', name='encoder')
    """

    pattern: str
    name: str

    @classmethod
    def parse(cls, text: str) -> ComponentRule:
        pattern, sep, name = text.partition("=")
        if not sep or not pattern.strip() or not name.strip():
            raise UsageError(
                f"a component rule looks like PATTERN=NAME (e.g. 'vision_tower=encoder'), got {text!r}"
            )
        return cls(pattern.strip(), name.strip())

    def matches(self, target: CompiledTarget | ModuleCall) -> bool:
        if isinstance(target, ModuleCall):  # a module call around the compiled code
            candidates: tuple[str, ...] = (target.path, target.class_name)
        else:
            candidates = (target.path, target.class_name, target.filename, target.qualname)
        return any(c and fnmatch.fnmatchcase(c, self.pattern) for c in candidates)


def parse_component_rules(rules: Iterable[str | ComponentRule]) -> tuple[ComponentRule, ...]:
    """Rules from ``PATTERN=NAME`` strings (or rules), in the order given."""
    parsed = []
    for rule in rules:
        if isinstance(rule, ComponentRule):
            parsed.append(rule)
        elif isinstance(rule, str):
            parsed.append(ComponentRule.parse(rule))
        else:
            raise UsageError(f"a component rule is a 'PATTERN=NAME' string, got {type(rule).__name__}")
    return tuple(parsed)


class ModuleCall(NamedTuple):
    """A module, as the component naming sees it: its attribute path from the outermost
    calling module ("" for that module itself) and its class name."""

    path: str
    class_name: str


@dataclass(frozen=True)
class CompiledTarget:
    """What is known of the code a compile traced: plain strings, no live objects."""

    path: str = ""  # attribute path from the outermost calling module ("" when unknown)
    class_name: str = ""  # the class of the module whose method is compiled ("" for a function)
    filename: str = ""
    qualname: str = ""  # the compiled code's qualified name ("Tower.forward", "step")
    compile_name: str | None = None  # torch.compile(name=...)
    encoder_flag: bool | None = None  # a library's own encoder flag, where it set one
    # file:line of the module class's own forward, behind its decorators, when the code is
    # that forward (a decorator around it, or its resume function); "" otherwise
    forward_location: str = ""
    # the module's method the code is ("forward", "get_image_features"; its resume function
    # too), "" for a function that is no method of the module
    method: str = ""
    # the module calls the code runs inside, nearest first, the module itself left out
    enclosing: tuple[ModuleCall, ...] = ()
    # the module the component is named after where it is not the module itself: the model a
    # regionally compiled block was taken from, or (a function) the nearest module call
    named_as: ModuleCall | None = None
    # what a decorator's ``*args`` stand for: the positional parameters of the method it
    # wraps, after those the decorator names itself (torch's guards say ``args[0]``)
    arg_names: tuple[str, ...] = ()


def target_of(
    target: Any,
    callers: Sequence[Any],
    *,
    filename: str = "",
    qualname: str = "",
    compile_name: str | None = None,
    code: Any = None,
) -> CompiledTarget:
    """Describe a compile from the object its code runs on and the objects of its callers
    (nearest first), as torch's frame gives them.

    >>> import torch.nn as nn
    >>> model = nn.Sequential(nn.Linear(2, 2))
    >>> found = target_of(model[0], (model[0], model))
    >>> found.path, found.class_name, found.enclosing
    ('0', 'Linear', (ModuleCall(path='', class_name='Sequential'),))
    """
    path = ""
    class_name = ""
    forward_location = ""
    method = ""
    resumed = _resumed_method_owner(callers, code)
    if resumed is not None:
        # The rest of a module's method after a graph break runs on whatever Dynamo passes
        # first, not on the module: the module is the caller whose class has that method.
        target, method = resumed
    elif _is_module(target):
        if any(getattr(fn, "__code__", None) is code for fn in _forward_chain(type(target))):
            method = "forward"
        else:
            method = _method_name(type(target), code)
    else:
        # A module's forward behind a decorator (transformers wraps every forward in one)
        # runs on no named first argument: the module is the nearest caller whose class's
        # forward is that code. torch.compile(nn.Linear(...)) compiles torch's own wrapper
        # of the module's call: the module is the one torch's wrapper around it holds.
        owner = _forward_owner(callers, code) or _wrapped_by_nearest_module(callers)
        if owner is not None:
            target, method = owner, "forward"
    paths = _paths_from_outermost(callers)
    named_as = None
    if _is_module(target):
        class_name = type(target).__name__
        if method == "forward":  # not another method of the module (torch.compile(model.generate))
            forward_location = _forward_location(type(target))
        path = _path_of(target, callers, paths)
        named_as = _part_of(target, paths)
    enclosing = _enclosing(callers, target, paths)
    arg_names = _vararg_names(type(target), method, code) if _is_module(target) and method else ()
    if not _is_module(target) and enclosing:
        nearest = next(c for c in callers if _is_module(c) and c is not target)
        named_as = _part_of(nearest, paths) or enclosing[0]
    # A resume function after a graph break is the rest of its function: named as that one.
    scope, dot, name = qualname.rpartition(".")
    if name.startswith(RESUME_PREFIX):
        qualname = f"{scope}{dot}{root_code_name(name)}"
    return CompiledTarget(
        path=path,
        class_name=class_name,
        filename=filename,
        qualname=qualname,
        compile_name=compile_name,
        encoder_flag=_encoder_flag(callers),
        forward_location=forward_location,
        method=method,
        enclosing=enclosing,
        named_as=named_as,
        arg_names=arg_names,
    )


def name_component(target: CompiledTarget, rules: Sequence[ComponentRule] = ()) -> str:
    """The component name for ``target`` (see the module docstring for the order).

    >>> name_component(CompiledTarget(path="model.vision_tower", class_name="CLIPVisionModel"))
    'encoder'
    >>> name_component(CompiledTarget(path="model.language_model", class_name="LlamaModel"))
    'model.language_model'
    >>> name_component(CompiledTarget(qualname="train_step"))
    'train_step'
    >>> name_component(CompiledTarget(class_name="Head"), [ComponentRule("Head", "head")])
    'head'
    >>> inside_tower = (ModuleCall("model.visual.blocks.0", "Block"), ModuleCall("model.visual", "Tower"))
    >>> name_component(CompiledTarget(qualname="rotary", enclosing=inside_tower))
    'encoder'
    """
    for rule in rules:
        if rule.matches(target):
            return rule.name
    if target.compile_name:
        return target.compile_name
    if target.encoder_flag:
        return ENCODER
    if _is_encoder(ModuleCall(target.path, target.class_name)):
        return ENCODER
    # The module calls around the code, nearest first: the first a rule or the encoder
    # names is the component (a helper compiled inside the vision tower's call).
    for call in target.enclosing:
        for rule in rules:
            if rule.matches(call):
                return rule.name
        if target.encoder_flag is None and _is_encoder(call):
            return ENCODER
    if target.named_as is not None:
        return target.named_as.path or target.named_as.class_name or target.qualname or "?"
    return target.path or target.class_name or target.qualname or "?"


# A block compiled on its own as part of a model (compiletrace run --apply regional-compile):
# the block -> the model (both weakly: the program owns them).
_PART_OF: weakref.WeakKeyDictionary[Any, weakref.ref[Any]] = weakref.WeakKeyDictionary()
_PART_OF_LOCK = threading.Lock()


def compiled_as_part_of(block: Any, model: Any) -> None:
    """Name the compiles of ``block`` (compiled on its own) as those of ``model``, the model
    it was taken from: what ``--apply regional-compile=CLASS`` does for each block, so that a
    verify's before and after read per component alike.

    >>> import torch.nn as nn
    >>> model = nn.Sequential(nn.Linear(2, 2))
    >>> compiled_as_part_of(model[0], model)
    >>> name_component(target_of(model[0], (model[0], model)))
    'Sequential'
    """
    with _PART_OF_LOCK:
        _PART_OF[block] = weakref.ref(model)


def _part_of(module: Any, paths: dict[int, str]) -> ModuleCall | None:
    with _PART_OF_LOCK:
        try:
            ref = _PART_OF.get(module)
        except TypeError:  # cannot be weakly referenced: never registered
            return None
    model = ref() if ref is not None else None
    if model is None:
        return None
    return ModuleCall(paths.get(id(model), ""), type(model).__name__)


def _is_encoder(call: ModuleCall) -> bool:
    segments = [s for s in call.path.split(".") if s]
    return any(s in ENCODER_ATTRIBUTES for s in segments) or call.class_name.endswith(_ENCODER_CLASS_SUFFIXES)


def _paths_from_outermost(callers: Sequence[Any]) -> dict[int, str]:
    """id -> attribute path of every module inside the outermost calling module (one walk)."""
    outermost = next((c for c in reversed(callers) if _is_module(c)), None)
    if outermost is None:
        return {}
    paths: dict[int, str] = {}
    try:
        for name, sub in outermost.named_modules():
            paths.setdefault(id(sub), ".".join(p for p in name.split(".") if p != _WRAPPED))
    except Exception:
        return {}
    return paths


def _path_of(target: Any, callers: Sequence[Any], paths: dict[int, str]) -> str:
    # The outermost caller module that holds the target names it most fully.
    if id(target) in paths:
        return paths[id(target)]
    for parent in reversed(callers):
        if parent is target or not _is_module(parent):
            continue
        found = _path_in(parent, target)
        if found is not None:
            return found
    return ""


def _enclosing(callers: Sequence[Any], target: Any, paths: dict[int, str]) -> tuple[ModuleCall, ...]:
    """The module calls around the compiled code, nearest first: the calling modules other
    than the target and torch's wrappers of it (``torch.compile(module)``)."""
    found: list[ModuleCall] = []
    for caller in callers:
        if caller is target or not _is_module(caller):
            continue
        inner = getattr(caller, "_modules", {}).get(_WRAPPED)
        if inner is not None and (inner is target or inner in callers):
            continue  # torch's wrapper: the module it wraps is the call
        call = ModuleCall(paths.get(id(caller), ""), type(caller).__name__)
        if call not in found:
            found.append(call)
    return tuple(found)


def _method_name(cls: type, code: Any) -> str:
    """The name under which ``cls`` has the method whose code (behind its decorators) is
    ``code``; "" where it has none (a function that takes the module as its first argument)."""
    for kind in cls.__mro__[:16]:
        for attr, fn in vars(kind).items():
            for _ in range(8):
                if fn is None:
                    break
                if getattr(fn, "__code__", None) is code:
                    return attr
                fn = getattr(fn, "__wrapped__", None)
    return ""


_CO_VARARGS = 0x04  # a code flag: the function takes *args
_MAX_ARG_NAMES = 64


def _vararg_names(cls: type, method: str, code: Any) -> tuple[str, ...]:
    """The names a decorator's ``*args`` stand for, when ``code`` is a decorator around
    ``cls``'s ``method``: the method's own positional parameters after those the decorator
    names itself (``wrapper(self, *args)`` around ``forward(self, pixel_values)``:
    ``("pixel_values",)``); () otherwise."""
    if code is None or not getattr(code, "co_flags", 0) & _CO_VARARGS:
        return ()
    try:
        fn = getattr(cls, method, None)
    except Exception:  # a class whose attributes compute themselves
        return ()
    chain = []
    for _ in range(8):
        if fn is None:
            break
        chain.append(fn)
        fn = getattr(fn, "__wrapped__", None)
    inner = getattr(chain[-1], "__code__", None) if chain else None
    if inner is None or inner is code or not any(getattr(f, "__code__", None) is code for f in chain):
        return ()
    names = tuple(str(n) for n in inner.co_varnames[: inner.co_argcount])
    return names[code.co_argcount :][:_MAX_ARG_NAMES]


def _is_module(obj: Any) -> bool:
    return obj is not None and callable(getattr(obj, "named_modules", None))


def _forward_owner(callers: Sequence[Any], code: Any) -> Any:
    if code is None:
        return None
    nearest = next((c for c in callers if _is_module(c)), None)
    if nearest is None:
        return None
    if any(getattr(fn, "__code__", None) is code for fn in _forward_chain(type(nearest))):
        return nearest
    return None


def _forward_chain(cls: type) -> list[Any]:
    """A class's forward and the functions its decorators wrap, outermost first."""
    chain = []
    forward = getattr(cls, "forward", None)
    for _ in range(8):
        if forward is None:
            break
        chain.append(forward)
        forward = getattr(forward, "__wrapped__", None)
    return chain


def _resumed_method_owner(callers: Sequence[Any], code: Any) -> tuple[Any, str] | None:
    """The module whose method a resume function continues after a graph break, and that
    method's name: Dynamo calls it from the method's own frame, so the module is the
    nearest caller whose class has that method (or a decorator around it) holding the line
    of the break, in that file."""
    name = getattr(code, "co_name", "")
    at = RESUME_AT.match(name)
    if at is None:
        return None
    root, line = root_code_name(name), int(at[1])
    for caller in callers:
        if not _is_module(caller):
            continue
        try:
            forward, method = getattr(type(caller), "forward", None), getattr(type(caller), root, None)
        except Exception:  # a class whose attributes compute themselves
            continue
        if _holds(forward, root, code.co_filename, line):
            return caller, "forward"
        if _holds(method, root, code.co_filename, line):
            return caller, root
    return None


def _holds(fn: Any, name: str, filename: str, line: int) -> bool:
    """Whether ``fn`` or a function it wraps is named ``name`` in ``filename`` and holds
    ``line`` (the code of a resume function is Dynamo's, not the method's)."""
    for _ in range(8):
        if fn is None:
            return False
        fn_code = getattr(fn, "__code__", None)
        if fn_code is not None and fn_code.co_name == name and fn_code.co_filename == filename:
            lines = [n for _, _, n in fn_code.co_lines() if n is not None]
            if lines and fn_code.co_firstlineno <= line <= max(lines):
                return True
        fn = getattr(fn, "__wrapped__", None)
    return False


def _forward_location(cls: type) -> str:
    """file:line of the innermost function of a class's forward: the model's own code, not
    the decorators a library wraps around it."""
    chain = _forward_chain(cls)
    fn_code = getattr(chain[-1], "__code__", None) if chain else None
    if fn_code is None:
        return ""
    return f"{fn_code.co_filename}:{fn_code.co_firstlineno}"


def _wrapped_by_nearest_module(callers: Sequence[Any]) -> Any:
    nearest = next((c for c in callers if _is_module(c)), None)
    inner = getattr(nearest, "_modules", {}).get(_WRAPPED) if nearest is not None else None
    return inner if _is_module(inner) else None


def _path_in(parent: Any, target: Any) -> str | None:
    try:
        for name, sub in parent.named_modules():
            if sub is target:
                parts = [p for p in name.split(".") if p != _WRAPPED]
                return ".".join(parts)
    except Exception:
        return None
    return None


def _encoder_flag(callers: Sequence[Any]) -> bool | None:
    # Only an instance's own __dict__: a wrapper whose __getattr__ forwards (vLLM's worker
    # wrapper) must not be asked.
    for obj in callers:
        try:
            flag = vars(obj).get("_is_encoder")
        except TypeError:  # no instance __dict__ (slots, builtins)
            continue
        if isinstance(flag, bool):
            return flag
    return None
