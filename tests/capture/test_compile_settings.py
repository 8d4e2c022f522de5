"""What each compile used (mode, dynamic, fullgraph) is recorded as torch.compile was given it,
and the report's header says it: a program compiled with mode="max-autotune-no-cudagraphs"
does not read "mode default". Real compiles: a frame that makes no graph costs inductor
nothing, so the inductor modes are checked without an inductor compile."""

from __future__ import annotations

import torch

import compiletrace
from compiletrace import GraphRecord
from compiletrace._data.run_meta import RunMeta
from compiletrace.reports._text import header_lines
from tests.tiny_models import DIM, Encoder


def identity(x: torch.Tensor) -> torch.Tensor:
    return x  # Dynamo compiles the frame; no graph, so no backend call


def test_each_compile_records_its_mode_dynamic_and_fullgraph() -> None:
    with compiletrace.observe(components=["identity=vit"], registry=compiletrace.Registry()) as seen:
        torch.compile(identity, mode="max-autotune-no-cudagraphs")(torch.randn(2))
        tower = torch.compile(Encoder(), backend="eager", fullgraph=True, dynamic=False)
        tower(torch.randn(2, DIM))
    by_component = {r.component: r for r in seen.registry.records()}
    assert by_component["vit"].settings == (
        ("mode", "max-autotune-no-cudagraphs"), ("dynamic", "None"), ("fullgraph", "False")
    )  # fmt: skip
    (other,) = [r for name, r in by_component.items() if name != "vit"]
    assert other.settings == (("dynamic", "False"), ("fullgraph", "True"))
    # The header of a recorded run: each component says how, as they differ.
    meta = RunMeta(source="compiletrace run", model="serve.py", backend="eager, inductor")
    lines = header_lines(seen.registry.records(), meta)
    assert lines[0] == "model serve.py: backend eager, inductor"
    assert "  vit: backend inductor, mode max-autotune-no-cudagraphs, dynamic=None, fullgraph=False" in lines
    assert f"  {other.component}: backend eager, dynamic=False, fullgraph=True" in lines
    assert not any("mode default" in line for line in lines)


def test_one_mode_for_every_compile_is_said_once() -> None:
    with compiletrace.observe(registry=compiletrace.Registry()) as seen:
        torch.compile(identity, mode="max-autotune-no-cudagraphs")(torch.randn(2))
    meta = RunMeta(source="compiletrace run", model="serve.py", backend="inductor")
    first = header_lines(seen.registry.records(), meta)[0]
    assert (
        first
        == "model serve.py: backend inductor, mode max-autotune-no-cudagraphs, dynamic=None, fullgraph=False"
    )


def test_compiletrace_compile_records_its_mode() -> None:
    reg = compiletrace.Registry()
    compiletrace.compile(identity, backend="inductor", mode="reduce-overhead", registry=reg)(torch.randn(2))
    (record,) = reg.records()
    assert dict(record.settings)["mode"] == "reduce-overhead"


def test_settings_are_saved_and_files_without_them_still_load() -> None:
    with compiletrace.observe(registry=compiletrace.Registry()) as seen:
        torch.compile(identity, mode="max-autotune-no-cudagraphs")(torch.randn(2))
    (record,) = seen.registry.records()
    saved = record.to_dict()
    assert saved["settings"] == {
        "mode": "max-autotune-no-cudagraphs",
        "dynamic": "None",
        "fullgraph": "False",
    }
    assert GraphRecord.from_dict(saved) == record
    older = {k: v for k, v in saved.items() if k != "settings"}  # as written before settings were
    assert GraphRecord.from_dict(older).settings == ()
