"""compiletrace.distributed and trace propagation, with real gloo process groups on 127.0.0.1.

Rank processes come from a forkserver that imports torch once, so a rank starts in a
fraction of a second instead of paying torch's import each time. Every rank writes what it
saw (its own registry's figures, what gather returned, its spans) to a JSON file, and the
test process asserts on those files.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import compiletrace
from compiletrace import distributed
from compiletrace._core.observers import OnCompile, process_observers
from compiletrace.distributed import GatherError, GatherResult, RankTimes
from compiletrace.distributed.transport import gather_tensors
from compiletrace.telemetry._propagation import (
    TRACEPARENT,
    context_from_environ,
    inject_into_environ,
    parent_context,
)

JOB_TIMEOUT_S = 90.0  # bounds every multi-process test, even when a rank hangs
GATHER_TIMEOUT_S = 60.0  # ranks finish compiling at different times on a busy machine
FAIL_TIMEOUT_S = 3.0  # what gather() gets in the tests where a rank never arrives

_ctx = mp.get_context("forkserver")
# Modules the first compile would import lazily are loaded once, in the forkserver, too.
_ctx.set_forkserver_preload(
    [
        "torch",
        "torch._dynamo",
        "torch._functorch.aot_autograd",
        "networkx",
        "compiletrace",
        "test_distributed",
    ]
)


# -- what runs in a rank ----------------------------------------------------------------


def _compile_and_run(registry: compiletrace.Registry, rank: int) -> None:
    """Different work per rank, so ranks' figures differ: rank r compiles r + 1 language
    model functions, and only odd ranks compile an encoder."""
    if rank % 2 == 1:
        enc = compiletrace.compile(torch.nn.Linear(4, 4), is_encoder=True, backend="eager", registry=registry)
        enc(torch.ones(2, 4))
    for i in range(rank + 1):
        lm = compiletrace.compile(
            lambda x, i=i: torch.relu(x) * (i + 2), backend="aot_eager", registry=registry
        )
        lm(torch.ones(3))


def _export_spans(registry: compiletrace.Registry) -> InMemorySpanExporter:
    """Telemetry as this test stands it up in a rank: an SDK provider, the launcher's
    context attached as the process's parent, and one "Rank compile" span per record (made
    here with the SDK, whatever spans compiletrace's own telemetry adds)."""
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    otel_context.attach(context_from_environ())
    tracer = provider.get_tracer("test-rank")

    def on_record(record: compiletrace.GraphRecord, backward: bool) -> None:
        if backward:
            return
        span = tracer.start_span(
            "Rank compile",
            context=parent_context(),
            start_time=record.start_unix_ns,
            attributes={"compiletrace.rank": record.rank, "compiletrace.world_size": record.world_size},
        )
        span.end(end_time=record.end_unix_ns)

    process_observers().add(OnCompile(on_record), registry=registry)
    return exporter


def _span_dicts(exporter: InMemorySpanExporter) -> list[dict[str, Any]]:
    return [
        {
            "name": s.name,
            "trace_id": s.context.trace_id,
            "span_id": s.context.span_id,
            "parent_id": s.parent.span_id if s.parent is not None else None,
            "attributes": dict(s.attributes or {}),
        }
        for s in exporter.get_finished_spans()
    ]


