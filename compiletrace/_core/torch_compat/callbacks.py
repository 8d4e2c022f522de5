"""Dynamo's compile callbacks: registered once per process, and kept registered across
``torch._dynamo.reset()``.

What is used, and why:

- ``torch._dynamo.callback.callback_handler``: start/end callbacks around each frame
  compile and each lazy backward compile. The backend alone sees neither Dynamo's
  tracing and guard building nor the lazy backward. ``torch._dynamo.reset()`` calls its
  ``clear()``, which drops every registered callback: ``clear`` is wrapped (on the
  instance) to register them again and tell the reset listeners.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compiletrace._core.torch_compat.frames import current_compile_id
from compiletrace._io.state import STATE, Slot, warn_once

TRIGGER_DYNAMO = "DYNAMO"
TRIGGER_LAZY_BACKWARD = "LAZY_BACKWARD"

# (trigger name, compile id) -> None
CompileEventCallback = Callable[[str, str], None]


def _callback_handler() -> Any | None:
    try:
        from torch._dynamo.callback import callback_handler
    except Exception:
        return None
    required = ("register_start_callback", "register_end_callback", "start_callbacks", "clear")
    if not all(hasattr(callback_handler, name) for name in required):
        return None
    return callback_handler


def load_dynamo() -> None:
    """Import ``torch._dynamo`` now. ``compiletrace run``'s bootstrap starts a process's
    recording when this import completes: importing it before the tracker is built lets that
    finish first, instead of building a second tracker from inside the first one's set-up."""
    with contextlib.suppress(Exception):  # no Dynamo: the capability table says what is missing
        import torch._dynamo  # noqa: F401


def callbacks_available() -> bool:
    """Whether this torch has the compile start/end callback API compiletrace needs."""
    return _callback_handler() is not None


class _CallbackAdapter:
    """Turns torch's callback argument (absent before ~2.8, ``CallbackArgs`` since) into
    ``(trigger name, compile id)`` and keeps any exception away from Dynamo: a start
    callback that raised would abort the user's compile."""

    def __init__(self, target: CompileEventCallback) -> None:
        self._target = target

    def __call__(self, args: Any = None) -> None:
        try:
            if args is None:
                trigger, compile_id = TRIGGER_DYNAMO, current_compile_id() or "?"
            else:
                trigger = getattr(args.callback_trigger, "name", str(args.callback_trigger))
                compile_id = str(args.compile_id)
            self._target(trigger, compile_id)
        except Exception as exc:  # telemetry must never break a compile
            warn_once(f"a compile callback failed and was ignored: {exc!r}")


@dataclass
class _Installation:
    on_start: _CallbackAdapter
    on_end: _CallbackAdapter


# The callback pair registered with Dynamo, once per process.
_CALLBACKS: Slot[_Installation | None] = STATE.slot("compile callbacks", None)
# Called after every torch._dynamo.reset(), in the order registered.
_RESET_LISTENERS: Slot[list[Callable[[], None]]] = STATE.slot("reset listeners", [])


def on_dynamo_reset(listener: Callable[[], None]) -> None:
    """Call ``listener()`` after every ``torch._dynamo.reset()`` (once compile callbacks
    are installed): compile ids start again at "0/0" from then on."""
    with STATE.lock:
        _RESET_LISTENERS.value.append(listener)


def install_callbacks(on_start: CompileEventCallback, on_end: CompileEventCallback) -> bool:
    """Register ``on_start``/``on_end`` with Dynamo, once per process, so that they survive
    ``torch._dynamo.reset()`` (which clears every registered callback).

    Returns False when this torch has no callback API; the caller then falls back to
    timing inside the backend alone.
    """
    handler = _callback_handler()
    if handler is None:
        return False
    with STATE.lock:
        if _CALLBACKS.value is None:
            _CALLBACKS.value = _Installation(_CallbackAdapter(on_start), _CallbackAdapter(on_end))
            _patch_clear(handler)
        ensure_callbacks_registered()
    return True


def ensure_callbacks_registered() -> bool:
    """Re-register the installed callbacks if something removed them. Returns True when
    they had to be re-registered."""
    handler = _callback_handler()
    inst = _CALLBACKS.value
    if handler is None or inst is None:
        return False
    if inst.on_start in handler.start_callbacks:
        return False
    handler.register_start_callback(inst.on_start)
    handler.register_end_callback(inst.on_end)
    return True


def _patch_clear(handler: Any) -> None:
    # torch._dynamo.reset() calls callback_handler.clear(); re-register right after it so
    # that measuring never silently stops. Patched on the instance, not the class.
    original_clear = handler.clear
    if getattr(original_clear, "_compiletrace_patched", False):
        return

    def clear_and_reregister() -> None:
        original_clear()
        try:
            ensure_callbacks_registered()
            with STATE.lock:
                listeners = tuple(_RESET_LISTENERS.value)
            for listener in listeners:
                listener()
        except Exception as exc:
            warn_once(f"could not re-register compile callbacks: {exc!r}")

    clear_and_reregister._compiletrace_patched = True  # type: ignore[attr-defined]
    handler.clear = clear_and_reregister


def uninstall_callbacks_for_tests() -> None:
    """Remove compiletrace's callbacks from Dynamo (test helper)."""
    handler = _callback_handler()
    inst = _CALLBACKS.value
    if handler is None or inst is None:
        return
    for lst, cb in ((handler.start_callbacks, inst.on_start), (handler.end_callbacks, inst.on_end)):
        while cb in lst:
            lst.remove(cb)
