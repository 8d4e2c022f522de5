"""What torch's automatic dynamic has made dynamic in a compiled code: the inputs, and their
dimensions, that it saw change between compiles, as entries of torch's own
``TORCH_COMPILE_DYNAMIC_SOURCES`` (``L['x']:0``, ``L['kwargs']['input_ids']:1``; a Python
number that changed: its source alone). Marking exactly these dynamic before the first call
(``run --apply mark-dynamic=...``) compiles the graph torch would have compiled on the
recompile, first, and no static graph before it.

Why torch's state and not the recompile reason: the reason names the first failing guard
only; where two inputs change together (``input_ids`` and ``attention_mask``) marking the
named one alone leaves the other to specialise the symbol back, and the recompile stays.

Internals used: ``torch._dynamo.pgo.get_code_state()`` (per code: ``CodeState``, whose
``automatic_dynamic`` maps a source to a ``FrameStateSizeEntry``), ``pgo.auto_dynamic`` (the
marker of a changed size or value), ``CodeId``'s ``filename``, ``firstlineno``, ``name``.
Read when a frame's compile ends (torch updates the state while it traces), in tenths of a
millisecond; a torch without them gives no entries (the capability table says so).
"""

from __future__ import annotations

from typing import Any

__all__ = ["automatic_dynamic_sources", "automatic_dynamic_state_available"]

MAX_SOURCES = 64  # entries kept per record: a model's inputs, not every buffer of it


def _pgo() -> Any:
    from torch._dynamo import pgo

    return pgo


def automatic_dynamic_sources(filename: str, firstlineno: int, name: str) -> tuple[str, ...]:
    """The entries torch's automatic dynamic holds for the code at ``filename:firstlineno``
    called ``name``, in the order torch added them; () for none, or where this torch keeps no
    such state."""
    try:
        pgo = _pgo()
        found: list[str] = []
        for code, state in list(pgo.get_code_state().items()):
            if (code.filename, code.firstlineno, code.name) != (filename, firstlineno, name):
                continue
            for source, entry in list(state.automatic_dynamic.items()):
                if isinstance(entry.size, tuple):
                    found += [
                        f"{source}:{i}" for i, size in enumerate(entry.size) if size is pgo.auto_dynamic
                    ]
                elif entry.scalar is pgo.auto_dynamic:
                    found.append(str(source))
        return tuple(dict.fromkeys(found))[:MAX_SOURCES]
    except Exception:
        return ()


def automatic_dynamic_state_available() -> bool:
    """Whether this torch keeps automatic dynamic's state where it is read."""
    pgo = _pgo()
    return callable(pgo.get_code_state) and pgo.auto_dynamic is not None and hasattr(pgo, "CodeId")
