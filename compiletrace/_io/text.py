"""Small text helpers shared by every layer."""

from __future__ import annotations

__all__ = ["first_line", "tail_lines"]


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
