"""How a run was made, as typed data: :class:`RunMeta` (what ran, where, with which torch,
what it measured beside its compiles, and who recorded it), saved as a run file's ``meta``.

Every writer builds a ``RunMeta``; every reader reads its attributes. A file's meta is read
field by field (:meth:`RunMeta.from_dict`): each known field is checked for its type, its
range and its length, and the first bad one raises :class:`~compiletrace.RunFileError`
naming it. Keys this compiletrace does not know (a user's own, another program's) are kept
in :attr:`RunMeta.extra`, bounded, and written back on save; nothing reads them.

A field is ``None`` where the run did not record it (a run of ``compiletrace run`` has no
MODEL spec; a profile run has no process), and is then left out of the file.

>>> meta = RunMeta(model="pkg.mod:build", backend="eager", steady_calls=20, steady_call_s=0.002)
>>> meta.to_dict()
{'model': 'pkg.mod:build', 'backend': 'eager', 'steady_call_s': 0.002, 'steady_calls': 20}
>>> RunMeta.from_dict(meta.to_dict()) == meta
True
>>> RunMeta.from_dict({"model": "m", "steady_calls": 0}, "run.json")
Traceback (most recent call last):
  ...
compiletrace._io.errors.RunFileError: run.json: field 'steady_calls' must be an integer >= 1 or null, got 0

Callers that read a run's meta as a dict before it was typed still can (``run.meta["model"]``,
``run.meta["trace"]["missing"]``): a ``RunMeta`` reads as the mapping :meth:`to_dict` gives.

To add a field: declare it on :class:`RunMeta` (``None`` by default, a comment saying what
it holds), read it in :meth:`RunMeta.from_dict` with its checks (type, range, length), set
it in the writer that records it, and add the run file's next version to
:data:`compiletrace._data.kinds.VERSIONS` (a field added is a new version). Files of the
versions before it lack the field and read as ``None``: no branch is needed.
"""

from __future__ import annotations

import enum
import json
import os
import socket
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from compiletrace._data.cache_keys import RunCacheKeys
from compiletrace._data.ready import ReadyMark
from compiletrace._io.envelope import Fields
from compiletrace._io.errors import ArgumentTypeError, RunFileError, UsageError
from compiletrace._io.text import clip, printable

__all__ = [
    "MAX_ARGS",
    "MAX_ARG_CHARS",
    "MAX_EXTRA_BYTES",
    "MAX_EXTRA_KEYS",
    "MAX_NAMES",
    "MAX_NODE_CHARS",
    "MAX_TEXT_CHARS",
    "CompilationMode",
    "LoadedArtifacts",
    "ProcessInfo",
    "RunMeta",
    "TraceInfo",
    "is_node_name",
    "node_of",
]

# What a meta field may hold, read from a file. Each is far above what a writer records (a
# writer that could exceed one clips first), and keeps a crafted file's text off a terminal.
MAX_TEXT_CHARS = 1 << 16  # a name, a version, a path, a model spec, a command line
MAX_ARG_CHARS = 1 << 17  # one argument of a command line (Linux's own limit, MAX_ARG_STRLEN)
MAX_ARGS = 1 << 16  # arguments of a command line
MAX_NAMES = 1 << 12  # entries of a name -> value table (components, skipped record kinds)
MAX_EXTRA_KEYS = 64  # keys this compiletrace does not know, kept
MAX_EXTRA_BYTES = 1 << 16  # one such key's value, as JSON


class CompilationMode(enum.Enum):
    """Whether an application compiles at all; one setting switches eager vs compiled."""

    NONE = "none"  # no torch.compile: the model runs eagerly, warm-up is skipped
    STOCK_TORCH_COMPILE = "stock"  # torch.compile through compiletrace's backend

    @classmethod
    def parse(cls, value: CompilationMode | str) -> CompilationMode:
        """Accept a member or its value ("none", "stock")."""
        if isinstance(value, cls):
            return value
        valid = ", ".join(f"CompilationMode.{m.name}" for m in cls)
        if not isinstance(value, str):
            raise ArgumentTypeError(
                f"compilation mode must be a CompilationMode ({valid}), got {type(value).__name__}"
            )
        for member in cls:
            if value.lower() in (member.value, member.name.lower()):
                return member
        raise UsageError(f"unknown compilation mode {value!r}; valid modes: {valid}")


