"""The environment as ``compiletrace env`` prints it: the versions of what compiletrace runs
with, and which torch internals this torch gives it, from plain data (names, flags, text)."""

from __future__ import annotations

from collections.abc import Sequence

from compiletrace.reports._table import render_table

__all__ = ["env_text"]

# (name, available, what is lacking without it / what compiletrace uses instead)
Capability = tuple[str, bool, str]


def env_text(
    versions: Sequence[tuple[str, str]], capabilities: Sequence[Capability], hooks: Sequence[Capability]
) -> str:
    """Three tables: package versions; the torch internals compiletrace measures with
    (a missing one names what records lack); the hooks this torch gives (a missing one
    names what compiletrace uses instead).

    >>> print(env_text([("torch", "2.13.0")], [("frames", False, "code names")], [("aot", True, "")]))
    package  version
    -------  -------
    torch    2.13.0
    <BLANKLINE>
    torch capability  available  records lack
    ----------------  ---------  ------------
    frames            MISSING    code names
    <BLANKLINE>
    hooks this torch gives  available  compiletrace uses instead
    ----------------------  ---------  -------------------------
    aot                     yes
    """
    tables = [
        render_table(["package", "version"], [[name, version] for name, version in versions]),
        render_table(
            ["torch capability", "available", "records lack"],
            [[name, "yes" if ok else "MISSING", "" if ok else lacking] for name, ok, lacking in capabilities],
        ),
        render_table(
            ["hooks this torch gives", "available", "compiletrace uses instead"],
            [[name, "yes" if ok else "no", lacking] for name, ok, lacking in hooks],
        ),
    ]
    return "\n\n".join("\n".join(table) for table in tables)
