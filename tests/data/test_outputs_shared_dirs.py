"""Outputs in a shared directory (docs/security.md, "What it writes"): a link or a FIFO another
user planted at an output's name, in a sticky world-writable directory such as /tmp.

compiletrace walks an output's path as the kernel does and applies the kernel's rule for such
directories (``fs.protected_symlinks``, ``fs.protected_fifos``) whatever the machine's setting:
another user's link there is never followed, and a FIFO never hangs the command. As root, the
test makes the other user's entries with ``lchown`` (elsewhere those tests skip, saying so).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import compiletrace
from compiletrace._io import files
from compiletrace._io.files import check_writable, write_bytes, write_json, write_text
from compiletrace.cli import main

OTHER_UID = 54321  # another local user: no account needed, only a uid of its own
INPUTS = Path(__file__).resolve().parent.parent / "inputs"
RUN = INPUTS / "runs" / "cli_small.run.json"

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="an entry owned by another user needs root (lchown); CI runs as root"
)


@contextlib.contextmanager
def shared_dir(owner: int | None = None) -> Iterator[Path]:
    """A directory like /tmp (mode 1777), owned by ``owner`` (the user by default)."""
    base = Path(tempfile.mkdtemp(prefix="compiletrace-test-shared-"))
    base.chmod(0o1777)
    if owner is not None:
        os.chown(base, owner, owner)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def planted_link(at: Path, to: Path, uid: int) -> Path:
    at.symlink_to(to)
    os.lchown(at, uid, uid)
    return at


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file of the user's that a planted link points at (their shell's start-up file)."""
    path = tmp_path / "home" / ".bashrc"
    path.parent.mkdir()
    path.write_text("# the user's own\n")
    return path


@needs_root
def test_another_users_link_in_a_shared_directory_is_refused_and_nothing_written(victim: Path) -> None:
    with shared_dir() as shared:
        link = planted_link(shared / "out.json", victim, OTHER_UID)
        with pytest.raises(compiletrace.OutputError, match=r"another user \(uid 54321\)") as raised:
            write_json(link, {"a": 1})
        assert raised.value.errno == errno.EPERM
        with pytest.raises(compiletrace.UsageError, match="a link another user"):
            check_writable(link, "--json")
        assert victim.read_text() == "# the user's own\n"
        assert link.is_symlink() and sorted(p.name for p in shared.iterdir()) == ["out.json"]


@needs_root
def test_another_users_link_on_the_way_to_an_output_is_refused_too(victim: Path) -> None:
    with shared_dir() as shared:
        planted_link(shared / "runs", victim.parent, OTHER_UID)  # a directory link, mid-path
        with pytest.raises(compiletrace.OutputError, match="a link another user"):
            write_text(shared / "runs" / ".bashrc", "echo owned\n")
        assert victim.read_text() == "# the user's own\n"


@needs_root
def test_links_the_kernel_follows_are_followed(victim: Path, tmp_path: Path) -> None:
    """The rule's three exceptions: the user's own link, a link of the directory's owner, and
    any link in a directory that is not sticky and world-writable."""
    with shared_dir() as shared:
        write_text(planted_link(shared / "mine.json", victim, os.geteuid()), "mine\n")
        assert victim.read_text() == "mine\n"
    with shared_dir(owner=OTHER_UID) as theirs:
        write_text(planted_link(theirs / "owners.json", victim, OTHER_UID), "the owner's\n")
        assert victim.read_text() == "the owner's\n"
    plain = tmp_path / "plain"
    plain.mkdir(mode=0o755)
    link = planted_link(plain / "out.json", victim, OTHER_UID)
    write_text(link, "not shared\n")
    assert victim.read_text() == "not shared\n" and link.is_symlink()


@needs_root
@pytest.mark.parametrize(
    "argv",
    [
        ["report", str(RUN), "--json", "{out}"],
        ["report", str(RUN), "--html", "{out}"],
        ["report", str(RUN), "--chrome-trace", "{out}"],
        ["doctor", str(RUN), "--json", "{out}"],
        ["why", str(RUN), str(RUN), "--json", "{out}"],
    ],
)
def test_every_output_of_the_command_line_refuses_the_planted_link(
    argv: list[str], victim: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with shared_dir() as shared:
        link = planted_link(shared / "out", victim, OTHER_UID)
        assert main([a.format(out=link) for a in argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("compiletrace: error:"), err
        assert "another user" in err, err
        assert victim.read_text() == "# the user's own\n"
        assert sorted(p.name for p in shared.iterdir()) == ["out"]


@needs_root
def test_another_users_fifo_in_a_shared_directory_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "STREAM_TIMEOUT_S", 0.2)
    with shared_dir() as shared:
        fifo = shared / "out.json"
        os.mkfifo(fifo)
        os.chown(fifo, OTHER_UID, OTHER_UID)
        with pytest.raises(compiletrace.OutputError, match="FIFO another user"):
            write_text(fifo, "secret\n")
        with pytest.raises(compiletrace.UsageError, match="FIFO another user"):
            check_writable(fifo, "--json")


def test_a_fifo_with_no_reader_fails_after_the_timeout_instead_of_hanging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "STREAM_TIMEOUT_S", 0.2)
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    with pytest.raises(compiletrace.OutputError, match=r"no reader opened the FIFO in 0\.2 s"):
        write_text(fifo, "x")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_fifo_whose_reader_stops_reading_fails_after_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "STREAM_TIMEOUT_S", 0.3)
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # opened, never read
    try:
        with pytest.raises(compiletrace.OutputError, match="the reader took no data"):
            write_bytes(fifo, b"x" * (4 << 20))  # far more than a pipe holds
    finally:
        os.close(reader)


def test_a_descriptor_link_is_written_through(tmp_path: Path) -> None:
    """``/dev/stdout`` and ``/proc/self/fd/N`` name a descriptor, whose link text
    ("pipe:[123]") is no path: the stream behind it is written."""
    read, write = os.pipe()
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(os.read(read, 1 << 16)))
    reader.start()
    try:
        write_text(f"/proc/self/fd/{write}", "through the descriptor\n")
        reader.join(timeout=30)
    finally:
        os.close(read)
        os.close(write)
    assert got == [b"through the descriptor\n"]
    assert list(tmp_path.iterdir()) == []