def _as_json(record: Any) -> dict[str, Any]:
    """A frozen record of this module as the JSON object its file holds: each field by its
    name, a nested record (or named tuple) as its own object, a tuple as a list, an enum as
    its value."""

    def value(v: Any) -> Any:
        if isinstance(v, RunCacheKeys):
            return v.to_json()
        if hasattr(v, "__dataclass_fields__"):
            return _as_json(v)
        if isinstance(v, enum.Enum):
            return v.value
        if isinstance(v, Mapping):
            return dict(v)
        if hasattr(v, "_asdict"):  # a named tuple of another module (a ReadyMark)
            return dict(v._asdict())
        return list(v) if isinstance(v, tuple) else v

    return {f.name: value(getattr(record, f.name)) for f in fields(record)}


def _text(f: Fields, key: str) -> str | None:
    """An optional text field of at most :data:`MAX_TEXT_CHARS`."""
    value: str | None = f.string(key, None, optional=True, limit=MAX_TEXT_CHARS)
    return value


def _counts(f: Fields, key: str) -> dict[str, int]:
    """A JSON object of name -> integer >= 0, at most :data:`MAX_NAMES` of them."""
    inner = f.obj(key)
    if len(inner.data) > MAX_NAMES:
        raise f.fail(key, f"an object of at most {MAX_NAMES:,} names", inner.data)
    return {inner.key(name): inner.integer(name, minimum=0) for name in inner.data}


@dataclass(frozen=True)
class ProcessInfo:
    """Which process of a ``compiletrace run`` job this is: saved in its run's meta (flat)
    and in its start marker."""

    pid: int
    ppid: int
    role: str  # "main", "rank 1", a multiprocessing name such as "EngineCore_DP0", "pid 41"
    argv: tuple[str, ...]
    # The machine of a job of several (run file version 5; "" where not recorded): the node
    # the launcher names (torchrun's GROUP_RANK, Slurm's SLURM_NODEID), else the host name.
    node: str = ""
    host: str = ""  # the host name

    @classmethod
    def this_process(cls, role: str) -> ProcessInfo:
        """This process, its command line held to what a reader takes (a longer argument is
        clipped, arguments past :data:`MAX_ARGS` left out), and its node and host."""
        argv = tuple(clip(arg, MAX_ARG_CHARS - 100) for arg in sys.argv[:MAX_ARGS])
        node, host = node_of(os.environ)
        return cls(os.getpid(), os.getppid(), clip(role, MAX_TEXT_CHARS - 100), argv, node, host)

    def to_dict(self) -> dict[str, Any]:
        out = _as_json(self)
        for key in ("node", "host"):  # left out where not recorded: a version 4 file's shape
            if not out[key]:
                del out[key]
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str, where: str) -> ProcessInfo:
        f = Fields(data, source, where)
        node, host = (f.string(key, "", limit=MAX_NODE_CHARS) for key in ("node", "host"))
        for key, value in (("node", node), ("host", host)):
            if value and not is_node_name(value):
                raise f.fail(key, "a node or host name (letters, digits, '.', '-', '_')", value)
        return cls(
            pid=f.integer("pid", minimum=0),
            ppid=f.integer("ppid", minimum=0),
            role=f.string("role", limit=MAX_TEXT_CHARS),
            argv=tuple(f.strings("argv", limit=MAX_ARG_CHARS, max_items=MAX_ARGS)),
            node=node,
            host=host,
        )

    @property
    def label(self) -> str:
        r"""``pid 41 (main)``, for a terminal: the role comes from a file, and is shown
        through :func:`~compiletrace._io.text.printable` (as every text view shows such text).

        >>> ProcessInfo(41, 40, "main\rrank 0", ()).label
        'pid 41 (main\\rrank 0)'
        """
        return f"pid {self.pid} ({printable(self.role)})"


_PROCESS_KEYS = ("pid", "ppid", "role", "argv", "node", "host")
MAX_NODE_CHARS = 255  # a host name's limit (RFC 1123)
_NODE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def is_node_name(text: str) -> bool:
    """Whether ``text`` may name a node or a host: letters, digits, '.', '-', '_', at most 255."""
    return len(text) <= MAX_NODE_CHARS and all(c in _NODE_CHARS for c in text)


