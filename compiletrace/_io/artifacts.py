"""Reading torch's cache-artifacts files without running any of them, and the digest
that ``cache save`` writes beside them.

A cache-artifacts file (the bytes ``torch.compiler.save_cache_artifacts()`` returns) is a
binary container: a CRC32, a format version, then per kind ("inductor", "aot_autograd",
...) a list of (key, content) entries. The container is plain data. The *contents* are
pickles, which torch unpickles (some while it loads the file, the rest when a compile
looks the entry up), and unpickling can run any code the pickle names.

So this module reads the container byte by byte, and the pickles with
:class:`RestrictedUnpickler`: every global a pickle names must be on the caller's
allowlist (anything else is refused with :class:`RunFileError`), and even an admitted
global resolves to an inert stand-in, so reading a file runs nothing from it, not even
torch's own classes. It imports the standard library only.

>>> data = pack_container({"autotune": [("ab/cd.best_config", b'{"x": 1}')]})
>>> [(a.kind, a.key, a.content) for a in parse_container(data, "demo.cache")]
[('autotune', 'ab/cd.best_config', b'{"x": 1}')]
"""

from __future__ import annotations

import ast
import base64
import binascii
import collections
import hashlib
import io
import math
import os
import pickle
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from compiletrace._io.errors import RunFileError
from compiletrace._io.files import write_text
from compiletrace._io.text import printable  # re-exported: one escape for every view

__all__ = [
    "ANY_GLOBAL",
    "DIGEST_SUFFIX",
    "FORMAT_VERSION",
    "MAX_BUILT_KEYS",
    "MAX_GUARD_BITS",
    "MAX_KEY_DEPTH",
    "MAX_KEY_PARTS",
    "MAX_PICKLE_GLOBALS",
    "MAX_PICKLE_OPS",
    "Digest",
    "Global",
    "PickleBudget",
    "PickleScan",
    "PickleTooLarge",
    "RawArtifact",
    "RestrictedUnpickler",
    "digest_path",
    "expression_problem",
    "pack_container",
    "parse_container",
    "printable",
    "read_digest",
    "read_pickle",
    "sha256_hex",
    "standin_fields",
    "standin_global",
    "standin_shape_problem",
    "walk",
    "write_digest",
]

Global = tuple[str, str]  # (module, qualified name), as a pickle names a class or function

FORMAT_VERSION = 1  # torch.utils._appending_byte_serializer's _ENCODING_VERSION (torch 2.7 to 2.13)
_CRC_SIZE = 4
_U64 = 8
_MAX_NESTED_DEPTH = 4  # a pickle inside a pickle inside ...: torch's artifacts have none


# -- the container -------------------------------------------------------------------------


@dataclass(frozen=True)
class RawArtifact:
    """One entry of the container: its kind, its key (torch names its cache files after
    it) and its content (a pickle, or JSON for autotune entries)."""

    kind: str
    key: str
    content: bytes = field(repr=False)


class _Reader:
    """Bounds-checked reads (torch's own reader slices past the end without noticing)."""

    def __init__(self, data: bytes, source: str) -> None:
        self.data = data
        self.pos = _CRC_SIZE
        self.source = source

    def done(self) -> bool:
        return self.pos == len(self.data)

    def left(self) -> int:
        return len(self.data) - self.pos

    def _bad(self, what: str) -> RunFileError:
        return RunFileError(f"{self.source} is not a torch cache-artifacts file ({what} at byte {self.pos})")

    def u64(self, what: str) -> int:
        if self.left() < _U64:
            raise self._bad(f"truncated {what}")
        value = int.from_bytes(self.data[self.pos : self.pos + _U64], "big")
        self.pos += _U64
        return value

    def raw(self, what: str) -> bytes:
        size = self.u64(f"{what} length")
        if size > self.left():
            raise self._bad(f"{what} of {size} bytes runs past the end")
        value = self.data[self.pos : self.pos + size]
        self.pos += size
        return value

    def text(self, what: str) -> str:
        raw = self.raw(what)
        try:
            # Decoded exactly as torch decodes it, so the key checked is the key torch uses.
            return base64.b64decode(raw).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise self._bad(f"{what} that is not base64 UTF-8 text") from None


