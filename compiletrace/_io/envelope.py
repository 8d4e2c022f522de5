"""The versioned JSON envelope of every file compiletrace writes, and typed reading of
what comes back.

A saved file is ``{"kind": ..., "schema_version": N, ...}``. Reading one back trusts
nothing: each field is checked for its type and range as it is read, and the first bad one
raises :class:`RunFileError` naming the file, the field and what was expected, instead of a
bare ``TypeError`` much later (or a negative time in a report).

>>> doc = Fields({"kind": "k", "schema_version": 1, "n": -1}, "run.json")
>>> doc.integer("n", minimum=0)
Traceback (most recent call last):
  ...
compiletrace._io.errors.RunFileError: run.json: field 'n' must be an integer >= 0, got -1
"""

from __future__ import annotations

import enum
import json
import math
import os
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from compiletrace._io.errors import RunFileError
from compiletrace._io.inputs import InputFile, open_input

__all__ = ["MAX_FILE_BYTES", "Fields", "envelope", "parse_json", "read_json", "read_json_file"]

_E = TypeVar("_E", bound=enum.Enum)
_MISSING: Any = object()
MAX_FILE_BYTES = 1 << 30  # a run file larger than this is not one compiletrace wrote
MAX_INTEGER = 1 << 63  # nanosecond counts and sizes are int64 wherever they come from


def envelope(kind: str, schema_version: int, body: Mapping[str, Any]) -> dict[str, Any]:
    """The dict to save: kind and version first, then the body.

    >>> envelope("compiletrace.run", 1, {"meta": {}})
    {'kind': 'compiletrace.run', 'schema_version': 1, 'meta': {}}
    """
    return {"kind": kind, "schema_version": schema_version, **body}


def read_json_file(path: str | os.PathLike[str], *, pipes: bool = True) -> Any:
    """Parse a JSON file (or, with ``pipes``, what comes through a pipe); raise
    :class:`RunFileError` for anything unreadable (missing, not a file, larger than
    :data:`MAX_FILE_BYTES`, not UTF-8, not JSON, nested too deeply, NaN or Infinity
    literals)."""
    with open_input(path, pipes=pipes) as source:
        return read_json(source)


def read_json(source: InputFile) -> Any:
    """:func:`read_json_file` of an input already open (its format told from its head)."""
    name = source.name
    if not source.regular and not source.head.lstrip().startswith(b"{"):
        # A pipe's size is unknown until it ends: what cannot be a file compiletrace wrote
        # (each is a JSON object) is refused from its first bytes, not read to its end.
        raise RunFileError(f"{name} is not JSON: what came through the pipe does not start with '{{'")
    try:
        data = source.read_all(MAX_FILE_BYTES)
    except OSError as exc:
        raise RunFileError(f"cannot read {name}: {exc.strerror or exc}") from None
    return parse_json(data, name)


