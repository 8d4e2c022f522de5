"""Records stay right where torch's own behaviour is surprising: callbacks swallowed by
another thread, compile ids reused after a reset, Dynamo's internal restarts, frames shared
by components, torch's own error types. Each test failed before its fix; torch's own
per-frame metrics are the oracle."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

import compiletrace
from tests.conftest import torch_rows

US = 1_000


def test_frame_time_is_torchs_own_figure_even_for_short_frames() -> None:
    reg = compiletrace.Registry()
    fn = compiletrace.compile(lambda x: torch.relu(x) + 1, backend="eager", registry=reg)
    fn(torch.ones(3))
    fn(torch.ones(5))  # a recompile: a short frame
    rows = torch_rows(forward=True)
    assert len(reg) == 2
    for rec in reg.records():
        torch_ns = rows[rec.compile_id].entire_frame_compile_time_s * 1e9
        assert abs(rec.frame_ns - torch_ns) <= 10 * US  # torch rounds to the microsecond


def test_a_lazy_backward_during_another_threads_compile_is_not_lost() -> None:
    reg = compiletrace.Registry()
    model = compiletrace.compile(torch.nn.Linear(4, 4), backend="aot_eager", registry=reg)
    loss = model(torch.randn(2, 4)).sum()  # forward compiled; its backward compiles lazily
    inside, release = threading.Event(), threading.Event()

    def slow_backend(gm: torch.fx.GraphModule, inputs: Any) -> Any:
        inside.set()
        release.wait(60)
        return gm.forward

    other = compiletrace.compile(lambda x: x * 3, component="vision", backend=slow_backend, registry=reg)
    thread = threading.Thread(target=lambda: other(torch.ones(2)))
    thread.start()
    try:
        assert inside.wait(60)
        # torch's pending-callback counter is process-wide: the other thread's open frame
        # compile swallows both callbacks of this backward.
        loss.backward()
    finally:
        release.set()
        thread.join(60)
    (lm,) = [r for r in reg.records() if r.component == "language_model"]
    (torch_bw,) = torch_rows(forward=False).values()
    assert lm.backward_ns > 0
    assert abs(lm.backward_ns - torch_bw.backward_cumulative_compile_time_us * US) <= 10 * US
    assert [r.component for r in reg.records()].count("vision") == 1


def test_a_lazy_backward_after_reset_stays_with_the_graph_that_made_it() -> None:
    reg = compiletrace.Registry()
    encoder = compiletrace.compile(torch.nn.Linear(4, 4), is_encoder=True, backend="aot_eager", registry=reg)
    loss = encoder(torch.randn(2, 4)).sum()
    torch._dynamo.reset()  # compile ids restart: the language model's first graph is "0/0" again
    lm = compiletrace.compile(torch.nn.Linear(4, 2), backend="aot_eager", registry=reg)
    with torch.no_grad():
        lm(torch.randn(2, 4))
    loss.backward()
    by_component = {r.component: r for r in reg.records()}
    assert by_component["encoder"].compile_id == by_component["language_model"].compile_id == "0/0"
    assert by_component["encoder"].backward_ns > 0
    assert by_component["language_model"].backward_ns == 0


def test_dynamos_restart_is_a_success_with_its_reasons_not_an_error() -> None:
    reg = compiletrace.Registry()

    def shift(x: torch.Tensor, by: float) -> torch.Tensor:
        return x + torch.full((3,), by)  # a Python float Dynamo must turn into a tensor: a restart

    fn = compiletrace.compile(shift, backend="aot_eager", dynamic=True, registry=reg)
    out = fn(torch.ones(3), 2.5)
    assert torch.equal(out, torch.full((3,), 3.5))
    (rec,) = reg.records()
    (row,) = torch_rows(forward=True).values()
    assert rec.status is compiletrace.CompileStatus.OK and rec.error_type is None
    assert row.restart_reasons, "this torch no longer restarts here: the test needs another trigger"
    assert rec.restart_reasons and rec.discarded_ns > 0
    assert rec.graph_node_count == row.graph_node_count  # the kept graph's nodes only
    assert rec.dynamo_ns is not None
    assert rec.dynamo_ns + rec.backend_ns + rec.discarded_ns == rec.frame_ns


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.proj(x))


def test_components_sharing_a_frame_are_not_each_others_recompiles() -> None:
    # One forward code object compiled by two components, as transformers' decorated
    # forwards are: torch calls the second component's first graph a recompile ("0/1").
    reg = compiletrace.Registry()
    encoder = compiletrace.compile(Block(), is_encoder=True, backend="eager", dynamic=False, registry=reg)
    decoder = compiletrace.compile(Block(), backend="eager", dynamic=False, registry=reg)
    encoder(torch.ones(1, 4))
    decoder(torch.ones(1, 4))
    decoder(torch.ones(3, 4))  # a real recompile of the decoder
    enc, dec_first, dec_again = reg.records()
    assert (enc.compile_id, dec_first.compile_id, dec_again.compile_id) == ("0/0", "0/1", "0/2")
    assert not enc.is_recompile and enc.shared_with is None
    assert not dec_first.is_recompile and dec_first.shared_with == "encoder"
    assert dec_first.frame_attempt == 1
    assert dec_again.is_recompile and dec_again.shared_with is None


def test_a_shared_frame_near_torchs_limit_warns_once() -> None:
    reg = compiletrace.Registry()
    encoder = compiletrace.compile(Block(), is_encoder=True, backend="eager", dynamic=False, registry=reg)
    decoder = compiletrace.compile(Block(), backend="eager", dynamic=False, registry=reg)
    with torch._dynamo.config.patch(recompile_limit=4), pytest.warns(RuntimeWarning) as caught:
        encoder(torch.ones(1, 4))
        decoder(torch.ones(1, 4))
        decoder(torch.ones(2, 4))
        decoder(torch.ones(3, 4))
    shared = [str(w.message) for w in caught if "share torch's 4 entries" in str(w.message)]
    assert len(shared) == 1
    assert "encoder and language_model" in shared[0] and "recompile_limit" in shared[0]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"backend": "no-such-backend"},
        {"mode": "turbo"},
        {"options": {"no_such_option": 1}},
        {"mode": "max-autotune", "options": {"max_autotune": True}},
    ],
)
def test_bad_options_raise_what_torch_compile_raises(kwargs: dict[str, Any]) -> None:
    model = torch.nn.Linear(2, 2)
    with pytest.raises(Exception) as torchs:
        torch.compile(model, **kwargs)(torch.ones(2))
    with pytest.raises(Exception) as ours:
        compiletrace.compile(model, **kwargs)(torch.ones(2))
    assert isinstance(ours.value, RuntimeError) and isinstance(torchs.value, RuntimeError)
    assert isinstance(ours.value, compiletrace.CompileOptionError)


def test_an_option_name_that_is_not_a_string_is_a_clear_type_error() -> None:
    with pytest.raises(compiletrace.ArgumentTypeError, match="option names must be strings, got 1"):
        compiletrace.compile(torch.nn.Linear(2, 2), options={1: 1})  # type: ignore[dict-item]


def test_a_multi_line_reason_keeps_one_row_per_graph_in_every_view() -> None:
    reason = (
        "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8\n"
        'User stack trace:\n  File "model.py", line 10, in forward\n    return self.block(x)\n'
    )
    rec = compiletrace.GraphRecord(
        "0/1",
        "language_model",
        "eager",
        "forward",
        3,
        0,
        10,
        4,
        6,
        2,
        is_recompile=True,
        recompile_reason=reason,
    )
    reg = compiletrace.Registry()
    reg.add(rec)
    lines = compiletrace.summary(reg).splitlines()
    per_graph = lines[lines.index("Per graph") + 3 :]
    assert per_graph[0].startswith("0/1 ")  # one row for the graph
    # The guard's line, whole, under the table (it would be cut in it); not torch's stack.
    assert per_graph[1:4] == [
        "",
        "Recompile reasons",
        "  0/1: 0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8",
    ]
    assert "User stack trace" not in compiletrace.summary(reg)
    assert per_graph[4] == ""  # the next line is the blank before the summary line
    assert max(len(line) for line in lines) <= 200
    from compiletrace.reports import registry_html_table

    html = registry_html_table([rec])
    assert "<details><summary>0/0: tensor &#x27;x&#x27; size mismatch" in html
    assert "User stack trace:" in html  # the whole reason, one click away
    assert compiletrace.GraphRecord.from_dict(rec.to_dict()).recompile_reason == reason


def test_control_characters_never_reach_the_terminal_raw() -> None:
    evil = "encoder\x1b]0;owned\x07\x1b[31m"
    reg = compiletrace.Registry()
    reg.add(compiletrace.GraphRecord("0/0", evil, "eager", "fwd\x1b[2J", 1, 0, 10, 4, 6, 2))
    text = compiletrace.summary(reg)
    assert "\x1b" not in text and "\x07" not in text
    assert "encoder\\x1b]0;owned\\x07" in text


def test_a_fullgraph_compile_that_breaks_is_an_error_as_torch_says() -> None:
    def prints(x: torch.Tensor) -> torch.Tensor:
        y = x.sin()
        print("between")  # a graph break: with fullgraph=True, torch raises Unsupported
        return y.cos()

    reg = compiletrace.Registry()
    with pytest.raises(torch._dynamo.exc.Unsupported):
        compiletrace.compile(prints, backend="eager", fullgraph=True, registry=reg)(torch.ones(2))
    (record,) = reg.records()
    (row,) = torch_rows().values()
    assert row.fail_type == "Unsupported"  # torch's own row
    assert record.status is compiletrace.CompileStatus.ERROR
    assert record.error_type == "torch._dynamo.exc.Unsupported"
    (reason,) = record.graph_breaks
    assert reason.lineno == prints.__code__.co_firstlineno + 2 and reason.frame_skipped
    # The doctor says the compile failed (not that the frame runs eagerly), and why.
    (finding,) = compiletrace.diagnose(reg)
    assert "prints failed to compile: torch raised Unsupported at the break" in finding.title
    assert "runs eagerly" not in finding.title and "compile without fullgraph=True" in finding.fix
    # Without fullgraph the same break is no error: the frame is split and runs.
    plain = compiletrace.Registry()
    compiletrace.compile(prints, backend="eager", registry=plain)(torch.ones(2))
    assert all(r.status is compiletrace.CompileStatus.OK for r in plain.records())
