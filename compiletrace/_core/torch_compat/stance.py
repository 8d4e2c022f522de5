"""The stance torch.compile takes toward a new compile, set at a process's ready mark by the
fixes that take effect there (``compiletrace run --apply fail-after-ready`` and
``eager-after-ready``; ``doctor --verify`` measures them).

Internals used: none past ``torch.compiler.set_stance`` (public) and torch's names of two
stances, ``"fail_on_recompile"`` (every new compile of a frame raises, the first compile of
a never-compiled function included) and ``"eager_on_recompile"`` (the call runs eagerly
instead). Either is a module global of Dynamo's, so every thread of the process takes it.
Neither stops a lazy backward, a CUDA-graph recording or an autotune, which never pass
through Dynamo. Torch refuses to change the stance inside a compiled region; the names it
takes differ by release, so the probe sets each inside a ``with`` block, which puts the
stance back.

>>> sorted(fix.value for fix in STANCE_FIXES)
['eager-after-ready', 'fail-after-ready']
"""

from __future__ import annotations

from compiletrace._data.fixes import Fix
from compiletrace._io.errors import CompiletraceError

__all__ = ["STANCE_FIXES", "apply_stance_fix", "is_stance_fix", "stance_fixes_available"]

# Each fix, and the stance it sets.
STANCE_FIXES: dict[Fix, str] = {
    Fix.FAIL_AFTER_READY: "fail_on_recompile",
    Fix.EAGER_AFTER_READY: "eager_on_recompile",
}


def is_stance_fix(name: str) -> bool:
    """Whether the fix called ``name`` sets a stance (made at the ready mark, not at start)."""
    return name in STANCE_FIXES


def apply_stance_fix(name: str) -> str:
    """Set the stance of the fix called ``name`` for this process; the stance. Raises
    :class:`CompiletraceError` when torch refuses (no such stance, or inside a compiled
    region)."""
    stance = STANCE_FIXES[Fix(name)]
    try:
        import torch

        torch.compiler.set_stance(stance)
    except Exception as exc:
        raise CompiletraceError(f"torch would not take the stance {stance!r}: {exc}") from None
    return stance


def stance_fixes_available() -> bool:
    """Whether this torch takes every stance the fixes set."""
    try:
        import torch

        for stance in STANCE_FIXES.values():
            with torch.compiler.set_stance(stance):
                pass
    except Exception:
        return False
    return True