def parse_json(data: bytes, name: str) -> Any:
    """Parse the bytes of a JSON file named ``name``; raise :class:`RunFileError` for
    anything that is not (not UTF-8, not JSON, nested too deeply, NaN or Infinity literals).

    >>> parse_json(b'{"a": NaN}', "x.json")
    Traceback (most recent call last):
      ...
    compiletrace._io.errors.RunFileError: x.json is not valid JSON: NaN is not a number JSON allows
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RunFileError(f"{name} is not a text file (not UTF-8)") from None
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{name} is not JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise RunFileError(f"{name} is nested too deeply to be a compiletrace file") from None
    except ValueError as exc:
        raise RunFileError(f"{name} is not valid JSON: {exc}") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


class Fields:
    """Typed, checked access to one JSON object read from ``source``; ``where`` is its
    path inside the file (``registry.records[3]``), for the messages."""

    def __init__(self, data: Any, source: str, where: str = "") -> None:
        if not isinstance(data, dict):
            what = f"field {where!r}" if where else "the file"
            raise RunFileError(f"{source}: {what} must be a JSON object, got {_describe(data)}")
        self.data: dict[str, Any] = data
        self.source = source
        self.where = where

    def path(self, key: str) -> str:
        """Where ``key`` is in the file (``registry.records[3].phases``), for messages."""
        return f"{self.where}.{key}" if self.where else key

    def key(self, key: str) -> str:
        """``key``, a name this object holds, checked to be Unicode text (a JSON object's
        keys are names a view may print)."""
        if not _is_unicode(key):
            raise self.fail(key, "named in Unicode text", key)
        return key

    def fail(self, key: str, expected: str, value: Any) -> RunFileError:
        return RunFileError(
            f"{self.source}: field {self.path(key)!r} must be {expected}, got {_describe(value)}"
        )

    def _get(self, key: str, default: Any) -> tuple[Any, bool]:
        """(value, present): the default, not checked, when the key is absent."""
        if key in self.data:
            return self.data[key], True
        if default is _MISSING:
            raise RunFileError(f"{self.source}: field {self.path(key)!r} is missing")
        return default, False

    def check_kind(self, kind: str, versions: Collection[int], hint: str) -> int:
        """Check the envelope: ``kind`` must match and the schema version be one this
        compiletrace reads. Returns the version."""
        if self.data.get("kind") != kind:
            raise RunFileError(
                f"{self.source} is not {hint} (its kind is {_describe(self.data.get('kind'))})"
            )
        return self.check_version(versions)

    def check_version(self, versions: Collection[int]) -> int:
        """The ``schema_version`` field, which must be one of ``versions``."""
        version = self.data.get("schema_version")
        # type() is int: 1.0 == 1 and True == 1 in Python, and neither is a version.
        if type(version) is not int or version not in versions:
            readable = ", ".join(str(v) for v in sorted(versions))
            raise RunFileError(
                f"{self.source}: schema version {version!r} is not supported; this compiletrace reads "
                f"version {readable} (a newer compiletrace wrote it? upgrade to read it)"
            )
        return version

    def string(
        self, key: str, default: Any = _MISSING, *, optional: bool = False, limit: int | None = None
    ) -> Any:
        """A string (of at most ``limit`` characters, when given)."""
        value, present = self._get(key, default)
        if not present or (optional and value is None):
            return value
        if not isinstance(value, str):
            raise self.fail(key, "a string" + (" or null" if optional else ""), value)
        if not _is_unicode(value):
            raise self.fail(key, "a string of Unicode text (not a lone surrogate)", value)
        if limit is not None and len(value) > limit:
            raise self.fail(key, f"a string of at most {limit:,} characters", value)
        return value

    def integer(
        self, key: str, default: Any = _MISSING, *, minimum: int | None = None, optional: bool = False
    ) -> Any:
        value, present = self._get(key, default)
        if not present or (optional and value is None):
            return value
        ok = isinstance(value, int) and not isinstance(value, bool)
        if ok and abs(value) >= MAX_INTEGER:
            raise self.fail(key, "an integer below 2**63", value)
        if not ok or (minimum is not None and value < minimum):
            expected = "an integer" + (f" >= {minimum}" if minimum is not None else "")
            raise self.fail(key, expected + (" or null" if optional else ""), value)
        return value

    def number(
        self, key: str, default: Any = _MISSING, *, minimum: float | None = None, optional: bool = False
    ) -> Any:
        value, present = self._get(key, default)
        if not present or (optional and value is None):
            return value
        ok = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and abs(value) < MAX_INTEGER  # a huge int does not convert to a float
            and math.isfinite(value)
        )
        if not ok or (minimum is not None and value < minimum):
            expected = "a finite number" + (f" >= {minimum:g}" if minimum is not None else "")
            raise self.fail(key, expected + (" or null" if optional else ""), value)
        return float(value)

    def boolean(self, key: str, default: Any = _MISSING) -> Any:
        value, present = self._get(key, default)
        if present and not isinstance(value, bool):
            raise self.fail(key, "true or false", value)
        return value

    def choice(self, key: str, enum_type: type[_E], default: Any = _MISSING) -> _E:
        value, _ = self._get(key, default)
        if isinstance(value, enum_type):
            return value
        try:
            return enum_type(value)
        except (ValueError, TypeError):
            allowed = ", ".join(repr(m.value) for m in enum_type)
            raise self.fail(key, f"one of {allowed}", value) from None

    def obj(self, key: str, default: Any = _MISSING) -> Fields:
        return Fields(self._get(key, default)[0], self.source, self.path(key))

    def seconds_by_name(self, key: str, default: Any = _MISSING) -> dict[str, float]:
        """A JSON object of name -> finite, non-negative number."""
        inner = self.obj(key, default)
        return {inner.key(name): inner.number(name, minimum=0.0) for name in inner.data}

    def strings(
        self, key: str, default: Any = _MISSING, *, limit: int | None = None, max_items: int | None = None
    ) -> list[str]:
        """A JSON array of strings (at most ``max_items`` of them, each of at most ``limit``
        characters, when given)."""
        value, present = self._get(key, default)
        if present and not (
            isinstance(value, list)
            and all(isinstance(v, str) and _is_unicode(v) for v in value)
            and (max_items is None or len(value) <= max_items)
            and (limit is None or all(len(v) <= limit for v in value))
        ):
            bounds = [f"at most {max_items:,} of them"] if max_items is not None else []
            bounds += [f"each of at most {limit:,} characters"] if limit is not None else []
            raise self.fail(key, "a list of strings" + (f" ({', '.join(bounds)})" if bounds else ""), value)
        return list(value)

    def items(self, key: str) -> list[Fields]:
        """A JSON array of objects."""
        value, _ = self._get(key, _MISSING)
        if not isinstance(value, list):
            raise self.fail(key, "a list", value)
        return [Fields(item, self.source, f"{self.path(key)}[{i}]") for i, item in enumerate(value)]


def _is_unicode(text: str) -> bool:
    """False for a string JSON can carry but no file or terminal can: a lone surrogate
    (``"\\ud800"``), which fails the moment it is printed or written."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _describe(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= MAX_INTEGER:
        return f"an integer of {len(str(abs(value)))} digits"
    text = (
        json.dumps(value) if isinstance(value, (str, int, float, bool, type(None))) else type(value).__name__
    )
    return text if len(text) <= 60 else text[:57] + "..."
