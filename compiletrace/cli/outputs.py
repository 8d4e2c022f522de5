"""The files a run's or a job's views are written to, shared by the commands that write
them (``profile``, ``report``, ``run``), each followed by the line that says so."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from compiletrace._io.files import write_json, write_text
from compiletrace._io.text import printable
from compiletrace.cli.parsing import PROG

if TYPE_CHECKING:
    from compiletrace._app.job import ProfileJob
    from compiletrace._app.profile_run import ProfileRun

__all__ = ["write_job_outputs", "write_outputs"]


def write_outputs(
    run: ProfileRun, html_path: str | None, trace_path: str | None, *, say: bool = True
) -> None:
    """A run's HTML report and Chrome trace (``say``: a line for each on stdout)."""
    if html_path is not None:
        write_text(html_path, run.html())
        if say:
            print(f"wrote HTML report to {html_path}")
    if trace_path is not None:
        from compiletrace.reports import export_chrome_trace

        export_chrome_trace(trace_path, run)
        if say:
            print(f"wrote Chrome trace to {trace_path}")


def write_job_outputs(
    job: ProfileJob,
    html_path: str | None,
    trace_path: str | None,
    *,
    on_stderr: bool = False,
    say: bool = True,
) -> None:
    """A job's HTML report and Chrome trace (``on_stderr``: the lines go to stderr; ``say``:
    a line for each)."""
    # run's own lines go to stderr (stdout is the command's), named as compiletrace's.
    out, prefix = (sys.stderr, f"{PROG}: ") if on_stderr else (sys.stdout, "")
    if html_path:
        write_text(html_path, job.html(title="compiletrace run: " + printable(" ".join(job.command))))
        if say:
            print(f"{prefix}wrote the HTML report to {html_path}", file=out)
    if trace_path:
        write_json(trace_path, job.chrome_trace())
        if say:
            print(f"{prefix}wrote the Chrome trace to {trace_path}", file=out)
