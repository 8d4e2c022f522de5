"""Portable compile caches: torch's cache artifacts saved to and loaded from a file."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from compiletrace._io.errors import RunFileError, UsageError
from compiletrace._io.files import write_bytes

__all__ = ["CacheArtifacts", "load_cache_artifacts", "save_cache_artifacts"]


@dataclass(frozen=True)
class CacheArtifacts:
    """What a cache-artifacts file holds (artifact keys per kind) and what handling it cost."""

    path: str
    size_bytes: int
    artifacts: dict[str, int] = field(default_factory=dict)  # kind ("inductor", ...) -> count
    seconds: float = 0.0  # time to save or to load

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size_bytes": self.size_bytes,
            "artifacts": dict(self.artifacts),
            "seconds": self.seconds,
        }

    def describe(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.artifacts.items())) or "no artifacts"
        return f"{self.path}: {self.size_bytes / 1e6:.2f} MB, {kinds}"


def _counts(info: Any) -> dict[str, int]:
    artifacts = getattr(info, "artifacts", None) or {}
    return {str(kind): len(keys) for kind, keys in artifacts.items() if keys}


def save_cache_artifacts(path: str | os.PathLike[str]) -> CacheArtifacts:
    """Save every compile-cache artifact this process produced so far to ``path`` (written
    atomically). Compile and run the model first.

    Raises :class:`~compiletrace.UsageError` when there is nothing to save.
    """
    start = time.perf_counter()
    saved = torch.compiler.save_cache_artifacts()
    if saved is None or not saved[0]:
        raise UsageError(
            "torch produced no cache artifacts: compile and run the model with the inductor backend first"
        )
    data, info = saved
    write_bytes(path, data)
    return CacheArtifacts(str(Path(path)), len(data), _counts(info), time.perf_counter() - start)


def load_cache_artifacts(path: str | os.PathLike[str]) -> CacheArtifacts:
    """Load a cache-artifacts file into this process's compile caches (the directories torch
    uses now, e.g. ``TORCHINDUCTOR_CACHE_DIR``), before compiling.

    Raises :class:`~compiletrace.RunFileError` for a missing file or one torch cannot read.
    """
    target = Path(path)
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        raise RunFileError(f"cache artifacts file {str(target)!r} does not exist") from None
    except OSError as exc:
        raise RunFileError(
            f"cannot read cache artifacts file {str(target)!r}: {exc.strerror or exc}"
        ) from None
    start = time.perf_counter()
    try:
        info = torch.compiler.load_cache_artifacts(data)
    except Exception as exc:
        raise RunFileError(f"{target} is not a torch cache-artifacts file: {exc}") from exc
    if info is None:
        raise RunFileError(f"{target} is not a torch cache-artifacts file (torch could not read it)")
    return CacheArtifacts(str(target), len(data), _counts(info), time.perf_counter() - start)