def parse_container(data: bytes, source: str) -> list[RawArtifact]:
    """Every entry of a cache-artifacts file, in file order; parsing runs nothing.

    Raises :class:`RunFileError` naming ``source`` for anything that is not exactly the
    container torch writes: a bad checksum, another format version, a truncated entry.

    >>> parse_container(b"not an artifact file", "junk.cache")
    Traceback (most recent call last):
      ...
    compiletrace._io.errors.RunFileError: junk.cache is not a torch cache-artifacts file (its checksum ...
    """
    if len(data) < _CRC_SIZE + _U64:
        raise RunFileError(f"{source} is not a torch cache-artifacts file (only {len(data)} bytes)")
    crc = binascii.crc32(data[_CRC_SIZE:]).to_bytes(_CRC_SIZE, "big")
    if data[:_CRC_SIZE] != crc:
        raise RunFileError(
            f"{source} is not a torch cache-artifacts file (its checksum does not match: "
            "damaged, or some other file)"
        )
    reader = _Reader(data, source)
    version = reader.u64("format version")
    if version != FORMAT_VERSION:
        raise RunFileError(
            f"{source} is in cache-artifacts format version {version}; "
            f"this compiletrace reads version {FORMAT_VERSION}"
        )
    artifacts: list[RawArtifact] = []
    while not reader.done():
        kind = reader.text("artifact kind")
        shown = printable(kind)
        count = reader.u64("artifact count")
        if count * 2 * _U64 > reader.left():  # every entry takes two lengths at least
            raise reader._bad(f"count of {count} {shown} artifacts that cannot fit")
        for _ in range(count):
            key = reader.text(f"{shown} key")
            artifacts.append(RawArtifact(kind, key, reader.raw(f"{shown} content")))
    return artifacts


def pack_container(sections: Mapping[str, Sequence[tuple[str, bytes]]]) -> bytes:
    """The container torch writes for ``{kind: [(key, content), ...]}`` (tests and tools).

    >>> len(pack_container({}))
    12
    """
    body = bytearray(FORMAT_VERSION.to_bytes(_U64, "big"))

    def put(raw: bytes) -> None:
        body.extend(len(raw).to_bytes(_U64, "big"))
        body.extend(raw)

    for kind, entries in sections.items():
        put(base64.b64encode(kind.encode("utf-8")))
        body.extend(len(entries).to_bytes(_U64, "big"))
        for key, content in entries:
            put(base64.b64encode(key.encode("utf-8")))
            put(content)
    return binascii.crc32(body).to_bytes(_CRC_SIZE, "big") + bytes(body)


# -- the restricted reader -----------------------------------------------------------------


class _Inert:
    """Stands in for an admitted global: takes any arguments and any state, runs nothing,
    and keeps them for the caller to look at."""

    ct_global: ClassVar[Global] = ("", "")
    ct_args: tuple[Any, ...]
    ct_kwargs: dict[str, Any]
    ct_states: list[Any]  # every BUILD, in order: unpickling applies them all, not just the last
    ct_items: list[Any]

    def __new__(cls, *args: Any, **kwargs: Any) -> _Inert:
        inst = object.__new__(cls)
        inst.ct_args = args
        inst.ct_kwargs = kwargs
        inst.ct_states = []
        inst.ct_items = []
        return inst

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass  # __new__ kept the arguments

    # What the unpickler may call on an object it built (BUILD, APPENDS, SETITEMS, ADDITEMS).
    def __setstate__(self, state: Any) -> None:
        self.ct_states.append(state)

    def append(self, item: Any) -> None:
        self.ct_items.append(item)

    def extend(self, items: Any) -> None:
        self.ct_items.extend(items)

    def add(self, item: Any) -> None:
        self.ct_items.append(item)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.ct_items.append((key, value))

    def __repr__(self) -> str:
        module, name = self.ct_global
        return f"<{module}.{name}>"


class _EveryGlobal(Collection[Global]):
    """An allowlist that admits every global, each still an inert stand-in: for reading
    what a pickle says (a cache entry's stored key parts), never for handing it to torch."""

    def __contains__(self, item: object) -> bool:
        return True

    def __iter__(self) -> Iterator[Global]:
        return iter(())

    def __len__(self) -> int:
        return 0


ANY_GLOBAL: Collection[Global] = _EveryGlobal()


