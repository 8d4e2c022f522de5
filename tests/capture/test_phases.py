"""The phase split: exact on hand-made regions, and complete on real compiles."""

from __future__ import annotations

import torch

import compiletrace
from compiletrace import Registry
from compiletrace._data.phases import OTHER, PHASES, fit_to, phase_of, split_phases


def test_innermost_region_wins_and_phases_cover_the_window() -> None:
    regions = [
        ("create_aot_dispatcher_function", 100, 1_000),
        ("compile_fx_inner", 200, 900),
        ("GraphLowering.codegen", 300, 800),
        ("compile_file", 400, 600),
        ("gc", 650, 700),  # a region with no phase hides nothing
        ("AOTAutogradCache.load", 950, 1_100),  # clipped at the window's end
    ]
    got = split_phases(regions, 0, 1_050)
    assert got == {
        "aot_autograd": 100 + 50,
        "inductor": 100 + 100 + 200 + 100,
        "kernel_compile": 200,
        "cache": 100,
        "other": 100,
    }
    assert sum(got.values()) == 1_050


def test_regions_outside_the_window_are_ignored() -> None:
    assert split_phases([("compile_file", 0, 10)], 20, 30) == {**dict.fromkeys(PHASES, 0), OTHER: 10}


def test_phase_names() -> None:
    assert phase_of("PyCodeCache.load_by_key_path") == "cache"
    assert phase_of("async_compile.wait") == "kernel_compile"
    assert phase_of("aot_collect_metadata") == "aot_autograd"
    assert phase_of("OutputGraph.call_user_compiler") is None


def test_fit_keeps_shares_and_exact_total() -> None:
    fitted = fit_to({"aot_autograd": 50, "inductor": 30, "kernel_compile": 0, "cache": 0, "other": 20}, 1_000)
    assert fitted == {"aot_autograd": 500, "inductor": 300, "kernel_compile": 0, "cache": 0, "other": 200}
    assert fit_to(dict.fromkeys(PHASES, 0), 7)[OTHER] == 7


def test_phases_of_real_compiles_add_up_to_backend_time() -> None:
    reg = Registry()
    model = compiletrace.compile(
        torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), backend="aot_eager", registry=reg
    )
    model(torch.randn(2, 4, requires_grad=True)).sum().backward()
    (rec,) = reg.records()
    assert abs(sum(rec.phase_ns.values()) - rec.backend_ns) <= 1_000_000
    assert rec.phase_ns["aot_autograd"] > 0
    assert set(rec.phase_ns) == set(PHASES)
