"""The fixes ``compiletrace run --apply`` makes to how a program calls a public API, with no
edit to the program (the others are torch settings: ``torch_compat.CONFIG_FIXES``):

- ``regional-compile=CLASS``: ``torch.compile(model)`` (and ``model.compile()``) compiles
  each ``CLASS`` block inside ``model`` on its own, with the same options, and leaves the
  model around the blocks as it is, in place: what diffusers' ``compile_repeated_blocks``
  does. Dynamo traces the block's code once and its one compiled graph serves every block.
  The blocks share one frame, and so torch's recompile limit for it: a block that
  specialises on its own index or cache layer (transformers' default cache:
  ``layers[i].is_initialized``) needs an entry of its own, so the fix raises the limit to
  the block count plus torch's own allowance, or the blocks past the limit would run
  uncompiled. A model with no ``CLASS`` inside, and a ``CLASS`` block compiled itself,
  compile as they would. Each block's compiles are named as the model's (the component it
  had compiled whole), so a verify's before and after read per component alike.
- ``static-cache``: transformers' ``generate`` gets ``cache_implementation="static"`` when
  the call sets no cache of its own (no ``past_key_values``, ``cache_implementation`` or
  ``use_cache=False``, here or in its generation config): the cache's tensors keep one
  shape, so the compiled forward stops recompiling as a dynamic cache grows.

The fixes' names, and what each does, are the vocabulary of
:class:`compiletrace._data.fixes.Fix`; this module makes its members that change the program's
calls (:data:`PROGRAM_FIXES`). Each is installed in a job's process before the program can
call what it changes: the bootstrap calls :func:`install` once ``torch`` is imported.
Nothing here may break the program: a fix that cannot be made is one warning, and the
program runs unfixed.

>>> parse_fix("regional-compile=LlamaDecoderLayer")
('regional-compile', 'LlamaDecoderLayer')
>>> parse_fix("static-cache")
('static-cache', None)
>>> sorted(fix.value for fix in PROGRAM_FIXES)
['regional-compile', 'static-cache']
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from compiletrace._app.engine_phases import EntryPoint, Installed
from compiletrace._app.engine_phases import install as install_wrappers
from compiletrace._core.components import compiled_as_part_of
from compiletrace._data.fixes import Fix, check_fixes
from compiletrace._data.fixes import parse_fix as parse_fix_name
from compiletrace._data.registry import Registry
from compiletrace._io.errors import UsageError
from compiletrace._io.state import STATE, Slot, warn_once

__all__ = [
    "PROGRAM_FIXES",
    "REGIONAL_COMPILE",
    "STATIC_CACHE",
    "applied",
    "check_program_fix",
    "check_program_fixes",
    "install",
    "is_program_fix",
    "parse_fix",
    "regional_compile_fix",
    "regional_targets",
]

REGIONAL_COMPILE = Fix.REGIONAL_COMPILE
STATIC_CACHE = Fix.STATIC_CACHE
_MARK = "__compiletrace_fix__"  # set on a wrapper this module made: never wrapped twice
# The fixes installed in this process, in the order installed, and the engine wrappers they
# put in (installed_for_test takes them out again).
_APPLIED: Slot[list[str]] = STATE.slot("program fixes", [])
_WRAPPERS: Slot[list[Installed]] = STATE.slot("program fix wrappers", [])


def regional_compile_fix(block_class: str) -> str:
    """The fix's name for compiling ``block_class`` regionally.

    >>> regional_compile_fix("LlamaDecoderLayer")
    'regional-compile=LlamaDecoderLayer'
    """
    return Fix.REGIONAL_COMPILE.spelled(block_class)


def parse_fix(name: str) -> tuple[str, str | None]:
    """A fix's name and its argument (``regional-compile=CLASS``: the class), unchecked."""
    base, sep, argument = name.partition("=")
    return base, argument if sep else None


def is_program_fix(name: str) -> bool:
    """Whether ``name`` is one of this module's fixes (well formed or not)."""
    return parse_fix(name)[0] in PROGRAM_FIXES


def check_program_fix(name: str) -> None:
    """Raise :class:`~compiletrace.UsageError` for a malformed fix of this module's."""
    parse_fix_name(name)


def check_program_fixes(names: Iterable[str]) -> None:
    """:func:`check_program_fix` on each of this module's fixes among ``names``, and at most
    one ``regional-compile`` (torch.compile is replaced once)."""
    check_fixes(name for name in names if is_program_fix(name))


def applied() -> list[str]:
    """The fixes installed in this process."""
    with STATE.lock:
        return list(_APPLIED.value)


def install(names: Iterable[str]) -> list[str]:
    """Install each of this module's fixes among ``names`` (others are skipped), once per
    process; the names installed now. A fix that cannot be made warns and is left out."""
    done = []
    for name in names:
        if not is_program_fix(name):
            continue
        with STATE.lock:
            if name in _APPLIED.value:
                continue
        try:
            fix, argument = parse_fix_name(name)
            PROGRAM_FIXES[fix](argument)
        except Exception as exc:  # never into the program
            with contextlib.suppress(Exception):
                warn_once(f"the fix {name!r} is not applied in this process ({type(exc).__name__}: {exc})")
            continue
        with STATE.lock:
            _APPLIED.value.append(name)
        done.append(name)
    return done


# -- regional compilation -------------------------------------------------------------------


def _class_matches(module: object, block_class: str) -> bool:
    """Whether ``module`` is a ``block_class``, by name, its base classes included (the
    doctor names the class that defines the forward it saw, which a subclass inherits)."""
    return any(
        block_class in (kind.__name__, kind.__qualname__, f"{kind.__module__}.{kind.__qualname__}")
        for kind in type(module).__mro__
    )