# What one unpickling may do. The bytes read are capped by each reader, but not what they
# build: a one-byte opcode makes a new empty set (216 bytes), so 4 MiB of them built about
# 1 GB. Every opcode builds at most one object of a bounded size (or a string no longer than
# its own bytes), so counting opcodes bounds the memory: stopped at this many (a pickle and
# the pickles nested in it together), 4 MiB of empty sets took 249 MiB of memory at most
# where it took 966 MiB unbounded. Torch's own entries run far fewer: 1,600 to 4,300 for
# the built-in model's FX-graph and AOTAutograd entries.
MAX_PICKLE_OPS = 1_000_000
# A global becomes a stand-in class, about 2.3 KB where an opcode's object is 216 bytes at
# most: a million distinct ones (protocol 0 names one in ten bytes) took 2.3 GB. Torch's
# entries name at most 30.
MAX_PICKLE_GLOBALS = 1_000
# What hashing a key costs. A string, bytes, a number or a stand-in hashes in one step, and
# no two of them that differ share a hash unless the values are far out of int64's range.
# A tuple (or a frozenset) hashes every part, recursively in C where neither Ctrl-C nor a
# signal acts: one nested 300,000 deep overflows the C stack, 100 aliased pairs make 2**100
# parts; and a crafted file can give many tuples one hash, which makes a dict of them
# quadratic. So a key built of parts may nest so deep and hold so many parts (each alias
# counted again), and one unpickling may hash so many of them. Torch's entries key their
# dicts by names and small ints only, and their largest tuple has 7 parts, 2 deep.
MAX_KEY_DEPTH = 16
MAX_KEY_PARTS = 256
MAX_BUILT_KEYS = 256
_INT_KEY_BITS = 64  # an int of at most this many bits shares its hash with 18 others at most
_FLAT_KEYS = (str, bytes, bool, float, type(None))  # hashed once, in one step (str, bytes: cached)


class PickleBudget:
    """What one unpickling has left (opcodes, keys built of parts) and the stand-in classes
    it made: shared by a pickle and those nested in it."""

    def __init__(self, ops: int | None = None) -> None:
        self.limit = MAX_PICKLE_OPS if ops is None else ops
        self.left = self.limit
        self.built_keys = MAX_BUILT_KEYS
        self.max_globals = MAX_PICKLE_GLOBALS
        self.standins: dict[Global, type[_Inert]] = {}


class PickleTooLarge(RunFileError):
    """A pickle that would build (or hash) more than its budget allows: read no further."""


def _stopped(where: str, what: str) -> PickleTooLarge:
    return PickleTooLarge(f"{where} {what}; compiletrace stopped reading it there")


def _key_problem(key: Any) -> str | None:
    """Why hashing ``key`` could cost more than a few steps, or None. Walks a tuple or a
    frozenset iteratively, each alias counted again, so that the walk stops where the
    recursion in C would not."""
    todo = [(key, 1)]
    parts = 1
    while todo:
        value, depth = todo.pop()
        if type(value) not in (tuple, frozenset):
            continue  # a leaf: hashed in one step, or not hashable at all (refused by Python)
        if depth > MAX_KEY_DEPTH:
            return f"nested more than {MAX_KEY_DEPTH} deep"
        parts += len(value)
        if parts > MAX_KEY_PARTS:
            return f"of more than {MAX_KEY_PARTS} parts, each alias counted again"
        todo.extend((part, depth + 1) for part in value)
    return None


def _hashed_keys(code: int) -> Callable[[RestrictedUnpickler], Sequence[Any]] | None:
    """The values opcode ``code`` hashes, read off the stack before it runs: dict keys and
    set members. A stand-in dict's or set's too: torch's own class hashes them when it
    loads the file."""
    if code in (pickle.DICT[0], pickle.SETITEMS[0]):
        return lambda u: u.stack[0::2]  # k1, v1, k2, v2, ... since the mark
    if code == pickle.SETITEM[0]:
        return lambda u: u.stack[-2:-1]  # ..., target, key, value
    if code in (pickle.ADDITEMS[0], pickle.FROZENSET[0]):
        return lambda u: u.stack  # the members, since the mark
    return None


def _counted(code: int, op: Callable[[Any], None]) -> Callable[[Any], None]:
    keys_of = _hashed_keys(code)

    def run(self: RestrictedUnpickler) -> None:
        budget = self.budget
        budget.left -= 1
        if budget.left < 0:
            raise _stopped(
                self.where,
                f"would build more than {budget.limit:,} objects when unpickled (a cache "
                "entry of torch's builds far fewer)",
            )
        if keys_of is not None:
            for key in keys_of(self):
                self.check_key(key)
        op(self)

    return run


