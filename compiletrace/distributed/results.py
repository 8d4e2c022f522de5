"""The figures of a distributed job as the applications use them: the plain data of
:mod:`compiletrace._data.gather`, with the doctor's view of a job and its table.
"""

from __future__ import annotations

from compiletrace._data.findings import Finding
from compiletrace._data.gather import GATHER_KIND, GATHER_SCHEMA_VERSION, RankTimes
from compiletrace._data.gather import GatherResult as _GatherData
from compiletrace._doctor import diagnose_evidence, gather_evidence

__all__ = ["GATHER_KIND", "GATHER_SCHEMA_VERSION", "GatherResult", "RankTimes"]


class GatherResult(_GatherData):
    """Every rank's compile figures (see :class:`compiletrace._data.gather.GatherResult`),
    with the doctor's findings on the job and its table.

    >>> r = GatherResult.of([RankTimes(0, {"language_model": 2.0}), RankTimes(1, {"language_model": 3.0})])
    >>> type(GatherResult.from_dict(r.to_dict())).__name__
    'GatherResult'
    """

    def diagnose(self) -> list[Finding]:
        """The doctor's findings on the job: ranks whose graphs or cache outcomes differ.

        >>> GatherResult.of([RankTimes(0, {"language_model": 1.0})]).diagnose()
        []
        """
        return diagnose_evidence(gather_evidence(ranks=self.ranks))

    def table(self) -> str:
        """The per-rank table, the maximum and the slowest rank, as text
        (:func:`compiletrace.reports.gather_table`).

        >>> lm = "language_model"
        >>> r = GatherResult.of([RankTimes(0, {lm: 2.0}), RankTimes(1, {lm: 3.0})])
        >>> r.table().splitlines()[-1]
        'slowest rank: 1 (3.000 s of compiling, 1.000 s more than the fastest)'
        """
        from compiletrace.reports import gather_table

        return gather_table(self)

    def __str__(self) -> str:
        return self.table()
