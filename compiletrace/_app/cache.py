"""Portable compile caches: torch's cache artifacts saved to, inspected in and loaded from
a file.

An artifacts file is code. Its entries are pickles that torch unpickles (inductor's while
it loads the file, the rest when a compile looks them up), and the compiled graphs in it
carry the Python and C++ source that inductor runs when a compile hits them. So:

- :func:`inspect_cache_artifacts` says what a file holds and runs nothing from it: the
  container is parsed byte by byte and the pickles are read by a restricted unpickler
  (:mod:`compiletrace._io.artifacts`) that admits only the classes torch's artifacts are
  made of, and even those as inert stand-ins.
- :func:`load_cache_artifacts` checks the file that way first (its digest, every global
  its pickles name, every path torch would write), refuses what it cannot vouch for, and
  then hands the very bytes it checked to torch. ``trust=True`` skips the checks: the
  caller vouches for the file.
- :func:`save_cache_artifacts` writes ``PATH.sha256`` beside the file, so that ``load``
  and ``inspect`` catch a damaged or swapped file.

What the check cannot do is vouch for the generated code itself: a file that passes still
runs its kernels' source when a compile hits them. Load files you would run as code (see
docs/security.md).
"""

from __future__ import annotations

import collections
import json
import os
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from compiletrace._core.torch_compat import (
    CACHE_ARTIFACT_FIELD_USES,
    CACHE_ARTIFACT_GLOBALS,
    CACHE_ARTIFACT_JSON_KINDS,
    GUARD_ARGUMENT,
    GUARD_CALLS,
    GUARD_CONSTANTS,
    REFUSED_ARTIFACT_GLOBALS,
    FieldUse,
    cache_artifact_class_shape,
    cache_artifact_location,
    cache_artifact_object_paths,
    inductor_cache_dir,
    quiet_cache_artifact_logs,
)
from compiletrace._data import cache_artifacts as _data
from compiletrace._data.cache_artifacts import (
    DIGEST_MISSING,
    DIGEST_VERIFIED,
    DIGEST_WRITTEN,
    NO_KEY,
    SIGNATURE_BAD,
    SIGNED_BY_OTHER,
    SIGNED_BY_YOU,
    UNSIGNED,
    ArtifactEntry,
)
from compiletrace._io.artifacts import (
    Digest,
    Global,
    RawArtifact,
    digest_path,
    expression_problem,
    parse_container,
    printable,
    read_digest,
    read_pickle,
    sha256_hex,
    standin_fields,
    standin_global,
    standin_shape_problem,
    walk,
    write_digest,
)
from compiletrace._io.errors import RunFileError, UsageError
from compiletrace._io.files import STDOUT, write_bytes
from compiletrace._io.signing import KEY_ENV, key_file, load_signing_key
from compiletrace._version import __version__

__all__ = [
    "ArtifactEntry",
    "CacheArtifacts",
    "check_cache_artifacts",
    "inspect_cache_artifacts",
    "load_cache_artifacts",
    "save_cache_artifacts",
]


class CacheArtifacts(_data.CacheArtifacts):
    """What a cache-artifacts file holds (:class:`compiletrace._data.cache_artifacts.CacheArtifacts`),
    with what ``compiletrace cache inspect`` prints about it."""

    def report(self) -> str:
        """The one-line description, the digest, who saved it, what the check found, and
        one line per artifact (:func:`compiletrace.reports.cache_artifacts_text`)."""
        from compiletrace.reports import cache_artifacts_text

        return cache_artifacts_text(self, str(torch.__version__))


def _counts(info: Any) -> dict[str, int]:
    artifacts = getattr(info, "artifacts", None) or {}
    return {str(kind): len(keys) for kind, keys in artifacts.items() if keys}