class RestrictedUnpickler(pickle._Unpickler):
    """Reads a pickle without running it: a global on ``allowed`` becomes an inert
    stand-in (a subclass of ``_Inert`` that records its arguments and state); any other
    global, and any persistent id, raises :class:`RunFileError` naming ``where`` and the
    global. ``reasons`` gives a clearer message for globals refused on purpose. At most
    ``budget`` opcodes run (:data:`MAX_PICKLE_OPS`), at most :data:`MAX_PICKLE_GLOBALS`
    distinct globals are named, and every dict key and set member hashes in bounded work
    (:data:`MAX_KEY_DEPTH`, :data:`MAX_KEY_PARTS`, :data:`MAX_BUILT_KEYS`): past any of
    them, :class:`PickleTooLarge`, before the costly step is taken.

    It is Python's own unpickler, each opcode counted on its way (the C one cannot be
    stopped part-way): slower per opcode, and torch's entries are mostly long strings.

    >>> import pickle
    >>> RestrictedUnpickler(pickle.dumps(print), set(), "x.cache").load()
    Traceback (most recent call last):
      ...
    compiletrace._io.errors.RunFileError: x.cache refers to builtins.print, which is not ...
    >>> RestrictedUnpickler(pickle.dumps([set()] * 3), set(), "x", budget=PickleBudget(4)).load()
    Traceback (most recent call last):
      ...
    compiletrace._io.artifacts.PickleTooLarge: x would build more than 4 objects when unpickled ...
    >>> key = ()
    >>> for _ in range(20):
    ...     key = (key,)
    >>> RestrictedUnpickler(pickle.dumps({key: 1}), set(), "x").load()
    Traceback (most recent call last):
      ...
    compiletrace._io.artifacts.PickleTooLarge: x keys a dict or set by a tuple nested more than 16 deep ...
    """

    dispatch = {code: _counted(code, op) for code, op in pickle._Unpickler.dispatch.items()}
    stack: list[Any]  # the unpickler's own, since the last mark

    def __init__(
        self,
        data: bytes,
        allowed: Collection[Global],
        where: str,
        reasons: Mapping[Global, str] | None = None,
        *,
        budget: PickleBudget | None = None,
    ) -> None:
        super().__init__(io.BytesIO(data))
        self.where = where
        self.allowed = allowed
        self.reasons = reasons or {}
        self.budget = budget or PickleBudget()
        self.seen: collections.Counter[Global] = collections.Counter()

    def check_key(self, key: Any) -> None:
        """Refuse a dict key or set member whose hash could cost more than a few steps."""
        kind = type(key)
        if kind in _FLAT_KEYS or isinstance(key, (_Inert, type)):  # stand-ins hash by identity
            return
        if kind is int and key.bit_length() <= _INT_KEY_BITS:
            return
        problem = _key_problem(key)
        if problem is not None:  # only a tuple or a frozenset has parts
            raise _stopped(
                self.where,
                f"keys a dict or set by a {kind.__name__} {problem} (torch's entries key theirs by "
                "names and numbers)",
            )
        self.budget.built_keys -= 1
        if self.budget.built_keys < 0:
            raise _stopped(
                self.where,
                f"keys dicts or sets by more than {MAX_BUILT_KEYS} values built of parts or ints "
                "beyond 64 bits (torch's entries key theirs by names and small numbers)",
            )

    def find_class(self, module: str, name: str) -> Any:
        # Never imports or looks anything up: the answer is a stand-in or a refusal.
        ref = (module, name)
        if ref not in self.allowed:
            why = self.reasons.get(ref, "which is not one of the classes torch's cache artifacts are made of")
            raise RunFileError(
                f"{self.where} refers to {module}.{name}, {why}; unpickling it could run code "
                "from the file, so compiletrace will not load it (--trust loads it anyway)"
            )
        standins = self.budget.standins
        standin = standins.get(ref)
        if standin is None:
            if len(standins) >= self.budget.max_globals:
                raise _stopped(
                    self.where,
                    f"names more than {self.budget.max_globals:,} distinct classes and functions "
                    "(a cache entry of torch's names a few dozen)",
                )
            standin = type(name.rpartition(".")[2] or "standin", (_Inert,), {"ct_global": ref})
            standins[ref] = standin
        self.seen[ref] += 1
        return standin

    def persistent_load(self, pid: Any) -> Any:
        raise RunFileError(f"{self.where} holds a persistent reference, which cache artifacts never do")


