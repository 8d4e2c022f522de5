"""What a record carries for the doctor's seconds, from real compiles (eager, milliseconds):
its CPU time, the block repeated inside its graph, what torch's automatic dynamic made
dynamic, and whether a ``.item()`` it broke on feeds a branch."""

from __future__ import annotations

import os
import time

import torch
from torch import nn

import compiletrace
from tests.inputs.runs.rule_programs import Stack, Unrolled


def _records(fn: object, *calls: tuple[object, ...], **options: object) -> list[compiletrace.GraphRecord]:
    torch._dynamo.reset()
    registry = compiletrace.Registry()
    compiled = compiletrace.compile(fn, backend="eager", registry=registry, **options)
    with torch.no_grad():
        for args in calls:
            compiled(*args)
    return list(registry.records())


def test_each_frame_has_its_cpu_time_within_the_process_and_its_set_up_within_it() -> None:
    before = time.process_time_ns() + sum(os.times()[2:4]) * 1e9
    records = _records(lambda x: (x.sin() + 1).cos(), (torch.ones(3),))
    after = time.process_time_ns() + sum(os.times()[2:4]) * 1e9
    (record,) = records
    assert record.cpu_ns is not None and 0 < record.cpu_ns <= after - before
    assert 0 <= record.setup_cpu_ns <= record.cpu_ns


def test_a_block_called_in_a_loop_is_seen_repeated_inside_its_graph_and_split_halves_are_not() -> None:
    (record,) = _records(Stack(), (torch.ones(2, 8),))
    block = record.repeated_block
    assert block is not None
    assert (block.class_name, block.instances, block.smallest, block.largest) == ("Block", 4, 3, 3)
    assert block.nodes == 12 and block.graph_ops == 12 and block.module == "tests.inputs.runs.rule_programs"
    # Graph breaks between the blocks: a block per graph, none repeated inside one.
    assert all(r.repeated_block is None for r in _records(Unrolled(), (torch.ones(2, 8),)))
    # torch's own modules are called many times in any model: no block of the user's.
    linears = nn.Sequential(*(nn.Linear(4, 4) for _ in range(4)))
    assert all(r.repeated_block is None for r in _records(linears, (torch.ones(2, 4),)))


def _by_keyword(**kwargs: torch.Tensor) -> torch.Tensor:
    return kwargs["ids"].float().sum(-1) + kwargs["mask"].float().mean(-1)


def test_the_inputs_torch_made_dynamic_are_named_as_torch_sources_with_their_dimension() -> None:
    first, second = _records(lambda x: x.sin() * 2, (torch.ones(2, 3),), (torch.ones(2, 5),))
    assert first.dynamic_sources == () and second.dynamic_sources == ("L['x']:1",)
    # Both inputs changed: both named, though the guard that failed names the first alone.
    calls = [(torch.ones(1, n, dtype=torch.long), torch.ones(1, n)) for n in (4, 8)]
    records = _records(lambda ids, mask: _by_keyword(ids=ids, mask=mask), *calls)
    assert "size mismatch" in (records[-1].recompile_reason or "")
    assert set(records[-1].dynamic_sources) == {"L['ids']:1", "L['mask']:1"}


class _EarlyExit(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
            if x.abs().mean().item() < 1e-6:  # an early exit: the value decides a branch
                break
        return x


def _scaled(x: torch.Tensor) -> torch.Tensor:
    value = x.sum().item()  # a number used in arithmetic, no branch
    return x * value


def test_a_scalar_read_for_a_branch_is_told_from_one_used_in_arithmetic() -> None:
    (exit_record,) = _records(_EarlyExit(), (torch.ones(2, 4),))
    (item,) = [b for b in exit_record.graph_breaks if "item()" in b.reason]
    assert item.scalar_in_branch and item.frame_skipped  # a break in a loop: the whole frame
    breaks = [b for r in _records(_scaled, (torch.ones(2),)) for b in r.graph_breaks]
    assert breaks and not any(b.scalar_in_branch for b in breaks)
