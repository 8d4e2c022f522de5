"""Small text helpers shared by every layer."""

from __future__ import annotations

import re

__all__ = ["first_line", "printable", "shorten", "tail_lines"]

# C0 and C1 control characters: ESC starts the sequences that recolour a terminal or
# retitle its window, so names read from a file must never reach one raw.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: object) -> str:
    r"""``str(text)`` with every control character shown escaped, for terminals.

    >>> printable("encoder\x1b]0;pwned\x07")
    'encoder\\x1b]0;pwned\\x07'
    """
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, an ellipsis marking the cut.

    >>> shorten("tensor 'x' size mismatch at index 0", 20)
    "tensor 'x' size mis…"
    """
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


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
