"""torch's structured trace (``TORCH_TRACE=DIR``) read into compiletrace's own records.

A torch program run with ``TORCH_TRACE=DIR`` writes one log per process into DIR
(``dedicated_log_torch_trace_rank_N_*.log`` for a rank of a distributed job). Each entry is
a glog-style line, ``V1201 19:48:17.596000 9438 torch/_dynamo/utils.py:2350] {JSON}``,
then, where the JSON says ``has_payload``, lines of payload that start with a tab. What is
read, per compile id:

- ``compilation_metrics``: torch's own row of the frame compile: its start and duration,
  backend time, node count, code, recompile reason, restarts, failure and cache counters
  (a row with ``is_forward: false``, or ``bwd_compilation_metrics``, is the lazy backward);
- ``chromium_event`` payloads: torch's timed regions (``backend_compile``,
  ``create_aot_dispatcher_function``, ``compile_fx_inner``, ...), mapped to phases by
  :mod:`compiletrace._data.phases` as the live tracker maps them, and each frame's time
  split into the warm-start ledger's lines (:mod:`compiletrace._data.ledger`);
- the work on a compiled graph's first calls, outside any compile (autotuning, CUDA-graph
  recording): its regions (their compile id is in their arguments), and torch's runtime
  rows, ``compilation_metrics_runtime`` and ``bwd_compilation_metrics_runtime`` (one per
  call that did such work), which stand for it where its regions are missing;
- the ``dynamo_graph_break_reason`` artifact: each graph break, its reason and its line;
- the cache-lookup artifacts (``fx_graph_cache_miss``, ``aotautograd_cache_hit``, ...):
  each lookup's outcome, key, torch's detailed status and the key's parts (bounded and
  split as the live recording splits them: :mod:`compiletrace._data.cache_keys`), and the
  ``inductor_output_code`` entries' file names (the generated code's hash, the cache
  directory), the metadata only;
- the ``torch_version`` artifact, and compiletrace's own ``compiletrace_ready`` (the ready
  mark ``compiletrace run`` writes into the program's trace).

Every other record type is skipped and counted (``meta.trace.skipped``, a run's
:class:`~compiletrace._data.run_meta.TraceInfo`). A log that ends mid-entry (a crashed or
killed job) keeps every whole entry before it (``meta.trace.truncated``); a damaged line
inside is counted and skipped. Fields the log does not carry are named in
``meta.trace.missing``, never filled in.

Logs are read line by line (a ``.gz`` too, and the members of a ``.zip``, the archive opened
once): memory holds one entry and the compiles' own state, not the file. A log may come
through a pipe (``report <(zcat trace.log.gz)``): it is read once, through the buffer its
format was told from. What a compile keeps is bounded, whatever the log holds: the
``MAX_*`` limits below cap each list a compile keeps and each text (a long reason is kept
as its head, then how much was cut and a digest of the whole), and what was cut is counted
(``meta.trace.cut``); a log past the limits on its size, its processes or the
trace's compiles is refused, naming the limit. Plain data, free of torch.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
import stat
import sys
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, TypeGuard

from compiletrace._data.cache_keys import (
    MAX_CACHE_DIRS,
    MAX_CONFIG_SETS,
    MAX_ENV,
    CacheFacts,
    ConfigSets,
    RunCacheKeys,
    split_key_lines,
)
from compiletrace._data.ledger import frame_regions, split_frame
from compiletrace._data.phases import split_phases
from compiletrace._data.ready import READY_ARTIFACT, ReadyMark
from compiletrace._data.records import (
    AUTOTUNE,
    CUDAGRAPH,
    NS_PER_S,
    CacheLookup,
    CacheOutcome,
    CompilationTimes,
    CompileStatus,
    GraphBreak,
    GraphRecord,
    RuntimeEvent,
    root_code_name,
)
from compiletrace._data.registry import Registry
from compiletrace._data.run import Run, WarmupResult
from compiletrace._data.run_meta import MAX_TEXT_CHARS, RunMeta, TraceInfo
from compiletrace._data.torch_text import CUDAGRAPH_REGIONS, RUNTIME_AUTOTUNE_REGIONS, break_reason
from compiletrace._io.errors import RunFileError
from compiletrace._io.inputs import HEAD_BYTES, InputFile, open_input
from compiletrace._io.text import clip, shell_word, shorten

__all__ = [
    "MISSING_FIELDS",
    "TRACE_SOURCE",
    "ComponentNamer",
    "TraceLog",
    "default_component",
    "holds_trace",
    "is_torch_trace",
    "is_trace_head",
    "read_torch_trace",
    "trace_logs",
]

TRACE_SOURCE = "TORCH_TRACE"  # a run's meta.source when it was read from torch's trace

# What a run read from a trace lacks, compared with one compiletrace recorded live.
MISSING_FIELDS = (
    "backend (the name torch.compile was given; inferred from torch's timed regions)",
    "module_class, module_path, module_forward (the trace names code, not modules)",
    "structure_hash, graph_block (the trace has no FX graph compiletrace can hash)",
    "trace_cost (per-function tracing time)",
    "warm-up and the start-up timeline (the trace has compiles only)",
)

# What a crafted or damaged entry raises when its fields are read (a string where a number
# goes, NaN, nesting past Python's limit), and what a damaged archive raises while streamed.
_BAD_VALUE = (ValueError, TypeError, OverflowError, RecursionError, KeyError, AttributeError)
_BAD_ARCHIVE = (OSError, EOFError, zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError)
# glog's prefix: level, MMDD, time, process (or thread) id, where, then the JSON. A
# distributed job's lines may start with their rank ("[rank1]:").
_LINE = re.compile(
    r"^(?:\[rank([0-9]+)\]:)?[VIWEC][0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]+ +([0-9]+) [^\]]*\] (\{.*)$"
)
_RANK = re.compile(r"rank_([0-9]+)")
_BREAK_AT = re.compile(r"^Graph break in user code at (.*):([0-9]{1,9})$", re.M)
_GZIP_MAGIC, _ZIP_MAGIC = b"\x1f\x8b", b"PK\x03\x04"
_LOG_SUFFIXES = (".log", ".log.gz")

# What one trace may make the reader hold. Each is far past what torch writes (a compile has
# about a hundred timed regions, a few graph breaks and cache lookups) and holds memory to
# the compiles, not to the log: a log of crafted entries (a 1.5 MB .gz of graph-break
# payloads is a GB of text) keeps at most these per compile, and counts what it cut.
MAX_LINE_CHARS = 16 * 1024 * 1024  # the longest line read whole (torch's metrics row: ~100 kB)
MAX_LOG_CHARS = 8 << 30  # one log's text (a .gz's, uncompressed): a longer one is refused
MAX_LOGS = 100_000  # logs in one trace directory or archive
MAX_PROCESSES = 4_096  # processes told apart in one log
MAX_COMPILES = 100_000  # compiles in one trace, its logs together (1 GB of a small model's log: 14,000)
MAX_REGIONS = 512  # timed regions a compile keeps (and as many left open)
MAX_BREAKS = 16  # graph breaks a compile keeps
MAX_LOOKUPS = 32  # cache lookups a compile keeps
MAX_RESTARTS = 16  # restart reasons a compile keeps
MAX_REASON_CHARS = 2_000  # a reason's head, as the live recording keeps it
MAX_NAME_CHARS = 1_000  # a code name, file name or error type's head
MAX_KEY_CHARS = 200  # a cache key, a lookup's detail, torch's version
MAX_REGION_NAME_CHARS = 200  # torch's region names are short: a longer one is none of torch's
MAX_SKIPPED_KINDS = 100  # skipped record kinds counted by name; the rest are counted together
MAX_RUNTIME = 10_000  # first-call regions and runtime rows a process keeps (a server logs one per call)
MAX_ID_DIGITS = 10  # a pid or a rank (Linux's largest pid has 7 digits)
_MAX_ID = 10**MAX_ID_DIGITS  # a frame id or a frame's compile count
_MAX_COMPILE_ID_CHARS = 64
_OTHER_KINDS = "(other kinds)"  # the skipped kinds past MAX_SKIPPED_KINDS, counted together


def is_trace_head(head: bytes) -> bool:
    """Whether a file that starts with ``head`` (its first :data:`HEAD_BYTES`) is torch's
    trace: a ``.gz`` or ``.zip``, or a first line that is a glog-style trace entry
    (compiletrace's own files are JSON documents).

    >>> is_trace_head(b'V1201 19:48:17.596000 9438 torch/_logging/_internal.py:1328] {"str": []}\\n')
    True
    >>> is_trace_head(b'{"kind": "compiletrace.run"}')
    False
    """
    if head.startswith((_GZIP_MAGIC, _ZIP_MAGIC)):
        return True
    # A full head whose first line starts as an entry does is taken for one here (a reader
    # that finds no entry says so); holds_trace, choosing what a directory holds, asks more.
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    return _is_trace_line(first, len(head) == HEAD_BYTES)


def _is_trace_line(first: str, cut: bool) -> bool:
    """Whether ``first``, a file's first line, is an entry of torch's trace; ``cut``: only
    its head was read (an entry longer than that starts as one does). A whole line that is
    no entry (a console's warning, ``W1207 12:00:00.000000 7 run.py:1] ****``) is none."""
    return _LINE.match(first) is not None or (
        cut and bool(re.match(r"^(?:\[rank[0-9]+\]:)?[VIWEC][0-9]{4} ", first))
    )


def holds_trace(path: str) -> bool:
    """Whether the file ``path`` (a ``.log``, ``.gz`` or ``.zip`` found in a directory) is
    torch's trace: its first line, once decompressed, an entry of one; a ``.zip`` is taken
    for an archive of logs. A console's log (what a rank printed) is not. Reads at most its
    first :data:`HEAD_BYTES` characters, never through a link or a pipe.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "node0.log"
    >>> _ = p.write_text("W1207 12:00:00.000000 7 torch/distributed/run.py:793] *****\\nstarted\\n")
    >>> holds_trace(str(p))
    False
    """
    with open_input(path, pipes=False, links=False) as source:
        if source.head.startswith(_ZIP_MAGIC):
            return True
        text = _log_text(source.stream, source.head)
        try:
            first = text.readline(HEAD_BYTES)
        except (OSError, EOFError, zlib.error):
            return False  # a damaged .gz: nothing of torch's trace can be read from it
        finally:
            text.close()
    return _is_trace_line(first.rstrip("\n"), len(first) == HEAD_BYTES and not first.endswith("\n"))


def is_torch_trace(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is torch's trace: a directory, or a file :func:`is_trace_head` says
    is one. (A pipe read here is read: :func:`compiletrace._data.files.read` tells the
    format from the one buffer it reads through.)

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.log"
    >>> line = 'V1201 19:48:17.596000 9438 torch/_logging/_internal.py:1328] {"str": ["a.py", 0]}'
    >>> _ = p.write_text(line + "\\n")
    >>> is_torch_trace(p), is_torch_trace(p.parent / "no.json")
    (True, False)
    """
    name = os.fspath(path)
    if os.path.isdir(name):
        return True
    try:
        with open_input(name) as source:
            return is_trace_head(source.head)
    except RunFileError:
        return False


@dataclass
class TraceLog:
    """One process's log, as found: where it is (``source``), its rank if its name says."""

    source: str  # the file, or "archive.zip:member"
    rank: int | None
    open: Callable[[], IO[str]] = field(repr=False)


@contextlib.contextmanager
def trace_logs(path: str | os.PathLike[str] | InputFile) -> Iterator[list[TraceLog]]:
    """The logs at ``path``, by rank, then name, ready to read while the context lasts: a
    TORCH_TRACE directory's (``*.log``, ``*.log.gz``), one log file, a ``.gz`` of one, or a
    ``.zip`` of them (opened once, and closed on leaving). ``path`` may be an input already
    open (a pipe whose head told its format). Raises :class:`~compiletrace.RunFileError` for
    a path with none."""
    with contextlib.ExitStack() as stack:
        if not isinstance(path, InputFile) and os.path.isdir(os.fspath(path)):
            logs = _directory_logs(os.fspath(path))
        else:
            source = path if isinstance(path, InputFile) else stack.enter_context(open_input(path))
            if source.head.startswith(_ZIP_MAGIC):
                logs = _zip_logs(source, stack)
            else:
                one = source  # read once, from the buffer its head was told from

                def open_log() -> IO[str]:
                    return _log_text(one.stream, one.head)

                logs = [TraceLog(one.name, _rank_of(one.name, one.name), open_log)]
        yield sorted(logs, key=lambda log: (log.rank is None, log.rank or 0, log.source))


def _directory_logs(name: str) -> list[TraceLog]:
    files = sorted(
        os.path.join(name, f) for f in os.listdir(name) if f.endswith(_LOG_SUFFIXES) and not f.startswith(".")
    )
    if len(files) > MAX_LOGS:
        raise RunFileError(f"{name} holds more than {MAX_LOGS:,} logs; read them a part at a time")
    # Regular files only, never a link (whatever it points to is none of the trace's).
    logs = [TraceLog(f, _rank_of(f, f), _file_opener(f)) for f in files if _is_regular(f)]
    if not logs:
        raise RunFileError(
            f"{name} holds no TORCH_TRACE logs (*.log): run the program with "
            f"TORCH_TRACE={shell_word(name)} first"
        )
    return logs


def _rank_of(name: str, source: str) -> int | None:
    """The rank a log's file name says (``..._rank_1_...``); ``source`` names it in errors."""
    found = _RANK.search(os.path.basename(name))
    return None if found is None else _bounded_int(found[1], "rank", source)


def _bounded_int(digits: str, what: str, where: str) -> int:
    """``digits`` as a pid or a rank; one longer than any system's is a crafted log."""
    if len(digits) > MAX_ID_DIGITS:
        raise RunFileError(
            f"{shorten(where, 300)}: a {what} of {len(digits):,} digits, which no process has: "
            "not a trace torch wrote"
        )
    return int(digits)


def _log_text(stream: IO[bytes], head: bytes) -> IO[str]:
    """Text of a log read from ``stream``, which starts with ``head`` (gzip's magic: a .gz)."""
    if head.startswith(_GZIP_MAGIC):
        return _OwningText(gzip.GzipFile(fileobj=stream, mode="rb"), [stream])
    return io.TextIOWrapper(stream, encoding="utf-8", errors="replace")


def _is_regular(name: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(name).st_mode)
    except OSError:
        return False


def _file_opener(name: str) -> Callable[[], IO[str]]:
    def open_log() -> IO[str]:
        # Checked again as it is opened: a file swapped meanwhile for a pipe or a link is refused.
        source = open_input(name, pipes=False, links=False)
        return _log_text(source.stream, source.head)

    return open_log


def _zip_logs(source: InputFile, stack: contextlib.ExitStack) -> list[TraceLog]:
    name = source.name
    if not source.regular:
        raise RunFileError(
            f"{name} is a zip archive in a pipe, and a zip is read from its end: give the .zip file itself"
        )
    try:
        # Opened once for all its members: opened per member, its directory of N members
        # was read N times (3,000 logs took a minute and more).
        archive = stack.enter_context(zipfile.ZipFile(source.stream))
        members = [m for m in archive.namelist() if m.endswith(_LOG_SUFFIXES) and not m.endswith("/")]
    except (zipfile.BadZipFile, OSError) as exc:
        raise RunFileError(
            f"{name} is a damaged zip archive ({exc}); zip the TORCH_TRACE directory again"
        ) from None
    if not members:
        raise RunFileError(f"{name} holds no TORCH_TRACE logs (*.log)")
    if len(members) > MAX_LOGS:
        raise RunFileError(f"{name} holds more than {MAX_LOGS:,} logs; read them a part at a time")

    def opener(member: str) -> Callable[[], IO[str]]:
        def open_member() -> IO[str]:
            raw = archive.open(member)
            if not member.endswith(".gz"):
                return io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
            try:
                return _OwningText(gzip.GzipFile(fileobj=raw, mode="rb"), [raw])
            except BaseException:
                raw.close()
                raise

        return open_member

    return [TraceLog(f"{name}:{m}", _rank_of(m, f"{name}:{m}"), opener(m)) for m in members]


class _OwningText(io.TextIOWrapper):
    """Text over a gzip stream that closes, with itself, what the gzip was read from."""

    def __init__(self, raw: Any, owned: list[Any]) -> None:
        super().__init__(raw, encoding="utf-8", errors="replace")
        self._owned = owned

    def close(self) -> None:
        try:
            super().close()
        finally:
            for resource in reversed(self._owned):
                with contextlib.suppress(Exception):
                    resource.close()


# -- entries ---------------------------------------------------------------------------


@dataclass
class _Entry:
    pid: int
    rank: int | None  # the line's own rank prefix, where it has one
    head: dict[str, Any]  # the entry's JSON, before its payload
    payload: list[str] | None  # None when the entry has none, or its kind keeps none


# torch's cache-lookup artifacts, as the live recording reads the same events: (tier, outcome).
_CACHE_ARTIFACT = re.compile(r"(fx_graph|aotautograd|autograd)_cache_(hit|miss|bypass)")  # matched whole
# The fields of torch's metrics row a record is built from (and the cache counters).
_METRIC_KEYS = frozenset(
    {
        "backend_compile_time_s",
        "co_filename",
        "co_firstlineno",
        "co_name",
        "compile_id",
        "duration_us",
        "entire_frame_compile_time_s",
        "fail_type",
        "graph_node_count",
        "inductor_compile_time_s",
        "is_forward",
        "recompile_reason",
        "restart_reasons",
        "start_time",
        "start_time_us",
        # The cache counters a tier's outcome is read from (:func:`_outcome`).
        *(
            f"{prefix}_{where}_cache_{outcome}_count"
            for prefix in ("inductor_fx", "aotautograd")
            for where in ("local", "remote")
            for outcome in ("hit", "miss")
        ),
    }
)
# torch's rows for the work on a compiled graph's calls (forward, backward).
_RUNTIME_ROWS = ("compilation_metrics_runtime", "bwd_compilation_metrics_runtime")
_RUNTIME_REGIONS = frozenset({*RUNTIME_AUTOTUNE_REGIONS, *CUDAGRAPH_REGIONS})
# Record types whose payload is read; every other payload is skipped as it streams by.
_PAYLOAD_WANTED = frozenset({"chromium_event", "artifact"})


@dataclass
class _Totals:
    """What every log of one trace adds up to, against the trace's limits."""

    compiles: int = 0


@dataclass
class _Stats:
    source: str  # the log, for the messages
    totals: _Totals = field(default_factory=_Totals)
    entries: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    damaged: int = 0  # lines inside the log that were no entry
    rejected: int = 0  # compiles whose figures were out of range (negative, past any clock)
    truncated: bool = False  # the log ended inside an entry
    cut: Counter[str] = field(default_factory=Counter)  # what a compile could not keep: regions, texts, ...

    def skip(self, kind: str) -> None:
        """Count a record of a kind not read, by its name while the names stay few."""
        name = shorten(kind, 100)
        if name not in self.skipped and len(self.skipped) >= MAX_SKIPPED_KINDS:
            name = _OTHER_KINDS
        self.skipped[name] += 1

    def text(self, value: str, limit: int) -> str:
        """``value`` clipped to ``limit`` characters (see :func:`~compiletrace._io.text.clip`)."""
        kept = clip(value, limit)
        if kept is not value:
            self.cut["texts"] += 1
        return kept


_OVERLONG = "\x00overlong\n"  # stands for a line past MAX_LINE_CHARS, its text never held


def _bounded_lines(stream: IO[str], source: str) -> Iterator[str]:
    """The stream's lines, none longer than :data:`MAX_LINE_CHARS`: a longer one (a crafted
    log, a decompression bomb) is read past in pieces and stands as :data:`_OVERLONG`. A
    stream past :data:`MAX_LOG_CHARS` in all is refused."""
    total = 0
    while True:
        line = stream.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        total += len(line)
        if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
            while True:
                rest = stream.readline(MAX_LINE_CHARS + 1)
                total += len(rest)
                if not rest or rest.endswith("\n") or total > MAX_LOG_CHARS:
                    break
            line = _OVERLONG
        if total > MAX_LOG_CHARS:
            raise RunFileError(
                f"{source} holds more than {_size(MAX_LOG_CHARS)} of text; compiletrace reads at most "
                "that much of one log"
            )
        yield line


def _size(chars: int) -> str:
    return f"{chars >> 30} GiB" if chars >= 1 << 30 else f"{chars >> 20} MiB"


def _entries(lines: Iterable[str], stats: _Stats) -> Iterator[_Entry]:
    """The log's entries, in order; a payload kept only where :data:`_PAYLOAD_WANTED`, and
    only up to :data:`MAX_LINE_CHARS` in all (a longer one is dropped, the entry kept)."""
    current: _Entry | None = None
    kept = 0  # payload characters kept for the current entry
    last_bad = False
    for number, raw in enumerate(lines, 1):
        if raw.startswith("\t"):
            if current is not None and current.payload is not None:
                kept += len(raw)
                if kept > MAX_LINE_CHARS:
                    current.payload = None
                    stats.damaged += 1
                else:
                    current.payload.append(raw[1:])
            last_bad = not raw.endswith("\n")  # a payload cut short: the job was killed
            continue
        if current is not None:
            yield current
            current = None
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        found = _LINE.match(line) if raw is not _OVERLONG else None
        head = None
        if found is not None:
            try:
                head = json.loads(found[3])
            except (ValueError, RecursionError):  # not JSON, or nested past Python's limit
                head = None
        if found is None or not isinstance(head, dict) or not head:
            stats.damaged += 1
            last_bad = not raw.endswith("\n")  # a last line cut short: the job was killed
            continue
        last_bad = False
        stats.entries += 1
        kind = next(iter(head))
        keep = "has_payload" in head and kind in _PAYLOAD_WANTED
        kept = 0
        where = f"{stats.source}, line {number}"
        rank = _bounded_int(found[1], "rank", where) if found[1] is not None else None
        current = _Entry(_bounded_int(found[2], "pid", where), rank, head, [] if keep else None)
    if current is not None:
        yield current
    if last_bad:
        stats.damaged -= 1
        stats.truncated = True


def _payload_json(entry: _Entry) -> Any:
    try:
        return json.loads("".join(entry.payload or ()))
    except (ValueError, RecursionError):
        return None  # cut short (the log ended inside it), or not JSON


# -- one log into records ------------------------------------------------------------------


@dataclass
class _Compile:
    """What the log said of one compile id."""

    regions: list[tuple[str, int, int]] = field(default_factory=list)
    open: dict[str, list[int]] = field(default_factory=dict)  # region name -> start ns stack
    opened: int = 0  # starts in ``open``, every name's
    breaks: list[GraphBreak] = field(default_factory=list)
    lookups: list[CacheLookup] = field(default_factory=list)
    code_hashes: list[str] = field(default_factory=list)  # inductor_output_code's modules, in order
    # (tier, outcome) of every lookup, the ones past MAX_LOOKUPS too: they still decide.
    outcomes: set[tuple[str, str]] = field(default_factory=set)
    metrics: dict[str, Any] | None = None
    backward: dict[str, Any] | None = None


def _compile_id(head: dict[str, Any]) -> str | None:
    frame, count = head.get("frame_id"), head.get("frame_compile_id")
    if isinstance(frame, int) and isinstance(count, int) and 0 <= frame < _MAX_ID and 0 <= count < _MAX_ID:
        return f"{frame}/{count}"
    return None


def _is_compile_id(value: object) -> TypeGuard[str]:
    """A compile id as torch writes one ("0/0", "[0/1]"): a short string, held as a key."""
    return isinstance(value, str) and len(value) <= _MAX_COMPILE_ID_CHARS


def _graph_break(text: str, stats: _Stats) -> GraphBreak:
    at = _BREAK_AT.search(text)
    reason = text.split("Graph Break Reason:", 1)[-1].split("\nUser code traceback:", 1)[0]
    # torch's user-facing reason, as compiletrace's live records keep it.
    reason = stats.text(break_reason(reason), MAX_REASON_CHARS)
    if at is None:
        return GraphBreak(reason, "", 0)
    return GraphBreak(reason, stats.text(at[1], MAX_NAME_CHARS), int(at[2]))


def default_component(code_filename: str, code_name: str) -> str:
    """A trace names code, not modules: a compile's component is its function (a resume
    function's, the one it continues) and the file it is in.

    >>> default_component("/src/model.py", "torch_dynamo_resume_in_forward_at_7")
    'forward (model.py)'
    """
    name = root_code_name(code_name) or "<unknown>"
    return f"{name} ({os.path.basename(code_filename)})" if code_filename else name


ComponentNamer = Callable[[str, str], "str | None"]  # (code file, code name) -> a rule's name


@dataclass
class _Read:
    """What one process's log gave: its records, its first-call work, its ready mark."""

    records: list[GraphRecord]
    runtime: list[RuntimeEvent]
    ready: ReadyMark | None
    info: TraceInfo
    cache_keys: RunCacheKeys | None  # the process parts of its cache keys, where it has them


def _read_log(log: TraceLog, namer: ComponentNamer | None, totals: _Totals) -> list[_Read]:
    """One log's records and what was read, per process: a log is one process's, but logs
    concatenated or interleaved into one file are told apart by the pid of each line."""
    stats = _Stats(log.source, totals)
    processes: dict[int, _Process] = {}
    torch_version: str | None = None
    try:
        with log.open() as stream:
            for entry in _entries(_bounded_lines(stream, log.source), stats):
                process = processes.get(entry.pid)
                if process is None:
                    if len(processes) >= MAX_PROCESSES:
                        raise RunFileError(
                            f"{log.source} holds more than {MAX_PROCESSES:,} processes' entries; "
                            "compiletrace reads at most that many from one log"
                        )
                    process = processes[entry.pid] = _Process()
                if entry.rank is not None:
                    process.rank = entry.rank
                try:
                    found = _take(entry, process, stats)
                except RunFileError:  # a limit reached (a ValueError too, but no damaged entry)
                    raise
                except _BAD_VALUE:  # a field of the wrong type or size: a damaged entry
                    stats.damaged += 1
                    continue
                if found is not None:
                    torch_version = found
    except _BAD_ARCHIVE as exc:
        raise RunFileError(f"{log.source} could not be read ({exc}): a damaged gzip or zip archive") from None
    out = []
    for pid, process in processes.items():
        rank = log.rank if log.rank is not None and len(processes) == 1 else process.rank
        records = []
        header_seen = False  # the process's first C++ compile: its precompiled header
        for cid in process.order:
            compiled = process.compiles[cid]
            regions, header_seen = frame_regions(compiled.regions, header_seen)
            try:
                record = _record(cid, compiled, rank, namer)
                if record is not None:
                    lines = split_frame(
                        regions,
                        record.start_unix_ns,
                        record.end_unix_ns,
                        aot_hit=record.aot_autograd_cache is CacheOutcome.HIT,
                        fx_hit=record.fx_graph_cache is CacheOutcome.HIT,
                    )
                    # Held to what compiletrace's own files hold, so 'report --json' reads back.
                    data = {**record.to_dict(), "frame_lines": [list(line) for line in lines]}
                    record = GraphRecord.from_dict(data, log.source)
            except (*_BAD_VALUE, RunFileError):
                stats.rejected += 1
                continue
            if record is not None:
                records.append(record)
        runtime = _runtime_events(process)
        if not records and not runtime and len(processes) > 1:
            continue  # a process of a shared log that compiled nothing
        info = TraceInfo(
            log=clip(log.source, MAX_TEXT_CHARS - 100),
            pid=pid,
            rank=rank,
            entries=stats.entries,
            skipped=dict(sorted(stats.skipped.items())),
            damaged_lines=stats.damaged,
            rejected_compiles=stats.rejected,
            truncated=stats.truncated,
            cut=dict(sorted(stats.cut.items())),
            missing=MISSING_FIELDS,
            torch_version=torch_version,
            runtime_rows=len(process.runtime_rows),
        )
        out.append(_Read(records, runtime, process.ready, info, _run_cache_keys(process)))
    return out  # empty: not a trace (no entry in it)


@dataclass
class _RuntimeRow:
    """One of torch's runtime rows: a call of a compiled graph that autotuned or recorded."""

    compile_id: str
    backward: bool
    end_ns: int
    duration_ns: int
    autotune_ns: int
    cudagraph_ns: int


@dataclass
class _Process:
    """One process's compiles in a log, in the order their ids first appeared."""

    compiles: dict[str, _Compile] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    rank: int | None = None
    config_sets: ConfigSets = field(default_factory=ConfigSets)  # the process parts of its keys
    cache_dirs: list[str] = field(default_factory=list)  # where its generated code was written
    versions: dict[str, str] = field(default_factory=dict)  # torch, python, triton, cuda (its metrics)
    functorch_config: dict[str, str] = field(default_factory=dict)  # in the AOTAutograd key
    runtime: list[RuntimeEvent] = field(default_factory=list)  # first-call work, from its regions
    runtime_open: dict[str, list[tuple[int, str, dict[str, Any]]]] = field(default_factory=dict)
    runtime_rows: list[_RuntimeRow] = field(default_factory=list)
    ready: ReadyMark | None = None  # compiletrace's ready mark, where the trace carries one

    def get(self, cid: str, stats: _Stats) -> _Compile:
        """The compile ``cid``, new if it is the first time the log names it."""
        c = self.compiles.get(cid)
        if c is None:
            if stats.totals.compiles >= MAX_COMPILES:
                raise RunFileError(
                    f"{stats.source}: the trace holds more than {MAX_COMPILES:,} compiles; compiletrace "
                    "reads at most that many from one trace: give it fewer of its logs"
                )
            stats.totals.compiles += 1
            c = self.compiles[cid] = _Compile()
            self.order.append(cid)
        return c


def _take(entry: _Entry, process: _Process, stats: _Stats) -> str | None:
    """Fold one entry into its process's compiles; the torch version, from its artifact."""
    kind = next(iter(entry.head))
    cid = _compile_id(entry.head)
    if kind == "chromium_event":
        _region(entry, process, stats)
    elif kind in _RUNTIME_ROWS:
        m = entry.head[kind]
        if isinstance(m, dict):
            _runtime_row(m, kind, process, stats)
    elif kind in ("compilation_metrics", "bwd_compilation_metrics"):
        m = entry.head[kind]
        if isinstance(m, dict) and _is_compile_id(m.get("compile_id")):
            c = process.get(m["compile_id"], stats)
            if kind == "bwd_compilation_metrics" or m.get("is_forward") is False:
                c.backward = _kept_row(m, stats)
            else:
                c.metrics = _kept_row(m, stats)
            if not process.versions:
                _process_facts(m, process, stats)
    elif kind == "artifact" and isinstance(entry.head[kind], dict):
        name = entry.head[kind].get("name")
        lookup = _CACHE_ARTIFACT.fullmatch(name) if isinstance(name, str) else None
        if name == "dynamo_graph_break_reason" and cid is not None and entry.payload is not None:
            c = process.get(cid, stats)
            if len(c.breaks) < MAX_BREAKS:
                c.breaks.append(_graph_break("".join(entry.payload), stats))
            else:
                stats.cut["graph_breaks"] += 1
        elif lookup is not None and cid is not None:
            c = process.get(cid, stats)
            tier = "fx_graph" if lookup[1] == "fx_graph" else "aot_autograd"
            c.outcomes.add((tier, lookup[2]))
            if len(c.lookups) >= MAX_LOOKUPS:
                stats.cut["cache_lookups"] += 1
                return None
            data = _payload_json(entry)
            info = data if isinstance(data, dict) else {}
            c.lookups.append(_cache_lookup(tier, lookup[2], info, c, process, stats))
        elif name == READY_ARTIFACT:
            data = _payload_json(entry)
            if process.ready is None:
                process.ready = ReadyMark.from_dict(data, stats.source, f"artifact {READY_ARTIFACT}")
        elif name == "torch_version":
            data = _payload_json(entry)
            if isinstance(data, dict) and isinstance(data.get("pytorch_version"), str):
                return stats.text(data["pytorch_version"], MAX_KEY_CHARS)
        else:
            stats.skip(f"artifact:{name}")
    elif kind == "inductor_output_code" and cid is not None and isinstance(entry.head[kind], dict):
        _output_code(entry.head[kind].get("filename"), process.get(cid, stats), process, stats)
    else:
        stats.skip(kind)
    return None


def _cache_lookup(
    tier: str, outcome: str, info: dict[str, Any], c: _Compile, process: _Process, stats: _Stats
) -> CacheLookup:
    """One cache-lookup artifact as a record: outcome, key, torch's detailed status, why it
    was bypassed or which guard failed, what a hit saved, and the key's parts. An FX-graph
    lookup logged before its compile's AOTAutograd lookup is the load of an AOTAutograd hit
    (stored parts); :func:`_record` settles it once the whole compile is read."""
    detail = info.get("cache_bypass_reason") or info.get("cache_status_guard_expr") or info.get("reason")
    saved = info.get("time_saved_ns")
    if not isinstance(saved, (int, float)) and isinstance(info.get("time_saved_ms"), (int, float)):
        saved = info["time_saved_ms"] * 1_000_000
    parts: tuple[Any, ...] = ()
    config_set = ""
    components = info.get("components")
    if isinstance(components, list) and components:
        parts, process_parts, cut = split_key_lines(c for c in components if isinstance(c, str))
        stats.cut["cache_key_parts"] += cut
        config_set = process.config_sets.add(process_parts, limit=MAX_CONFIG_SETS)
    stored = tier == "fx_graph" and not any(x.tier == "aot_autograd" for x in c.lookups)
    return CacheLookup(
        tier,
        outcome,
        stats.text(str(info.get("key") or ""), MAX_KEY_CHARS),
        stats.text(str(detail or ""), MAX_KEY_CHARS),
        stats.text(str(info.get("cache_status_detailed") or ""), MAX_KEY_CHARS),
        source="stored" if stored else "lookup",
        parts=parts,
        config_set=config_set,
        note="" if parts or outcome == "bypass" else "torch gave none",
        saved_ns=int(saved) if isinstance(saved, (int, float)) and 0 < saved < 1 << 62 else 0,
    )


def _output_code(filename: Any, c: _Compile, process: _Process, stats: _Stats) -> None:
    """inductor_output_code's file: ``<cache dir>/<2 chars>/c<hash>.py``, the module of the
    generated code (what a build is known by) under the cache directory used."""
    if not isinstance(filename, str) or not filename.endswith(".py"):
        return
    name = stats.text(os.path.basename(filename)[: -len(".py")], MAX_KEY_CHARS)
    if len(c.code_hashes) < MAX_LOOKUPS:
        c.code_hashes.append(name)
    directory = stats.text(os.path.dirname(os.path.dirname(filename)), MAX_NAME_CHARS)
    if directory not in process.cache_dirs and len(process.cache_dirs) < MAX_CACHE_DIRS:
        process.cache_dirs.append(directory)


def _process_facts(row: dict[str, Any], process: _Process, stats: _Stats) -> None:
    """The versions and the functorch config of a process, from its first metrics row."""
    for fact, key in (("torch", "pytorch_version"), ("triton", "triton_version"), ("cuda", "cuda_version")):
        if isinstance(row.get(key), str):
            process.versions[fact] = stats.text(row[key], MAX_KEY_CHARS)
    if isinstance(row.get("python_version"), str):
        process.versions["python"] = stats.text(row["python_version"].split(" ", 1)[0], MAX_KEY_CHARS)
    config = row.get("functorch_config")
    try:
        parsed = json.loads(config) if isinstance(config, str) and len(config) < MAX_LINE_CHARS else None
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, dict):
        for name in sorted(parsed)[:MAX_ENV]:
            if isinstance(name, str) and not name.startswith("_"):
                # repr() of the JSON value is how the live recording writes the Python one
                process.functorch_config[stats.text(name, MAX_KEY_CHARS)] = shorten(repr(parsed[name]), 80)


def _run_cache_keys(process: _Process) -> RunCacheKeys | None:
    """A process's share of its keys, as a run's meta keeps it (None when the trace has none)."""
    sets = process.config_sets.snapshot()
    if not sets and not process.cache_dirs:
        return None
    facts = CacheFacts(
        torch=process.versions.get("torch", ""),
        python=process.versions.get("python", ""),
        triton=process.versions.get("triton", ""),
        cuda=process.versions.get("cuda", ""),
        cache_dir=process.cache_dirs[0] if process.cache_dirs else "",
        cache_dirs=tuple(process.cache_dirs),
        functorch_config=dict(process.functorch_config),
        env_known=False,  # torch's trace keeps no environment
    )
    return RunCacheKeys(sets, facts)


def _kept_row(row: dict[str, Any], stats: _Stats) -> dict[str, Any]:
    """Of torch's metrics row, only what a record is built from, each text clipped: the row
    also carries torch's whole config (some 100 kB per compile), which held would grow with
    the log, and a crafted row can make any field as long as its line."""
    kept: dict[str, Any] = {}
    for key, value in row.items():
        if key not in _METRIC_KEYS:
            continue
        if key == "restart_reasons" and isinstance(value, list):
            stats.cut["restart_reasons"] += max(len(value) - MAX_RESTARTS, 0)
            value = [stats.text(str(r), MAX_REASON_CHARS) for r in value[:MAX_RESTARTS]]
        elif isinstance(value, str):
            value = stats.text(value, MAX_REASON_CHARS if key == "recompile_reason" else MAX_NAME_CHARS)
        elif isinstance(value, (dict, list)):
            value = None  # no other field of the row a record reads is a container
        kept[key] = value
    return kept


def _runtime_row(m: dict[str, Any], kind: str, process: _Process, stats: _Stats) -> None:
    """Keep one of torch's runtime rows: where its call's regions are missing from the log,
    it stands for them (:func:`_runtime_events`)."""
    end_us, duration_us = m.get("end_time_us"), m.get("duration_us")
    if not (isinstance(end_us, int) and isinstance(duration_us, int) and 0 <= duration_us <= end_us):
        stats.damaged += 1
        return
    if len(process.runtime_rows) >= MAX_RUNTIME:
        stats.cut["runtime_rows"] += 1
        return
    cid = m.get("compile_id")

    def ns(key: str) -> int:
        value = m.get(key)
        return max(min(value, duration_us), 0) * 1000 if isinstance(value, int) else 0

    process.runtime_rows.append(
        _RuntimeRow(
            cid if _is_compile_id(cid) else "",
            kind.startswith("bwd_") or m.get("is_forward") is False,
            end_us * 1000,
            duration_us * 1000,
            ns("runtime_triton_autotune_time_us"),
            ns("runtime_cudagraphify_time_us"),
        )
    )


def _runtime_region(
    name: str, ns: int, ph: Any, args: dict[str, Any], process: _Process, stats: _Stats
) -> None:
    """A region of a compiled graph's call (its compile id in its arguments): a runtime event."""
    stack = process.runtime_open.setdefault(name, [])
    if ph == "B":
        if len(stack) < MAX_REGIONS:
            cid = args.get("compile_id")
            stack.append((ns, cid if _is_compile_id(cid) and cid != "None" else "", args))
        else:
            stats.cut["regions"] += 1
    elif ph == "E" and stack:
        start, cid, start_args = stack.pop()
        if len(process.runtime) >= MAX_RUNTIME:
            stats.cut["runtime_events"] += 1
            return
        kernel = start_args.get("kernel_name")
        process.runtime.append(
            RuntimeEvent(
                AUTOTUNE if name in RUNTIME_AUTOTUNE_REGIONS else CUDAGRAPH,
                cid,
                start_args.get("is_backward") is True,
                start,
                max(ns - start, 0),
                stats.text(kernel if isinstance(kernel, str) else name, MAX_KEY_CHARS),
            )
        )


def _runtime_events(process: _Process) -> list[RuntimeEvent]:
    """The process's first-call work: each region the log kept, and for a runtime row whose
    call left none (a log cut short, or a torch that logs no such region), the row's own
    figures, placed at the end of its call (torch's ``start_time_us`` of a runtime row is
    where its first region ended, not where its work began)."""
    events = list(process.runtime)
    for row in process.runtime_rows:
        start = row.end_ns - row.duration_ns
        covered = any(
            e.compile_id == row.compile_id
            and e.backward == row.backward
            and start <= e.end_unix_ns <= row.end_ns
            for e in process.runtime
        )
        if covered:
            continue
        at = start
        for kind, ns, detail in (
            (AUTOTUNE, row.autotune_ns, "(torch's runtime row)"),
            (CUDAGRAPH, row.cudagraph_ns, "(torch's runtime row)"),
        ):
            if ns > 0:
                events.append(RuntimeEvent(kind, row.compile_id, row.backward, at, ns, detail))
                at += ns
    return sorted(events, key=lambda e: e.start_unix_ns)


def _region(entry: _Entry, process: _Process, stats: _Stats) -> None:
    event = _payload_json(entry)
    if not isinstance(event, dict):
        return
    name, ts, ph = event.get("name"), event.get("ts"), event.get("ph")
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    if name in _RUNTIME_REGIONS and isinstance(ts, (int, float)) and isinstance(args, dict):
        _runtime_region(name, int(ts * 1000), ph, args, process, stats)
        return
    cid = args.get("compile_id") if isinstance(args, dict) else None
    if not (isinstance(name, str) and isinstance(ts, (int, float)) and _is_compile_id(cid)):
        return
    c = process.get(cid, stats)
    if len(name) > MAX_REGION_NAME_CHARS:
        stats.cut["regions"] += 1
        return
    ns = int(ts * 1000)  # torch's chromium events are in microseconds since the epoch
    if ph == "B":
        if c.opened >= MAX_REGIONS:
            stats.cut["regions"] += 1
            return
        # One string per name, however many regions carry it.
        c.open.setdefault(sys.intern(name), []).append(ns)
        c.opened += 1
    elif ph == "E" and c.open.get(name):
        start = c.open[name].pop()
        c.opened -= 1
        if len(c.regions) < MAX_REGIONS:
            c.regions.append((sys.intern(name), start, ns))
        else:
            stats.cut["regions"] += 1


def _outcome(m: dict[str, Any], prefix: str, tier: str, outcomes: set[tuple[str, str]]) -> CacheOutcome:
    """A tier's outcome: from its lookups (a miss over a hit over a bypass, as live), else
    from the row's counters (``inductor_fx_local_cache_hit_count``, ...)."""
    seen = {outcome for where, outcome in outcomes if where == tier}
    hits = sum(int(m.get(f"{prefix}_{where}_cache_hit_count") or 0) for where in ("local", "remote"))
    misses = sum(int(m.get(f"{prefix}_{where}_cache_miss_count") or 0) for where in ("local", "remote"))
    if misses or "miss" in seen:
        return CacheOutcome.MISS
    if hits or "hit" in seen:
        return CacheOutcome.HIT
    return CacheOutcome.BYPASS if "bypass" in seen else CacheOutcome.NONE


def _seconds_ns(value: Any) -> int | None:
    return round(float(value) * NS_PER_S) if isinstance(value, (int, float)) else None


def _backend_name(regions: list[tuple[str, int, int]], outcomes: set[tuple[str, str]]) -> str:
    # The trace never names the backend torch.compile was given: its regions (compile_fx)
    # and its FX-graph cache lookups tell inductor from another backend on AOTAutograd,
    # which is all it can say.
    names = {r[0] for r in regions}
    if any(tier == "fx_graph" for tier, _ in outcomes) or any(
        n.startswith(("compile_fx", "fx_codegen_and_compile", "inductor_compile")) for n in names
    ):
        return "inductor"
    if any(n.startswith(("create_aot_dispatcher_function", "aot_")) for n in names):
        return "aot_autograd"
    return "unknown"


def _record(cid: str, c: _Compile, rank: int | None, namer: ComponentNamer | None) -> GraphRecord | None:
    m = c.metrics
    if m is None:
        return None  # regions of a compile whose row the log lost (a killed job): no figures
    start_us = m.get("start_time_us")
    start_ns = int(start_us) * 1000 if isinstance(start_us, int) else _seconds_ns(m.get("start_time"))
    frame_ns = _seconds_ns(m.get("entire_frame_compile_time_s"))
    if frame_ns is None and isinstance(m.get("duration_us"), int):
        frame_ns = m["duration_us"] * 1000
    if start_ns is None or frame_ns is None:
        return None
    backend_ns = _seconds_ns(m.get("backend_compile_time_s")) or 0
    backend = [r for r in c.regions if r[0] == "backend_compile"]
    phases: tuple[tuple[str, int], ...] = ()
    backend_start = None
    if backend:
        window_start, window_end = backend[0][1], backend[-1][2]
        backend_start = window_start
        split = split_phases(c.regions, window_start, window_end)
        scale = backend_ns / max(sum(split.values()), 1)
        # The regions' clock (microseconds) and the row's differ in rounding: phases are
        # scaled to add up to the row's backend time, as the live phases add up to theirs.
        phases = tuple(sorted((k, int(v * scale)) for k, v in split.items() if v))
        if phases:
            fixed = backend_ns - sum(v for _, v in phases)
            phases = tuple(
                (k, v + fixed) if i == len(phases) - 1 else (k, v) for i, (k, v) in enumerate(phases)
            )
    code_name = str(m.get("co_name") or "")
    code_file = str(m.get("co_filename") or "")
    component = (namer(code_file, code_name) if namer is not None else None) or default_component(
        code_file, code_name
    )
    fail = m.get("fail_type")
    count = cid.split("/")[1] if cid.count("/") == 1 else ""
    frame_count = int(count) if count.isascii() and count.isdecimal() else 0
    reason = m.get("recompile_reason")
    backward_ns, backward_start = 0, None
    if c.backward is not None:
        b = c.backward
        backward_ns = (
            _seconds_ns(b.get("entire_frame_compile_time_s"))
            or (b["duration_us"] * 1000 if isinstance(b.get("duration_us"), int) else None)
            or _seconds_ns(b.get("inductor_compile_time_s"))
            or 0
        )
        bstart = b.get("start_time_us")
        backward_start = int(bstart) * 1000 if isinstance(bstart, int) else None
    return GraphRecord(
        compile_id=cid,
        component=component,
        backend=_backend_name(c.regions, c.outcomes),
        code_name=code_name,
        graph_node_count=int(m.get("graph_node_count") or 0),
        start_unix_ns=start_ns,
        end_unix_ns=start_ns + frame_ns,
        dynamo_ns=max(frame_ns - backend_ns, 0),
        backend_ns=backend_ns,
        backend_start_unix_ns=backend_start,
        backward_ns=backward_ns,
        backward_start_unix_ns=backward_start,
        is_recompile=frame_count > 0 or isinstance(reason, str),
        recompile_reason=reason if isinstance(reason, str) else None,
        fx_graph_cache=_outcome(m, "inductor_fx", "fx_graph", c.outcomes),
        aot_autograd_cache=_outcome(m, "aotautograd", "aot_autograd", c.outcomes),
        cache_lookups=_settled_lookups(c),
        status=CompileStatus.ERROR if fail else CompileStatus.OK,
        error_type=str(fail) if fail else None,
        rank=rank or 0,
        phases=phases,
        frame_attempt=frame_count,
        restart_reasons=tuple(str(r) for r in m.get("restart_reasons") or ()),
        code_filename=code_file,
        code_firstlineno=int(m.get("co_firstlineno") or 0),
        graph_breaks=tuple(c.breaks),
    )


def _settled_lookups(c: _Compile) -> tuple[CacheLookup, ...]:
    """A compile's lookups once all of it is read: with no AOTAutograd lookup in the compile,
    no FX-graph lookup was an AOTAutograd hit's load; each generated module, in order, goes
    to the FX-graph lookups that built or loaded code (a hit, or a miss torch looked up)."""
    lookups = c.lookups
    if not any(x.tier == "aot_autograd" for x in lookups):
        lookups = [x._replace(source="lookup") for x in lookups]
    codes = iter(c.code_hashes)
    settled = []
    for x in lookups:
        builds = x.tier == "fx_graph" and (
            x.outcome == "hit" or (x.outcome == "miss" and x.source == "lookup")
        )
        settled.append(x._replace(code_hash=next(codes, "")) if builds else x)
    return tuple(settled)


def read_torch_trace(
    path: str | os.PathLike[str] | InputFile, *, components: ComponentNamer | None = None
) -> Run | list[tuple[TraceInfo, Run]]:
    """The runs in torch's trace at ``path``: one :class:`Run` when it holds one process's
    log, else ``(info, run)`` per process (``info``: its log, rank, pid and what was
    skipped or cut). ``path`` may be an input already open (a pipe, read once).
    ``components`` names a compile's component from its code file and code name where a
    rule matches (else :func:`default_component`). Raises
    :class:`~compiletrace.RunFileError` for a path with no logs, a damaged archive, a log
    with no entry in it, and a trace past the reader's limits (``MAX_*``).
    """
    name = path.name if isinstance(path, InputFile) else os.fspath(path)
    totals = _Totals()
    with trace_logs(path) as logs:
        runs = [(read.info, _run(read, name)) for log in logs for read in _read_log(log, components, totals)]
        first = logs[0].source
        if not runs:  # a log with no entry beside others (a process that died at once) is passed over
            raise RunFileError(
                f"{first if len(logs) == 1 else name} is not torch's trace (TORCH_TRACE): no entry in it"
            )
    if len(runs) == 1:
        return runs[0][1]
    return runs


def _run(read: _Read, source: str) -> Run:
    records, info = read.records, read.info
    registry = Registry()
    for record in sorted(records, key=lambda r: r.end_unix_ns):
        registry.add(record)
    by_component = registry.by_component()
    warmup = WarmupResult(
        skipped=True,  # a trace has no warm-up: its compiles only
        duration_s=0.0,
        compilation_times=CompilationTimes.from_components(by_component),
        by_component=by_component,
    )
    meta = RunMeta(
        source=TRACE_SOURCE,
        model=clip(f"TORCH_TRACE {source}", MAX_TEXT_CHARS - 100),
        backend=", ".join(sorted({r.backend for r in records})) or None,
        torch_version=info.torch_version,
        trace=info,
        ready=read.ready,
        cache_keys=read.cache_keys,
    )
    return Run(registry.records(), warmup, meta, None, tuple(read.runtime))
