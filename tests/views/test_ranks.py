"""A multi-rank job reads as one job: the HTML per-graph table says whose graph each row is,
and what every rank found alike is one finding naming the ranks ("ranks 0-1"). The ranks'
compiles are real (tests/programs/branches.py's function, backend "eager")."""

from __future__ import annotations

import re

import compiletrace
from compiletrace._data.findings import FindingKind
from tests.views.test_headlines import branches_job, job_of


def two_ranks() -> compiletrace.ProfileJob:
    """Two ranks that compiled alike (one run, as two ranks' files hold it), and a main process."""
    (rank,) = branches_job().compiling()
    (main,) = branches_job().compiling()
    again = compiletrace.ProfileRun.from_dict(rank.run.to_dict())  # the other rank's own records
    return compiletrace.ProfileJob.of(job_of(rank_0=rank.run, rank_1=again, main=main.run))


def test_what_every_rank_found_alike_is_one_finding() -> None:
    job = two_ranks()
    breaks = [f for f in job.diagnose() if f.kind is FindingKind.GRAPH_BREAK]
    # The ranks' one finding, and the main process's own (it is no rank).
    assert sorted(f.evidence["process"] for f in breaks) == ["pid 102 (main)", "ranks 0-1"]
    rank_0 = job.ranks()[0]
    single = compiletrace.ProfileJob.of(job_of(rank_0=rank_0.run)).diagnose()
    (alone,) = [f for f in single if f.kind is FindingKind.GRAPH_BREAK]
    folded = next(f for f in breaks if f.evidence["process"] == "ranks 0-1")
    assert folded.seconds == alone.seconds  # side by side: the slowest rank's, not the sum


def test_the_html_per_graph_table_says_whose_graph_a_row_is() -> None:
    page = two_ranks().html()
    table = page.split('data-table="graphs"', 1)[1].split("</table>", 1)[0]
    assert '<th scope="col">process</th>' in table
    rows = re.findall(r"<tr[^>]*><td>([^<]*)</td><td>0/0</td>", table)
    assert sorted(rows) == ["rank 0", "rank 1"]  # the ranks' two 0/0s, each with its rank
    assert set(re.findall(r"<tr[^>]*><td>([^<]*)</td>", table)) == {"main", "rank 0", "rank 1"}
