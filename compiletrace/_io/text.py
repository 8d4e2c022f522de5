"""Small text helpers shared by every layer."""

from __future__ import annotations

__all__ = [
    "PIPE_WIDTH",
    "ascii_int",
    "clip",
    "first_line",
    "printable",
    "shell_line",
    "shell_word",
    "shorten",
    "tail_lines",
    "text_width",
]

import hashlib
import os
import re
import shlex
import sys
from collections.abc import Iterable

PIPE_WIDTH = 100  # the width of a text view when the output is no terminal (a file, a pipe, a CI log)

# What a terminal could act on or be fooled by, shown as Python writes it in a string
# literal: every character ``str.isprintable`` refuses (C0 and C1 controls and DEL, the
# ESC that starts the sequences that clear a screen or retitle a window; lone surrogates,
# which cannot even be encoded for output; format characters such as the bidi overrides
# U+202A-U+202E and U+2066-U+2069 that show text in an order other than its own; line and
# paragraph separators). The backslash is doubled, so a name that spells an escape out
# (a backslash, then "x1b") never reads the same as one that held the control character.
_SHORT = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(ch: str) -> str:
    short = _SHORT.get(ch)
    if short is not None:
        return short
    if ch.isprintable():
        return ch
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: object) -> str:
    r"""``str(text)`` safe to show on a terminal: one line, every character a terminal could
    act on or be fooled by written as its escape (``\x1b``, ``\u202e``, ``\n``, ...), and
    the backslash doubled, so distinct texts stay distinct. Every text view shows what
    comes from a run file or from the user's model through this function.

    >>> print(printable("encoder\x1b]0;pwned\x07 \u202efdp.exe"))
    encoder\x1b]0;pwned\x07 \u202efdp.exe
    >>> print(printable("C:\\models\tfirst"), printable("language_model"))
    C:\\models\tfirst language_model
    """
    text = str(text)
    if text.isprintable() and "\\" not in text:
        return text  # nearly every name: no copy
    return "".join(map(_escape, text))


# A word a POSIX shell reads as itself, unquoted (shlex's own set of safe characters).
_PLAIN_WORD = re.compile(r"[\w@%+=:,./-]+", re.ASCII)
# What double quotes do not keep literal (and "!", which bash's history expands inside them).
_NOT_IN_DOUBLE = frozenset('"$`\\!')
# Inside $'...', escaped: the backslash; the quote and "!" as \x escapes (an interactive
# shell's history expansion misreads \' and a bare "!"); tab and line breaks as themselves.
_DOLLAR_SHORT = {"\\": "\\\\", "'": "\\x27", "!": "\\x21", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _dollar_escape(ch: str) -> str:
    short = _DOLLAR_SHORT.get(ch)
    if short is not None:
        return short
    if ch.isprintable():
        return ch
    try:  # the bytes the character stands for in an argument (os.fsencode's reading)
        data = ch.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate no argument can hold: shown, all the same
        data = ch.encode("utf-8", "surrogatepass")
    return "".join(f"\\x{byte:02x}" for byte in data)


def shell_word(word: str) -> str:
    r"""``word`` quoted for a POSIX shell (bash, zsh, sh), so that pasting it gives ``word``
    exactly and runs nothing: bare where every character is plain, else in single quotes
    (double quotes for a word that holds a single quote and nothing double quotes expand),
    and in bash's ``$'...'`` where it holds a character :func:`printable` would escape (a
    control character, a tab, a bidi override), each such character written as the bytes
    it stands for (``\x1b``). The result is itself safe to show on a terminal: every
    character of it is printable.

    >>> print(shell_word("regional-compile=Block"), shell_word("mark-dynamic=L['x']:0"))
    regional-compile=Block "mark-dynamic=L['x']:0"
    >>> print(shell_word("Block$(touch X)"), shell_word(r"\d+"), shell_word("a\tb"))
    'Block$(touch X)' '\d+' $'a\tb'
    """
    if _PLAIN_WORD.fullmatch(word):
        return word
    if word.isprintable():
        if "'" not in word:
            return f"'{word}'"
        if _NOT_IN_DOUBLE.isdisjoint(word):
            return f'"{word}"'
        return shlex.quote(word)
    return "$'" + "".join(map(_dollar_escape, word)) + "'"


def shell_line(words: Iterable[str]) -> str:
    r"""A command line made of ``words``, each :func:`shell_word`-quoted: what every view
    prints for a user to paste (pasted, it runs that command with exactly those arguments).
    Show it as it is: :func:`printable` would double its backslashes.

    >>> print(shell_line(["compiletrace", "run", "--", "grep", "-P", r"\d+", "a b"]))
    compiletrace run -- grep -P '\d+' 'a b'
    """
    return " ".join(map(shell_word, words))


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, an ellipsis marking the cut.

    >>> shorten("tensor 'x' size mismatch at index 0", 20)
    "tensor 'x' size mis…"
    """
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def clip(text: str, limit: int) -> str:
    """``text`` kept whole when it has at most ``limit`` characters; else its first ``limit``,
    then how many were cut and the start of the whole text's SHA-256, so that two long texts
    with one head stay apart (the doctor groups graph breaks by their reason).

    >>> clip("size mismatch", 20)
    'size mismatch'
    >>> clip("Unsupported call " + "x" * 100, 16)
    'Unsupported call … [101 more characters cut; sha256 8442fe334a1c]'
    """
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{text[:limit]} … [{len(text) - limit:,} more characters cut; sha256 {digest}]"


def tail_lines(text: str, lines: int = 20) -> str:
    """The last ``lines`` lines of ``text``, without trailing blank space.

    >>> tail_lines("a\\nb\\nc\\n", 2)
    'b\\nc'
    """
    return "\n".join(text.rstrip().splitlines()[-lines:])


def first_line(text: object) -> str:
    """The first non-blank line of ``str(text)`` (an exception's message, say).

    >>> first_line(ValueError("\\nbad option\\nmore"))
    'bad option'
    """
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return ""


def ascii_int(text: str, most_digits: int = 20) -> int | None:
    """``text`` as a whole number when it is ASCII decimal digits, whole, and at most
    ``most_digits`` of them; else None. ``str.isdigit()`` admits ``'²'``, which ``int()``
    refuses, and ``int()`` takes ``'٣'``, spaces and ``_``: none is a number read here.

    >>> ascii_int("8000"), ascii_int("²"), ascii_int("٣"), ascii_int(" 1"), ascii_int("1_0")
    (8000, None, None, None, None)
    """
    if text.isascii() and text.isdecimal() and len(text) <= most_digits:
        return int(text)
    return None


def text_width() -> int:
    """The columns a text view may take: ``COLUMNS`` when set (as shells and ``shutil`` read
    it), else the terminal's width when standard output is one, else :data:`PIPE_WIDTH`.

    >>> os.environ["COLUMNS"] = "80"; text_width()
    80
    >>> del os.environ["COLUMNS"]
    """
    columns = ascii_int(os.environ.get("COLUMNS", ""), 6)
    if columns:  # isdigit() takes '²'
        return columns
    try:
        if sys.stdout.isatty():
            return os.get_terminal_size(sys.stdout.fileno()).columns
    except (AttributeError, OSError, ValueError):  # a replaced stdout, a closed one
        pass
    return PIPE_WIDTH
