"""The warm-up guard: warm up only when something is compiled, under a span named for the device."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compiletrace._core.compile import CompilationMode
from compiletrace._core.records import NS_PER_S, CompilationTimes
from compiletrace._core.registry import Registry, get_registry
from compiletrace._core.tracker import Clock
from compiletrace._io.envelope import Fields
from compiletrace._io.errors import ArgumentTypeError, UsageError
from compiletrace._io.state import warn_once

__all__ = ["WarmupResult", "warm_up", "warmup_span_name"]

_DEVICE_LABELS = {"cpu": "CPU", "cuda": "GPU", "xpu": "XPU", "mps": "MPS", "hpu": "HPU", "meta": "Meta"}


def warmup_span_name(device: object) -> str:
    """ "Warmup (CPU)" for cpu, "Warmup (GPU)" for cuda, "Warmup (XPU)" for xpu, ..."""
    dev_type = str(getattr(device, "type", device)).split(":")[0].lower()
    label = _DEVICE_LABELS.get(dev_type, dev_type.upper() or "CPU")
    return f"Warmup ({label})"


@dataclass(frozen=True)
class WarmupResult:
    """What a warm-up did."""

    skipped: bool  # True in CompilationMode.NONE: nothing compiles, so nothing to warm up
    duration_s: float  # wall time of the warm-up run (0.0 when skipped)
    compilation_times: CompilationTimes  # compile seconds recorded during the warm-up
    by_component: dict[str, float] = field(default_factory=dict)  # the same, for any component
    mode: CompilationMode = CompilationMode.STOCK_TORCH_COMPILE
    device: str = "cpu"

    def to_dict(self) -> dict[str, Any]:
        return {
            "skipped": self.skipped,
            "duration_s": self.duration_s,
            "compilation_times": self.compilation_times._asdict(),
            "by_component": dict(self.by_component),
            "mode": self.mode.value,
            "device": self.device,
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "warm-up", where: str = "") -> WarmupResult:
        """Read :meth:`to_dict` output back, checking every field."""
        f = Fields(data, source, where)
        by_component = f.seconds_by_name("by_component", {})
        return cls(
            skipped=f.boolean("skipped"),
            duration_s=f.number("duration_s", minimum=0.0),
            compilation_times=CompilationTimes.from_components(by_component),
            by_component=by_component,
            mode=f.choice("mode", CompilationMode, CompilationMode.STOCK_TORCH_COMPILE),
            device=f.string("device", "cpu"),
        )


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

    The run happens under an OpenTelemetry span "Warmup (CPU)" / "Warmup (GPU)" so the
    compiles it triggers nest under it; when skipped the span is still emitted with
    ``compiletrace.warmup.skipped = true``. After a run, the registry's one-line summary
    is logged (INFO) on the "compiletrace" logger.

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
    if registry is not None and not isinstance(registry, Registry):
        raise ArgumentTypeError(f"registry must be a compiletrace.Registry, got {type(registry).__name__}")
    reg = registry if registry is not None else get_registry()
    now = clock or time.perf_counter_ns
    device_name = str(getattr(device, "type", device))
    skipped = cmode is CompilationMode.NONE

    attributes = {
        "compiletrace.warmup.skipped": skipped,
        "compiletrace.compilation_mode": cmode.value,
        "compiletrace.device": device_name,
    }
    # The span is current while run() executes, so the compiles it triggers nest under it;
    # user_span records an exception from run() and re-raises it unchanged. Imported here:
    # OpenTelemetry loads on first use, not with compiletrace.
    from compiletrace.telemetry._instrument import user_span

    with user_span(warmup_span_name(device), attributes) as span:
        if skipped:
            return WarmupResult(True, 0.0, CompilationTimes(), {}, cmode, device_name)
        before = reg.by_component()
        start = now()
        run()
        duration_ns = now() - start
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
