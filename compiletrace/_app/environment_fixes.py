"""The fixes ``compiletrace run --apply`` makes through the command's environment, with no
edit to the program (the others are torch's settings, ``torch_compat.CONFIG_FIXES``, and
changes to the program's calls, ``_app.program_fixes``):

- ``mark-dynamic=SOURCE:DIM,...``: torch's own ``TORCH_COMPILE_DYNAMIC_SOURCES``, which every
  process of the command reads when it imports torch: the named inputs' dimensions are
  compiled dynamic from the first call, as automatic dynamic would have on the recompile,
  and nothing else (no other dimension, no float of any module). A dimension the graph
  specialises stays static, with no error. A value the user set is kept; the entries are
  added to it.

The launcher imports no torch, and neither does this module. Each entry was checked to be a
source as torch names one (``compiletrace._data.fixes.dynamic_source_entries``) before
anything runs: the value holds input names, nothing a shell or torch would run.

>>> environment_for(["mark-dynamic=L['x']:0"], {})
{'TORCH_COMPILE_DYNAMIC_SOURCES': "L['x']:0"}
>>> environment_for(["mark-dynamic=L['x']:0"], {"TORCH_COMPILE_DYNAMIC_SOURCES": "L['y']"})
{'TORCH_COMPILE_DYNAMIC_SOURCES': "L['y'],L['x']:0"}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from compiletrace._data.fixes import DYNAMIC_SOURCES_ENV, Fix, dynamic_source_entries, parse_fix
from compiletrace._io.errors import UsageError

__all__ = ["ENVIRONMENT_FIXES", "environment_for", "is_environment_fix"]


def _mark_dynamic(argument: str | None, env: Mapping[str, str]) -> dict[str, str]:
    entries = dynamic_source_entries(argument or "")
    existing = [e for e in env.get(DYNAMIC_SOURCES_ENV, "").split(",") if e]
    return {DYNAMIC_SOURCES_ENV: ",".join(dict.fromkeys([*existing, *entries]))}


# Each fix made through the environment: (its argument, the environment so far) -> the
# variables it sets.
ENVIRONMENT_FIXES: dict[Fix, Callable[[str | None, Mapping[str, str]], dict[str, str]]] = {
    Fix.MARK_DYNAMIC: _mark_dynamic,
}


def is_environment_fix(name: str) -> bool:
    """Whether the fix called ``name`` is made through the environment."""
    try:
        return parse_fix(name)[0] in ENVIRONMENT_FIXES
    except UsageError:
        return False


def environment_for(fixes: Iterable[str], env: Mapping[str, str]) -> dict[str, str]:
    """The variables the environment fixes among ``fixes`` set, over ``env``."""
    changed: dict[str, str] = {}
    for name in fixes:
        fix, argument = parse_fix(name)
        make = ENVIRONMENT_FIXES.get(fix)
        if make is not None:
            changed.update(make(argument, {**env, **changed}))
    return changed
