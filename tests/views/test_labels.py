"""The labels people read first say what happened: a trace's or a notebook cell's warm-up is
not "skipped (eager)", a trace's header names the compiletrace that read it, a warm cache that
still compiles says so, and ``compiletrace run`` ends with the doctor's count and how to read it.
The runs are real: torch's trace and a cache hit written by the repository's programs
(tests/inputs), a cell recorded as ``%%compiletrace`` records one, a job of real compiles."""

from __future__ import annotations

import time
from pathlib import Path

import torch

import compiletrace
from compiletrace._app.notebook import cell_run
from compiletrace.reports import job_findings_line
from compiletrace.reports._text import header_lines
from tests.programs.branches import clamp_twice
from tests.views.test_headlines import branches_job

INPUTS = Path(__file__).resolve().parent.parent / "inputs"


def _warmup_fact(html: str) -> str:
    return html.split("<dt>warm-up</dt><dd>", 1)[1].split("</dd>", 1)[0].replace("<wbr>", "")


def test_a_trace_reads_as_what_it_is() -> None:
    trace = compiletrace.load(INPUTS / "traces" / "breaks_and_recompiles")
    assert isinstance(trace, compiletrace.ProfileRun)
    versions = header_lines(trace.graph_records, trace.meta)[1]
    assert versions.startswith(f"torch 2.13.0+cpu, read by compiletrace {compiletrace.__version__};")
    assert "compiletrace ?" not in versions
    fact = _warmup_fact(trace.html())
    assert "eager" not in fact and fact.startswith("none: TORCH_TRACE recorded the program as it ran")


def test_a_notebook_cell_ran_no_warm_up_and_nothing_eagerly() -> None:
    reg = compiletrace.Registry()
    start = time.time_ns()
    with compiletrace.observe(registry=reg):
        torch.compile(clamp_twice, backend="eager")(torch.ones(4))
    run = cell_run(reg, start, "In [3]")
    fact = _warmup_fact(run.html())
    assert fact == "none: %%compiletrace recorded the program as it ran"


def test_a_warm_cache_that_still_compiles_is_warm_in_name_only() -> None:
    run = compiletrace.load(INPUTS / "runs" / "expensive_hit.run.json")
    assert isinstance(run, compiletrace.ProfileRun)
    line = header_lines(run.graph_records, run.meta)[1]
    assert "cache: warm in name (1 graph, every one a hit, but 1 still compiled for 24.29 s)" in line


def test_the_run_summary_ends_with_the_doctors_count() -> None:
    job = branches_job()
    findings = job.diagnose()
    assert findings
    line = " ".join(job_findings_line(findings, "job.json").split())  # unwrapped
    n = len(findings)
    assert line.startswith(f"compiletrace: the doctor has {n} finding{'s' if n > 1 else ''} (")
    assert line.endswith("for why and what to change: compiletrace doctor job.json")
    assert "--json FILE" in job_findings_line(findings, None)