def save_cache_artifacts(path: str | os.PathLike[str]) -> CacheArtifacts:
    """Save every compile-cache artifact this process produced so far to ``path`` (written
    atomically). Compile and run the model first.

    The torch bytes go to ``path`` unchanged (``torch.compiler.load_cache_artifacts`` reads
    the file as it is); their SHA-256 goes to ``PATH.sha256`` beside it, in the format
    ``sha256sum -c`` checks, with the torch and compiletrace versions as comments.

    Raises :class:`~compiletrace.UsageError` when there is nothing to save.

    Example (after compiling and running a model with inductor)::

        info = save_cache_artifacts("demo.cache")  # also writes demo.cache.sha256
        print(info.describe())  # demo.cache: 0.50 MB, 2 aot_autograd, 2 inductor
    """
    if os.fspath(path) == STDOUT:
        raise UsageError("cache artifacts need a file path: their digest is written beside it (PATH.sha256)")
    start = time.perf_counter()
    saved = torch.compiler.save_cache_artifacts()
    if saved is None or not saved[0]:
        raise UsageError(
            "torch produced no cache artifacts: compile and run the model with the inductor backend first"
        )
    data, info = saved
    target = Path(path)
    key = load_signing_key(create=True)
    assert key is not None  # create=True makes one or raises
    write_bytes(target, data)
    # The digest is written second: a crash between the two leaves a digest that does not
    # match, which load refuses, never an unchecked file that looks checked.
    write_digest(
        target,
        data,
        torch_version=str(torch.__version__),
        compiletrace_version=__version__,
        signature=(key.sign(data), key.key_id),
    )
    return CacheArtifacts(
        str(target),
        len(data),
        _counts(info),
        time.perf_counter() - start,
        sha256=sha256_hex(data),
        digest=DIGEST_WRITTEN,
        torch_version=str(torch.__version__),
        entries=_entries(parse_container(data, str(target))),
        signature=SIGNED_BY_YOU,
        key_id=key.key_id,
    )


def inspect_cache_artifacts(path: str | os.PathLike[str]) -> CacheArtifacts:
    """What a cache-artifacts file holds: artifacts per kind, their keys and sizes, the
    torch that saved it, its SHA-256. Runs nothing from the file and writes nothing.

    The file is checked as :func:`load_cache_artifacts` checks it, except that a missing
    ``PATH.sha256`` is reported (``digest == "missing"``) rather than refused. Raises
    :class:`~compiletrace.RunFileError` naming the file for one that does not match its
    digest, is not a cache-artifacts file, or names a class (or a path) that loading it
    would have to trust.

    >>> inspect_cache_artifacts("/no/such.cache")
    Traceback (most recent call last):
      ...
    compiletrace._io.errors.RunFileError: cache artifacts file '/no/such.cache' does not exist
    """
    target, data = _read(path)
    start = time.perf_counter()
    info = _examine(target, data, trust=False, require_digest=False, cache_dir=None)
    return replace(info, seconds=time.perf_counter() - start)


def check_cache_artifacts(path: str | os.PathLike[str], *, trust: bool = False) -> CacheArtifacts:
    """Check a file as :func:`load_cache_artifacts` would, without loading it (the start-up
    benchmark checks once before it starts any process). With ``trust=True`` only that it
    is a cache-artifacts file whose digest, if there is one, matches."""
    target, data = _read(path)
    start = time.perf_counter()
    info = _examine(target, data, trust=trust, require_digest=not trust, cache_dir=None)
    return replace(info, seconds=time.perf_counter() - start)


def load_cache_artifacts(path: str | os.PathLike[str], *, trust: bool = False) -> CacheArtifacts:
    """Load a cache-artifacts file into this process's compile caches (the directories torch
    uses now, e.g. ``TORCHINDUCTOR_CACHE_DIR``), before compiling.

    The file is checked first, and refused with :class:`~compiletrace.RunFileError` naming
    the file and the reason, unless it: matches its ``PATH.sha256``; is exactly the
    container torch writes; has pickles that name only the classes torch's artifacts are
    made of (read without running them); and puts every file torch would write inside the
    cache directory. Torch then loads the very bytes that were checked.

    ``trust=True`` is the way past the check, for a file you vouch for: torch unpickles it
    unchecked, and whatever it runs, runs. Only a digest that does not match still stops it
    (the file is not the one that was saved).

    Example::

        info = load_cache_artifacts("demo.cache")  # refuses a file it cannot vouch for
        print(f"loaded {info.describe()} in {info.seconds:.2f} s")
    """
    target, data = _read(path)
    start = time.perf_counter()
    cache_dir = None if trust else inductor_cache_dir()
    info = _examine(target, data, trust=trust, require_digest=not trust, cache_dir=cache_dir)
    try:
        with quiet_cache_artifact_logs():
            loaded = torch.compiler.load_cache_artifacts(data)
    except OSError:
        raise  # the cache directory could not be written: not the file's fault
    except Exception as exc:
        raise RunFileError(f"torch could not load {target}: {type(exc).__name__}: {exc}") from exc
    if loaded is None:
        raise RunFileError(f"{target} is not a torch cache-artifacts file (torch could not read it)")
    return replace(info, artifacts=_counts(loaded), seconds=time.perf_counter() - start)


# -- the check --------------------------------------------------------------------------------


def _read(path: str | os.PathLike[str]) -> tuple[Path, bytes]:
    target = Path(path)
    try:
        return target, target.read_bytes()
    except FileNotFoundError:
        raise RunFileError(f"cache artifacts file {str(target)!r} does not exist") from None
    except OSError as exc:
        raise RunFileError(
            f"cannot read cache artifacts file {str(target)!r}: {exc.strerror or exc}"
        ) from None


