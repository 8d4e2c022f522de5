"""What ``compiletrace cache inspect`` prints about a file of torch's cache artifacts."""

from __future__ import annotations

from compiletrace._data.cache_artifacts import (
    DIGEST_MISSING,
    NO_KEY,
    SIGNATURE_BAD,
    SIGNED_BY_OTHER,
    SIGNED_BY_YOU,
    UNSIGNED,
    CacheArtifacts,
)
from compiletrace._io.artifacts import digest_path
from compiletrace._io.text import printable

__all__ = ["cache_artifacts_text"]


def cache_artifacts_text(info: CacheArtifacts, torch_version: str) -> str:
    """What ``compiletrace cache inspect`` prints: the one-line description, the digest,
    who saved it (and whether ``torch_version``, this process's, can use it), what the
    check found, and one line per artifact.

    >>> from compiletrace._data.cache_artifacts import ArtifactEntry
    >>> entry = ArtifactEntry("inductor", "fxgraph-1", 1200)
    >>> info = CacheArtifacts("demo.cache", 500_000, {"inductor": 1}, sha256="ab12", torch_version="2.13.0",
    ...                       entries=(entry,), globals=("torch.Size",))
    >>> print(cache_artifacts_text(info, "2.13.0"))  # doctest: +NORMALIZE_WHITESPACE
    demo.cache: 0.50 MB, 1 inductor
    sha256:   ab12 (no demo.cache.sha256 beside it: 'cache load' refuses it without --trust)
    signed:   no: 'cache load' refuses it without --trust
    saved by: torch 2.13.0
    checked:  1 artifacts; their pickles name 1 classes and functions, all on the list of what
    torch's artifacts are made of; every path stays inside the cache directory; nothing in the file was run
    kind           bytes  key
    inductor        1200  fxgraph-1
    """
    sidecar = digest_path(info.path).name
    if info.digest == DIGEST_MISSING:
        digest = f"{info.sha256} (no {sidecar} beside it: 'cache load' refuses it without --trust)"
    else:
        digest = f"{info.sha256} (matches {sidecar})"
    here = torch_version
    saved = "unknown (no digest file)" if info.torch_version is None else f"torch {info.torch_version}"
    if info.torch_version is not None and info.torch_version != here:
        saved += f"; this is torch {here}, whose caches will not use it"
    signed = {
        SIGNED_BY_YOU: f"by your key {info.key_id}: 'cache load' takes it",
        SIGNED_BY_OTHER: f"by another key ({info.key_id}): 'cache load' refuses it without --trust",
        SIGNATURE_BAD: f"with your key id {info.key_id}, but the signature does not verify",
        NO_KEY: f"by key {info.key_id}; there is no signing key here to check it with",
        UNSIGNED: "no: 'cache load' refuses it without --trust",
    }[info.signature]
    lines = [
        info.describe(),
        f"sha256:   {digest}",
        f"signed:   {signed}",
        f"saved by: {saved}",
    ]
    if info.checked:
        lines.append(
            f"checked:  {len(info.entries)} artifacts; their pickles name {len(info.globals)} classes "
            "and functions, all on the list of what torch's artifacts are made of; every path stays "
            "inside the cache directory; nothing in the file was run"
        )
    else:
        lines.append("checked:  no (trusted)")
    width = max([len("kind"), *(len(printable(e.kind)) for e in info.entries)])
    lines.append(f"{'kind':<{width}}  {'bytes':>9}  key")
    lines += [f"{printable(e.kind):<{width}}  {e.size_bytes:>9}  {printable(e.key)}" for e in info.entries]
    return "\n".join(lines)
