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

The fixes themselves, their names and what each does, are the vocabulary of
:class:`compiletrace._data.fixes.Fix`; this module makes the settings of its members that
are torch's.

>>> sorted(fix.value for fix in CONFIG_FIXES)
['capture-scalar-outputs', 'dynamic-shapes', 'raise-recompile-limit', 'reorderable-print']
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from compiletrace._data.fixes import RAISED_RECOMPILE_LIMIT, Fix
from compiletrace._io.errors import CompiletraceError, UsageError

__all__ = [
    "CONFIG_FIXES",
    "ConfigFix",
    "apply_config_fix",
    "check_config_fix_names",
    "config_fixes_available",
    "raise_recompile_limit",
    "set_recompile_limit",
]


@dataclass(frozen=True)
class ConfigFix:
    """How one :class:`Fix` is made: the torch._dynamo.config entry it sets, and the setting."""

    fix: Fix
    attribute: str  # the torch._dynamo.config attribute it sets
    apply: Callable[[], None]

    @property
    def name(self) -> str:
        """The fix's name, as ``run --apply`` takes it."""
        return self.fix.value

    @property
    def setting(self) -> str:
        """The line a user puts in their own code to keep the fix."""
        return self.fix.in_code


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


# Keyed by the member, which is also its name (a str): CONFIG_FIXES["dynamic-shapes"] works.
CONFIG_FIXES: dict[Fix, ConfigFix] = {
    made.fix: made
    for made in (
        ConfigFix(Fix.DYNAMIC_SHAPES, "assume_static_by_default", _set("assume_static_by_default", False)),
        ConfigFix(Fix.CAPTURE_SCALAR_OUTPUTS, "capture_scalar_outputs", _set("capture_scalar_outputs", True)),
        ConfigFix(Fix.REORDERABLE_PRINT, "reorderable_logging_functions", _reorder_print),
        ConfigFix(
            Fix.RAISE_RECOMPILE_LIMIT, "recompile_limit", _set("recompile_limit", RAISED_RECOMPILE_LIMIT)
        ),
    )
}


def raise_recompile_limit(at_least: int) -> int:
    """Raise torch's recompile limit (per frame, every thread's) to ``at_least``, never lower
    it; returns the limit now in force. Raises :class:`CompiletraceError` when this torch
    has no such setting."""
    entry = _entry("recompile_limit")
    current = entry.default if isinstance(entry.default, int) else 0
    entry.default = max(current, at_least)
    return int(entry.default)


def set_recompile_limit(limit: int) -> None:
    """Put torch's recompile limit back to ``limit`` (what :func:`raise_recompile_limit`
    returned with 0 before a raise): for undoing a fix in a test."""
    _entry("recompile_limit").default = limit


def check_config_fix_names(names: Iterable[str]) -> None:
    """Raise :class:`UsageError` for the first name not in :data:`CONFIG_FIXES`."""
    for name in names:
        if name not in CONFIG_FIXES:
            known = ", ".join(sorted(fix.value for fix in CONFIG_FIXES))
            raise UsageError(f"unknown fix {name!r}; the fixes that apply with no edit: {known}")


def apply_config_fix(name: str | Fix) -> ConfigFix:
    """Make the setting of the fix called ``name``; raises :class:`UsageError` for a name not
    in :data:`CONFIG_FIXES`, :class:`CompiletraceError` when this torch lacks the setting."""
    check_config_fix_names([name])
    made = CONFIG_FIXES[Fix(name)]
    made.apply()
    return made


def config_fixes_available() -> bool:
    """Whether this torch has every setting the fixes make, where every thread reads it."""
    try:
        for fix in CONFIG_FIXES.values():
            _entry(fix.attribute)
    except CompiletraceError:
        return False
    return True