@dataclass(frozen=True)
class PickleScan:
    """What :func:`read_pickle` found: the object tree (stand-ins for admitted globals),
    how often each global was named, and the roots of every pickle read (this one first,
    then the ones nested inside it), so a check can walk them all."""

    root: Any
    globals: collections.Counter[Global]
    roots: tuple[Any, ...] = ()


def _looks_like_pickle(value: bytes | bytearray) -> bool:
    return len(value) >= 2 and value[0] == pickle.PROTO[0] and 2 <= value[1] <= pickle.HIGHEST_PROTOCOL


def read_pickle(
    data: bytes,
    allowed: Collection[Global],
    where: str,
    reasons: Mapping[Global, str] | None = None,
    *,
    budget: PickleBudget | None = None,
    _depth: int = 0,
) -> PickleScan:
    """Read ``data`` with :class:`RestrictedUnpickler`, then every pickle found in a bytes
    value inside it the same way. Runs nothing; raises :class:`RunFileError` for a refused
    global or a pickle that cannot be read.

    >>> import collections, pickle
    >>> scan = read_pickle(pickle.dumps(collections.Counter("aab")), {("collections", "Counter")}, "x")
    >>> scan.globals
    Counter({('collections', 'Counter'): 1})
    """
    budget = budget or PickleBudget()
    reader = RestrictedUnpickler(data, allowed, where, reasons, budget=budget)
    try:
        root = reader.load()
    except RunFileError:
        raise
    except MemoryError:
        raise RunFileError(f"{where} needs more memory to unpickle than this machine gave it") from None
    except Exception as exc:  # malformed or hostile bytes: whatever the unpickler raised
        raise RunFileError(f"{where} is not a readable pickle ({type(exc).__name__}: {exc})") from None
    found = collections.Counter(reader.seen)
    roots = [root]
    for value in walk(root):
        if isinstance(value, (bytes, bytearray)) and _looks_like_pickle(value):
            if _depth >= _MAX_NESTED_DEPTH:
                raise RunFileError(f"{where} nests pickles more than {_MAX_NESTED_DEPTH} deep")
            inner = read_pickle(
                bytes(value),
                allowed,
                f"{where} (a pickle inside it)",
                reasons,
                budget=budget,
                _depth=_depth + 1,
            )
            found.update(inner.globals)
            roots.extend(inner.roots)
    return PickleScan(root, found, tuple(roots))


def walk(root: Any) -> Iterator[Any]:
    """Every object reachable from ``root`` through containers and stand-ins (arguments,
    state, items), each once; iterative, so a deep or cyclic tree is fine."""
    seen: set[int] = set()
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        yield obj
        if isinstance(obj, dict):
            todo.extend(obj.keys())
            todo.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            todo.extend(obj)
        elif isinstance(obj, _Inert):
            todo.extend((obj.ct_args, obj.ct_kwargs, obj.ct_states, obj.ct_items))


def standin_fields(obj: Any) -> dict[str, Any]:
    """The attributes a stand-in would have had once unpickled: its keyword arguments, then
    every BUILD state (a dict, or a ``(dict, slots)`` pair) applied in order, as pickle
    applies them. Keys that are not strings are kept as they are (a shape check refuses
    them).
    """
    if not isinstance(obj, _Inert):
        return {}
    fields: dict[Any, Any] = dict(obj.ct_kwargs)
    for state in obj.ct_states:
        parts = state if isinstance(state, tuple) else (state,)
        for part in parts:
            if isinstance(part, dict):
                fields.update(part)
    return fields


def standin_shape_problem(obj: Any) -> str | None:
    """What about a stand-in's BUILD states no ``pickle.dumps`` of a real object writes:
    more than one BUILD (a later one can overwrite what a check read in an earlier one), a
    state that is not a dict or a ``(dict, dict)`` pair, or an attribute name that is not a
    string. None when the shape is one pickle writes.
    """
    if not isinstance(obj, _Inert):
        return None
    if len(obj.ct_states) > 1:
        return f"is built {len(obj.ct_states)} times (pickle builds an object once)"
    for state in obj.ct_states:
        parts = state if isinstance(state, tuple) else (state,)
        if isinstance(state, tuple) and len(state) != 2:
            return "has a state tuple that is not a (dict, slots) pair"
        for part in parts:
            if part is None and isinstance(state, tuple):
                continue
            if not isinstance(part, dict):
                return f"has a state that is a {type(part).__name__}, not the attribute dict pickle writes"
            if not all(isinstance(k, str) for k in part):
                return "has an attribute name that is not a string"
    return None