def node_of(env: Mapping[str, str]) -> tuple[str, str]:
    """This machine's node in a job of several, and its host name: the node's rank as the
    launcher gives it (torchrun's ``GROUP_RANK``, Slurm's ``SLURM_NODEID``), else the host
    name. A value that is no plain name is not taken.

    >>> node_of({"GROUP_RANK": "1"})[0], node_of({"SLURM_NODEID": "7"})[0]
    ('1', '7')
    >>> node_of({})[0] == node_of({})[1]
    True
    """
    try:
        host = socket.gethostname()
    except OSError:  # never a reason for a recording process to fail
        host = ""
    host = host if is_node_name(host) else ""
    for variable in ("GROUP_RANK", "SLURM_NODEID"):
        value = env.get(variable, "")
        if value.isascii() and value.isdecimal() and len(value) <= 10:
            return str(int(value)), host
    return host, host


@dataclass(frozen=True)
class LoadedArtifacts:
    """The cache-artifacts file a run loaded into torch's compile caches before it compiled
    (``profile --cache-artifacts``), and what checking and loading it cost."""

    path: str  # the file, as given
    size_bytes: int
    artifacts: Mapping[str, int]  # artifacts per kind ("inductor", "aot_autograd", ...)
    seconds: float  # to check and load it
    sha256: str  # the file's digest
    digest: str  # what is known of PATH.sha256 beside it ("verified", "missing", ...)
    torch_version: str | None  # the torch that saved it, as the digest file says
    checked: bool  # False: loaded with --trust, compiletrace vouched for nothing
    signature: str  # who signed the digest ("signed by you", "unsigned", ...)
    key_id: str | None  # the key that signed it

    def to_dict(self) -> dict[str, Any]:
        return _as_json(self)

    @classmethod
    def from_dict(cls, data: Any, source: str, where: str) -> LoadedArtifacts:
        f = Fields(data, source, where)
        return cls(
            path=f.string("path", limit=MAX_TEXT_CHARS),
            size_bytes=f.integer("size_bytes", minimum=0),
            artifacts=_counts(f, "artifacts"),
            seconds=f.number("seconds", minimum=0.0),
            sha256=f.string("sha256", limit=MAX_TEXT_CHARS),
            digest=f.string("digest", limit=MAX_TEXT_CHARS),
            torch_version=f.string("torch_version", optional=True, limit=MAX_TEXT_CHARS),
            checked=f.boolean("checked"),
            signature=f.string("signature", limit=MAX_TEXT_CHARS),
            key_id=f.string("key_id", optional=True, limit=MAX_TEXT_CHARS),
        )


@dataclass(frozen=True)
class TraceInfo:
    """What reading one process's log of torch's trace (``TORCH_TRACE``) skipped, cut and
    could not know (see :mod:`compiletrace._data.torch_trace`)."""

    log: str  # the log it was read from
    pid: int  # the process that wrote the log's entries
    rank: int | None  # its rank, where the log's name or its lines say
    entries: int  # entries read, every kind
    skipped: Mapping[str, int]  # entries of a kind the reader does not use, by kind
    damaged_lines: int  # lines that were not an entry, skipped
    rejected_compiles: int  # compiles whose fields did not hold, left out
    truncated: bool  # the log ended mid-entry (a crashed or killed job)
    cut: Mapping[str, int]  # what the reader's limits cut, by what ("graph_breaks", "texts")
    missing: tuple[str, ...]  # record fields the trace does not carry, left at their defaults
    torch_version: str | None  # the torch that wrote it, where the log says
    # torch's runtime rows read (one per call of a compiled graph that autotuned or recorded a
    # CUDA graph); None in files from before they were read
    runtime_rows: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return _as_json(self)

    @classmethod
    def from_dict(cls, data: Any, source: str, where: str) -> TraceInfo:
        f = Fields(data, source, where)
        return cls(
            log=f.string("log", limit=MAX_TEXT_CHARS),
            pid=f.integer("pid", minimum=0),
            rank=f.integer("rank", optional=True, minimum=0),
            entries=f.integer("entries", minimum=0),
            skipped=_counts(f, "skipped"),
            damaged_lines=f.integer("damaged_lines", minimum=0),
            rejected_compiles=f.integer("rejected_compiles", minimum=0),
            truncated=f.boolean("truncated"),
            cut=_counts(f, "cut"),
            missing=tuple(f.strings("missing", limit=MAX_TEXT_CHARS, max_items=MAX_NAMES)),
            torch_version=f.string("torch_version", optional=True, limit=MAX_TEXT_CHARS),
            runtime_rows=f.integer("runtime_rows", None, optional=True, minimum=0),
        )


