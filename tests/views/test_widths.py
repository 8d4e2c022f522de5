"""Every text view reads at 80 and at 120 columns: no line is wider than the screen but for a
word that cannot be cut (a path, a URL, on a line of its own), prose is wrapped, a table
leaves out the columns that matter least before it cuts a name, and a long recompile reason
goes under the table, whole. The views are of real runs: a profile, a job of real compiles
with graph breaks and recompiles, torch's trace, two jobs compared, the doctor's findings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import compiletrace
from compiletrace._app.compare import compare_files
from compiletrace.reports import findings_text, job_findings_line, profile_text, timeline_text
from tests.views.test_headlines import branches_job

INPUTS = Path(__file__).resolve().parent.parent / "inputs"


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """The runs the views show, recorded once."""
    profiled = compiletrace.profile(backend="eager")
    job = branches_job()
    saved = tmp_path_factory.mktemp("jobs") / "job.json"
    job.save(saved)
    yield {"profiled": profiled, "job": job, "saved": saved}


def _texts(views: dict[str, object]) -> dict[str, str]:
    profiled, job, saved = views["profiled"], views["job"], views["saved"]
    assert isinstance(profiled, compiletrace.ProfileRun) and isinstance(job, compiletrace.ProfileJob)
    trace = compiletrace.load(INPUTS / "traces" / "breaks_and_recompiles")
    ranks = compiletrace.load(INPUTS / "traces" / "ranks")
    assert isinstance(trace, compiletrace.ProfileRun) and isinstance(ranks, compiletrace.ProfileJob)
    assert profiled.timeline is not None
    findings = job.diagnose()
    nodes = compiletrace.load(INPUTS / "nodes" / "node_cache_miss")  # a job of two nodes, read as one
    assert isinstance(nodes, compiletrace.ProfileJob)
    return {
        "nodes report": nodes.summary(),
        "nodes doctor": findings_text(nodes.diagnose()),
        "profile": profile_text(profiled, profiled.diagnose()),
        "timeline": timeline_text(profiled.timeline),
        "job report": job.summary(),
        "doctor": findings_text(findings),
        "run's last line": job_findings_line(findings, str(saved)),
        "trace report": trace.summary(),
        "ranks report": ranks.summary(),
        "compare jobs": compare_files(saved, saved).table(),
        "compare traces": compare_files(INPUTS / "traces" / "ranks", INPUTS / "traces" / "ranks").table(),
    }


@pytest.mark.parametrize("width", [80, 120])
def test_every_text_view_fits_the_screen(
    views: dict[str, object], width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    for name, text in _texts(views).items():
        for line in text.splitlines():
            # Wider only where one word cannot be cut: a path or a URL, on its own line.
            assert len(line) <= width or " " not in line.strip(), f"{name} at {width}: {line!r}"


def test_tables_leave_out_columns_before_they_cut_names(
    views: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    job = views["job"]
    assert isinstance(job, compiletrace.ProfileJob)
    resume = next(r.code_name for r in job.records() if r.code_name.startswith("torch_dynamo_resume"))
    monkeypatch.setenv("COLUMNS", "120")
    wide = job.summary()
    assert resume in wide  # the code column whole: the space is there
    # The recompile reasons whole, each on a line of its own under the table.
    reasons = [r for r in job.records() if r.recompile_reason]
    assert reasons and all(f"{r.compile_id}: {r.first_reason_line}" in wide for r in reasons)
    monkeypatch.setenv("COLUMNS", "80")
    narrow = job.summary().splitlines()
    header = next(line for line in narrow if line.startswith("compile id"))
    # At 80 the least telling columns go (node counts, cache "none", status "ok"); the
    # seconds stay.
    assert "nodes" not in header and "dynamo s" in header and "total s" in header
    assert all(len(line) <= 80 for line in narrow)


def test_the_verify_tables_rows_stay_apart_at_80(monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor --verify's table of two findings of one kind in two towers (its figures as a
    verify run gives them): at 80 columns each row still says which finding it is."""
    from compiletrace._data.verify import TrialFigures, VerifyRow
    from compiletrace.reports import verify_lines

    rows = [
        VerifyRow("graph_break (model.vision_tower)", "reorderable-print",
                  TrialFigures(4, 304, 4.04, 12.0), TrialFigures(1, 292, 2.26, 10.0), "verified"),
        VerifyRow("graph_break (model.language_model)", "capture-scalar-outputs",
                  TrialFigures(25, 279, 6.53, 12.0), TrialFigures(21, 285, 7.31, 13.0),
                  "did not help: the hooks' breaks stay"),
    ]  # fmt: skip
    monkeypatch.setenv("COLUMNS", "80")
    lines = verify_lines(rows, steady_calls=20)
    assert all(len(line) <= 80 for line in lines), lines
    first, second = (line.split("  ")[0] for line in lines[2:4])
    assert first != second and first.endswith("vision_tower)") and second.endswith("language_model)")
    assert "  graph_break (model.language_model): the hooks' breaks stay" in lines  # the why, whole