def standin_global(obj: Any) -> Global | None:
    """The global a stand-in instance stands for (None for anything else)."""
    return obj.ct_global if isinstance(obj, _Inert) else None


# -- expressions torch evaluates ---------------------------------------------------------------

_MAX_EXPRESSION_CHARS = 100_000
_EXPRESSION_NODES = (
    ast.Expression,
    ast.BoolOp, ast.And, ast.Or,
    ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
    ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.LShift, ast.Pow,
    ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
    ast.IfExp,
    ast.Load,
)  # fmt: skip


def expression_problem(
    text: str,
    *,
    arguments: re.Pattern[str],
    calls: Collection[str],
    constants: Collection[str] = (),
) -> str | None:
    """Why ``text`` is not an expression of the shape torch writes for the shape guards it
    later ``eval``s, or None when it is.

    Accepted, and nothing else: comparisons, boolean and arithmetic operators, number
    literals, the guard's arguments as ``L['<name>']`` with ``<name>`` matching
    ``arguments``, calls of the dotted names in ``calls`` (positional arguments only), and
    the dotted names in ``constants``. No other name, no attribute, no string, no
    subscript, no keyword: so no path from the expression to a builtin or a module.

    >>> pattern = re.compile(r"t[0-9]+")
    >>> expression_problem("2 <= L['t0'] and L['t0'] <= 4096", arguments=pattern, calls={"max"}) is None
    True
    >>> expression_problem("open('/etc/passwd')", arguments=pattern, calls={"max"})
    "it calls open, not one of the functions torch's guards call"
    >>> expression_problem("__import__('os').system('id')", arguments=pattern, calls={"max"})
    "it calls what an expression returns, not one of the functions torch's guards call"
    """
    if len(text) > _MAX_EXPRESSION_CHARS:
        return f"it is {len(text)} characters long (torch's guards are far shorter)"
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "it is not a Python expression"
    return _expression_node_problem(tree, arguments, frozenset(calls), frozenset(constants)) or (
        _magnitude_problem(tree.body)
    )


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _expression_node_problem(
    root: ast.AST, arguments: re.Pattern[str], calls: frozenset[str], constants: frozenset[str]
) -> str | None:
    todo: list[ast.AST] = [root]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float, bool):
                return f"it holds the literal {node.value!r}, where torch's guards hold numbers only"
            continue
        if isinstance(node, ast.Subscript):  # L['t0']: an argument, and only that
            key = node.slice
            if not (
                isinstance(node.value, ast.Name)
                and node.value.id == "L"
                and isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and arguments.fullmatch(key.value)
            ):
                return "it subscripts something other than one of the guard's arguments L['...']"
            continue
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name is None or name not in calls:
                shown = name or "what an expression returns"
                return f"it calls {shown}, not one of the functions torch's guards call"
            if node.keywords:
                return f"it passes keywords to {name}"
            todo.extend(node.args)
            continue
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = _dotted(node)
            if name is None or name not in constants:
                return f"it names {name or 'an attribute'}, which torch's guards never do"
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.LShift, ast.Pow)):
            # torch writes (-1 << 63) for the smallest int64; a huge shift or power hangs eval.
            shift = node.right
            if not (isinstance(shift, ast.Constant) and type(shift.value) is int and 0 <= shift.value <= 64):
                return "it shifts or raises to something other than a small constant"
        if not isinstance(node, _EXPRESSION_NODES):
            return f"it uses {type(node).__name__}, which torch's guards never do"
        todo.extend(ast.iter_child_nodes(node))
    return None


# How large a number a guard may compute: each operator's own operand is checked above (a
# power or a shift of at most 64), but powers of powers grow without it: six nested ``**64``
# of 10**64 make a number of 2**36 bits, which torch would spend 27 GiB evaluating. Torch's
# guards compare sizes (int64): a product of a few, a float's floor (1,024 bits at most).
MAX_GUARD_BITS = 8192
_ARGUMENT_BITS = 64  # L['tN'] is a size or an int input: int64
_FLOAT_BITS = 1024  # a finite float is below 2**1024, so is an int made of one
_TO_INT = frozenset({"math.floor", "math.ceil", "math.trunc", "round"})
_SAME_KIND = frozenset({"abs", "max", "min"})
_TRUTH = frozenset({"IsNonOverlappingAndDenseIndicator", "cast_symbool_to_symint_guardless"})