@dataclass(frozen=True, repr=False)
class RunMeta(Mapping[str, Any]):
    """How a run was made. Every field is optional: ``None`` where the run did not record it
    (each writer records its own: ``profile()``, a ``compiletrace run`` process, a notebook
    cell, torch's trace), and left out of the file then.

    It reads as a mapping too (``meta["model"]``, ``meta.get("trace")``): the dict
    :meth:`to_dict` gives, for code written when meta was a dict. New code reads attributes.
    """

    # What recorded it when not profile(): "compiletrace run", "%%compiletrace", "TORCH_TRACE".
    source: str | None = None
    # What ran, as headers name it: profile's MODEL spec ("pkg.mod:build"), a command line, a cell.
    model: str | None = None
    backend: str | None = None  # the backend wrapped, or those the records name ("eager, inductor")
    mode: str | None = None  # inductor's mode ("max-autotune"), when one was given
    compilation_mode: CompilationMode | None = None  # profile's: stock, or none (eager)
    device: str | None = None  # where profile built the model ("cpu", "cuda:0")
    components: Mapping[str, str] | None = None  # profile's: submodule path -> component name
    created_unix_s: float | None = None  # when the run ended (time.time())
    created: str | None = None  # the same, in ISO 8601 (UTC), for people
    torch_version: str | None = None
    compiletrace_version: str | None = None
    cache_artifacts: LoadedArtifacts | None = None  # artifacts loaded before compiling
    eager_run_s: float | None = None  # compilation mode none: one eager run of the model
    steady_call_s: float | None = None  # profile --steady-calls N: the median call after warm-up
    steady_call_spread_s: float | None = None  # ... and the interquartile range of those calls
    steady_calls: int | None = None  # ... and N
    applied_fixes: tuple[str, ...] | None = None  # compiletrace run --apply: the fixes applied
    process: ProcessInfo | None = None  # compiletrace run: the process (saved flat: pid, role, ...)
    trace: TraceInfo | None = None  # read from torch's trace: what the reader skipped and cut
    # The process parts of its cache keys and the facts that decide reuse (run file version 2).
    cache_keys: RunCacheKeys | None = None
    # When the process became ready to serve (compiletrace run --ready, compiletrace.ready(),
    # the end of its warm-up; or the mark a trace carries): compiles after it are spikes
    ready: ReadyMark | None = None
    # What torch's stance said when it refused a compile after ready and the program died of
    # it (compiletrace run --apply fail-after-ready)
    refused_after_ready: str | None = None
    # compiletrace run: when the process wrote this run while it still ran (its last
    # checkpoint: it was stopped before it could write at its end); None: written at its end
    checkpoint_unix_s: float | None = None
    # Keys this compiletrace does not know, as read (JSON values): written back, never read.
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clash = sorted(set(self.extra) & _KNOWN_KEYS)
        if clash:
            raise UsageError(f"RunMeta.extra holds keys RunMeta knows, {clash}: give them as its fields")

    @property
    def empty(self) -> bool:
        """Nothing recorded: the meta of records alone (a registry's)."""
        return self == _EMPTY

    def __repr__(self) -> str:
        # The fields recorded only: most are None in any one run.
        values = ((f.name, getattr(self, f.name)) for f in fields(self))
        shown = ", ".join(f"{name}={value!r}" for name, value in values if value not in (None, {}))
        return f"RunMeta({shown})"

    # -- the mapping, for code that read meta as a dict -------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    # -- saving and reading ----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON object a run file's ``meta`` holds: each field recorded, then the keys
        kept from the file it was read from."""
        out = {name: value for name, value in _as_json(self).items() if value is not None}
        out.pop("process", None)
        if self.process is not None:
            out.update(self.process.to_dict())  # saved flat
        out.update(out.pop("extra"))
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str = "meta", where: str = "") -> RunMeta:
        """Read a run file's ``meta``, checking every field; raises
        :class:`~compiletrace.RunFileError` naming the first bad one."""
        f = Fields(data, source, where)
        given = {key for key, value in f.data.items() if value is not None}  # null: not recorded
        return cls(
            source=_text(f, "source"),
            model=_text(f, "model"),
            backend=_text(f, "backend"),
            mode=_text(f, "mode"),
            compilation_mode=f.choice("compilation_mode", CompilationMode)
            if "compilation_mode" in given
            else None,
            device=_text(f, "device"),
            components=_components(f) if "components" in given else None,
            created_unix_s=f.number("created_unix_s", None, minimum=0.0, optional=True),
            created=_text(f, "created"),
            torch_version=_text(f, "torch_version"),
            compiletrace_version=_text(f, "compiletrace_version"),
            cache_artifacts=(
                LoadedArtifacts.from_dict(f.data["cache_artifacts"], source, f.path("cache_artifacts"))
                if "cache_artifacts" in given
                else None
            ),
            eager_run_s=f.number("eager_run_s", None, minimum=0.0, optional=True),
            steady_call_s=f.number("steady_call_s", None, minimum=0.0, optional=True),
            steady_call_spread_s=f.number("steady_call_spread_s", None, minimum=0.0, optional=True),
            steady_calls=f.integer("steady_calls", None, minimum=1, optional=True),
            applied_fixes=(
                tuple(f.strings("applied_fixes", limit=MAX_TEXT_CHARS, max_items=MAX_NAMES))
                if "applied_fixes" in given
                else None
            ),
            # Saved flat; all four or none (a missing one is named).
            process=ProcessInfo.from_dict(f.data, source, where) if given & set(_PROCESS_KEYS) else None,
            trace=TraceInfo.from_dict(f.data["trace"], source, f.path("trace")) if "trace" in given else None,
            cache_keys=(
                RunCacheKeys.from_json(f.data["cache_keys"], source, f.path("cache_keys"))
                if "cache_keys" in given
                else None
            ),
            ready=ReadyMark.from_dict(f.data["ready"], source, f.path("ready")) if "ready" in given else None,
            refused_after_ready=_text(f, "refused_after_ready"),
            checkpoint_unix_s=f.number("checkpoint_unix_s", None, minimum=0.0, optional=True),
            extra=_extra(f, set(f.data) - _KNOWN_KEYS),
        )

    @classmethod
    def of(cls, meta: Mapping[str, Any] | None, source: str = "meta") -> RunMeta:
        """``meta`` as a ``RunMeta``: itself, or a dict (as callers gave one before meta was
        typed) read with :meth:`from_dict`'s checks; an empty one for None."""
        if isinstance(meta, RunMeta):
            return meta
        if meta is None:
            return cls()
        if not isinstance(meta, Mapping):
            raise ArgumentTypeError(f"a run's meta must be a RunMeta or a dict, got {type(meta).__name__}")
        return cls.from_dict(dict(meta), source)


