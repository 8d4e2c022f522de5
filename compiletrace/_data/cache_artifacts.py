"""What a file of torch's portable cache artifacts holds, as plain data: its artifacts, its
digest and signature, what the check of it found (reading, checking, saving and loading one
is :mod:`compiletrace._app.cache`'s; ``compiletrace cache inspect``'s text is a view).

>>> CacheArtifacts("demo.cache", 500_000, {"inductor": 2, "aot_autograd": 2}).describe()
'demo.cache: 0.50 MB, 2 aot_autograd, 2 inductor'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compiletrace._data.run_meta import LoadedArtifacts

__all__ = [
    "DIGEST_MISSING",
    "DIGEST_VERIFIED",
    "DIGEST_WRITTEN",
    "NO_KEY",
    "SIGNATURE_BAD",
    "SIGNED_BY_OTHER",
    "SIGNED_BY_YOU",
    "UNSIGNED",
    "ArtifactEntry",
    "CacheArtifacts",
]

# CacheArtifacts.digest: what is known about PATH.sha256.
DIGEST_WRITTEN = "written"  # save wrote it
DIGEST_VERIFIED = "verified"  # it is there and matches the file
DIGEST_MISSING = "missing"  # there is none beside the file

# CacheArtifacts.signature: what is known about the signature in PATH.sha256.
SIGNED_BY_YOU = "yours"  # signed by this user's key, and it verifies
SIGNED_BY_OTHER = "another key"  # signed, by a key that is not this user's
SIGNATURE_BAD = "does not verify"  # signed with this user's key id, yet the HMAC does not match
UNSIGNED = "unsigned"  # no signature (or no digest file at all)
NO_KEY = "no key here"  # signed, but this user has no key to check it with


@dataclass(frozen=True)
class ArtifactEntry:
    """One artifact in a file: its kind, its key, and the size of its content."""

    kind: str
    key: str
    size_bytes: int


@dataclass(frozen=True)
class CacheArtifacts:
    """What a cache-artifacts file holds (artifact keys per kind) and what handling it cost.

    ``digest`` says what is known about the ``PATH.sha256`` beside it (``"written"``,
    ``"verified"`` or ``"missing"``); ``torch_version`` is the torch that saved it, as the
    digest file records it; ``checked`` is False when the file was loaded with
    ``trust=True`` and compiletrace vouched for nothing.
    """

    path: str
    size_bytes: int
    artifacts: dict[str, int] = field(default_factory=dict)  # kind ("inductor", ...) -> count
    seconds: float = 0.0  # time to save, to inspect, or to check and load
    sha256: str = ""
    digest: str = DIGEST_MISSING
    torch_version: str | None = None
    entries: tuple[ArtifactEntry, ...] = ()
    globals: tuple[str, ...] = ()  # "module.name" of every class the pickles name, sorted
    checked: bool = True
    signature: str = UNSIGNED  # SIGNED_BY_YOU, SIGNED_BY_OTHER, SIGNATURE_BAD, UNSIGNED or NO_KEY
    key_id: str | None = None  # the key that signed it

    def loaded(self) -> LoadedArtifacts:
        """What a run's meta keeps of a file it loaded (``RunMeta.cache_artifacts``)."""
        return LoadedArtifacts(
            self.path,
            self.size_bytes,
            dict(self.artifacts),
            self.seconds,
            self.sha256,
            self.digest,
            self.torch_version,
            self.checked,
            self.signature,
            self.key_id,
        )

    def to_dict(self) -> dict[str, Any]:
        return self.loaded().to_dict()

    def describe(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(self.artifacts.items())) or "no artifacts"
        return f"{self.path}: {self.size_bytes / 1e6:.2f} MB, {kinds}"
