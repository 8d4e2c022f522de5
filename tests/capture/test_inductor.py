"""The few tests that need inductor itself: cache outcomes and the registered backend.

Each costs seconds (C++ kernels compile with gcc); they use a private cache directory so a
cold miss and a warm hit are deterministic.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import compiletrace
from compiletrace import CacheOutcome, Registry
from compiletrace.reports import summary_table

pytestmark = pytest.mark.inductor


def _fn(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * 2 + 1


def test_cold_miss_then_warm_hit_from_a_private_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    reg = Registry()
    x = torch.randn(16)
    cold = compiletrace.compile(_fn, is_encoder=True, registry=reg)
    torch.testing.assert_close(cold(x), _fn(x))
    torch._dynamo.reset()  # forget in-memory compiled code; the on-disk cache stays
    warm = compiletrace.compile(_fn, is_encoder=True, registry=reg)
    torch.testing.assert_close(warm(x), _fn(x))

    cold_rec, warm_rec = reg.records()
    assert cold_rec.backend == "inductor"
    assert cold_rec.fx_graph_cache is CacheOutcome.MISS
    assert cold_rec.cache_outcome is CacheOutcome.MISS
    assert warm_rec.cache_outcome is CacheOutcome.HIT
    assert warm_rec.aot_autograd_cache is CacheOutcome.HIT
    assert warm_rec.backend_ns < cold_rec.backend_ns
    # Phases add up to the backend time; cold compiles kernels, warm loads from the cache.
    for rec in (cold_rec, warm_rec):
        assert sum(rec.phase_ns.values()) == rec.backend_ns
    assert cold_rec.phase_ns["kernel_compile"] > 0
    assert cold_rec.phase_ns["inductor"] > 0
    assert warm_rec.phase_ns["cache"] > 0


def test_registered_backend_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    reg = compiletrace.get_registry()
    reg.clear()
    fn = torch.compile(_fn, backend="compiletrace")
    x = torch.randn(8)
    torch.testing.assert_close(fn(x), _fn(x))
    (rec,) = reg.records()
    assert (rec.component, rec.backend) == ("language_model", "inductor")
    assert rec.dynamo_ns is not None  # the callbacks were in place before the first frame
    reg.clear()


def test_torch_compile_name_labels_a_passive_compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # torch keeps name= on its inductor wrapper only: checked on a real inductor compile.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    with compiletrace.observe(registry=Registry()) as seen:
        torch.compile(_fn, name="vision")(torch.randn(16))
    assert [(r.component, r.backend) for r in seen.registry.records()] == [("vision", "inductor")]


def test_a_backward_compiled_with_its_forward_says_so_instead_of_zero(tmp_path: Path) -> None:
    """With dynamic shapes whose backward saves sizes, AOTAutograd compiles the backward
    inside the forward's backend call: no lazy backward follows, and the table says the
    backward is in the forward rather than "0.000"."""
    reg = Registry()
    with compiletrace.observe(registry=reg):
        step = torch.compile(
            lambda x: (x.reshape(x.shape[0] // 2, -1) * x.shape[1]).sin().sum(),
            backend="inductor",
            dynamic=True,
        )
        step(torch.randn(8, 4, requires_grad=True)).backward()
    (record,) = reg.records()
    assert record.backward_in_forward and record.backward_ns == 0
    assert compiletrace.GraphRecord.from_dict(record.to_dict()).backward_in_forward
    assert "in forward" in summary_table([record])
    # A lazy backward is not one.
    reg = Registry()
    with compiletrace.observe(registry=reg):
        lazy = torch.compile(lambda x: (x.sin() * 2).sum(), backend="inductor")
        lazy(torch.randn(8, requires_grad=True)).backward()
    (record,) = reg.records()
    assert not record.backward_in_forward and record.backward_ns > 0
