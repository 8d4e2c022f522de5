"""The fixes that apply from outside a program (``compiletrace run --apply NAME``, and
``compiletrace doctor --verify``, which proves each by re-running the program with it): each
one setting of torch's Dynamo configuration, made in every process of the job once
``torch._dynamo`` is imported, before its first compile.

Internals: ``torch._dynamo.config``'s ``assume_static_by_default`` (what
``torch.compile(dynamic=True)`` sets for its own compiles), ``capture_scalar_outputs``,
``reorderable_logging_functions`` and ``recompile_limit``, and the config module's table of
entries (``_config``): a plain assignment to the config is a context variable, seen by the
thread that makes it alone, so the fix changes each entry's default, which every thread
(a server's workers, an engine's threads) reads. Their names move between releases: the
capability table probes them (``config fixes``).

>>> sorted(CONFIG_FIXES)
['capture-scalar-outputs', 'dynamic-shapes', 'raise-recompile-limit', 'reorderable-print']
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from compiletrace._io.errors import CompiletraceError, UsageError

__all__ = [
    "CONFIG_FIXES",
    "ConfigFix",
    "apply_config_fix",
    "check_config_fix_names",
    "config_fixes_available",
]

RAISED_RECOMPILE_LIMIT = 64  # torch's default is 8


@dataclass(frozen=True)
class ConfigFix:
    """A fix the doctor can apply with no edit: what it sets, as the user would write it."""

    name: str
    setting: str  # the line a user puts in their own code to keep the fix
    attribute: str  # the torch._dynamo.config attribute it sets
    apply: Callable[[], None]


def _config() -> object:
    import torch._dynamo.config as dynamo_config

    return dynamo_config


def _entry(attribute: str) -> Any:
    """The config module's entry for ``attribute``, whose ``default`` every thread reads."""
    entries = getattr(_config(), "_config", None)
    entry = entries.get(attribute) if isinstance(entries, dict) else None
    if entry is None or not hasattr(entry, "default"):
        raise CompiletraceError(f"this torch has no torch._dynamo.config.{attribute} entry to set")
    return entry


def _set(attribute: str, value: object) -> Callable[[], None]:
    def apply() -> None:
        _entry(attribute).default = value

    return apply


def _reorder_print() -> None:
    entry = _entry("reorderable_logging_functions")
    if not isinstance(entry.default, set):
        raise CompiletraceError("this torch's reorderable_logging_functions is not a set")
    entry.default = {*entry.default, builtins.print}


CONFIG_FIXES: dict[str, ConfigFix] = {
    fix.name: fix
    for fix in (
        ConfigFix(
            "dynamic-shapes",
            "torch.compile(..., dynamic=True), or torch._dynamo.config.assume_static_by_default = False",
            "assume_static_by_default",
            _set("assume_static_by_default", False),
        ),
        ConfigFix(
            "capture-scalar-outputs",
            "torch._dynamo.config.capture_scalar_outputs = True",
            "capture_scalar_outputs",
            _set("capture_scalar_outputs", True),
        ),
        ConfigFix(
            "reorderable-print",
            "torch._dynamo.config.reorderable_logging_functions.add(print)",
            "reorderable_logging_functions",
            _reorder_print,
        ),
        ConfigFix(
            "raise-recompile-limit",
            f"torch._dynamo.config.recompile_limit = {RAISED_RECOMPILE_LIMIT}",
            "recompile_limit",
            _set("recompile_limit", RAISED_RECOMPILE_LIMIT),
        ),
    )
}


def check_config_fix_names(names: Iterable[str]) -> None:
    """Raise :class:`UsageError` for the first name not in :data:`CONFIG_FIXES`."""
    for name in names:
        if name not in CONFIG_FIXES:
            known = ", ".join(sorted(CONFIG_FIXES))
            raise UsageError(f"unknown fix {name!r}; the fixes that apply with no edit: {known}")


def apply_config_fix(name: str) -> ConfigFix:
    """Make the setting of the fix called ``name``; raises :class:`UsageError` for a name not
    in :data:`CONFIG_FIXES`, :class:`CompiletraceError` when this torch lacks the setting."""
    check_config_fix_names([name])
    fix = CONFIG_FIXES[name]
    fix.apply()
    return fix


def config_fixes_available() -> bool:
    """Whether this torch has every setting the fixes make, where every thread reads it."""
    try:
        for fix in CONFIG_FIXES.values():
            _entry(fix.attribute)
    except CompiletraceError:
        return False
    return True
