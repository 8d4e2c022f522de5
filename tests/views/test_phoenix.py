"""OTLP export end to end: a real warm-up's spans sent to a Phoenix trace server and read
back through its REST API. CI starts Phoenix and sets COMPILETRACE_PHOENIX_URL."""

from __future__ import annotations

import json
import os
import time
import urllib.parse
import urllib.request
import uuid
from typing import Any

import pytest
import torch

import compiletrace
from compiletrace import telemetry

PHOENIX_URL = os.environ.get("COMPILETRACE_PHOENIX_URL")

pytestmark = pytest.mark.skipif(
    not PHOENIX_URL, reason="COMPILETRACE_PHOENIX_URL is not set (.ci/run starts Phoenix and sets it)"
)


def _get_spans(base: str, project: str) -> list[dict[str, Any]]:
    url = f"{base}/v1/projects/{urllib.parse.quote(project)}/spans?limit=1000"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return list(json.load(resp)["data"])
    except urllib.error.HTTPError as exc:
        if exc.code == 404:  # the project appears with its first span
            return []
        raise


def test_warm_up_spans_arrive_in_phoenix_with_links_and_attributes() -> None:
    assert PHOENIX_URL is not None
    project = f"compiletrace-test-{uuid.uuid4().hex[:8]}"
    tel = telemetry.configure(
        exporter="otlp",
        endpoint=PHOENIX_URL + "/v1/traces",
        service_name="compiletrace-test",
        # Phoenix files spans under the project named by this resource attribute.
        resource_attributes={"openinference.project.name": project},
        metrics_enabled=False,
        set_global=False,
    )
    reg = compiletrace.Registry()
    enc = compiletrace.compile(torch.nn.Linear(4, 4), is_encoder=True, backend="eager", registry=reg)
    lm = compiletrace.compile(torch.nn.Tanh(), backend="aot_eager", registry=reg)
    result = compiletrace.warm_up(lambda: lm(enc(torch.ones(2, 4))), compilation_mode="stock", registry=reg)
    assert not result.skipped
    assert tel.shutdown(timeout_s=10)

    deadline = time.monotonic() + 15
    spans: list[dict[str, Any]] = []
    while time.monotonic() < deadline:  # Phoenix ingests asynchronously
        spans = _get_spans(PHOENIX_URL, project)
        if len([s for s in spans if not s["name"].startswith("Backend phase: ")]) >= 7:
            break
        time.sleep(0.2)
    # The aot_eager graph's backend also has one "Backend phase: ..." child per timed phase.
    phase_spans = [s for s in spans if s["name"].startswith("Backend phase: ")]
    names = sorted(s["name"] for s in spans if s not in phase_spans)
    assert names == sorted(["Warmup (CPU)"] + ["Compile graph", "Dynamo tracing", "Backend compile"] * 2)
    assert "Backend phase: aot_autograd" in {s["name"] for s in phase_spans}

    by_id = {s["context"]["span_id"]: s for s in spans}
    (warmup,) = [s for s in spans if s["name"] == "Warmup (CPU)"]
    assert warmup.get("parent_id") in (None, "")
    assert warmup["attributes"]["compiletrace.warmup.skipped"] is False
    graphs = [s for s in spans if s["name"] == "Compile graph"]
    assert {g["parent_id"] for g in graphs} == {warmup["context"]["span_id"]}
    assert {g["attributes"]["compiletrace.component"] for g in graphs} == {"encoder", "language_model"}
    for g in graphs:
        attrs = g["attributes"]
        assert attrs["compiletrace.backend"] == (
            "eager" if attrs["compiletrace.component"] == "encoder" else "aot_eager"
        )
        assert attrs["compiletrace.compile_id"] in {r.compile_id for r in reg.records()}
        assert attrs["compiletrace.cache.outcome"] == "none"
        assert attrs["compiletrace.graph.node_count"] > 0
    for child in (s for s in spans if s["name"] in ("Dynamo tracing", "Backend compile")):
        assert by_id[child["parent_id"]]["name"] == "Compile graph"
    for phase in phase_spans:
        assert by_id[phase["parent_id"]]["name"] == "Backend compile"
    assert len({s["context"]["trace_id"] for s in spans}) == 1