def regional_targets(model: Any, block_class: str) -> list[Any]:
    """The outermost ``block_class`` blocks inside ``model`` (an ``nn.Module``), in module
    order, not counting ``model`` itself; blocks inside a block are the block's.

    >>> import torch.nn as nn
    >>> model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 2)), nn.ReLU())
    >>> [type(b).__name__ for b in regional_targets(model, "Linear")]
    ['Linear', 'Linear']
    """
    found: list[Any] = []
    inside: set[str] = set()
    for path, module in model.named_modules():
        if not path or any(path.startswith(prefix) for prefix in inside):
            continue
        if _class_matches(module, block_class):
            found.append(module)
            inside.add(path + ".")
    return found


def _module_of(target: Any) -> Any:
    """The module a ``torch.compile`` target is, or whose method it is; else None."""
    import torch.nn as nn

    if isinstance(target, nn.Module):
        return target
    owner = getattr(target, "__self__", None) if inspect.ismethod(target) else None
    return owner if isinstance(owner, nn.Module) else None


def _install_regional(block_class: str) -> None:
    import torch

    real = torch.compile
    if getattr(real, _MARK, None) is not None:
        raise UsageError(f"torch.compile already compiles {getattr(real, _MARK)} regionally in this process")

    @functools.wraps(real)
    def compile(*args: Any, **kwargs: Any) -> Any:
        target = args[0] if args else kwargs.get("model")
        module = _module_of(target) if target is not None else None
        if module is None or _class_matches(module, block_class):
            return real(*args, **kwargs)  # a function, a decorator's options, or a block itself
        blocks = regional_targets(module, block_class)
        if not blocks:
            with contextlib.suppress(Exception):
                warn_once(
                    f"regional-compile: {type(module).__name__} holds no {block_class}; compiled as it is",
                    key=f"{_MARK}{block_class}",
                )
            return real(*args, **kwargs)
        options = {k: v for k, v in kwargs.items() if k != "model"}
        for block in blocks:
            # Its compiles are the model's component, as they were compiled whole.
            compiled_as_part_of(block, module)
            block.compile(*args[1:], **options)  # torch.compile(block's call, ...): the real one
        _room_for(len(blocks))
        return target  # the model runs as it is around its compiled blocks

    setattr(compile, _MARK, block_class)
    torch.compile = compile


def _room_for(blocks: int) -> None:
    """One entry of the blocks' shared frame per block, beside torch's own allowance for a
    frame's variants: blocks that each specialise (a cache layer of their own) all compile."""
    from compiletrace._core import torch_compat as tc

    try:
        limit = tc.raise_recompile_limit(0)
        tc.raise_recompile_limit(limit + blocks)
    except Exception:  # a torch without the setting: the blocks past the limit run eagerly
        with contextlib.suppress(Exception):
            warn_once(
                f"regional-compile: could not raise torch's recompile limit for {blocks} blocks; "
                "blocks past it may run uncompiled",
                key=f"{_MARK}limit",
            )


# -- transformers' generation cache ---------------------------------------------------------


# The keywords by which a generate call brings a cache of its own (transformers 5 renamed
# past_key_values to cache; state-space models take cache_params).
_OWN_CACHE = ("past_key_values", "cache", "cache_params", "cache_implementation")


def _sets_its_own_cache(model: Any, arguments: Mapping[str, Any]) -> bool:
    if any(arguments.get(name) is not None for name in _OWN_CACHE) or arguments.get("use_cache") is False:
        return True
    config = arguments.get("generation_config") or getattr(model, "generation_config", None)
    if getattr(config, "cache_implementation", None) is not None:
        return True
    return getattr(config, "use_cache", True) is False


def _static_generate(generate: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(generate)

    @functools.wraps(generate)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:  # the call's own arguments by name, a generation_config passed by position included
            bound = signature.bind_partial(self, *args, **kwargs).arguments
        except TypeError:
            bound = kwargs  # generate itself will say what is wrong with the call
        extra = bound.get("kwargs")  # generate's **kwargs, where the cache keywords arrive
        named = {**bound, **extra} if isinstance(extra, dict) else bound
        if not _sets_its_own_cache(self, named):
            kwargs["cache_implementation"] = "static"
        return generate(self, *args, **kwargs)

    return wrapper


_GENERATE = EntryPoint(
    "transformers.generation.utils", "GenerationMixin.generate", STATIC_CACHE, wrapper=_static_generate
)


def _install_static_cache() -> None:
    # Wrapped now if transformers' generation module is imported, else once it is.
    wrappers = install_wrappers(Registry(), entry_points=(_GENERATE,))
    with STATE.lock:
        _WRAPPERS.value.append(wrappers)


def _install_regional_fix(block_class: str | None) -> None:
    assert block_class is not None  # parse_fix_name checked it
    _install_regional(block_class)


# What makes each of the fixes that change the program's calls, given the fix's argument.
PROGRAM_FIXES: dict[Fix, Callable[[str | None], None]] = {
    Fix.REGIONAL_COMPILE: _install_regional_fix,
    Fix.STATIC_CACHE: lambda argument: _install_static_cache(),
}


@contextlib.contextmanager
def installed_for_test(names: Iterable[str]) -> Iterator[list[str]]:
    """:func:`install`, undone after (tests only: a process keeps its fixes)."""
    import torch

    from compiletrace._core import torch_compat as tc

    real = torch.compile
    limit = tc.raise_recompile_limit(0)  # regional-compile raises it: put it back
    done = install(names)
    try:
        yield done
    finally:
        torch.compile = real
        tc.set_recompile_limit(limit)
        with STATE.lock:
            for name in done:
                _APPLIED.value.remove(name)
            wrappers, _WRAPPERS.value[:] = list(_WRAPPERS.value), []
        for wrapper in wrappers:
            wrapper.remove()
