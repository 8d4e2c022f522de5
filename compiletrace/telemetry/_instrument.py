"""``instrument``: put a function under a span (and on the start-up timeline); and the
failure-proof span that ``instrument`` uses (telemetry errors never reach the user's call)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar, cast, overload

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from compiletrace._core.recorder import recording
from compiletrace._data.records import qualified_type_name
from compiletrace._data.timeline import SPAN
from compiletrace._io.errors import ArgumentTypeError
from compiletrace._io.state import warn_once
from compiletrace.telemetry import _providers
from compiletrace.telemetry._propagation import parent_context

__all__ = ["instrument", "record_error", "user_span"]

P = ParamSpec("P")
R = TypeVar("R")


def _telemetry_failed(exc: Exception) -> None:
    warn_once(f"telemetry failed and was skipped: {exc!r}")


def record_error(span: Span, exc: BaseException) -> None:
    """Mark ``span`` as failed by the user's ``exc``: the exception event, status ERROR and
    ``error.type``. A failure of telemetry itself is swallowed with one warning."""
    try:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.set_attribute("error.type", qualified_type_name(exc))
    except Exception as tel_exc:
        _telemetry_failed(tel_exc)


@contextmanager
def user_span(
    name: str,
    attributes: Mapping[str, AttributeValue] | None = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> Iterator[Span]:
    """A current span around user code. An exception from the user's code is recorded
    (status ERROR, ``error.type``) and re-raised unchanged; an exception from telemetry
    itself is swallowed with one warning."""
    span: Span = INVALID_SPAN
    token: object | None = None
    try:
        # Nest under the current span, or under a launcher's span passed in TRACEPARENT.
        tracer = _providers.tracer(tracer_provider)
        span = tracer.start_span(name, context=parent_context(), attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span))
    except Exception as exc:
        _telemetry_failed(exc)
    try:
        yield span
    except BaseException as exc:
        record_error(span, exc)
        raise
    finally:
        try:
            if token is not None:
                otel_context.detach(token)  # type: ignore[arg-type]
            span.end()
        except Exception as exc:
            _telemetry_failed(exc)


def _code_attributes(func: Callable[..., Any]) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {
        "code.function.name": f"{func.__module__}.{func.__qualname__}",
    }
    code = getattr(inspect.unwrap(func), "__code__", None)
    if code is not None:
        attrs["code.file.path"] = code.co_filename
        attrs["code.line.number"] = code.co_firstlineno
    return attrs


def _decorate(
    func: Callable[P, R],
    span_name: str | None,
    attributes: Mapping[str, AttributeValue] | None,
    tracer_provider: trace.TracerProvider | None,
) -> Callable[P, R]:
    if not callable(func):
        raise ArgumentTypeError(f"instrument decorates a function, got {type(func).__name__}")
    name = span_name if span_name is not None else func.__qualname__
    attrs = {**_code_attributes(func), **(attributes or {})}

    if inspect.iscoroutinefunction(func):
        async_func = cast(Callable[P, Awaitable[Any]], func)

        @functools.wraps(func)
        async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
            with recording(name, SPAN), user_span(name, attrs, tracer_provider):
                return await async_func(*args, **kwargs)

        return cast(Callable[P, R], async_wrapper)

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with recording(name, SPAN), user_span(name, attrs, tracer_provider):
            return func(*args, **kwargs)

    return wrapper


@overload
def instrument(func: Callable[P, R], /) -> Callable[P, R]: ...
@overload
def instrument(
    *,
    span_name: str | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def instrument(
    func: Callable[P, R] | None = None,
    /,
    *,
    span_name: str | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Run a function (sync or async) under an OpenTelemetry span named ``span_name``
    (default: the function's qualified name), with the ``code.*`` attributes of the OTel
    semantic conventions and ``attributes``. An exception sets the span's status to ERROR
    and ``error.type``, and is re-raised unchanged. Spans go to ``tracer_provider`` if
    given, else to compiletrace's providers (:func:`set_providers`), else the global one.
    Each call is also a phase of kind "span" on the start-up timeline (recorded in the
    registry of the phase around it, else the process registry).

    >>> import compiletrace
    >>> @compiletrace.instrument(span_name="Load model", attributes={"model.size": "tiny"})
    ... def load() -> str:
    ...     return "ok"
    >>> load()
    'ok'
    """
    if span_name is not None and not isinstance(span_name, str):
        raise ArgumentTypeError(f"span_name must be a str, got {type(span_name).__name__}")
    if attributes is not None and not isinstance(attributes, Mapping):
        raise ArgumentTypeError(
            f"attributes must be a mapping of str to values, got {type(attributes).__name__}"
        )
    if isinstance(func, str):
        raise ArgumentTypeError(f"pass the span name by keyword: @instrument(span_name={func!r})")
    if func is not None:
        return _decorate(func, span_name, attributes, tracer_provider)

    def decorator(f: Callable[P, R]) -> Callable[P, R]:
        return _decorate(f, span_name, attributes, tracer_provider)

    return decorator
