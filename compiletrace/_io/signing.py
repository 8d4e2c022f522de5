"""The key that signs the cache-artifacts files ``cache save`` writes, so that ``cache load``
can tell by construction that a file is one of yours, instead of by inspecting it.

A signature is HMAC-SHA256 of the file's bytes under a secret only the user holds: the
value of ``COMPILETRACE_SIGNING_KEY`` (a team's or a CI's shared secret) or else a key file
in the user's configuration directory (``$XDG_CONFIG_HOME/compiletrace/signing-key``,
``~/.config/...`` by default), created with permissions 0600 the first time a file is
signed. A key file that others may read or write is refused: whoever can read it can sign.

The key id names a key without giving it away (an HMAC of a fixed label under the key),
so a refusal can say "signed by another key" rather than "damaged".

>>> key = SigningKey(b"0123456789abcdef0123456789abcdef", "a test key")
>>> signature = key.sign(b"artifacts")
>>> key.verifies(b"artifacts", signature), key.verifies(b"artifacts!", signature)
(True, False)
>>> len(key.key_id)
16
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from compiletrace._io.errors import UsageError

__all__ = ["KEY_ENV", "MIN_KEY_BYTES", "SigningKey", "key_file", "load_signing_key"]

KEY_ENV = "COMPILETRACE_SIGNING_KEY"
MIN_KEY_BYTES = 16  # a shorter secret can be guessed
_KEY_FILE_NAME = "signing-key"
_KEY_ID_LABEL = b"compiletrace signing key id"


@dataclass(frozen=True)
class SigningKey:
    """A secret and where it came from (``source``: the variable or the file, for messages)."""

    secret: bytes = field(repr=False)
    source: str

    @property
    def key_id(self) -> str:
        """16 hex digits that name this key and reveal nothing of it."""
        return hmac.new(self.secret, _KEY_ID_LABEL, hashlib.sha256).hexdigest()[:16]

    def sign(self, data: bytes) -> str:
        """The HMAC-SHA256 of ``data`` under this key, in hex."""
        return hmac.new(self.secret, data, hashlib.sha256).hexdigest()

    def verifies(self, data: bytes, signature: str) -> bool:
        """Whether ``signature`` is this key's signature of ``data`` (in constant time)."""
        return hmac.compare_digest(self.sign(data), signature)


def key_file() -> Path:
    """Where the user's key file lives: ``$XDG_CONFIG_HOME/compiletrace/signing-key``, or
    ``~/.config/compiletrace/signing-key`` when the variable is unset or empty."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "compiletrace" / _KEY_FILE_NAME


def load_signing_key(*, create: bool) -> SigningKey | None:
    """The user's signing key: ``COMPILETRACE_SIGNING_KEY`` if set, else the key file. With
    ``create=True`` a missing key file is made (a fresh 256-bit secret, mode 0600, in a
    directory of mode 0700); otherwise a missing one gives None.

    Raises :class:`~compiletrace.UsageError` for a key too short, or a key file that is not
    a regular file of the user's, that others may read or write, or that cannot be read.
    """
    value = os.environ.get(KEY_ENV)
    if value:
        secret = value.strip().encode("utf-8")
        if len(secret) < MIN_KEY_BYTES:
            raise UsageError(
                f"{KEY_ENV} holds {len(secret)} bytes; a signing key needs {MIN_KEY_BYTES} at least "
                "(e.g. the output of: python -c 'import secrets; print(secrets.token_hex(32))')"
            )
        return SigningKey(secret, KEY_ENV)
    path = key_file()
    if create:
        _create_key_file(path)
    return _read_key_file(path)


def _create_key_file(path: Path) -> None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        return  # made earlier, or by another process just now: read that one
    except OSError as exc:
        raise UsageError(
            f"cannot create the signing key {str(path)!r}: {exc.strerror or exc}; "
            f"set {KEY_ENV} instead, or XDG_CONFIG_HOME to a directory you can write"
        ) from None
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(secrets.token_hex(32) + "\n")
        out.flush()
        os.fsync(out.fileno())


def _read_key_file(path: Path) -> SigningKey | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        why = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise UsageError(f"cannot read the signing key {str(path)!r}: {why}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"the signing key {str(path)!r} is not a regular file")
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise UsageError(f"the signing key {str(path)!r} belongs to another user; it must be yours")
        if info.st_mode & 0o077:
            raise UsageError(
                f"the signing key {str(path)!r} can be read or written by others "
                f"(mode {stat.S_IMODE(info.st_mode):04o}); whoever can read it can sign files as you: "
                f"chmod 600 {path}"
            )
        secret = handle.read(4096).strip()
    if len(secret) < MIN_KEY_BYTES:
        raise UsageError(
            f"the signing key {str(path)!r} holds {len(secret)} bytes; a key needs {MIN_KEY_BYTES} at "
            "least: remove the file and 'cache save' makes a new one"
        )
    return SigningKey(secret, str(path))
