"""The warm-up guard: skipped in eager mode, a span named for the device, compiles under it."""

from __future__ import annotations

import logging
import re

import pytest
import torch
from opentelemetry.trace import StatusCode

import compiletrace
from compiletrace import CompilationMode, telemetry
from compiletrace._app.warmup import warmup_span_name
from tests.conftest import FakeClock


def test_none_mode_never_runs_and_still_emits_the_span(tel: telemetry.Telemetry) -> None:
    calls: list[int] = []
    result = compiletrace.warm_up(lambda: calls.append(1), compilation_mode=CompilationMode.NONE)
    assert calls == []
    assert result.skipped and result.duration_s == 0.0
    assert result.compilation_times == compiletrace.CompilationTimes()
    (span,) = tel.spans()
    assert span.name == "Warmup (CPU)"
    assert dict(span.attributes or {}) == {
        "compiletrace.warmup.skipped": True,
        "compiletrace.compilation_mode": "none",
        "compiletrace.device": "cpu",
    }


def test_compiled_mode_nests_compiles_and_accrues_times(tel: telemetry.Telemetry) -> None:
    reg = compiletrace.Registry()  # empty: must still be the registry used
    model = compiletrace.compile(torch.nn.Linear(4, 4), is_encoder=True, backend="eager", registry=reg)
    result = compiletrace.warm_up(lambda: model(torch.ones(1, 4)), compilation_mode="stock", registry=reg)
    assert not result.skipped
    assert result.compilation_times.encoder == reg.compilation_times().encoder > 0
    assert result.by_component == {"encoder": reg.compilation_times().encoder}
    spans = tel.spans()
    (warm,) = [s for s in spans if s.name == "Warmup (CPU)"]
    (graph,) = [s for s in spans if s.name == "Compile graph"]
    assert warm.context is not None and graph.parent is not None
    assert graph.parent.span_id == warm.context.span_id
    assert graph.attributes is not None and graph.attributes["compiletrace.component"] == "encoder"
    assert warm.attributes is not None and warm.attributes["compiletrace.warmup.skipped"] is False


def test_duration_comes_from_the_injected_clock(fake_clock: FakeClock) -> None:
    result = compiletrace.warm_up(
        lambda: fake_clock.advance(5_000_000),
        compilation_mode="stock",
        registry=compiletrace.Registry(),
        clock=fake_clock,
    )
    assert result.duration_s == 0.005
    assert result.compilation_times.total == 0.0


def test_run_exception_is_reraised_unchanged_and_recorded(tel: telemetry.Telemetry) -> None:
    boom = ValueError("bad batch")

    def run() -> None:
        raise boom

    with pytest.raises(ValueError) as info:
        compiletrace.warm_up(run, compilation_mode="stock", device="cuda", registry=compiletrace.Registry())
    assert info.value is boom
    (span,) = tel.spans()
    assert span.name == "Warmup (GPU)"
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["error.type"] == "ValueError"


@pytest.mark.parametrize(
    ("device", "name"),
    [
        ("cpu", "Warmup (CPU)"),
        ("cuda", "Warmup (GPU)"),
        ("cuda:1", "Warmup (GPU)"),
        (torch.device("cpu"), "Warmup (CPU)"),
        ("xpu", "Warmup (XPU)"),
        ("npu", "Warmup (NPU)"),
    ],
)
def test_span_is_named_for_the_device(device: object, name: str) -> None:
    assert warmup_span_name(device) == name


def test_bad_input_is_rejected_with_the_valid_modes() -> None:
    with pytest.raises(TypeError, match="run must be a callable"):
        compiletrace.warm_up(42, compilation_mode=CompilationMode.NONE)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"CompilationMode\.NONE, CompilationMode\.STOCK_TORCH_COMPILE"):
        compiletrace.warm_up(lambda: None, compilation_mode=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"valid modes: CompilationMode\.NONE"):
        compiletrace.warm_up(lambda: None, compilation_mode="turbo")
    with pytest.raises(ValueError, match="needs compilation_mode="):
        compiletrace.warm_up(lambda: None)


def test_mode_is_still_accepted_as_the_former_name() -> None:
    calls: list[int] = []
    result = compiletrace.warm_up(lambda: calls.append(1), mode=CompilationMode.NONE)
    assert result.skipped and calls == []
    with pytest.raises(ValueError, match="compilation_mode= only"):
        compiletrace.warm_up(lambda: None, mode="none", compilation_mode="none")


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_warm_up_logs_the_one_line_summary() -> None:
    logger = logging.getLogger("compiletrace")
    handler, old_level = _Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        reg = compiletrace.Registry()
        enc = compiletrace.compile(lambda x: x * 2, is_encoder=True, backend="eager", registry=reg)
        lm = compiletrace.compile(lambda x: x + 1, backend="eager", registry=reg)
        compiletrace.warm_up(lambda: lm(enc(torch.ones(2))), compilation_mode="stock", registry=reg)
        (line,) = handler.lines
        m = re.fullmatch(r"compilation took (\S+) s \(language_model: (\S+) s, encoder: (\S+) s\)", line)
        assert m is not None, line
        times = reg.compilation_times()
        assert [float(g) for g in m.groups()] == pytest.approx(
            [times.total, times.language_model, times.encoder], abs=0.006
        )
        compiletrace.warm_up(lambda: None, compilation_mode="none", registry=reg)
        assert len(handler.lines) == 1  # skipped: nothing to say
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
