"""compiletrace on real third-party model code: transformers models built from tiny random
configurations (no downloads, fixed seeds).

Covered: an encoder-decoder (Whisper: encoder and decoder compiled as two components, a
forward and a short ``generate`` with its recompiles), a vision tower beside a decoder LM
(SigLIP + Llama, glued by a projection into ``inputs_embeds``), a training step on both
components (``aot_eager``: lazy backwards on the right records; one tiny ``inductor`` step),
GPT-2 under ``dynamic=True`` inside a wrapper with a graph break (Dynamo restarts, a resume
frame), and two components that share transformers' decorated ``forward`` compiled and run
from four threads.

Every test checks the records against torch's own per-frame metrics, frame by frame, and
attributes each compile to a component with an oracle of its own (hooks on the compiled
modules plus a Dynamo start callback), independent of compiletrace's attribution. Compiled
outputs (and gradients) must equal eager ones.
"""

from __future__ import annotations

import copy
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

import compiletrace
from compiletrace import CompileStatus, GraphRecord, Registry
from compiletrace._core.tracker import SHARED_FRAME_WARN_SHARE
from tests.conftest import torch_rows

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.real_model

MS = 1_000_000  # nanoseconds
US = 1_000
# A recorded time matches torch's own figure within 5% or 10 ms, whichever is larger.
REL_TOL = 0.05
ABS_TOL_NS = 10 * MS


# -- Models: tiny random configurations -------------------------------------------------


def whisper() -> Any:
    torch.manual_seed(0)
    config = transformers.WhisperConfig(
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        num_mel_bins=8,
        max_source_positions=16,
        max_target_positions=32,
        vocab_size=100,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=3,
        begin_suppress_tokens=None,
        suppress_tokens=None,
    )
    return transformers.WhisperForConditionalGeneration(config).eval()


def siglip_vision() -> Any:
    torch.manual_seed(1)
    config = transformers.SiglipVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=16,
        patch_size=8,
        num_channels=3,
    )
    return transformers.SiglipVisionModel(config).eval()


