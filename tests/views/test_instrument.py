"""``compiletrace.instrument``: spans around user functions, sync and async."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from opentelemetry.trace import StatusCode

import compiletrace
from compiletrace import telemetry


def load_model(size: int) -> int:
    return size * 2


def test_bare_decorator_names_the_span_and_sets_code_attributes(tel: telemetry.Telemetry) -> None:
    wrapped = compiletrace.instrument(load_model)
    assert wrapped(3) == 6
    assert wrapped.__name__ == "load_model"
    (span,) = tel.spans()
    assert span.name == "load_model"
    assert dict(span.attributes or {}) == {
        "code.function.name": f"{__name__}.load_model",
        "code.file.path": __file__,
        "code.line.number": inspect.getsourcelines(load_model)[1],
    }


def test_arguments_set_name_and_attributes(tel: telemetry.Telemetry) -> None:
    @compiletrace.instrument(span_name="Load model", attributes={"model.size": "tiny", "model.layers": 2})
    def load() -> str:
        return "ok"

    assert load() == "ok"
    (span,) = tel.spans()
    assert span.name == "Load model"
    assert span.attributes is not None
    assert (span.attributes["model.size"], span.attributes["model.layers"]) == ("tiny", 2)
    assert str(span.attributes["code.function.name"]).endswith("load")


def test_async_function_gets_a_span_nested_under_the_caller(tel: telemetry.Telemetry) -> None:
    @compiletrace.instrument(span_name="Fetch")
    async def fetch(x: int) -> int:
        await asyncio.sleep(0)
        return x + 1

    @compiletrace.instrument(span_name="Serve")
    async def serve() -> int:
        return await fetch(1)

    assert inspect.iscoroutinefunction(fetch)
    assert asyncio.run(serve()) == 2
    spans = {s.name: s for s in tel.spans()}
    assert set(spans) == {"Fetch", "Serve"}
    assert spans["Fetch"].parent is not None and spans["Serve"].context is not None
    assert spans["Fetch"].parent.span_id == spans["Serve"].context.span_id


def test_exception_is_recorded_and_reraised_unchanged(tel: telemetry.Telemetry) -> None:
    boom = KeyError("missing weights")

    @compiletrace.instrument
    def fails() -> None:
        raise boom

    with pytest.raises(KeyError) as info:
        fails()
    assert info.value is boom
    (span,) = tel.spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None and span.attributes["error.type"] == "KeyError"
    assert [e.name for e in span.events] == ["exception"]


def test_async_exception_is_recorded(tel: telemetry.Telemetry) -> None:
    class ModelError(Exception):
        pass

    @compiletrace.instrument(span_name="Async load")
    async def fails() -> None:
        raise ModelError("nope")

    with pytest.raises(ModelError):
        asyncio.run(fails())
    (span,) = tel.spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == f"{__name__}.test_async_exception_is_recorded.<locals>.ModelError"


def test_without_an_sdk_it_just_calls_the_function() -> None:
    telemetry.set_providers()

    @compiletrace.instrument(span_name="Quiet")
    def f(x: int) -> int:
        return x * 10

    assert f(4) == 40


def test_bad_arguments_are_type_errors() -> None:
    with pytest.raises(TypeError, match="span_name must be a str, got int"):
        compiletrace.instrument(span_name=5)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="by keyword"):
        compiletrace.instrument("Load model")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="attributes must be a mapping"):
        compiletrace.instrument(attributes=["a"])  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="decorates a function"):
        compiletrace.instrument(span_name="x")(42)  # type: ignore[arg-type]