def _rank_main(
    rank: int, world: int, port: int, scenario: str, out_dir: str, env: dict[str, str], done: Any
) -> None:
    os.environ.update(env)
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=JOB_TIMEOUT_S),
    )
    registry = compiletrace.Registry()
    exporter = _export_spans(registry) if scenario == "trace" else None
    report: dict[str, Any] = {"rank": rank}
    last = rank == world - 1
    if scenario == "die" and last:
        os._exit(3)  # dies before gather, without a word to the others
    if scenario == "hang" and last:
        done.wait(JOB_TIMEOUT_S)  # alive, but never calls gather
        os._exit(0)
    if scenario not in ("die", "hang"):
        compiletrace.warm_up(
            lambda: _compile_and_run(registry, rank), compilation_mode="stock", registry=registry
        )
    report["own_times"] = list(registry.compilation_times())
    report["own_by_component"] = registry.by_component()
    report["record_ranks"] = sorted({(r.rank, r.world_size) for r in registry.records()})
    report["graphs"] = len(registry)
    timeout = FAIL_TIMEOUT_S if scenario in ("die", "hang") else GATHER_TIMEOUT_S
    start = time.monotonic()
    try:
        report["gathered"] = distributed.gather(registry, timeout=timeout).to_dict()
        if scenario in ("die", "hang"):
            raise AssertionError("gather returned although a rank never joined")
        # The tensor transport that NCCL needs, run here over gloo with CPU tensors.
        payload = RankTimes.of(registry, rank).to_dict()
        moved = gather_tensors(payload, None, world, timeout, torch.device("cpu"))
        report["tensor_gathered"] = GatherResult.of([RankTimes.from_dict(p) for p in moved], rank).to_dict()
    except GatherError as exc:
        report["error"] = str(exc)
    report["elapsed_s"] = time.monotonic() - start
    if exporter is not None:
        report["spans"] = _span_dicts(exporter)
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(report))
    os._exit(0)  # skip teardown: a failed gloo group may block in its destructor


def _rank_main_failfast(*args: Any) -> None:
    try:
        _rank_main(*args)
    except BaseException as exc:  # report it instead of leaving the test to time out
        Path(args[4], f"rank{args[0]}.json").write_text(json.dumps({"crash": repr(exc)}))
        os._exit(1)


def _free_port() -> int:
    # The test's own process group (no launcher): a port free now, on loopback.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_job(
    world: int, scenario: str, out_dir: Path, env: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    done = _ctx.Event()
    port = _free_port()
    procs = [
        _ctx.Process(
            target=_rank_main_failfast, args=(r, world, port, scenario, str(out_dir), env or {}, done)
        )
        for r in range(world)
    ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + JOB_TIMEOUT_S
    try:
        survivors = procs[:-1] if scenario in ("die", "hang") else procs
        for p in survivors:
            p.join(max(deadline - time.monotonic(), 0))
        done.set()
        for p in procs:
            p.join(max(deadline - time.monotonic(), 0))
        hung = [r for r, p in enumerate(procs) if p.is_alive()]
        assert not hung, f"ranks {hung} did not finish within {JOB_TIMEOUT_S} s"
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    reports = []
    for r in range(len(survivors)):
        path = out_dir / f"rank{r}.json"
        assert path.exists(), f"rank {r} wrote no report (exit code {procs[r].exitcode})"
        report = json.loads(path.read_text())
        assert "crash" not in report, f"rank {r} crashed: {report['crash']}"
        reports.append(report)
    return reports


def _check_gathered(reports: list[dict[str, Any]], key: str) -> None:
    world = len(reports)
    own = [r["own_by_component"] for r in reports]
    names = {n for o in own for n in o}
    expected_max = {n: max(o.get(n, 0.0) for o in own) for n in names}
    totals = [sum(o.values()) for o in own]
    for report in reports:
        result = GatherResult.from_dict(report[key], rank=report["rank"])
        assert result.world_size == world
        assert [rt.rank for rt in result.ranks] == list(range(world))
        # The same figures as each rank's own registry, exactly.
        assert list(result.by_component) == own
        assert [list(t) for t in result.compilation_times] == [r["own_times"] for r in reports]
        assert result.max_by_component == expected_max
        assert result.maximum == compiletrace.CompilationTimes(
            language_model=expected_max["language_model"], encoder=expected_max.get("encoder", 0.0)
        )
        assert result.slowest_rank == totals.index(max(totals))
        assert f"slowest rank: {result.slowest_rank} " in result.table()


# -- a job of two ranks, under a launcher's span ----------------------------------------


@pytest.fixture(scope="module")
def two_rank_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[dict[str, Any]], Any]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test-launcher")
    with tracer.start_as_current_span("Launch ranks") as parent:
        env = dict(inject_into_environ({}))
        reports = _run_job(2, "trace", tmp_path_factory.mktemp("two"), env)
    yield reports, parent.get_span_context()
    provider.shutdown()


