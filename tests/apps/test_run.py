"""``compiletrace run -- COMMAND``: real, unmodified programs run as a user runs them (a
separate process), every compile of every Python process recorded and checked against
torch's own per-process figures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import compiletrace

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
TIMEOUT_S = 600  # generous: the suite must pass beside four CPU-bound processes


def ct_run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "compiletrace", "run", *args],
        capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd, env=env,
    )  # fmt: skip


def _oracle(path: Path) -> dict[str, float]:
    return {row["compile_id"]: row["seconds"] for row in json.loads(path.read_text())}


def _agree(ours_s: float, torch_s: float) -> bool:
    # 2%, and 5 ms for the small compiles, whose bounds the two read a call apart.
    return abs(ours_s - torch_s) <= 0.02 * torch_s + 0.005


@pytest.mark.slow
@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_every_compile_of_every_process_matches_torch(tmp_path: Path, method: str) -> None:
    job_json = tmp_path / "job.json"
    oracle = tmp_path / "oracle"
    proc = ct_run(
        "--json", str(job_json), "--",
        sys.executable, str(PROGRAMS / "two_towers.py"), str(oracle), "3", method,
        cwd=tmp_path,
    )  # fmt: skip
    # The program's exit status and stdout are its own; compiletrace speaks on stderr.
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "output (2, 8)\n"
    assert "compiletrace: compilation:" in proc.stderr.splitlines()[0]

    job = compiletrace.load(job_json)
    assert isinstance(job, compiletrace.ProfileJob)
    assert job.exit_status == 3 and job.missing == ()
    main, child = job.compiling()
    assert main.info.role == "main" and child.info.role.endswith("Process-1")
    assert child.info.ppid == main.info.pid

    # The vision tower is named "encoder" with no edit; the language model by its path.
    by_component = {r.component: r for r in main.run.graph_records}
    assert set(by_component) == {"encoder", "language_model"}
    source = (PROGRAMS / "two_towers.py").read_text().splitlines()
    tower_forward = source.index("    def forward(self, x: torch.Tensor) -> torch.Tensor:") + 1
    assert by_component["encoder"].code_location.endswith(f"two_towers.py:{tower_forward}")
    assert all(r.backend == "aot_eager" and r.dynamo_ns for r in main.run.graph_records)
    assert [r.component for r in child.run.graph_records] == ["child.<locals>.postprocess"]
    # The child's records are its own, not its parent's (a forked child starts with a copy).
    assert [r.backend for r in child.run.graph_records] == ["eager"]

    # Frame by frame, each process's totals agree with torch's own figures within 2%.
    for process, suffix in ((main, "main"), (child, "child")):
        torch_s = _oracle(Path(f"{oracle}.{suffix}.json"))
        ours = {r.compile_id: r.total_ns / 1e9 for r in process.run.graph_records}
        assert set(ours) == set(torch_s)
        for compile_id, seconds in torch_s.items():
            assert _agree(ours[compile_id], seconds), (suffix, compile_id, ours[compile_id], seconds)
        assert _agree(sum(ours.values()), sum(torch_s.values()))


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.parametrize("mode", ["generate", "train"])
def test_an_unmodified_transformers_script_matches_torch_frame_by_frame(tmp_path: Path, mode: str) -> None:
    pytest.importorskip("transformers")
    job_json, oracle = tmp_path / "job.json", tmp_path / "oracle.json"
    proc = ct_run(
        "--json", str(job_json), "--", sys.executable, str(PROGRAMS / "hf_llama.py"), mode, str(oracle),
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    job = compiletrace.load(job_json)
    assert isinstance(job, compiletrace.ProfileJob)
    (process,) = job.compiling()
    rows = json.loads(oracle.read_text())
    forward = {row["compile_id"]: row["seconds"] for row in rows if row["forward"]}
    records = {r.compile_id: r for r in process.run.graph_records}
    assert set(records) == set(forward)  # prefill and each decode recompile, or the one step
    for compile_id, seconds in forward.items():
        assert _agree(records[compile_id].frame_ns / 1e9, seconds), (compile_id, records[compile_id], seconds)
    # The model, named by its class: the frame torch compiles is transformers' decorator around
    # the forward, which runs on no named argument.
    assert {r.component for r in records.values()} == {"LlamaForCausalLM"}
    backward = [row for row in rows if not row["forward"]]
    assert [r.compile_id for r in records.values() if r.backward_ns > 0] == [
        row["compile_id"] for row in backward
    ]
    assert (mode == "train") == bool(backward)


@pytest.mark.slow
def test_the_job_reads_back_through_report_doctor_and_views(tmp_path: Path) -> None:
    job_json, html, trace = tmp_path / "job.json", tmp_path / "job.html", tmp_path / "trace.json"
    proc = ct_run(
        "--json", str(job_json), "--html", str(html), "--chrome-trace", str(trace), "--",
        sys.executable, str(PROGRAMS / "two_towers.py"), str(tmp_path / "oracle"),
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    job = compiletrace.load(job_json)
    assert isinstance(job, compiletrace.ProfileJob)
    pids = {p.info.pid for p in job.compiling()}
    # One Chrome trace, a process track group per process.
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["pid"] for e in events if e["ph"] == "X"} == pids
    names = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {f"{p.info.role} (pid {p.info.pid})" for p in job.compiling()}
    assert "encoder" in html.read_text()

    report = subprocess.run(
        [sys.executable, "-m", "compiletrace", "report", str(job_json)],
        capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert report.stdout.count("== pid ") == 2 and "compilation took" in report.stdout
    doctor = subprocess.run(
        [sys.executable, "-m", "compiletrace", "doctor", str(job_json)],
        capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert doctor.returncode == 0, doctor.stderr


@pytest.mark.slow
def test_torchrun_ranks_are_one_job_with_their_maximum_and_one_trace(tmp_path: Path) -> None:
    job_json, trace = tmp_path / "job.json", tmp_path / "trace.json"
    torchrun = Path(sys.executable).with_name("torchrun")
    oracle = tmp_path / "oracle"
    proc = ct_run(
        "--json", str(job_json), "--chrome-trace", str(trace), "--",
        str(torchrun), "--standalone", "--nproc-per-node", "2", str(PROGRAMS / "ranks.py"), str(oracle),
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    job = compiletrace.load(job_json)
    assert isinstance(job, compiletrace.ProfileJob)
    ranks = job.ranks()
    assert sorted(ranks) == [0, 1] and all(p.compiled for p in ranks.values())
    totals = {}
    for rank, process in ranks.items():
        torch_s = _oracle(Path(f"{oracle}.rank{rank}.json"))
        ours = {r.compile_id: r.total_ns / 1e9 for r in process.run.graph_records}
        assert set(ours) == set(torch_s) and all(_agree(ours[k], torch_s[k]) for k in torch_s)
        assert {r.rank for r in process.run.graph_records} == {rank}
        totals[rank] = sum(ours.values())
    slowest = max(totals, key=lambda rank: totals[rank])
    assert f"the slowest, rank {slowest}, {totals[slowest]:.2f} s" in proc.stderr
    # The headline counts the ranks that compiled side by side once (the slowest), their sum
    # only as CPU-seconds.
    said = " ".join(proc.stderr.split())
    assert f"compiletrace: compilation: {totals[slowest]:.2f} s —" in said
    assert f"{sum(totals.values()):.2f} CPU-seconds in all" in said
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["pid"] for e in events if e["ph"] == "X"} == {p.info.pid for p in ranks.values()}


@pytest.mark.slow
def test_ddp_compiled_whole_counts_its_frames_apart_from_its_graphs(tmp_path: Path) -> None:
    # torch.compile(DDP(model)): Dynamo gives up inside DDP's forward and the context
    # managers it enters, frames that compile no graph; only the model's backward is a graph.
    torchrun = Path(sys.executable).with_name("torchrun")
    proc = ct_run(
        "--json", str(tmp_path / "job.json"), "--",
        str(torchrun), "--standalone", "--nproc-per-node", "2", str(PROGRAMS / "ddp_step.py"), "outer", "net",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    job = compiletrace.load(tmp_path / "job.json")
    assert isinstance(job, compiletrace.ProfileJob)
    said = " ".join(proc.stderr.split())
    for rank, process in job.ranks().items():
        records = process.run.graph_records
        graphs = sum(1 for r in records if r.graph_node_count > 0)
        assert len(records) > graphs  # frames that compiled nothing: the case at hand
        counted = f"{len(records)} frames ({graphs} graph{'s' if graphs != 1 else ''})"
        assert f"pid {process.info.pid} (rank {rank}): {counted}, " in said
    # The frames of no graph are counted as such, not as components named after torch's
    # internals, and no such name is offered as a tower to --component.
    assert "no graph: " in said
    assert "contextmanager" not in said and "DistributedDataParallel" not in said
    assert "--component" not in said


@pytest.mark.slow
@pytest.mark.parametrize("signals", [1, 2])
def test_sigterm_reaches_the_program_and_what_it_recorded_is_kept(tmp_path: Path, signals: int) -> None:
    # Two in a row (timeout, torchrun and a process group all send more than one): the
    # second lands while the first one's handler writes the run, and must not hang it.
    job_json = tmp_path / "job.json"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "compiletrace", "run", "--json", str(job_json), "--",
         sys.executable, str(PROGRAMS / "compile_then_wait.py"), "wait"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert launcher.stdout is not None
    assert launcher.stdout.readline() == "compiled\n"
    for _ in range(signals):
        launcher.send_signal(signal.SIGTERM)
    _, stderr = launcher.communicate(timeout=TIMEOUT_S)
    # The launcher dies of the program's own signal (what a shell or a supervisor would see
    # without compiletrace), after writing what was recorded.
    assert launcher.returncode == -signal.SIGTERM, stderr
    job = compiletrace.load(job_json)
    assert isinstance(job, compiletrace.ProfileJob) and job.exit_status == 143
    (process,) = job.compiling()
    assert [r.backend for r in process.run.graph_records] == ["eager"]


@pytest.mark.slow
def test_a_process_killed_with_sigkill_is_named_as_leaving_no_run(tmp_path: Path) -> None:
    job_json = tmp_path / "job.json"
    proc = ct_run(
        "--json", str(job_json), "--", sys.executable, str(PROGRAMS / "compile_then_wait.py"), "kill9",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL  # the program's own death, re-enacted
    assert proc.stdout == "compiled\n"
    job = compiletrace.load(job_json)
    assert isinstance(job, compiletrace.ProfileJob)
    assert job.processes == () and len(job.missing) == 1
    assert job.missing[0].role == "main"
    assert "left no run" in proc.stderr


@pytest.mark.slow
def test_a_process_killed_with_sigkill_after_its_checkpoint_keeps_its_compiles(tmp_path: Path) -> None:
    """A process stopped where nothing can write at its end (SIGKILL; vLLM's engine core torn
    down by its parent) keeps what it compiled: its run was written while it ran, and the
    job says it is a checkpoint."""
    job_json = tmp_path / "job.json"
    proc = ct_run(
        "--json", str(job_json), "--", sys.executable, str(PROGRAMS / "compile_then_wait.py"),
        "kill9-checkpointed", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stdout == "compiled\ncheckpointed\n"
    job = compiletrace.load(job_json)
    assert isinstance(job, compiletrace.ProfileJob)
    assert job.missing == ()
    (process,) = job.processes
    assert process.info.role == "main"
    assert [(r.backend, r.compile_id) for r in process.run.graph_records] == [("eager", "0/0")]
    assert process.run.meta.checkpoint_unix_s is not None
    assert process.run.meta.checkpoint_unix_s >= process.run.graph_records[0].end_unix_ns / 1e9
    assert f"{process.info.label} ended before writing its run" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_processes_that_never_compile_pay_nothing_and_leave_nothing(tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    proc = ct_run(
        "--job-dir", str(job_dir), "--", sys.executable, "-c", "import torch, sys; print(sys.argv[1:])", "a",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "['a']\n"
    assert proc.stderr == "compiletrace: no process of this command compiled anything (exit status 0)\n"
    assert list(job_dir.iterdir()) == []  # torch imported, its compiler never: nothing started


@pytest.mark.slow
def test_the_users_own_sitecustomize_still_runs(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    code = (
        "import os, torch; f = torch.compile(lambda x: x + 1, backend='eager'); f(torch.ones(1)); "
        "print(os.environ.get('USER_SITE_RAN'))"
    )
    proc = ct_run("--", sys.executable, "-c", code, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "yes\n"
    assert "1 graph in 1 process" in proc.stderr


@pytest.mark.slow
def test_a_program_that_changes_directory_probes_the_import_and_uses_compiletrace_compile(
    tmp_path: Path,
) -> None:
    (tmp_path / "elsewhere").mkdir()
    code = (
        "import importlib.util, os; importlib.util.find_spec('torch._dynamo'); os.chdir('elsewhere')\n"
        "import torch, compiletrace\n"
        "torch.compile(lambda x: x + 1, backend='eager')(torch.ones(1))\n"
        "compiletrace.compile(lambda x: x * 2, is_encoder=True, backend='eager')(torch.ones(1))\n"
    )
    proc = ct_run("--job-dir", "job", "--json", "job.json", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job = compiletrace.load(tmp_path / "job.json")
    assert isinstance(job, compiletrace.ProfileJob) and job.missing == ()
    (process,) = job.compiling()
    assert sorted(r.component for r in process.run.graph_records) == ["<lambda>", "encoder"]
    assert sorted(p.name for p in (tmp_path / "job").iterdir())[-1].endswith(".started.json")


@pytest.mark.slow
def test_the_programs_own_observe_and_the_job_each_record_every_compile(tmp_path: Path) -> None:
    code = (
        "import torch, compiletrace\n"
        "with compiletrace.observe(components=['*=mine']) as seen:\n"
        "    torch.compile(lambda x: x + 1, backend='eager')(torch.ones(1))\n"
        "print(sorted(r.component for r in seen.registry.records()))\n"
    )
    proc = ct_run("--json", "job.json", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['mine']"  # the program's own observer saw its compile
    job = compiletrace.load(tmp_path / "job.json")
    assert isinstance(job, compiletrace.ProfileJob)
    (process,) = job.compiling()
    # ... and the job's recording too, once, under the job's names. (The program's observer
    # built the tracker here, its import of torch._dynamo starting the job's recording.)
    assert [(r.component, r.code_name) for r in process.run.graph_records] == [("<lambda>", "<lambda>")]


@pytest.mark.slow
def test_a_failing_bootstrap_is_one_warning_and_the_program_runs_on(tmp_path: Path) -> None:
    from compiletrace._app.job import child_environment
    from compiletrace._io.private_dir import PrivateDirectory

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    # A job directory that cannot be opened: the program runs, unrecorded, with one warning.
    env = child_environment(PrivateDirectory(str(blocker / "job"), "0:0"), (), False)
    code = "import torch; f = torch.compile(lambda x: x + 1, backend='eager'); print(f(torch.ones(1)).item())"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S, env=env
    )
    assert proc.returncode == 0
    assert proc.stdout == "2.0\n"
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("compiletrace:")]
    assert len(warnings) == 1 and "recording is off in this process" in warnings[0]


def test_bad_input_is_one_line_and_runs_nothing(tmp_path: Path) -> None:
    from compiletrace.cli import main

    def one_line(capsys_err: str) -> bool:
        return capsys_err.count("\n") == 1 and capsys_err.startswith("compiletrace: error:")

    cases = [
        ([], 2, "needs a command"),
        (["--"], 2, "needs a command"),
        (["--", "no-such-program-here"], 127, "command not found: 'no-such-program-here'"),
        (["--", str(tmp_path)], 127, "command not found"),
        (["--component", "novalue", "--", "true"], 2, "PATTERN=NAME"),
        (["--json", str(tmp_path / "missing-dir" / "x.json"), "--", "true"], 2, "missing-dir"),
        (["--json", "-", "--", "true"], 2, "stdout is the command's own"),
    ]
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    cases.append((["--job-dir", str(tmp_path / "full"), "--", "true"], 2, "not empty"))
    for args, status, message in cases:
        err_path = tmp_path / "stderr"
        with open(err_path, "w") as err, _redirect_stderr(err):
            assert main(["run", *args]) == status, args
        text = err_path.read_text()
        assert one_line(text) and message in text, (args, text)


@pytest.mark.slow
def test_a_program_that_exits_non_zero_keeps_its_status(tmp_path: Path) -> None:
    from compiletrace._app.job import run_command

    outcome = run_command([sys.executable, "-c", "import sys; sys.exit(7)"])
    assert outcome.exit_status == 7 and outcome.signal is None
    assert outcome.job.processes == () and outcome.job.missing == ()


def _redirect_stderr(stream: object) -> object:
    import contextlib

    return contextlib.redirect_stderr(stream)  # type: ignore[type-var]


class _OtlpReceiver:
    """A real OTLP/HTTP receiver on loopback: every POST to /v1/traces decoded with the
    protocol's own messages; metrics are accepted and ignored."""

    def __init__(self) -> None:
        import http.server
        import threading

        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.requests: list[ExportTraceServiceRequest] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    receiver.requests.append(request)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[tuple[dict[str, object], object]]:
        """(the span's resource attributes, the span) for every span received."""
        out = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value for a in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    out.extend((resource, span) for span in scope.spans)
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.slow
@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_otlp_endpoint_gets_every_processs_compiles_as_spans(tmp_path: Path, method: str) -> None:
    receiver = _OtlpReceiver()
    try:
        proc = ct_run(
            "--otlp-endpoint", receiver.url, "--json", str(tmp_path / "job.json"), "--",
            sys.executable, str(PROGRAMS / "two_towers.py"), str(tmp_path / "oracle"), "0", method,
            cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "output (2, 8)\n"  # the program's own output, unchanged
    finally:
        receiver.close()
    job = compiletrace.load(tmp_path / "job.json")
    assert isinstance(job, compiletrace.ProfileJob)
    graph_spans = [(res, s) for res, s in receiver.spans() if s.name == "Compile graph"]

    def attr(span: object, key: str) -> str:
        (value,) = [a.value.string_value for a in span.attributes if a.key == key]  # type: ignore[attr-defined]
        return value

    # One span per compile of each process, from that process (its pid on the resource).
    for process in job.compiling():
        mine = [s for res, s in graph_spans if res["process.pid"].int_value == process.info.pid]
        assert sorted(attr(s, "compiletrace.compile_id") for s in mine) == sorted(
            r.compile_id for r in process.run.graph_records
        )
        assert {attr(s, "compiletrace.component") for s in mine} == {
            r.component for r in process.run.graph_records
        }
    assert {attr(s, "compiletrace.component") for _, s in graph_spans} >= {"encoder", "language_model"}


@pytest.mark.slow
def test_a_bad_otlp_endpoint_is_bad_input_before_the_command_runs(tmp_path: Path) -> None:
    proc = ct_run("--otlp-endpoint", "not a url", "--", sys.executable, "-c", "print('ran')", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "endpoint must be an http(s) URL" in proc.stderr


@pytest.mark.slow
def test_the_job_html_lays_every_process_on_one_axis_then_each_ones_timeline(tmp_path: Path) -> None:
    import html
    import re

    job_json, page_path = tmp_path / "job.json", tmp_path / "job.html"
    proc = ct_run(
        "--json", str(job_json), "--html", str(page_path), "--",
        sys.executable, str(PROGRAMS / "two_towers.py"), str(tmp_path / "oracle"), "0", "spawn",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    job = compiletrace.load(job_json)
    assert isinstance(job, compiletrace.ProfileJob)
    page = page_path.read_text()
    tracks = re.findall(r'<g class="track" data-pid="(\d+)" data-role="([^"]*)"[^>]*>(.*?)</g>', page, re.S)
    # A track per process, in the order they started, each with its role and pid.
    assert [(int(pid), role) for pid, role, _ in tracks] == [(p.info.pid, p.info.role) for p in job.processes]
    assert [role for _, role, _ in tracks] == ["main", "SpawnProcess-1"]
    for pid, role, body in tracks:
        assert f'<text class="track-name" x="0" y="12">{role} (pid {pid})</text>' in body

    # Where the job's records say: the axis runs from the first process's start to the
    # last one's end, and each compile bar lies in its own process's track.
    timelines = [p.run.timeline for p in job.processes]
    assert all(tl is not None for tl in timelines)
    t0 = min(tl.start_unix_ns for tl in timelines if tl is not None)
    t1 = max(
        max([tl.end_unix_ns] + [r.end_unix_ns for r in p.run.graph_records])
        for tl, p in zip(timelines, job.processes, strict=True)
        if tl is not None
    )

    def x(t: int) -> str:
        return f"{100 * (t - t0) / (t1 - t0):.2f}%"

    for (_, _, body), process, tl in zip(tracks, job.processes, timelines, strict=True):
        assert tl is not None
        bars = re.findall(
            r'<rect class="compile" data-compile-id="([^"]+)" data-component="([^"]+)" x="([^"]+)"', body
        )
        assert bars == [
            (r.compile_id, html.escape(r.component), x(r.start_unix_ns)) for r in process.run.graph_records
        ]
        first = re.search(r'<rect class="entry" data-kind="process" x="([^"]+)"', body)
        assert first and first.group(1) == x(tl.start_unix_ns)  # the process's own start
    main_track, child_track = (body for _, _, body in tracks)
    assert 'data-component="encoder"' in main_track and 'data-component="language_model"' in main_track
    assert 'data-component="child.&lt;locals&gt;.postprocess"' in child_track

    # Then each process's own timeline, after the tracks.
    for process in job.processes:
        section = re.search(
            rf'<section class="ct-process" id="ct-process-{process.info.pid}".*?</section>', page, re.S
        )
        assert section
        assert f"<h3>{process.info.role} (pid {process.info.pid})</h3>" in section.group()
        assert '<section class="compiletrace-startup-timeline">' in section.group()
        assert page.index("compiletrace-job-timeline") < section.start()

    # compiletrace report --html on the job file writes the same view.
    again = tmp_path / "again.html"
    report = subprocess.run(
        [sys.executable, "-m", "compiletrace", "report", "--html", str(again), str(job_json)],
        capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr

    def job_view(text: str) -> str:
        return text[
            text.index('<section class="compiletrace-job-timeline">') : text.index("<h2>Compile time per")
        ]

    assert job_view(again.read_text()) == job_view(page)


@pytest.mark.slow
def test_a_job_process_says_nothing_of_capabilities_its_torch_has(tmp_path: Path) -> None:
    """The bootstrap makes the tracker while torch imports, when torch's cache modules
    cannot be imported yet: what they give is probed at the first compile, not called
    missing at the start of every process of every job."""
    program = "import torch; torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2))"
    done = ct_run("--json", str(tmp_path / "job.json"), "--", sys.executable, "-c", program, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "lacks" not in done.stderr and "does not hand its cache keys" not in done.stderr, done.stderr
    job = compiletrace.load(tmp_path / "job.json")
    assert [p.run.meta.cache_keys is not None for p in job.processes] == [True]