def _entries(raws: list[RawArtifact]) -> tuple[ArtifactEntry, ...]:
    return tuple(ArtifactEntry(r.kind, r.key, len(r.content)) for r in raws)


def _examine(
    target: Path, data: bytes, *, trust: bool, require_digest: bool, cache_dir: str | None
) -> CacheArtifacts:
    """Everything short of loading: the digest, the container, and (unless ``trust``) the
    pickles and the paths. Raises RunFileError for the first thing it cannot vouch for."""
    sha256 = sha256_hex(data)
    digest = _verify_digest(target, sha256, require=require_digest)
    raws = parse_container(data, str(target))
    signature = _signature_status(data, digest)
    if require_digest and signature != SIGNED_BY_YOU:
        raise _unsigned(target, signature, digest)
    found = collections.Counter[Global]() if trust else _check_artifacts(str(target), raws, cache_dir)
    return CacheArtifacts(
        str(target),
        len(data),
        dict(collections.Counter(r.kind for r in raws)),
        sha256=sha256,
        digest=DIGEST_MISSING if digest is None else DIGEST_VERIFIED,
        torch_version=None if digest is None else digest.torch_version,
        entries=_entries(raws),
        globals=tuple(sorted(f"{module}.{name}" for module, name in found)),
        checked=not trust,
        signature=signature,
        key_id=None if digest is None else digest.key_id,
    )


def _signature_status(data: bytes, digest: Digest | None) -> str:
    if digest is None or digest.signature is None or digest.key_id is None:
        return UNSIGNED
    key = load_signing_key(create=False)
    if key is None:
        return NO_KEY
    if key.key_id != digest.key_id:
        return SIGNED_BY_OTHER
    return SIGNED_BY_YOU if key.verifies(data, digest.signature) else SIGNATURE_BAD


def _unsigned(target: Path, signature: str, digest: Digest | None) -> RunFileError:
    """Why a file that is not signed by this user's key is refused, and what to do."""
    fix = "pass --trust (trust=True) if you trust where it came from"
    if signature == SIGNED_BY_OTHER:
        assert digest is not None
        why = (
            f"it is signed by another key ({digest.key_id}); set {KEY_ENV} to the key that signed "
            f"it (a team's or CI's shared key), or {fix}"
        )
    elif signature == NO_KEY:
        why = (
            f"it is signed by key {digest.key_id if digest else '?'}, and there is no signing key here "
            f"({KEY_ENV} is unset and {key_file()} does not exist); set {KEY_ENV} to that key, or {fix}"
        )
    elif signature == SIGNATURE_BAD:
        why = "its signature does not verify under your key: it was damaged or forged after it was signed"
    else:
        why = (
            "it is not signed ('cache save' signs what it writes with your key); save it again with "
            f"this compiletrace, or {fix}"
        )
    return RunFileError(f"{target} is refused: {why}")


def _verify_digest(target: Path, sha256: str, *, require: bool) -> Digest | None:
    digest = read_digest(target)
    sidecar = digest_path(target)
    if digest is None:
        if require:
            raise RunFileError(
                f"{target} has no digest beside it ({sidecar.name} is missing), so compiletrace "
                "cannot tell it is the file 'cache save' wrote; save it again, or pass --trust "
                "(trust=True) if you trust where it came from"
            )
        return None
    if digest.sha256 != sha256:
        raise RunFileError(
            f"{target} does not match its digest {sidecar.name} (sha256 {sha256[:12]}..., "
            f"expected {digest.sha256[:12]}...): it was damaged or replaced after it was saved"
        )
    return digest


def _check_artifacts(
    source: str, raws: list[RawArtifact], cache_dir: str | None
) -> collections.Counter[Global]:
    """Check every artifact without running it; returns the globals their pickles name."""
    found: collections.Counter[Global] = collections.Counter()
    for raw in raws:
        where = f"{source}: {printable(raw.kind)} artifact {raw.key!r}"
        parts = cache_artifact_location(raw.kind, raw.key)
        is_json = raw.kind in CACHE_ARTIFACT_JSON_KINDS
        if parts is None or not (is_json or raw.kind in CACHE_ARTIFACT_GLOBALS):
            raise RunFileError(
                f"{where}: compiletrace does not know {raw.kind!r} artifacts, so it cannot check "
                "what loading them would run or write (--trust loads them anyway)"
            )
        _check_path(where, "its key", raw.key, parts, cache_dir)
        if is_json:
            try:
                json.loads(raw.content)
            except ValueError:
                raise RunFileError(f"{where} is not JSON, as {raw.kind} artifacts are") from None
            continue
        scan = read_pickle(raw.content, CACHE_ARTIFACT_GLOBALS[raw.kind], where, REFUSED_ARTIFACT_GLOBALS)
        found.update(scan.globals)
        for root in scan.roots:
            for obj in walk(root):
                cls = standin_global(obj)
                if cls is not None:
                    _check_object(where, cls, obj, cache_dir)
    return found


