"""The warm-up guard: warm up only when something is compiled, as a start-up phase (a span
named for the device); afterwards, every compile into the warmed-up registry is marked
``after_warmup`` (a latency spike while serving), and :func:`expect_no_compiles` makes a
test fail on one."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from compiletrace._app.timeline import OwnPhase
from compiletrace._core.observers import OnCompile, process_observers
from compiletrace._core.tracker import Clock, get_tracker
from compiletrace._data.records import NS_PER_S, CompilationTimes, GraphRecord
from compiletrace._data.registry import Registry, checked_registry, get_registry
from compiletrace._data.run import CompilationMode, WarmupResult
from compiletrace._io.errors import ArgumentTypeError, UnexpectedCompileError, UsageError
from compiletrace._io.state import warn_once

__all__ = ["CompileWatch", "WarmupResult", "expect_no_compiles", "warm_up", "warmup_span_name"]

_DEVICE_LABELS = {"cpu": "CPU", "cuda": "GPU", "xpu": "XPU", "mps": "MPS", "hpu": "HPU", "meta": "Meta"}


def warmup_span_name(device: object) -> str:
    """ "Warmup (CPU)" for cpu, "Warmup (GPU)" for cuda, "Warmup (XPU)" for xpu, ..."""
    dev_type = str(getattr(device, "type", device)).split(":")[0].lower()
    label = _DEVICE_LABELS.get(dev_type, dev_type.upper() or "CPU")
    return f"Warmup ({label})"


def warm_up(
    run: Callable[[], Any],
    *,
    compilation_mode: CompilationMode | str | None = None,
    device: object = "cpu",
    registry: Registry | None = None,
    clock: Clock | None = None,
    mode: CompilationMode | str | None = None,
) -> WarmupResult:
    """Run ``run()`` once to trigger compilation before real work, unless
    ``compilation_mode`` is ``CompilationMode.NONE`` (eager), where warm-up only costs
    start-up time. (``mode=`` is its former name, still accepted; in ``compile`` ``mode``
    is the inductor mode.)

    The warm-up is a start-up phase named "Warmup (CPU)" / "Warmup (GPU)", recorded in
    ``registry`` (see ``compiletrace.phase``): the timeline shows it with the compile time
    inside it. With OpenTelemetry it is a span of that name so the compiles it triggers
    nest under it (under the start-up's root span when a phase opened one); when skipped the
    span is still emitted with ``compiletrace.warmup.skipped = true``. After a run, the
    registry's one-line summary is logged (INFO) on the "compiletrace" logger.

    >>> import torch, compiletrace
    >>> model = torch.nn.Linear(4, 4)
    >>> none = compiletrace.CompilationMode.NONE
    >>> res = compiletrace.warm_up(lambda: model(torch.ones(1, 4)), compilation_mode=none)
    >>> res.skipped
    True
    """
    if not callable(run):
        raise ArgumentTypeError(f"run must be a callable taking no arguments, got {type(run).__name__}")
    if mode is not None:
        if compilation_mode is not None:
            raise UsageError("pass compilation_mode= only (mode= is its former name)")
        compilation_mode = mode
    valid = ", ".join(f"CompilationMode.{m.name}" for m in CompilationMode)
    if compilation_mode is None:
        raise UsageError(f"warm_up needs compilation_mode= ({valid})")
    if not isinstance(compilation_mode, (CompilationMode, str)):
        raise ArgumentTypeError(
            f"compilation_mode must be a CompilationMode ({valid}), got {type(compilation_mode).__name__}"
        )
    cmode = CompilationMode.parse(compilation_mode)
    checked_registry(registry)
    reg = registry if registry is not None else get_registry()
    now = clock or time.perf_counter_ns
    device_name = str(getattr(device, "type", device))
    skipped = cmode is CompilationMode.NONE

    attributes = {
        "compiletrace.warmup.skipped": skipped,
        "compiletrace.compilation_mode": cmode.value,
        "compiletrace.device": device_name,
    }
    # The phase's span is current while run() executes, so the compiles it triggers nest
    # under it; an exception from run() is recorded and re-raised unchanged. The warm-up
    # joins an open start-up root span but opens none: a program that declares no phase
    # keeps the warm-up span as its root.
    warm = OwnPhase(warmup_span_name(device), attributes=attributes, registry=reg)
    with warm:
        span = warm.span
        if skipped:
            return WarmupResult(True, 0.0, CompilationTimes(), {}, cmode, device_name)
        tracker = get_tracker()
        tracker.set_warmed_up(reg, False)  # compiles during a warm-up are what it is for
        before = reg.by_component()
        start = now()
        run()
        duration_ns = now() - start
        tracker.set_warmed_up(reg, True)
        after = reg.by_component()
        accrued = {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 0}
        times = CompilationTimes.from_components(accrued)
        try:
            span.set_attribute("compiletrace.warmup.compile_s", float(sum(accrued.values())))
        except Exception as exc:  # telemetry never fails the warm-up
            warn_once(f"telemetry failed and was skipped: {exc!r}")
    # The one-line summary on the "compiletrace" logger, as a serving engine logs it at start-up:
    # "compilation took 12.34 s (language_model: 8.00 s, encoder: 4.34 s)".
    from compiletrace.reports import log_summary

    log_summary(reg.records())
    return WarmupResult(False, duration_ns / NS_PER_S, times, accrued, cmode, device_name)


class CompileWatch:
    """What :func:`expect_no_compiles` saw: the frame compiles and the lazy backward
    compiles inside its block, in the order they finished."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[tuple[GraphRecord, bool]] = []

    def _add(self, record: GraphRecord, backward: bool) -> None:
        with self._lock:
            self._seen.append((record, backward))

    @property
    def records(self) -> tuple[GraphRecord, ...]:
        """The graph record of each frame compile seen."""
        with self._lock:
            return tuple(r for r, backward in self._seen if not backward)

    @property
    def backwards(self) -> tuple[GraphRecord, ...]:
        """The forward's record of each lazy backward compile seen."""
        with self._lock:
            return tuple(r for r, backward in self._seen if backward)

    def __len__(self) -> int:
        with self._lock:
            return len(self._seen)

    def describe(self) -> str:
        """One line per compile: component, code, location and torch's reason."""
        with self._lock:
            seen = list(self._seen)
        lines = []
        for r, backward in seen:
            what = "the lazy backward of " if backward else ""
            where = f" ({r.code_location})" if r.code_location else ""
            why = f": {r.first_reason_line}" if r.first_reason_line and not backward else ""
            if r.recompile_limit_hit:  # a refused compile: the frame runs eagerly from now on
                lines.append(f"{r.component} hit torch's recompile limit on {r.code_name}{where}{why}")
            else:
                lines.append(f"{r.component} compiled {what}{r.code_name} {r.compile_id}{where}{why}")
        return "\n".join(lines)


@contextlib.contextmanager
def expect_no_compiles(*, raise_on_compile: bool = True) -> Iterator[CompileWatch]:
    """A block that must not compile: any frame or lazy backward compile of a compiletrace
    backend inside it (any registry, any thread) is recorded, and when the block ends
    :class:`~compiletrace.UnexpectedCompileError` is raised naming each one, unless
    ``raise_on_compile=False`` (then read what happened from the watch it yields). For
    serving tests and CI: a compile after warm-up is a latency spike.

    >>> import torch, compiletrace
    >>> f = compiletrace.compile(lambda x: x + 1, backend="eager", registry=compiletrace.Registry())
    >>> _ = f(torch.ones(2))  # the warm-up compiles
    >>> with compiletrace.expect_no_compiles():
    ...     _ = f(torch.ones(2))  # the same shape: no compile
    >>> with compiletrace.expect_no_compiles(raise_on_compile=False) as seen:
    ...     _ = f(torch.ones(2, dtype=torch.float64))
    >>> len(seen.records)
    1
    """
    if not isinstance(raise_on_compile, bool):
        raise ArgumentTypeError(f"raise_on_compile must be True or False, got {raise_on_compile!r}")
    watch = CompileWatch()
    with process_observers().observing(OnCompile(watch._add), name="expect_no_compiles"):
        yield watch
    if raise_on_compile and len(watch):
        raise UnexpectedCompileError(
            f"{len(watch)} compile{'s' if len(watch) > 1 else ''} inside expect_no_compiles():\n"
            + watch.describe(),
            watch.records + watch.backwards,
        )