def llama(hidden_size: int = 32) -> Any:
    torch.manual_seed(2)
    config = transformers.LlamaConfig(
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    return transformers.LlamaForCausalLM(config).eval()


def gpt2_config() -> Any:
    no_dropout = {"embd_pdrop": 0.0, "resid_pdrop": 0.0, "attn_pdrop": 0.0}
    return transformers.GPT2Config(
        n_embd=32,
        n_layer=1,
        n_head=2,
        vocab_size=128,
        n_positions=64,
        bos_token_id=1,
        eos_token_id=2,
        **no_dropout,
    )


class GPT2WithHead(torch.nn.Module):
    """GPT-2 and a small head, with a graph break between them: two compiled blocks."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.gpt = transformers.GPT2LMHeadModel(gpt2_config())
        self.head = torch.nn.Linear(128, 8)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        logits = self.gpt(input_ids=input_ids).logits
        torch._dynamo.graph_break()
        return self.head(logits).softmax(-1)


class VisionLanguage(torch.nn.Module):
    """A vision tower beside a decoder LM: patch features projected and prepended to the
    token embeddings, as LLaVA-style models do."""

    def __init__(self, hidden_size: int = 32) -> None:
        super().__init__()
        self.vision = siglip_vision()
        self.language_model = llama(hidden_size)
        torch.manual_seed(4)
        self.projector = torch.nn.Linear(32, hidden_size)

    def forward(
        self, pixel_values: torch.Tensor, input_ids: torch.Tensor, labels: torch.Tensor | None = None
    ) -> Any:
        features = self.vision(pixel_values=pixel_values).last_hidden_state
        text = self.language_model.get_input_embeddings()(input_ids)
        embeds = torch.cat([self.projector(features), text], dim=1)
        if labels is not None:  # no loss on the image positions
            ignore = torch.full(features.shape[:2], -100, dtype=labels.dtype)
            labels = torch.cat([ignore, labels], dim=1)
        return self.language_model(inputs_embeds=embeds, labels=labels)


def pixels(seed: int) -> torch.Tensor:
    return torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(seed))


def token_ids(seed: int, length: int) -> torch.Tensor:
    return torch.randint(3, 128, (1, length), generator=torch.Generator().manual_seed(seed))


# -- The oracle: which component's call started each frame compile ----------------------


class ComponentProbe:
    """Maps each Dynamo frame compile to the component whose compiled module was being
    called on that thread. Hooks on each compiled module (they run in Python, outside
    Dynamo) mark the component on the calling thread; a Dynamo start callback of the
    test's own reads the mark with the compile id. Independent of compiletrace."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self.components: dict[str, str] = {}  # compile id -> component

    def _stack(self) -> list[str]:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        stack: list[str] = self._local.stack
        return stack

    def tag(self, module: torch.nn.Module, component: str) -> None:
        def enter(mod: torch.nn.Module, args: Any, kwargs: Any) -> None:
            self._stack().append(component)

        def leave(mod: torch.nn.Module, args: Any, kwargs: Any, out: Any) -> None:
            self._stack().pop()

        module.register_forward_pre_hook(enter, with_kwargs=True)
        module.register_forward_hook(leave, with_kwargs=True, always_call=True)

    def compile(self, module: torch.nn.Module, expected: str, **kwargs: Any) -> Any:
        """``compiletrace.compile(module, **kwargs)``, its calls tagged as component
        ``expected`` for the oracle."""
        compiled = compiletrace.compile(module, **kwargs)
        self.tag(compiled, expected)
        return compiled

    def on_start(self, args: Any) -> None:
        if args.callback_trigger is not torch._dynamo.callback.CallbackTrigger.DYNAMO:
            return
        stack = self._stack()
        with self._lock:
            self.components[str(args.compile_id)] = stack[-1] if stack else "<untagged>"


@pytest.fixture
def probe() -> Iterator[ComponentProbe]:
    oracle = ComponentProbe()
    handler = torch._dynamo.callback.callback_handler
    handler.register_start_callback(oracle.on_start)
    yield oracle
    handler.remove_start_callback(oracle.on_start)


def _close(recorded_ns: int, torch_ns: float) -> bool:
    return abs(recorded_ns - torch_ns) <= max(REL_TOL * torch_ns, ABS_TOL_NS)


def _frame_and_attempt(compile_id: str) -> tuple[str, int]:
    frame, _, attempt = compile_id.partition("/")
    return frame, int(attempt.split("_")[0])


def assert_records_match_torch(reg: Registry, probe: ComponentProbe) -> tuple[GraphRecord, ...]:
    """Every record of ``reg`` against torch's own row for its frame (this test's rows)."""
    records = reg.records()
    fwd, bwd = torch_rows(forward=True), torch_rows(forward=False)
    assert records, "nothing was recorded"
    # One record per frame that produced a graph, and no frame twice. torch's rows are picked
    # by their backend time: not every release leaves a node count unset where no backend ran.
    assert sorted(r.compile_id for r in records if r.graph_node_count) == sorted(
        cid for cid, row in fwd.items() if row.backend_compile_time_s is not None
    )
    assert len({r.compile_id for r in records}) == len(records)
    seen: dict[str, list[str]] = {}  # frame -> components that compiled it, in compile order
    for rec in sorted(records, key=lambda r: _frame_and_attempt(r.compile_id)[1]):
        where = f"record {rec.compile_id} ({rec.component}, {rec.code_name})"
        assert rec.compile_id in fwd, f"{where}: torch has no such frame compile"
        row = fwd[rec.compile_id]
        assert rec.code_name == row.co_name, where
        assert rec.component == probe.components.get(rec.compile_id), where
        torch_ns = row.entire_frame_compile_time_s * 1e9
        assert _close(rec.frame_ns, torch_ns), f"{where}: frame {rec.frame_ns} ns, torch {torch_ns:.0f} ns"
        if row.fail_type is None:
            assert rec.status is CompileStatus.OK and rec.error_type is None, where
        if row.graph_node_count is not None:
            assert rec.graph_node_count == row.graph_node_count, where
        if rec.recompile_reason or row.recompile_reason:
            assert rec.recompile_reason == row.recompile_reason, where
        # Restarts inside the backend call (torch lists them among its restart reasons;
        # it also lists Dynamo's own restart at a graph break, which has no backend time).
        torch_restarts = " ".join(str(reason) for reason in row.restart_reasons or ())
        assert all(reason in torch_restarts for reason in rec.restart_reasons), where
        if "TensorifyScalarRestartAnalysis" in torch_restarts:
            assert rec.restart_reasons and rec.discarded_ns > 0, where
        if not rec.restart_reasons:
            assert rec.discarded_ns == 0, where
        if rec.dynamo_ns is not None:
            assert rec.dynamo_ns + rec.backend_ns + rec.discarded_ns == rec.frame_ns, where
        if rec.compile_id in bwd:
            torch_bw_ns = bwd[rec.compile_id].backward_cumulative_compile_time_us * US
            assert rec.backward_ns > 0, f"{where}: its lazy backward was not recorded"
            assert _close(rec.backward_ns, torch_bw_ns), f"{where}: backward {rec.backward_ns} ns"
        else:
            assert rec.backward_ns == 0, f"{where}: a backward torch did not compile"
        # A recompile of this component's own entry, or the first graph of a frame that
        # another component compiled first (torch calls both a recompile).
        frame, attempt = _frame_and_attempt(rec.compile_id)
        before = seen.setdefault(frame, [])
        assert rec.frame_attempt == attempt, where
        assert rec.is_recompile is (attempt > 0 and (not before or rec.component in before)), where
        assert rec.shared_with == (before[0] if before and rec.component not in before else None), where
        if rec.component not in before:
            before.append(rec.component)
    # Backwards torch compiled belong to recorded graphs.
    assert set(bwd) <= {r.compile_id for r in records}
    _assert_one_summary_row_per_graph(reg)
    return records


def _assert_one_summary_row_per_graph(reg: Registry) -> None:
    lines = compiletrace.summary(reg).splitlines()
    start = lines.index("Per graph") + 3  # the title, the header, the rule
    end = lines.index("", start)
    assert len(lines[start:end]) == len(reg)


def by_component(records: tuple[GraphRecord, ...], component: str) -> list[GraphRecord]:
    return [r for r in records if r.component == component]


# -- The tests ----------------------------------------------------------------------------


def test_whisper_encoder_and_decoder_forward_then_generate(probe: ComponentProbe) -> None:
    model = whisper()
    features = torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(5))
    decoder_ids = torch.tensor([[3, 5, 7]])
    with torch.no_grad():
        eager_logits = model(input_features=features, decoder_input_ids=decoder_ids).logits
        eager_tokens = model.generate(features, max_new_tokens=3, do_sample=False)

    reg = Registry()
    inner = model.model
    inner.encoder = probe.compile(inner.encoder, "encoder", is_encoder=True, backend="eager", registry=reg)
    inner.decoder = probe.compile(inner.decoder, "language_model", backend="eager", registry=reg)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logits = model(input_features=features, decoder_input_ids=decoder_ids).logits
        forward_records = len(reg)
        tokens = model.generate(features, max_new_tokens=3, do_sample=False)
    torch.testing.assert_close(logits, eager_logits)
    assert torch.equal(tokens, eager_tokens)

    records = assert_records_match_torch(reg, probe)
    encoder, decoder = by_component(records, "encoder"), by_component(records, "language_model")
    assert forward_records == 2 and encoder and decoder
    # transformers' decorated forward is one code object: the decoder's first graph is
    # torch's "0/1" recompile of the encoder's frame, but not a recompile of the decoder.
    first = decoder[0]
    assert first.compile_id == "0/1" and first.recompile_reason
    assert not first.is_recompile and first.shared_with == "encoder"
    # generate's cached decoding steps recompile the decoder, with torch's reasons.
    assert any(r.is_recompile and r.recompile_reason for r in decoder[1:])
    # The two components fill one frame's entries together: said once, near torch's limit.
    used = 1 + max(r.frame_attempt for r in records if r.compile_id.startswith("0/"))
    near_limit = used >= SHARED_FRAME_WARN_SHARE * torch._dynamo.config.recompile_limit
    shared = [w for w in caught if "share torch's" in str(w.message)]
    assert len(shared) == int(near_limit)