def _refuse(where: str, cls: Global, problem: str) -> RunFileError:
    return RunFileError(
        f"{where}: its {cls[0]}.{cls[1]} object {problem}, which no artifact torch writes does; "
        "compiletrace will not load it (--trust loads it anyway)"
    )


def _check_object(where: str, cls: Global, obj: Any, cache_dir: str | None) -> None:
    """One object of an allowed class: its shape must be one the installed torch's class
    has (no stand-in carrying another class's attributes), and every field torch acts on
    (CACHE_ARTIFACT_FIELD_USES) must hold what torch itself writes there."""
    problem = standin_shape_problem(obj)
    if problem is not None:
        raise _refuse(where, cls, problem)
    shape = cache_artifact_class_shape(cls)
    if shape is None:
        raise _refuse(where, cls, "names a class this torch does not have")
    if len(obj.ct_args) > shape.max_args:
        raise _refuse(where, cls, f"is made with {len(obj.ct_args)} arguments, more than it takes")
    if obj.ct_items and not shape.items:
        raise _refuse(where, cls, "is filled with items, though it is no container")
    fields = standin_fields(obj)
    unknown = sorted(set(fields) - (shape.attributes or frozenset()))
    if unknown:
        shown = ", ".join(printable(str(name)) for name in unknown[:5])
        raise _refuse(where, cls, f"sets attributes its class does not have ({shown})")
    for (use_cls, name), use in CACHE_ARTIFACT_FIELD_USES.items():
        if use_cls != cls or name not in fields:
            continue
        value = fields[name]
        if use is FieldUse.GUARD_EXPRESSION and value is not None:
            bad = (
                expression_problem(
                    value, arguments=GUARD_ARGUMENT, calls=GUARD_CALLS, constants=GUARD_CONSTANTS
                )
                if isinstance(value, str)
                else "is not text"
            )
            if bad is not None:
                raise _refuse(where, cls, f"has a {name} torch would evaluate, and {bad}")
        elif use is FieldUse.MUST_BE_EMPTY and not _is_empty(value):
            raise _refuse(where, cls, f"has entries in {name} ({use.value})")
        elif use is FieldUse.CODE and not isinstance(value, str):
            raise _refuse(where, cls, f"has a {name} that is not text")
        elif use is FieldUse.FILE_NAME and not isinstance(value, (str, tuple)):
            raise _refuse(where, cls, f"has a {name} that is not a name")
    for name, value, obj_parts in cache_artifact_object_paths(cls, fields):
        _check_path(where, f"its {cls[1]}.{name} {value!r}", value, obj_parts, cache_dir)


def _is_empty(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return not value
    return standin_global(value) is not None and not value.ct_items and not value.ct_args


_DRIVE = re.compile(r"^[A-Za-z]:")


def _path_problem(raw: str, parts: tuple[str, ...]) -> str | None:
    if "\x00" in raw:
        return "it holds a NUL byte"
    if not raw.isprintable():
        return "it holds a control character"
    if raw.startswith(("/", "\\")) or os.path.isabs(raw) or _DRIVE.match(raw):
        return "it is an absolute path"
    if ".." in re.split(r"[/\\]", raw):
        return "it holds '..'"
    for part in parts:
        if part in ("", ".", ".."):
            return f"it makes an empty, '.' or '..' path part ({part!r})"
        if "/" in part or "\\" in part:
            return "it holds a path separator where torch expects one name"
    return None


def _check_path(where: str, what: str, raw: str, parts: tuple[str, ...], cache_dir: str | None) -> None:
    """Refuse a name that would put a file outside the cache directory: an absolute path,
    '..', a separator inside a name, or (given ``cache_dir``) a path that resolves outside
    it, through a symlink for instance."""
    problem = _path_problem(raw, parts)
    if problem is None and cache_dir is not None:
        base = os.path.realpath(cache_dir)
        resolved = os.path.realpath(os.path.join(base, *parts))
        if os.path.commonpath([base, resolved]) != base:
            problem = f"it resolves to {resolved}"
    if problem is not None:
        raise RunFileError(
            f"{where}: {what} would put a file outside the cache directory ({problem}); "
            "compiletrace will not load it"
        )