@pytest.mark.slow
def test_gather_two_ranks_matches_each_registry(two_rank_job: Any) -> None:
    reports, _ = two_rank_job
    assert [r["record_ranks"] for r in reports] == [[[0, 2]], [[1, 2]]]  # records carry rank, world size
    _check_gathered(reports, "gathered")
    _check_gathered(reports, "tensor_gathered")
    assert reports[0]["gathered"] == reports[1]["gathered"]


@pytest.mark.slow
def test_trace_propagates_to_every_rank(two_rank_job: Any) -> None:
    reports, parent = two_rank_job
    for report in reports:
        spans = report["spans"]
        warmups = [s for s in spans if s["name"] == "Warmup (CPU)"]
        compiles = [s for s in spans if s["name"] == "Rank compile"]
        assert len(warmups) == 1
        assert len(compiles) == report["graphs"] == report["rank"] * 2 + 1  # one per graph
        assert {s["trace_id"] for s in spans} == {parent.trace_id}
        assert warmups[0]["parent_id"] == parent.span_id  # the launcher's span parents the rank
        assert {s["parent_id"] for s in compiles} == {warmups[0]["span_id"]}
        # Every other span of the rank (compiletrace's own) nests inside the rank's tree.
        ids = {s["span_id"] for s in spans}
        assert all(s["parent_id"] in ids for s in spans if s is not warmups[0])
        assert {s["attributes"]["compiletrace.rank"] for s in compiles} == {report["rank"]}
        assert {s["attributes"]["compiletrace.world_size"] for s in compiles} == {2}


# -- four ranks, and ranks that never arrive ---------------------------------------------


@pytest.mark.slow
def test_gather_four_ranks(tmp_path: Path) -> None:
    reports = _run_job(4, "plain", tmp_path)
    _check_gathered(reports, "gathered")
    _check_gathered(reports, "tensor_gathered")
    result = GatherResult.from_dict(reports[2]["gathered"])
    assert result.max_by_component["encoder"] == max(
        r["own_by_component"].get("encoder", 0.0) for r in reports
    )


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["die", "hang"])
def test_missing_rank_fails_the_others_within_the_timeout(tmp_path: Path, scenario: str) -> None:
    # gather(timeout=3) in the ranks; the rank that died or hangs is the last of three.
    reports = _run_job(3, scenario, tmp_path)
    assert len(reports) == 2
    for report in reports:
        assert "error" in report, f"rank {report['rank']} did not fail"
        assert report["error"].startswith(f"compiletrace gather failed on rank {report['rank']} of 3")
        assert "did not call gather() within 3 s" in report["error"]
        # It failed because gather's own 3 s timeout fired (the message says so), not the 60 s
        # one nor the job's; the wall-clock bound is generous, for a busy machine.
        assert report["elapsed_s"] < 5 * FAIL_TIMEOUT_S < GATHER_TIMEOUT_S
    if scenario == "hang":  # rank 0's monitored barrier names the missing rank
        assert "Ranks 2 failed to pass monitoredBarrier" in reports[0]["error"]


# -- one process, no group -----------------------------------------------------------------


def test_gather_without_a_group_is_this_process() -> None:
    reg = compiletrace.Registry()
    f = compiletrace.compile(lambda x: x + 1, backend="eager", registry=reg)
    f(torch.ones(2))
    result = distributed.gather(reg, timeout=1.0)
    assert result.world_size == 1 and result.rank == 0 and result.slowest_rank == 0
    assert result.compilation_times == (reg.compilation_times(),)
    assert result.by_component == (reg.by_component(),)
    assert result.maximum == reg.compilation_times()
    assert result.ranks[0].graphs == 1


def test_gather_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        distributed.gather(compiletrace.Registry(), timeout=0)
    with pytest.raises(TypeError, match=r"compiletrace\.Registry"):
        distributed.gather({})  # type: ignore[arg-type]


