"""What groups one job's processes in a collector: the resource attributes every process of
``compiletrace run --otlp-endpoint`` sends (the job's id, its node, its rank, its host), and
the start-up phase metric a dashboard sums per phase."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import pytest

import compiletrace
from compiletrace import cli, telemetry
from compiletrace._app.job import child_environment
from compiletrace._data.job_dir import JOB_ID_ATTRIBUTE, JOB_ID_ENV, job_resource_attributes
from compiletrace._io.errors import UsageError
from compiletrace._io.private_dir import PrivateDirectory


def test_the_launchers_run_id_is_the_jobs_id_else_compiletraces() -> None:
    env = {
        "TORCHELASTIC_RUN_ID": "rdzv-7",
        "SLURM_JOB_ID": "123",
        JOB_ID_ENV: "mine",
        "GROUP_RANK": "2",
        "RANK": "9",
    }
    attrs = job_resource_attributes(env)
    assert attrs == {
        JOB_ID_ATTRIBUTE: "rdzv-7",
        "compiletrace.node.rank": 2,
        "compiletrace.rank": 9,
        "host.name": socket.gethostname(),
    }
    assert JOB_ID_ATTRIBUTE == "compiletrace.job.id"
    # torchrun's run id when none was given is "none": no id; Slurm's job id comes next.
    slurm = {"TORCHELASTIC_RUN_ID": "none", "SLURM_JOB_ID": "123", "SLURM_NODEID": "4", "SLURM_PROCID": "33"}
    assert job_resource_attributes(slurm) == {
        JOB_ID_ATTRIBUTE: "123",
        "compiletrace.node.rank": 4,
        "compiletrace.rank": 33,
        "host.name": socket.gethostname(),
    }
    assert job_resource_attributes({JOB_ID_ENV: "mine"})[JOB_ID_ATTRIBUTE] == "mine"
    assert "compiletrace.node.rank" not in job_resource_attributes({"GROUP_RANK": "x"})


def test_run_gives_every_process_its_job_id_or_a_new_one_per_run(tmp_path: Path) -> None:
    directory = PrivateDirectory(str(tmp_path), "0:0")
    given = child_environment(directory, [], False, bootstrap_dir=str(tmp_path), job_id="train-42")
    assert given[JOB_ID_ENV] == "train-42"
    one, other = (
        child_environment(directory, [], False, bootstrap_dir=str(tmp_path))[JOB_ID_ENV] for _ in "ab"
    )
    assert one != other and len(one) == 32
    with pytest.raises(UsageError, match="--job-id must be 1 to 255 printable ASCII characters"):
        child_environment(directory, [], False, bootstrap_dir=str(tmp_path), job_id="two words")


def test_a_bad_job_id_is_bad_input_before_the_command_runs(capsys: pytest.CaptureFixture[str]) -> None:
    marker = "ran"
    assert cli.main(["run", "--job-id", "a\nb", "--", sys.executable, "-c", f"print({marker!r})"]) == 2
    captured = capsys.readouterr()
    assert marker not in captured.out and "--job-id must be" in captured.err


def _phase_points(tel: telemetry.Telemetry) -> dict[str, Any]:
    data = tel.metrics()
    assert data is not None
    found = [
        m
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "compiletrace.startup.phase.duration"
    ]
    (metric,) = found
    assert metric.unit == "s"
    return {p.attributes["compiletrace.phase"]: p for p in metric.data.data_points}


def test_each_start_up_phase_is_one_histogram_point_by_name(tel: telemetry.Telemetry) -> None:
    ticks = iter(range(1_000_000_000, 100_000_000_000, 1_250_000_000))  # 1.25 s a reading
    reg = compiletrace.Registry()
    with compiletrace.phase("Load weights", registry=reg, clock=lambda: next(ticks)):
        pass
    for _ in range(2):
        with compiletrace.phase("Warm up", registry=reg, clock=lambda: next(ticks)):
            pass
    points = _phase_points(tel)
    # The phases measured before telemetry could record them count too (the start-up root's:
    # which of them a process has depends on what it imported first, so another test's).
    early = set(points) - {"Load weights", "Warm up"}
    assert {"import compiletrace", "interpreter start + earlier imports"} <= early
    assert early <= {"import compiletrace", "import compiletrace core", "interpreter start + earlier imports"}
    assert (points["Load weights"].count, points["Load weights"].sum) == (1, 1.25)
    assert (points["Warm up"].count, points["Warm up"].sum) == (2, 2.5)
    # The point is its span's time: a dashboard's sum per phase is the trace's.
    (load,) = [s for s in tel.spans() if s.name == "Load weights"]
    assert load.end_time is not None and load.start_time is not None
    assert (load.end_time - load.start_time) / 1e9 == 1.25