# The keys a file's meta may hold that RunMeta reads (the process's, flat).
_KNOWN_KEYS = frozenset({f.name for f in fields(RunMeta)} - {"process", "extra"} | set(_PROCESS_KEYS))
_EMPTY = RunMeta()


def _components(f: Fields) -> dict[str, str]:
    inner = f.obj("components")
    if len(inner.data) > MAX_NAMES:
        raise f.fail("components", f"an object of at most {MAX_NAMES:,} components", inner.data)
    return {inner.key(path): inner.string(path, limit=MAX_TEXT_CHARS) for path in inner.data}


def _extra(f: Fields, unknown: set[str]) -> dict[str, Any]:
    """The keys this compiletrace does not know, in the file's order: at most
    :data:`MAX_EXTRA_KEYS`, each named in at most 200 characters and holding at most
    :data:`MAX_EXTRA_BYTES` of JSON, kept as they were and never read."""
    if len(unknown) > MAX_EXTRA_KEYS:
        raise RunFileError(
            f"{f.source}: field {f.where or 'meta'!r} holds {len(unknown):,} keys this compiletrace does "
            f"not know, and at most {MAX_EXTRA_KEYS} are kept: is it a compiletrace run?"
        )
    out = {}
    for key in (f.key(k) for k in f.data if k in unknown):
        if len(key) > 200:
            raise f.fail(key, "named in at most 200 characters", key)
        try:
            size = len(json.dumps(f.data[key], ensure_ascii=False).encode("utf-8"))
        except (TypeError, ValueError, UnicodeEncodeError):
            raise f.fail(key, "JSON of Unicode text", f.data[key]) from None
        if size > MAX_EXTRA_BYTES:
            raise RunFileError(
                f"{f.source}: field {f.path(key)!r}, which this compiletrace does not know, holds "
                f"{size:,} bytes of JSON (at most {MAX_EXTRA_BYTES:,} are kept)"
            )
        out[key] = f.data[key]
    return out
