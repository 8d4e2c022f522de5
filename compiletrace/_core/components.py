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

The rest of a function after a graph break (Dynamo's resume function) is named as the
function it continues: a module's forward by that module, any other function by its name.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from compiletrace._data.records import ENCODER, RESUME_PREFIX, root_code_name
from compiletrace._io.errors import UsageError

__all__ = [
    "ENCODER_ATTRIBUTES",
    "CompiledTarget",
    "ComponentRule",
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

    def matches(self, target: CompiledTarget) -> bool:
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
    (nearest first), as torch's frame gives them."""
    path = ""
    class_name = ""
    forward_location = ""
    if _is_module(target):
        is_forward = any(getattr(fn, "__code__", None) is code for fn in _forward_chain(type(target)))
    else:
        # A module's forward behind a decorator (transformers wraps every forward in one)
        # runs on no named first argument: the module is the nearest caller whose class's
        # forward is that code. torch.compile(nn.Linear(...)) compiles torch's own wrapper
        # of the module's call: the module is the one torch's wrapper around it holds.
        owner = (
            _forward_owner(callers, code)
            or _wrapped_by_nearest_module(callers)
            or _resumed_forward_owner(callers, code)
        )
        is_forward = owner is not None
        target = owner if owner is not None else target
    if _is_module(target):
        class_name = type(target).__name__
        if is_forward:  # not another method of the module (torch.compile(model.generate))
            forward_location = _forward_location(type(target))
        # The outermost caller module that holds the target names it most fully.
        for parent in reversed(callers):
            if parent is target or not _is_module(parent):
                continue
            found = _path_in(parent, target)
            if found is not None:
                path = found
                break
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
    """
    for rule in rules:
        if rule.matches(target):
            return rule.name
    if target.compile_name:
        return target.compile_name
    if target.encoder_flag:
        return ENCODER
    segments = [s for s in target.path.split(".") if s]
    if any(s in ENCODER_ATTRIBUTES for s in segments) or target.class_name.endswith(_ENCODER_CLASS_SUFFIXES):
        return ENCODER
    return target.path or target.class_name or target.qualname or "?"


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


def _resumed_forward_owner(callers: Sequence[Any], code: Any) -> Any:
    """The module whose forward a resume function continues after a graph break: Dynamo
    calls it from the forward's own frame, so the module is the nearest caller whose class's
    forward (or a decorator around it) is that function."""
    name = getattr(code, "co_name", "")
    if not name.startswith(RESUME_PREFIX):
        return None
    nearest = next((c for c in callers if _is_module(c)), None)
    if nearest is None:
        return None
    root = root_code_name(name)
    for fn in _forward_chain(type(nearest)):
        fn_code = getattr(fn, "__code__", None)
        if fn_code is not None and fn_code.co_name == root and fn_code.co_filename == code.co_filename:
            return nearest
    return None


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
