"""The table of a distributed job's compile figures: a row per rank, the maximum and the
slowest rank (what ``compiletrace profile --nproc N`` and rank 0 of a job print)."""

from __future__ import annotations

from compiletrace._data.gather import GatherResult
from compiletrace._data.records import LANGUAGE_MODEL, ordered_components
from compiletrace.reports._table import render_table

__all__ = ["gather_table"]


def gather_table(result: GatherResult) -> str:
    """The per-rank table, the maximum and the slowest rank, as text.

    >>> from compiletrace._data.gather import RankTimes
    >>> lm = "language_model"
    >>> print(gather_table(GatherResult.of([RankTimes(0, {lm: 2.0}), RankTimes(1, {lm: 3.0})])))
    rank  host  language_model s  total s  graphs
    ----  ----  ----------------  -------  ------
    0           2.000             2.000    0
    1           3.000             3.000    0
    max         3.000
    slowest rank: 1 (3.000 s of compiling, 1.000 s more than the fastest)
    """
    names = ordered_components(result.max_by_component) or [LANGUAGE_MODEL]
    headers = ["rank", "host", *(f"{n} s" for n in names), "total s", "graphs"]
    rows = [
        [
            str(r.rank),
            r.host,
            *(f"{r.by_component.get(n, 0.0):.3f}" for n in names),
            f"{r.total_s:.3f}",
            str(r.graphs),
        ]
        for r in result.ranks
    ]
    rows.append(["max", "", *(f"{result.max_by_component.get(n, 0.0):.3f}" for n in names), "", ""])
    fastest = min(r.total_s for r in result.ranks)
    slowest = result.slowest
    lines = render_table(headers, rows)
    lines.append(
        f"slowest rank: {slowest.rank} ({slowest.total_s:.3f} s of compiling, "
        f"{slowest.total_s - fastest:.3f} s more than the fastest)"
    )
    return "\n".join(lines)
