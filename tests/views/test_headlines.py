"""The first lines people read agree with the rest of the report: the job's headline split is
the per-component line's, a component that compiled nothing is not printed as 0.00 s, a tower
not named the encoder gets a hint at --component, and ranks that compile side by side are not
added up. The compiles are real (torch.compile, backend "eager")."""

from __future__ import annotations

import re

import torch

import compiletrace
from compiletrace._data.job import Job, JobProcess
from compiletrace._data.records import CompilationTimes
from compiletrace._data.run import Run, WarmupResult
from compiletrace._data.run_meta import ProcessInfo
from compiletrace.reports import summary_table
from compiletrace.reports._job import job_summary_lines
from tests.tiny_models import DIM, Encoder, LanguageModel


def towers_run(*components: str) -> Run:
    """A real run of two towers, each compiled under its own component."""
    reg = compiletrace.Registry()
    x = torch.randn(2, DIM)
    for component, module in zip(components, (Encoder(), LanguageModel()), strict=False):
        compiletrace.compile(module, component=component, backend="eager", registry=reg)(x)
    return Run(reg.records(), WarmupResult(False, 1.0, CompilationTimes(), reg.by_component()), {})


def job_of(**runs: Run) -> Job:
    processes = tuple(
        JobProcess(ProcessInfo(100 + n, 1, role.replace("_", " "), ("python", "serve.py")), run)
        for n, (role, run) in enumerate(runs.items())
    )
    return Job(("python", "serve.py"), 0, processes)


def branches_job() -> compiletrace.ProfileJob:
    """A job of one process that compiled tests/programs/branches.py's function with two
    shapes: two graph-break sites, recompiles, four breaks."""
    from tests.programs.branches import clamp_twice

    reg = compiletrace.Registry()
    step = compiletrace.compile(clamp_twice, backend="eager", dynamic=False, registry=reg)
    for n in (4, 5):
        step(torch.ones(n))
    run = Run(reg.records(), WarmupResult(True, 0.0, CompilationTimes(), reg.by_component()), {})
    return compiletrace.ProfileJob.of(job_of(main=run))


def _unwrapped(lines: list[str]) -> list[str]:
    """The lines as printed before wrapping to the screen (a continuation is indented four
    more than the line it continues)."""
    out: list[str] = []
    base = 0
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if out and indent >= base + 4:
            out[-1] += " " + line.strip()
        else:
            out.append(line)
            base = indent
    return out


def _seconds(line: str) -> dict[str, str]:
    """The components' seconds of a headline (the total, "compilation: 1.23 s", left out)."""
    return {k: v for k, v in re.findall(r"([\w.<>]+): (\d+\.\d\d) s", line) if k != "compilation"}


def test_the_headline_split_is_the_per_component_line() -> None:
    run = towers_run("vit", "text")
    head, *rest = _unwrapped(job_summary_lines(job_of(main=run)))
    last = summary_table(run).splitlines()[-1]
    # "compilation: 0.12 s — vit: 0.10 s, text: 0.02 s" and "compilation took 0.12 s (vit: ...)".
    assert _seconds(head) == _seconds(last)
    assert set(_seconds(head)) == {"vit", "text"}  # no language_model nor encoder: 0.00 s
    assert head.split("compilation: ")[1].split(" s")[0] == last.split("took ")[1].split(" s")[0]
    # Neither tower is the encoder: a hint names --component with one of them.
    (hint,) = [line for line in rest if "--component" in line]
    assert "--component 'vit=encoder'" in hint


def test_a_job_with_an_encoder_gets_no_hint_and_no_unmeasured_component() -> None:
    run = towers_run("encoder")  # as after inlining a tower: only one component compiled
    lines = _unwrapped(job_summary_lines(job_of(main=run)))
    assert not any("--component" in line for line in lines)
    assert set(_seconds(lines[0])) == {"encoder"}
    assert summary_table(run).splitlines()[-1].endswith(f"(encoder: {_seconds(lines[0])['encoder']} s)")


def test_ranks_that_compile_side_by_side_are_not_added_up() -> None:
    slow, fast = towers_run("language_model"), towers_run("language_model")
    job = job_of(rank_0=slow, rank_1=fast)
    head = _unwrapped(job_summary_lines(job))[0]
    per_rank = [sum(r.total_ns for r in run.graph_records) / 1e9 for run in (slow, fast)]
    assert f"compilation: {max(per_rank):.2f} s — language_model: {max(per_rank):.2f} s" in head
    assert "the slowest of 2 ranks per component" in head
    assert f"{sum(per_rank):.2f} CPU-seconds in all" in head
