"""What a compile cache directory holds, read without running any of it: each FX-graph
entry's key and the parts its writer computed for it (torch stores them in the entry:
``CompiledFxGraph._fx_graph_cache_debug_lines``, and each AOTAutograd entry keeps its FX
graphs' as ``fx_graph_cache_info``), so that a run that missed can be compared with the
entries of the same graph that were there.

Entries are pickles. They are read with compiletrace's restricted unpickler, every global
an inert stand-in (nothing named in the file is imported or called), as regular files only
(no link followed), within the limits below: the bytes read, and what unpickling them may
build and hash (``MAX_PICKLE_OPS`` opcodes each, and the other bounds of
``compiletrace._io.artifacts``). An entry past a limit, damaged or refused is
*unreadable*, and said to be, with why: a shared team cache directory is a realistic source
of a crafted one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from compiletrace._data.torch_text import CACHE_KEY_DIGEST, CACHE_KEY_LETTERS
from compiletrace._io.artifacts import ANY_GLOBAL, RestrictedUnpickler, standin_fields, walk
from compiletrace._io.errors import RunFileError
from compiletrace._io.inputs import open_input

__all__ = [
    "MAX_ENTRIES",
    "MAX_ENTRY_FILES",
    "StoreReading",
    "StoredEntry",
    "Unreadable",
    "autotune_choices",
    "entry_file_times",
    "entry_parts",
    "read_store",
    "stored_entries",
]

MAX_ENTRIES = 256  # entry files read from one directory, the newest first
MAX_ENTRY_BYTES = 64 << 20  # a larger file is no entry of a graph compiletrace would compare
MAX_TOTAL_BYTES = 128 << 20  # read from one directory in all
MAX_LINES = 8192  # key lines one entry may hold (torch's have about 640)


@dataclass(frozen=True)
class StoredEntry:
    """An FX-graph entry of a cache directory: the key it is stored under and the key's
    lines (torch's text, as its writer computed them), and what compiling it took."""

    key: str
    lines: tuple[str, ...]
    time_taken_ns: int  # the writer's compile time: what a hit on it saves (0 unknown)
    path: str  # the file it was read from (an AOTAutograd entry's, for its FX graphs)


@dataclass(frozen=True)
class Unreadable:
    """An entry file that could not be read, and why (one line)."""

    path: str
    why: str


@dataclass(frozen=True)
class StoreReading:
    """What :func:`read_store` found: the entries, and the files it could not read."""

    entries: list[StoredEntry]
    unreadable: list[Unreadable]


MAX_LISTED = 50_000  # directory entries looked at under one cache directory
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _regular_files(
    directory: str, depth: int, budget: list[int] | None = None, *, inside: bool = False
) -> Iterator[tuple[str, os.stat_result]]:
    """Regular files ``depth`` levels of directories under ``directory``, links never
    followed (``inside``: not even ``directory`` itself, a directory torch makes inside the
    cache directory), at most :data:`MAX_LISTED` entries looked at in all."""
    budget = [MAX_LISTED] if budget is None else budget
    try:  # listed through this one descriptor: a link put in its place later changes nothing
        fd = os.open(directory, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC | (_O_NOFOLLOW if inside else 0))
    except OSError:
        return
    listed: list[tuple[str, os.stat_result]] = []
    try:
        with os.scandir(fd) as found:
            for entry in found:
                if budget[0] <= 0:
                    break
                budget[0] -= 1
                if entry.name.startswith("."):
                    continue
                with contextlib.suppress(OSError):
                    listed.append((entry.name, entry.stat(follow_symlinks=False)))
    except OSError:
        return
    finally:
        os.close(fd)
    for name, info in listed:
        path = os.path.join(directory, name)
        if depth == 0 and stat.S_ISREG(info.st_mode):
            yield path, info
        elif depth > 0 and stat.S_ISDIR(info.st_mode):
            yield from _regular_files(path, depth - 1, budget, inside=True)


MAX_ENTRY_FILES = 1024  # files looked at in one key's entry directory (torch writes one a guard set)


def entry_parts(tier: str, key: str) -> tuple[str, ...] | None:
    """Where torch keeps the entry of ``key`` under a cache directory, as parts of a path
    (``fx_graph``: ``fxgraph/<key[1:3]>/<key>``; ``aot_autograd``: ``aotautograd/<key>``),
    or None for a key torch does not make: its tier's letter, then lowercase base32, whole.
    A key read from a file never makes a path of its own (an absolute one, ``..``).

    >>> entry_parts("fx_graph", "fabcdefghijklmnopqrstuvwxyz234567")[:2]
    ('fxgraph', 'ab')
    >>> entry_parts("aot_autograd", "a/../../etc"), entry_parts("aot_autograd", "/etc")
    (None, None)
    """
    letter = CACHE_KEY_LETTERS.get(tier)
    if letter is None or key[:1] != letter or not CACHE_KEY_DIGEST.fullmatch(key[1:]):
        return None
    return ("fxgraph", key[1:3], key) if tier == "fx_graph" else ("aotautograd", key)


def entry_file_times(cache_dir: str, parts: tuple[str, ...]) -> list[int] | None:
    """When each file of the entry directory at ``parts`` (:func:`entry_parts`) under
    ``cache_dir`` was last written (ns), at most :data:`MAX_ENTRY_FILES` of them looked
    at; None where that is no directory. Each directory below ``cache_dir`` is opened
    through the one above it without following a link, so the listing stays inside."""
    try:
        fd = os.open(cache_dir, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    except OSError:
        return None
    try:
        for part in parts:
            inner = os.open(part, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = inner
        times = []
        with os.scandir(fd) as found:
            for looked, entry in enumerate(found):
                if looked >= MAX_ENTRY_FILES:
                    break
                if not entry.name.startswith("."):  # torch's temporary files
                    times.append(entry.stat(follow_symlinks=False).st_mtime_ns)
        return times
    except OSError:
        return None
    finally:
        os.close(fd)


def _lines(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and 0 < len(value) <= MAX_LINES and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _entries_in(path: str, data: bytes) -> list[StoredEntry]:
    """The FX-graph keys and lines one entry file holds (an FX-graph entry, its own; an
    AOTAutograd entry, its forward's and backward's). Raises :class:`RunFileError` saying
    why it cannot be read (damaged, refused, or past what it may build)."""
    try:
        root = RestrictedUnpickler(data, ANY_GLOBAL, path).load()
    except RunFileError:
        raise
    except MemoryError:
        raise RunFileError(f"{path} needs more memory to unpickle than this machine gave it") from None
    except Exception as exc:  # damaged, or not a pickle
        raise RunFileError(f"{path} is not a readable pickle ({type(exc).__name__})") from None
    found: dict[str, StoredEntry] = {}
    for obj in walk(root):
        fields = obj if isinstance(obj, dict) else standin_fields(obj)
        if not fields:
            continue
        lines = _lines(fields.get("_fx_graph_cache_debug_lines"))
        key = fields.get("_fx_graph_cache_key")
        taken = fields.get("_time_taken_ns")
        if lines is not None and isinstance(key, str):
            found[key] = StoredEntry(key, lines, taken if isinstance(taken, int) and taken > 0 else 0, path)
        info = fields.get("fx_graph_cache_info")
        if isinstance(info, tuple) and len(info) == 2 and isinstance(info[0], str):
            stored = _lines(info[1])
            if stored is not None and info[0] not in found:
                found[info[0]] = StoredEntry(info[0], stored, 0, path)
    return list(found.values())


def read_store(cache_dir: str) -> StoreReading:
    """The FX-graph entries under ``cache_dir`` (``fxgraph/*/KEY/*`` and those
    ``aotautograd/KEY/*`` names), the newest :data:`MAX_ENTRIES` files, at most
    :data:`MAX_TOTAL_BYTES` read in all, and the files among them that could not be read.

    >>> read_store("/no/such/cache")
    StoreReading(entries=[], unreadable=[])
    """
    files = [
        *_regular_files(os.path.join(cache_dir, "fxgraph"), 2, inside=True),
        *_regular_files(os.path.join(cache_dir, "aotautograd"), 1, inside=True),
    ]
    files.sort(key=lambda f: -f[1].st_mtime_ns)
    out: dict[str, StoredEntry] = {}
    unreadable: list[Unreadable] = []
    total = 0
    for path, info in files[:MAX_ENTRIES]:
        if info.st_size > MAX_ENTRY_BYTES or total + info.st_size > MAX_TOTAL_BYTES:
            unreadable.append(Unreadable(path, f"larger than compiletrace reads ({info.st_size:,} bytes)"))
            continue
        total += info.st_size
        try:  # opened again as no link, in case it was swapped for one since it was listed
            with open_input(path, pipes=False, links=False) as source:
                data = source.read_all(MAX_ENTRY_BYTES)
            entries = _entries_in(path, data)
        except RunFileError as exc:
            unreadable.append(Unreadable(path, str(exc)))
            continue
        except OSError as exc:
            unreadable.append(Unreadable(path, f"cannot be read: {exc.strerror or exc}"))
            continue
        for entry in entries:
            if entry.key not in out or (not out[entry.key].time_taken_ns and entry.time_taken_ns):
                out[entry.key] = entry
    return StoreReading(list(out.values()), unreadable)


def stored_entries(cache_dir: str) -> list[StoredEntry]:
    """The entries :func:`read_store` could read (an entry that cannot be read is passed
    over).

    >>> stored_entries("/no/such/cache")
    []
    """
    return read_store(cache_dir).entries


MAX_CHOICES = 512  # autotune results a run keeps (one per Triton kernel that autotuned)
_NOT_A_CHOICE = ("time_taken_ms", "triton_cache_hash")  # the benchmark's figures, not the choice


def autotune_choices(cache_dir: str) -> dict[str, str]:
    """What autotuning chose for each kernel of ``cache_dir`` (its ``*.best_config`` files,
    next to the kernels, ``<2 chars>/<hash>.best_config``): file name -> a digest of the
    choice (the config without how long benchmarking took). Two runs whose keys are equal
    but whose digests differ built different kernels. Empty where nothing autotuned (the CPU).

    >>> autotune_choices("/no/such/cache")
    {}
    """
    found: dict[str, str] = {}
    for path, info in _regular_files(cache_dir, 1):
        if not path.endswith(".best_config") or info.st_size > 1 << 20 or len(found) >= MAX_CHOICES:
            continue
        try:
            with open_input(path, pipes=False, links=False) as source:
                config = json.loads(source.read_all(1 << 20))
        except (RunFileError, OSError, ValueError, RecursionError):
            continue
        if isinstance(config, dict):
            choice = {k: v for k, v in config.items() if k not in _NOT_A_CHOICE}
            text = json.dumps(choice, sort_keys=True, default=str)
            found[os.path.basename(path)] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return dict(sorted(found.items()))