def test_result_json_round_trip_and_table() -> None:
    ranks = [
        RankTimes(1, {"language_model": 2.5, "encoder": 0.5}, graphs=3, host="b"),
        RankTimes(0, {"language_model": 2.0, "encoder": 1.0, "audio": 0.25}, graphs=4, host="a"),
    ]
    result = GatherResult.of(ranks)
    assert [r.rank for r in result.ranks] == [0, 1]
    assert result.max_by_component == {"language_model": 2.5, "encoder": 1.0, "audio": 0.25}
    assert result.slowest_rank == 0  # 3.25 s against 3.0 s, though rank 1 has the largest LM figure
    data = json.loads(json.dumps(result.to_dict()))
    assert GatherResult.from_dict(data) == result
    # The two-way split counts audio with the language model: 2.5 + 0.25.
    assert data["maximum"]["compilation_times"] == {"language_model": 2.75, "encoder": 1.0}
    lines = result.table().splitlines()
    headers = "rank  host  language_model s  encoder s  audio s  total s  graphs"
    assert lines[0] == headers
    assert lines[2].split() == ["0", "a", "2.000", "1.000", "0.250", "3.250", "4"]
    assert lines[4].split() == ["max", "2.500", "1.000", "0.250"]
    assert lines[5] == "slowest rank: 0 (3.250 s of compiling, 0.250 s more than the fastest)"
    with pytest.raises(ValueError, match="not a compiletrace gather result"):
        GatherResult.from_dict({"kind": "other"})


def test_slowest_rank_tie_goes_to_the_lowest_rank() -> None:
    result = GatherResult.of([RankTimes(r, {"language_model": 1.0}) for r in (2, 0, 1)])
    assert result.slowest_rank == 0


# -- trace context through the environment -------------------------------------------------


def test_environ_round_trip_and_pass_through() -> None:
    provider = TracerProvider()
    tracer = provider.get_tracer("test")
    inherited = {TRACEPARENT: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "TRACESTATE": "k=v"}
    assert inject_into_environ(dict(inherited)) == inherited  # no span here: passes through
    with tracer.start_as_current_span("parent") as span:
        env = inject_into_environ(dict(inherited))
    ctx = span.get_span_context()
    assert env[TRACEPARENT] == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"
    assert "TRACESTATE" not in env  # the inherited state belonged to the inherited parent
    from opentelemetry import trace

    remote = trace.get_current_span(context_from_environ(env)).get_span_context()
    assert (remote.trace_id, remote.span_id, remote.is_remote) == (ctx.trace_id, ctx.span_id, True)
    assert not trace.get_current_span(context_from_environ({})).get_span_context().is_valid
    assert (
        not trace.get_current_span(context_from_environ({TRACEPARENT: "garbage"})).get_span_context().is_valid
    )


# -- the launcher: torch.distributed.run on loopback ----------------------------------------


@pytest.mark.slow
def test_launch_two_ranks_with_torchrun() -> None:
    root = Path(__file__).resolve().parents[2]  # where tests.tiny_models imports from
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), *sys.path]))
    run = distributed.launch(
        2,
        ["--model", "tests.tiny_models:tiny", "--backend", "eager", "--timeout", "60"],
        timeout=JOB_TIMEOUT_S * 2,
        env=env,
        capture_output=True,
    )
    result = run.result
    assert run.returncode == 0 and result.world_size == 2
    assert [r.rank for r in result.ranks] == [0, 1]
    assert all(set(r.by_component) == {"encoder", "language_model"} and r.graphs == 2 for r in result.ranks)
    assert len({r.pid for r in result.ranks}) == 2
    assert result.table() in run.output  # rank 0 printed the same table


@pytest.mark.slow
def test_launch_failure_is_reported() -> None:
    with pytest.raises(distributed.LaunchError, match="failed with exit status"):
        distributed.launch(
            1, ["--model", "no.such.module:factory", "--backend", "eager"], timeout=JOB_TIMEOUT_S
        )


@pytest.mark.slow
def test_cli_profile_nproc_two_ranks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from compiletrace import cli

    out = tmp_path / "ranks.json"
    assert cli.main(["profile", "--nproc", "2", "--backend", "eager", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "slowest rank:" in printed and "max" in printed
    data = json.loads(out.read_text())
    assert data["kind"] == "compiletrace.gather" and data["world_size"] == 2
    assert [r["rank"] for r in data["ranks"]] == [0, 1]
    for comp in ("encoder", "language_model"):
        assert data["maximum"]["by_component"][comp] == max(r["by_component"][comp] for r in data["ranks"])