def test_vision_tower_beside_a_decoder_lm(probe: ComponentProbe) -> None:
    model = VisionLanguage()
    px, ids = pixels(0), token_ids(0, 4)
    with torch.no_grad():
        eager = model(px, ids)

    reg = Registry()
    model.vision = probe.compile(model.vision, "vision", component="vision", backend="eager", registry=reg)
    model.language_model = probe.compile(
        model.language_model, "language_model", backend="eager", registry=reg
    )
    with torch.no_grad():
        out = model(px, ids)
    torch.testing.assert_close(out.logits, eager.logits)

    records = assert_records_match_torch(reg, probe)
    assert [r.component for r in records] == ["vision", "language_model"]
    assert not any(r.is_recompile or r.shared_with for r in records)


def _train_step(model: VisionLanguage, px: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    loss: torch.Tensor = model(px, ids, labels=ids).loss
    loss.backward()
    return loss.detach()


def _assert_same_grads(compiled: torch.nn.Module, eager: torch.nn.Module) -> None:
    grads = {n: p.grad for n, p in eager.named_parameters() if p.grad is not None}
    assert grads
    for name, param in compiled.named_parameters():
        name = name.replace("_orig_mod.", "")
        if name in grads:
            assert param.grad is not None, name
            torch.testing.assert_close(param.grad, grads[name], msg=name)


def test_training_step_records_each_lazy_backward_on_its_forward(probe: ComponentProbe) -> None:
    model = VisionLanguage().train()
    reference = copy.deepcopy(model)
    px, ids = pixels(1), token_ids(1, 4)
    eager_loss = _train_step(reference, px, ids)

    reg = Registry()
    model.vision = probe.compile(
        model.vision, "vision", component="vision", backend="aot_eager", registry=reg
    )
    model.language_model = probe.compile(
        model.language_model, "language_model", backend="aot_eager", registry=reg
    )
    loss = _train_step(model, px, ids)
    torch.testing.assert_close(loss, eager_loss)
    _assert_same_grads(model, reference)

    records = assert_records_match_torch(reg, probe)
    assert {r.component for r in records} == {"vision", "language_model"}
    assert all(r.backward_ns > 0 for r in records)  # each forward's own backward
    # A second step runs the compiled graphs: nothing new, no backward counted twice.
    torch.testing.assert_close(_train_step(model, px, ids), _train_step(reference, px, ids))
    assert reg.records() == records


@pytest.mark.inductor
def test_inductor_training_step(probe: ComponentProbe) -> None:
    model = llama(hidden_size=16).train()
    reference = copy.deepcopy(model)
    ids = token_ids(2, 4)

    def step(lm: Any) -> torch.Tensor:
        optimizer = torch.optim.SGD(lm.parameters(), lr=0.1)
        loss: torch.Tensor = lm(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        return loss.detach()

    eager_loss = step(reference)
    reg = Registry()
    compiled = probe.compile(model, "language_model", backend="inductor", registry=reg)
    loss = step(compiled)
    torch.testing.assert_close(loss, eager_loss)
    _assert_same_grads(compiled, reference)
    for (name, param), ref in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(param, ref, msg=name)

    (record,) = assert_records_match_torch(reg, probe)
    assert record.backend == "inductor" and record.backward_ns > 0


def test_gpt2_dynamic_with_a_graph_break(probe: ComponentProbe) -> None:
    model = GPT2WithHead().eval()
    inputs = [token_ids(3, 5), token_ids(4, 9)]
    with torch.no_grad():
        eager = [model(ids) for ids in inputs]

    reg = Registry()
    compiled = probe.compile(model, "language_model", backend="aot_eager", dynamic=True, registry=reg)
    with torch.no_grad():
        outs = [compiled(ids) for ids in inputs]  # a second length: no recompile when dynamic
    for out, ref in zip(outs, eager, strict=True):
        torch.testing.assert_close(out, ref)

    records = assert_records_match_torch(reg, probe)
    codes = [r.code_name for r in records]
    assert codes[0] == "forward" and any(c.startswith("torch_dynamo_resume_in_forward") for c in codes)
    assert not any(r.is_recompile for r in records)
    # Dynamo restarted its analysis of GPT-2's frame (a Python float under dynamic shapes).
    (restarted,) = [r for r in records if r.restart_reasons]
    assert restarted.status is CompileStatus.OK and restarted.compile_id == "0/0"
    assert restarted.dynamo_ns is not None
    assert restarted.dynamo_ns + restarted.backend_ns + restarted.discarded_ns == restarted.frame_ns


def test_two_components_sharing_a_forward_from_four_threads(probe: ComponentProbe) -> None:
    # SigLIP's and GPT-2's model forwards are one decorated code object: one frame. Each
    # thread runs a forward and a backward: a lazy backward compiles on one thread while
    # another thread's frame compile may be open (torch's pending-callback counter is
    # process-wide, so the backward's callbacks can go unseen).
    vision = siglip_vision().train()  # no dropout in these configs
    torch.manual_seed(7)
    text = transformers.GPT2Model(gpt2_config()).train()
    reg = Registry()
    compiled = {
        "vision": probe.compile(vision, "vision", component="vision", backend="aot_eager", registry=reg),
        "language_model": probe.compile(text, "language_model", backend="aot_eager", registry=reg),
    }
    jobs: list[tuple[str, Callable[[Any], torch.Tensor]]] = []
    for seed in (10, 11):
        px = pixels(seed)
        jobs.append(("vision", lambda m, px=px: m(pixel_values=px).last_hidden_state))
    for seed, length in ((12, 4), (13, 6)):
        ids = token_ids(seed, length)
        jobs.append(("language_model", lambda m, ids=ids: m(input_ids=ids).last_hidden_state))
    eager_models = {"vision": vision, "language_model": text}
    with torch.no_grad():
        expected = [run(eager_models[name]) for name, run in jobs]

    barrier = threading.Barrier(len(jobs))
    results: list[torch.Tensor | BaseException | None] = [None] * len(jobs)

    def work(i: int) -> None:
        name, run = jobs[i]
        try:
            barrier.wait(60)
            out = run(compiled[name])
            out.square().mean().backward()
            results[i] = out.detach()
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads)
    for result, ref in zip(results, expected, strict=True):
        assert isinstance(result, torch.Tensor), result
        torch.testing.assert_close(result, ref)

    records = assert_records_match_torch(reg, probe)
    assert {r.component for r in records} == {"vision", "language_model"}
    assert len({r.code_name for r in records}) == 1  # one shared frame
    assert sum(r.shared_with is not None for r in records) == 1
    assert sum(r.backward_ns > 0 for r in records) >= 2  # at least each component's first graph


def _llama_layer_by_layer(compile_layer: Callable[[torch.nn.Module], Any]) -> list[str]:
    """A 10-layer tiny Llama compiled layer by layer (regional compilation, as diffusers'
    compile_repeated_blocks and torchtitan do): the compile ids torch records for one call."""
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=10,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    for i, layer in enumerate(model.model.layers):
        model.model.layers[i] = compile_layer(layer)
    started = time.time()
    with torch.no_grad():
        model(torch.randint(0, 64, (1, 6)), use_cache=False)
    rows = torch._dynamo.utils.get_compilation_metrics()
    return [str(m.compile_id) for m in rows if m.is_forward and (m.start_time or 0) >= started]


def test_compiling_layer_by_layer_compiles_as_often_as_torch_compile() -> None:
    # A backend object per layer made Dynamo recompile the layers' shared code once per layer
    # ("BACKEND_MATCH failure") up to its limit of 8, then run the rest eagerly.
    plain = _llama_layer_by_layer(lambda layer: torch.compile(layer, backend="aot_eager"))
    reg = Registry()
    ours = _llama_layer_by_layer(lambda layer: compiletrace.compile(layer, backend="aot_eager", registry=reg))
    assert plain == ours == ["0/0"]
    (record,) = reg.records()
    assert record.status is CompileStatus.OK and not record.recompile_limit_hit


def test_blocks_that_update_a_cache_layer_each_are_seen_doing_so() -> None:
    """GPT-2 compiled whole: on transformers' defaults (use_cache=True) each block updates its
    own layer of the cache, which a block compiled on its own would specialise on; without a
    cache, the same blocks read none."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=128, n_positions=64, n_embd=32, n_layer=4, n_head=2, bos_token_id=2, eos_token_id=1,
        pad_token_id=0,
    )  # fmt: skip
    model = transformers.GPT2LMHeadModel(config).eval()
    seen = {}
    for use_cache in (True, False):
        reg = Registry()
        compiled = compiletrace.compile(model, backend="aot_eager", registry=reg)
        with torch.no_grad():
            compiled(input_ids=token_ids(0, 8), use_cache=use_cache)
        (record,) = reg.records()
        block = record.repeated_block
        assert block is not None and (block.class_name, block.instances) == ("GPT2Block", 4)
        seen[use_cache] = block.reads_own_cache
        torch._dynamo.reset()
    assert seen == {True: True, False: False}