@dataclass(frozen=True)
class _Magnitude:
    """At most how many bits an expression's value has, were it an int (log2 of a bound on
    its magnitude), and whether it can be an int at all (a float costs the same to compute
    however large)."""

    bits: float
    kind: str  # "int", "float", or "any" (an argument: torch passes ints, and floats)


def _merged(values: Sequence[_Magnitude]) -> _Magnitude:
    kinds = {v.kind for v in values}
    return _Magnitude(max((v.bits for v in values), default=1), kinds.pop() if len(kinds) == 1 else "any")


def _operator_magnitude(node: ast.BinOp, left: _Magnitude, right: _Magnitude) -> _Magnitude:
    op = node.op
    if isinstance(op, ast.Div):
        return _Magnitude(_FLOAT_BITS, "float")
    kind = "float" if "float" in (left.kind, right.kind) else _merged((left, right)).kind
    constant: Any = node.right.value if isinstance(node.right, ast.Constant) else 0
    if isinstance(op, ast.Pow):
        bits = left.bits * max(int(constant), 1)  # checked above: a constant int, 0 to 64
    elif isinstance(op, ast.LShift):
        bits = left.bits + int(constant)
    elif isinstance(op, ast.Mult):
        bits = left.bits + right.bits
    elif isinstance(op, ast.FloorDiv):
        bits = left.bits  # |a // b| <= |a| for ints; a float's is a float
    elif isinstance(op, ast.Mod):
        bits = right.bits  # |a % b| < |b|
    else:  # Add, Sub: log2(2**a + 2**b), so a sum of n terms grows by log2(n), not n
        bits = max(left.bits, right.bits) + math.log2(1 + 2 ** -abs(left.bits - right.bits))
    return _Magnitude(min(bits, _FLOAT_BITS) if kind == "float" else bits, kind)


def _call_magnitude(name: str, args: Sequence[_Magnitude]) -> _Magnitude:
    if name in _TRUTH:
        return _Magnitude(1, "int")
    if name in _SAME_KIND:
        return _merged(args)
    if name in _TO_INT and len(args) == 1:
        (arg,) = args
        return _Magnitude(max(arg.bits, 0 if arg.kind == "int" else _FLOAT_BITS), "int")
    if name == "round" and len(args) == 2:  # round(x, -n) computes 10**n on the way
        x, digits = args
        ten_to_the_n = math.log2(10) * 2 ** min(digits.bits, 64)
        return _Magnitude(max(x.bits, ten_to_the_n) + 1, x.kind)
    return _Magnitude(_FLOAT_BITS, "float")  # math.cos, torch.sym_float, ...: floats


def _operands(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.BoolOp):
        return list(node.values)
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    if isinstance(node, ast.IfExp):
        return [node.test, node.body, node.orelse]
    if isinstance(node, ast.Call):
        return list(node.args)
    return []  # a number, an argument, a constant name


def _magnitude(node: ast.AST, operands: list[_Magnitude]) -> _Magnitude:
    if isinstance(node, ast.Constant):
        value: Any = node.value  # an int, a float or a bool (checked above)
        finite = value == value and abs(value) != math.inf
        bits = math.log2(abs(value)) if finite and abs(value) >= 1 else 0.0
        return _Magnitude(bits, "float" if isinstance(value, float) else "int")
    if isinstance(node, ast.Subscript):
        return _Magnitude(_ARGUMENT_BITS, "any")
    if isinstance(node, ast.BinOp):
        return _operator_magnitude(node, operands[0], operands[1])
    if isinstance(node, ast.UnaryOp):
        return _Magnitude(1, "int") if isinstance(node.op, ast.Not) else operands[0]
    if isinstance(node, ast.BoolOp):
        return _merged(operands)
    if isinstance(node, ast.IfExp):
        return _merged(operands[1:])
    if isinstance(node, ast.Call):
        return _call_magnitude(_dotted(node.func) or "", operands)
    if isinstance(node, ast.Compare):
        return _Magnitude(1, "int")
    return _Magnitude(1, "float")  # math.inf, math.nan


def _magnitude_problem(root: ast.expr) -> str | None:
    """Whether some part of an expression of the admitted shape (see
    :func:`expression_problem`) could compute an int of more than :data:`MAX_GUARD_BITS`
    bits: an upper bound for every node, operands first, without evaluating anything."""
    found: dict[int, _Magnitude] = {}
    todo: list[tuple[ast.AST, bool]] = [(root, False)]
    while todo:  # iterative: an expression may nest deeper than Python's recursion limit
        node, ready = todo.pop()
        operands = _operands(node)
        if not ready:
            todo.append((node, True))
            todo.extend((operand, False) for operand in operands)
            continue
        magnitude = _magnitude(node, [found[id(operand)] for operand in operands])
        if magnitude.bits > MAX_GUARD_BITS:
            return (
                f"it computes a number of up to {math.ceil(magnitude.bits):,} bits, more than "
                f"{MAX_GUARD_BITS:,} (torch's guards compare sizes of 64 bits)"
            )
        found[id(node)] = magnitude
    return None


# -- the digest beside the file --------------------------------------------------------------

DIGEST_SUFFIX = ".sha256"
_DIGEST_LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")
_META_LINE = re.compile(r"^# (torch|compiletrace) (\S+)$")
_SIGNATURE_LINE = re.compile(r"^# hmac-sha256 ([0-9a-f]{64}) key ([0-9a-f]{16})$")


@dataclass(frozen=True)
class Digest:
    """The sidecar ``PATH.sha256``: the SHA-256 of the artifacts file, and the torch and
    compiletrace versions that saved it."""

    sha256: str
    torch_version: str | None = None
    compiletrace_version: str | None = None
    signature: str | None = None  # HMAC-SHA256 of the file under the saver's key, in hex
    key_id: str | None = None  # which key made it (compiletrace._io.signing.SigningKey.key_id)


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data`` in hex, as ``sha256sum`` prints it.

    >>> sha256_hex(b"")[:16]
    'e3b0c44298fc1c14'
    """
    return hashlib.sha256(data).hexdigest()


def digest_path(path: str | os.PathLike[str]) -> Path:
    """Where the digest of ``path`` lives: beside it, with ``.sha256`` added.

    >>> digest_path("out/demo.cache").as_posix()
    'out/demo.cache.sha256'
    """
    p = Path(path)
    return p.with_name(p.name + DIGEST_SUFFIX)


def write_digest(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    torch_version: str,
    compiletrace_version: str,
    signature: tuple[str, str] | None = None,
) -> Path:
    """Write ``PATH.sha256`` for the artifacts ``data`` saved at ``path`` (atomically),
    in the format ``sha256sum -c`` reads (its ``#`` lines are comments). ``signature`` is
    ``(hmac_hex, key_id)``, written as one more comment line. Returns its path.

    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "x.cache")
    >>> print(write_digest(p, b"", torch_version="2.13.0", compiletrace_version="0.1.0").read_text(), end="")
    # compiletrace cache artifacts; check with: sha256sum -c x.cache.sha256
    # torch 2.13.0
    # compiletrace 0.1.0
    e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  x.cache
    """
    target = digest_path(path)
    name = Path(path).name
    text = (
        f"# compiletrace cache artifacts; check with: sha256sum -c {target.name}\n"
        f"# torch {torch_version}\n"
        f"# compiletrace {compiletrace_version}\n"
        + ("" if signature is None else f"# hmac-sha256 {signature[0]} key {signature[1]}\n")
        + f"{sha256_hex(data)}  {name}\n"
    )
    write_text(target, text)
    return target


def read_digest(path: str | os.PathLike[str]) -> Digest | None:
    """The digest beside ``path``, or None when there is none. Raises
    :class:`RunFileError` for one that cannot be read or is not in the format
    :func:`write_digest` writes."""
    target = digest_path(path)
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(f"cannot read the digest {str(target)!r}: {exc}") from None
    versions: dict[str, str] = {}  # "# torch X" and "# compiletrace Y" lines: who saved it
    digests: list[str] = []
    signatures: list[tuple[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            m = _META_LINE.match(line)
            if m:
                versions[m.group(1)] = m.group(2)
            s = _SIGNATURE_LINE.match(line)
            if s:
                signatures.append((s.group(1), s.group(2)))
            continue
        m = _DIGEST_LINE.match(line)
        if m is None:
            raise RunFileError(f"{target} is not a digest file: {line[:60]!r} is not '<sha256>  <name>'")
        digests.append(m.group(1))
    if len(digests) != 1:
        raise RunFileError(f"{target} must hold exactly one SHA-256 line, found {len(digests)}")
    if len(signatures) > 1:
        raise RunFileError(f"{target} holds {len(signatures)} signatures; 'cache save' writes one")
    signature, key_id = signatures[0] if signatures else (None, None)
    return Digest(digests[0], versions.get("torch"), versions.get("compiletrace"), signature, key_id)
