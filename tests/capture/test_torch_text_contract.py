"""The contract with torch's text: every name and pattern of ``compiletrace._data.torch_text``
still matches what the installed torch writes.

Real compiles on this torch (eager and aot_eager here; one inductor compile, cold then warm,
in a process of its own) make torch write its recompile reasons, graph-break reasons,
resume-function names, error types and timed regions; each constant of the module, and each
alternative (``a|b``) of each pattern, must match at least one of them. A torch that rewords
one fails here, naming it: the fix is a change to ``torch_text.py``. What this machine
cannot make torch write (a second GPU, a Triton build) is listed with the reason, and only
that.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

import compiletrace
from compiletrace._core import torch_compat as tc
from compiletrace._data import torch_text
from compiletrace._data.cache_store import entry_file_times, entry_parts
from compiletrace._data.records import GraphRecord
from compiletrace._doctor.guards import guard_text
from tests.inputs.runs.rule_programs import size_relation

# -- what this torch writes -----------------------------------------------------------------


@dataclass
class Written:
    """Torch's own text, as compiletrace recorded it from real compiles."""

    reasons: list[str] = field(default_factory=list)  # recompile reasons, whole
    breaks: list[str] = field(default_factory=list)  # graph-break reasons, whole
    code_names: list[str] = field(default_factory=list)  # compiled frames' code names
    error_types: list[str] = field(default_factory=list)  # the exceptions compiles raised
    regions: set[str] = field(default_factory=set)  # timed-region names
    stance: list[str] = field(default_factory=list)  # what a stance that refuses a compile raises
    module_classes: list[str] = field(default_factory=list)  # the classes of DDP's frames
    sources: list[str] = field(default_factory=list)  # the inputs torch's automatic dynamic names

    def add(self, records: Iterable[GraphRecord]) -> None:
        for r in records:
            if r.recompile_reason:
                self.reasons.append(r.recompile_reason)
            self.breaks.extend(b.reason for b in r.graph_breaks)
            self.code_names.append(r.code_name)
            self.sources.extend(entry.rpartition(":")[0] for entry in r.dynamic_sources)
            if r.error_type:
                self.error_types.append(r.error_type)

    @property
    def guards(self) -> list[str]:
        """Each failed guard itself (the first line, without torch's entry prefix and padding)."""
        return [guard_text(reason) for reason in self.reasons]

    @property
    def compared(self) -> list[tuple[str, str]]:
        """(what was guarded, the constant it had to equal) of each value guard."""
        found = (torch_text.VALUE_COMPARISON.match(g) for g in self.guards)
        return [(m[1], m[2].strip()) for m in found if m]

    @property
    def guarded_names(self) -> list[str]:
        """How guards name what they guard: the tensor of a size guard, the value of a comparison."""
        sizes = (torch_text.SIZE_MISMATCH.search(g) for g in self.guards)
        return [m[1] for m in sizes if m] + [name for name, _ in self.compared]


def _calls(fn: Callable[..., Any], *calls: tuple[Any, ...], **options: Any) -> list[GraphRecord]:
    """Compile ``fn`` (eager) and call it once per argument tuple; the records."""
    torch._dynamo.reset()
    reg = compiletrace.Registry()
    compiled = compiletrace.compile(fn, backend="eager", registry=reg, **options)
    for args in calls:
        with contextlib.suppress(Exception):  # fullgraph=True raises at the break: its record says so
            compiled(*args)
    return list(reg.records())


def _ones(*shape: int, **kwargs: Any) -> torch.Tensor:
    return torch.ones(*shape, **kwargs)


class _Holder:
    def __init__(self, value: Any) -> None:
        self.value = value


class _A:
    v = 1


class _B:
    v = 1


def _kwargs_size(**kwargs: torch.Tensor) -> torch.Tensor:
    return kwargs["x"].sin()


def _varargs_size(*args: torch.Tensor) -> torch.Tensor:
    return args[0].sin()


def _kwargs_count(x: torch.Tensor, **kwargs: int) -> torch.Tensor:
    return x * len(kwargs)


def _item_then_use(x: torch.Tensor) -> torch.Tensor:
    value = x.sum().item()  # a break; the number goes to the graph after it
    return x * value


def _tensor_branch(x: torch.Tensor) -> torch.Tensor:
    if x.sum() > 0:  # a Python if on a tensor's value
        return x.sin()
    return x.cos()


def _scalar_branch(x: torch.Tensor) -> torch.Tensor:
    n = x.sum().item()
    if n > 0:  # a branch on a captured scalar: data-dependent
        return x.sin()
    return x.cos()


def _printing(x: torch.Tensor) -> torch.Tensor:
    x = x.sin()
    print("torch text contract: a print in compiled code")
    return x.cos()


_log = logging.getLogger("compiletrace.tests.torch_text")


def _logging(x: torch.Tensor) -> torch.Tensor:
    _log.debug("a log call in compiled code")
    return x.sin()


_lock = threading.Lock()


def _locked(x: torch.Tensor) -> torch.Tensor:
    with _lock:  # a context manager Dynamo cannot enter
        return x.sin()


def _explicit_break(x: torch.Tensor) -> torch.Tensor:
    x = x.sin()
    torch._dynamo.graph_break()
    return x.cos()


def _wrapping(func: Callable[..., Any]) -> Callable[..., Any]:
    """A decorator like a library's around each forward: one wrapper code for every function."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper


@_wrapping
def _wrapped_sin(x: torch.Tensor) -> torch.Tensor:
    return x.sin()


@_wrapping
def _wrapped_cos(x: torch.Tensor) -> torch.Tensor:
    return x.cos()


class _Layers:
    """A cache of layers, each with a flag, as transformers' cache holds them."""

    def __init__(self, ready: bool) -> None:
        self.layers = [_Holder(ready), _Holder(ready)]


def _layer_flag(x: torch.Tensor, cache: _Layers) -> torch.Tensor:
    return x + 1 if cache.layers[0].value else x - 1  # guarded on the flag of one layer


def _ddp_records() -> list[GraphRecord]:
    """torch.compile(DDP(nn.Sequential)) in a process group of one: every frame breaks."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("gloo", store=dist.FileStore(f"{folder}/store", 1), rank=0, world_size=1)
        try:
            model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(4, 4)))
            return _calls(model, (_ones(2, 4),))
        finally:
            dist.destroy_process_group()


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).relu()


class _Tower(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = _Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x) * 2


@pytest.fixture(scope="module")
def written() -> Written:
    w = Written()
    f1, f2 = (lambda t: t + 1), (lambda t: t + 2)
    # Recompile reasons: one scenario per kind of failed guard.
    w.add(_calls(lambda x: x.sin(), (_ones(2),), (_ones(3),), (_ones(1),), dynamic=False))  # size, 0/1
    w.add(_calls(lambda x: x.sin(), (_ones(2),), (_ones(3),), (_ones(1),)))  # 2 <= x.size()[0]
    w.add(_calls(lambda x: x.sin(), (_ones(2, 3),), (_ones(3, 2).t(),), dynamic=False))  # stride
    w.add(_calls(lambda x: x.sin(), (_ones(2),), (_ones(2, 2),), dynamic=False))  # rank
    w.add(_calls(lambda x: x.sin(), (_ones(2),), (_ones(2, dtype=torch.float64),)))  # dtype
    w.add(_calls(lambda x: x.sin(), (_ones(2),), (_ones(2, device="meta"),)))  # dispatch key set
    w.add(_calls(lambda x: x.sin(), (_ones(2),), (_ones(2, requires_grad=True),)))  # requires_grad
    w.add(_calls(lambda x, n: x * n, (_ones(2), 2), (_ones(2), 3), dynamic=False))  # a value: n == 2
    string = (_ones(2), "a"), (_ones(2), "b")
    w.add(_calls(lambda x, m: x.sin() if m == "a" else x.cos(), *string))  # mode == 'a'
    w.add(_calls(lambda x, lst: x * len(lst), (_ones(2), [1, 2]), (_ones(2), [1, 2, 3])))  # len(lst)
    keys = (_ones(2), {"k": 1}), (_ones(2), {"j": 1})
    w.add(_calls(lambda x, d: x + 1 if "k" in d else x - 1, *keys))  # ___dict_contains('k', d)
    held = (_ones(2), _Holder(None)), (_ones(2), _Holder(3))
    w.add(_calls(lambda x, o: x * 2 if o.value is None else x + 1, *held))  # o.value is None
    w.add(_calls(lambda x, fn: fn(x), (_ones(2), f1), (_ones(2), f2)))  # ___check_obj_id
    w.add(_calls(lambda x, o: x * o.v, (_ones(2), _A()), (_ones(2), _B())))  # ___check_type_id
    w.add(_calls(_layer_flag, (_ones(2), _Layers(False)), (_ones(2), _Layers(True))))  # c.layers[0].ready
    torch._dynamo.reset()
    reg = compiletrace.Registry()
    by_keyword = compiletrace.compile(_kwargs_size, backend="eager", registry=reg, dynamic=False)
    by_keyword(x=_ones(2))
    by_keyword(x=_ones(3))  # tensor 'kwargs['x']' size mismatch
    by_position = compiletrace.compile(_varargs_size, backend="eager", registry=reg)
    by_position(_ones(2))
    by_position(_ones(3))  # tensor 'args[0]' size mismatch; automatic dynamic: L['args'][0]
    counted = compiletrace.compile(_kwargs_count, backend="eager", registry=reg)
    counted(_ones(2), a=1)
    counted(_ones(2), a=1, b=2)  # len(kwargs) == 1
    w.add(reg.records())
    torch._dynamo.reset()
    reg = compiletrace.Registry()
    grad = compiletrace.compile(lambda x: x.sin() * 2, backend="eager", registry=reg)
    with torch.no_grad():
        grad(_ones(2))
    grad(_ones(2))  # GLOBAL_STATE changed: grad_mode
    w.add(reg.records())
    torch._dynamo.reset()
    reg = compiletrace.Registry()
    block = _Block()
    for _ in range(2):  # a backend object per call: BACKEND_MATCH
        torch.compile(block, backend=compiletrace.backend(backend="eager", registry=reg))(_ones(2, 4))
    w.add(reg.records())
    w.add(_calls(_item_then_use, (_ones(2),), (_ones(2) * 2,)))  # .item(), and ___stack0 == 2.0
    sizes = [(torch.randn(1, 2, n),) for n in (16, 32, 36)]
    w.add(_calls(size_relation, *sizes))  # (x.size()[2] // 4) == (2*((7 + x.size()[2]) // 8))
    torch._dynamo.reset()
    reg = compiletrace.Registry()
    sin = compiletrace.compile(_wrapped_sin, backend="eager", registry=reg)
    cos = compiletrace.compile(_wrapped_cos, backend="eager", registry=reg)
    sin(_ones(2))
    cos(_ones(2))  # ___check_obj_id(func.__code__, ...): one wrapper code, another function
    sin(x=_ones(2))  # len(args) == 1: called by keyword now
    w.add(reg.records())
    ddp = _ddp_records()
    w.add(ddp)
    w.module_classes.extend(r.module_class for r in ddp)
    # Graph-break reasons.
    w.add(_calls(_printing, (_ones(2),)))
    w.add(_calls(_printing, (_ones(2),), fullgraph=True))  # raises Unsupported at the break
    w.add(_calls(_logging, (_ones(2),)))
    w.add(_calls(_locked, (_ones(2),)))
    w.add(_calls(_explicit_break, (_ones(2),)))
    w.add(_calls(_tensor_branch, (_ones(2),)))
    w.add(_calls(_tensor_branch, (_ones(2),), fullgraph=True))
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        w.add(_calls(_scalar_branch, (_ones(2),)))
    # Timed regions: a frame, a lazy backward (aot_eager), torch's ahead-of-time path, a
    # recompile with a dynamic size (its deferred runtime asserts).
    torch._dynamo.reset()
    tc.install_region_hook()
    with tc.collect_timed_regions() as regions:
        trained = compiletrace.compile(_Tower(), backend="aot_eager", registry=compiletrace.Registry())
        trained(torch.randn(2, 4)).sum().backward()
        ahead = torch.compile(_Tower.forward, fullgraph=True, backend="aot_eager")
        ahead.aot_compile(((_Tower(), torch.randn(2, 4)), {}))
        sized = torch.compile(lambda x: x.sin()[: x.shape[0] // 2], backend="aot_eager")
        sized(_ones(4))
        sized(_ones(6))
    w.regions |= {name for name, _, _ in regions}
    # What a stance that refuses compiles raises (the fail-after-ready fix).
    torch._dynamo.reset()
    refusing = torch.compile(lambda x: x.cos(), backend="eager", dynamic=False)
    refusing(_ones(2))
    try:
        with torch.compiler.set_stance("fail_on_recompile"):
            refusing(_ones(3))
    except Exception as exc:
        w.stance.append(str(exc))
    return w


# Alternatives this machine cannot make the installed torch write, and why. Nothing else may
# go unmatched.
NOT_WRITTEN_HERE: dict[tuple[str, str], str] = {
    ("GUARD_DTYPE_DEVICE", "device mismatch"): "older releases' wording; 2.13 says 'device index mismatch'",
    ("GUARD_DTYPE_DEVICE", "device index mismatch"): "needs two devices of one kind (cuda:0, cuda:1)",
    ("BREAK_DATA_DEPENDENT", "generic_jump"): "Dynamo's internal name, which runs saved before "
    "live breaks kept torch's message hold",
    ("GUARD_IDENTITY", "ID_MATCH"): "older releases named the guard that failed",
    ("GUARD_IDENTITY", "TYPE_MATCH"): "older releases named the guard that failed",
    ("GUARD_SHAPE", r"\.stride\(\)"): "a symbolic stride guard: dynamic strides torch does not make here",
    ("GUARD_SHAPE", "storage_offset"): "a symbolic storage-offset guard: not made on these inputs",
    (
        "GUARD_SYMBOLIC",
        r"\.stride\(\)\[\d+\]",
    ): "a symbolic stride guard: dynamic strides torch does not make here",
    ("GUARD_VALUE", "!="): "torch words value guards with ==; kept for a guard that negates",
    ("GUARD_VALUE", " is not None"): "torch guards a value that is not None by its type or value",
    ("KERNEL_COMPILE_REGIONS", "CppCodeCache"): "no such region in this release",
    ("KERNEL_COMPILE_REGIONS", "TritonCodeCache"): "Triton: GPU builds",
    ("KERNEL_COMPILE_REGIONS", "triton."): "Triton: GPU builds",
    ("CACHE_REGIONS", "FxGraphCache"): "no such region in this release (its lookups are events)",
    ("CACHE_REGIONS", "autograd_cache"): "no such region in this release (its lookups are events)",
    ("CACHE_REGIONS", "fx_graph_cache"): "no such region in this release (its lookups are events)",
    ("GUARD_REGIONS", "precompile_build_guards"): "torch's precompile path (caching_precompile)",
    ("GUARD_REGIONS", "precompile_load_guards"): "torch's precompile path (caching_precompile)",
    ("REMOTE_CACHE_REGIONS", "remote_fx_graph_cache"): "a remote cache (fbcode's): none here",
}

# Regions only a GPU (or a remote cache) makes torch write: each name must still be in
# torch's own source, where torch times it, as a string (checked by text, not by running).
WRITTEN_ON_GPU = {
    "RUNTIME_AUTOTUNE_REGIONS": lambda: list(torch_text.RUNTIME_AUTOTUNE_REGIONS),
    "CUDAGRAPH_REGIONS": lambda: list(torch_text.CUDAGRAPH_REGIONS),
    # COMPILE_AUTOTUNE_REGIONS, by the texts its alternatives match: f"{name}_template_..."
    "COMPILE_AUTOTUNE_REGIONS": lambda: [
        "_template_autotuning",
        "_template_precompiling",
        "benchmark_fused_nodes",
    ],
    "REMOTE_CACHE_REGIONS": lambda: ["remote_fx_graph_cache"],
    "GUARD_REGIONS": lambda: ["precompile_build_guards", "precompile_load_guards"],
}
if torch.torch_version.TorchVersion(torch.__version__) < (2, 14):
    # 2.14 explains the break: "logging.Logger methods are only supported if the logger ..."
    NOT_WRITTEN_HERE[("BREAK_LOGGING", "logger")] = "before 2.14 a log call's break says 'logging.Logger'"


def _alternatives(pattern: str) -> list[str]:
    """A pattern's top-level alternatives (``a|b(c|d)`` -> ``a``, ``b(c|d)``)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    return [*parts, pattern[start:]]


def _unmatched(name: str, pattern: re.Pattern[str], texts: Iterable[str], how: str = "search") -> list[str]:
    texts = list(texts)
    assert texts, f"{name}: the scenarios made no text to check it against"
    missing = []
    for alternative in _alternatives(pattern.pattern):
        compiled = re.compile(alternative, pattern.flags)
        if not any(getattr(compiled, how)(text) for text in texts):
            missing.append(alternative)
    return missing


def _prefixes_unmatched(prefixes: Iterable[str], names: set[str]) -> list[str]:
    return [p for p in prefixes if not any(n.startswith(p) for n in names)]


# Each constant, and the text of torch's it is read from.
PATTERNS: dict[str, tuple[Callable[[Written], Iterable[str]], str]] = {
    "GUARD_ENTRY_PREFIX": (lambda w: w.reasons, "match"),
    "GUARD_SOURCE_COMMENT": (lambda w: (r.splitlines()[0] for r in w.reasons), "search"),
    "GUARD_BACKEND": (lambda w: w.guards, "search"),
    "GUARD_GRAD_MODE": (lambda w: w.guards, "search"),
    "GUARD_SHAPE": (lambda w: w.guards, "search"),
    "GUARD_DTYPE_DEVICE": (lambda w: w.guards, "search"),
    "GUARD_IDENTITY": (lambda w: w.guards, "search"),
    "GUARD_VALUE": (lambda w: w.guards, "search"),
    "GUARD_SYMBOLIC": (lambda w: w.guards, "search"),
    "GUARD_WRAPPED_FUNCTION": (lambda w: w.guards, "search"),
    "GUARD_POSITIONAL_COUNT": (lambda w: w.guards, "search"),
    "SIZE_MISMATCH": (lambda w: w.guards, "search"),
    "GUARD_SUBSCRIPT": (lambda w: w.guards, "search"),
    "VALUE_COMPARISON": (lambda w: w.guards, "match"),
    "KWARGS_COUNT_GUARD": (lambda w: w.guards, "match"),
    "GUARDED_ARGUMENT": (lambda w: w.guarded_names, "match"),
    "GUARDED_POSITIONAL": (lambda w: [*w.guarded_names, *w.sources], "match"),
    "STACK_VALUE": (lambda w: (name for name, _ in w.compared), "match"),
    "STRING_CONSTANT": (lambda w: (value for _, value in w.compared), "match"),
    "NUMBER_CONSTANT": (lambda w: (value for _, value in w.compared), "match"),
    "BREAK_HINT": (lambda w: w.breaks, "search"),
    "BREAK_PRINT": (lambda w: w.breaks, "search"),
    "BREAK_LOGGING": (lambda w: w.breaks, "search"),
    "BREAK_ITEM": (lambda w: w.breaks, "search"),
    "BREAK_EXPLICIT": (lambda w: w.breaks, "search"),
    "BREAK_DATA_DEPENDENT": (lambda w: w.breaks, "search"),
    "BREAK_PAGE": (lambda w: w.breaks, "search"),
    "BREAK_CONTEXT_MANAGER": (lambda w: w.breaks, "search"),
    "DDP_BREAK": (lambda w: w.breaks, "search"),
    "RESUME_NAME": (lambda w: w.code_names, "match"),
    "RESUME_AT": (lambda w: w.code_names, "match"),
}
PREFIXES = (
    "AOT_AUTOGRAD_REGIONS",
    "CACHE_REGIONS",
    "INDUCTOR_REGIONS",
    "KERNEL_COMPILE_REGIONS",
    "ONE_TIME_REGIONS",
    "FX_LOAD_REGIONS",
    "KERNEL_LOAD_REGIONS",
)
# Prefixes of the regions any compile makes (eager, aot_eager).
COMPILE_PREFIXES = ("TRACING_REGIONS", "GUARD_REGIONS", "REMOTE_CACHE_REGIONS")
# Checked by their own tests below.
NAMES = (
    "RESUME_PREFIX",
    "BREAK_EXPLANATION",
    "UNSUPPORTED",
    "FRAME_REGION",
    "BACKWARD_REGION",
    "AOT_REGION",
    "BACKEND_REGION",
    "HEADER_REGION",
    "BACKWARD_COMPILER_REGION",
    "STANCE_REFUSED",
    "DDP_CLASS",
)
CACHE_EVENTS = ("CACHE_EVENT_TIERS", "CACHE_EVENT_OUTCOMES")
# The parts of a cache key: checked on the keys an inductor compile writes (below).
CACHE_KEY_PARTS = ("KEY_PART_LINE", "TENSOR_METADATA", "PROCESS_KEY_ATTRIBUTES", "GRAPH_KEY_ATTRIBUTES")
# A cache key's shape, and where its entry lies: checked on the keys of the same compiles.
CACHE_KEYS = ("CACHE_KEY_LETTERS", "CACHE_KEY_DIGEST")


# Read from torch's trace of a real inductor compile the repository's own program made
# (tests/inputs/traces/cache_bypass: frozen_inference.py, freezing on): each setting's reason.
WRITTEN_IN_TRACES = ("CACHE_BYPASS_SETTINGS",)
TRACES = Path(__file__).resolve().parents[1] / "inputs" / "traces"


def test_each_cache_bypass_setting_matches_what_torch_wrote_in_a_trace() -> None:
    (log,) = (TRACES / "cache_bypass").glob("*.log")
    reasons = re.findall(r'"cache_bypass_reason": "([^"]*)"', log.read_text())
    assert reasons
    for pattern, _, variable, _ in torch_text.CACHE_BYPASS_SETTINGS:
        assert _unmatched(variable, pattern, reasons) == []


def test_the_contract_covers_every_constant_of_the_module() -> None:
    covered = {
        *PATTERNS,
        *PREFIXES,
        *COMPILE_PREFIXES,
        *NAMES,
        *CACHE_EVENTS,
        *CACHE_KEY_PARTS,
        *CACHE_KEYS,
        *WRITTEN_ON_GPU,
        *WRITTEN_IN_TRACES,
    }
    assert covered == set(torch_text.__all__)
    assert all(isinstance(getattr(torch_text, name), re.Pattern) for name in PATTERNS)


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_each_pattern_matches_what_this_torch_writes(name: str, written: Written) -> None:
    texts, how = PATTERNS[name]
    missing = _unmatched(name, getattr(torch_text, name), texts(written), how)
    assert [m for m in missing if (name, m) not in NOT_WRITTEN_HERE] == []


def test_the_names_match_what_this_torch_writes(written: Written) -> None:
    resumed = [n for n in written.code_names if n.startswith(torch_text.RESUME_PREFIX)]
    assert resumed and all(torch_text.RESUME_NAME.match(n) for n in resumed)
    assert any(
        line.strip().startswith(torch_text.BREAK_EXPLANATION)
        for b in written.breaks
        for line in b.splitlines()
    )
    assert any(t.rpartition(".")[2] == torch_text.UNSUPPORTED for t in written.error_types)
    regions = written.regions
    assert {torch_text.FRAME_REGION, torch_text.BACKWARD_REGION, torch_text.AOT_REGION} <= regions
    assert torch_text.DDP_CLASS in written.module_classes  # the frame of DDP's forward names it
    assert torch_text.BACKEND_REGION in regions
    assert written.stance and all(torch_text.STANCE_REFUSED in text for text in written.stance)


@pytest.mark.parametrize("name", COMPILE_PREFIXES)
def test_the_compiles_region_prefixes_match_what_this_torch_writes(name: str, written: Written) -> None:
    missing = _prefixes_unmatched(getattr(torch_text, name), written.regions)
    assert [p for p in missing if (name, p) not in NOT_WRITTEN_HERE] == []
    excused = [p for n, p in NOT_WRITTEN_HERE if n == name]
    assert [p for p in excused if any(r.startswith(p) for r in written.regions)] == []


def _torch_source() -> str:
    """The text of torch's compiler (Dynamo, inductor): where it names the regions it times."""
    root = Path(torch.__file__).parent
    return "\n".join(
        path.read_text(encoding="utf-8", errors="replace")
        for part in ("_dynamo", "_inductor")
        for path in sorted((root / part).rglob("*.py"))
    )


@pytest.mark.parametrize("name", sorted(WRITTEN_ON_GPU))
def test_the_gpus_region_names_are_still_in_torchs_source(name: str) -> None:
    source = _torch_source()
    for text in WRITTEN_ON_GPU[name]():
        assert re.search(r"""["'}]""" + re.escape(text), source), (name, text)


@pytest.mark.inductor
def test_the_region_names_and_cache_events_match_what_inductor_writes(tmp_path: Any) -> None:
    """A cold inductor compile of a training step, then a warm one after a reset, in a fresh
    process (torch's once-per-process regions fire once) with an empty cache of its own."""
    script = """
import json, sys, torch
from compiletrace._core import torch_compat as tc
tc.install_region_hook()
tc.install_cache_lookup_hook()
tc.install_cache_key_hooks()
names, lookups, unread, keys = set(), [], [], []
for _ in range(2):
    torch._dynamo.reset()
    with tc.collect_timed_regions() as regions, tc.collect_cache_lookups() as seen:
        step = torch.compile(lambda x: (x.sin() * 2).sum(), backend="inductor")
        step(torch.ones(8, requires_grad=True)).backward()
    names |= {name for name, _, _ in regions}
    lookups += [(c.tier, c.outcome) for c in seen.records()]
    keys += [(c.tier, c.key) for c in seen.records() if c.key]
    unread += [c.key for c in seen.records() if not c.parts and not c.note.startswith("not computed")]
json.dump({"regions": sorted(names), "lookups": lookups, "unread": unread, "keys": keys}, sys.stdout)
"""
    trace = tmp_path / "trace"
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache"), "TORCH_TRACE": str(trace)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    regions = set(found["regions"])
    assert torch_text.HEADER_REGION in regions
    assert torch_text.BACKWARD_COMPILER_REGION in regions  # the lazy backward's compiler
    for name in PREFIXES:
        missing = _prefixes_unmatched(getattr(torch_text, name), regions)
        assert [p for p in missing if (name, p) not in NOT_WRITTEN_HERE] == [], name
    excused = [(name, p) for name, p in NOT_WRITTEN_HERE if name in PREFIXES]
    assert [(name, p) for name, p in excused if any(r.startswith(p) for r in regions)] == []
    # The cache-lookup events, read through the names: a cold miss then a warm hit, each tier.
    lookups = {tuple(pair) for pair in found["lookups"]}
    assert {("fx_graph", "miss"), ("aot_autograd", "miss"), ("aot_autograd", "hit")} <= lookups
    assert {tier for _, tier in torch_text.CACHE_EVENT_TIERS} == {tier for tier, _ in lookups}
    assert {"hit", "miss"} <= torch_text.CACHE_EVENT_OUTCOMES
    _check_key_lines(_key_lines(trace))
    assert found["unread"] == [], "lookups whose key's parts compiletrace could not read"
    # Every key is in the alphabet the check admits, and its entry lies where entry_parts says.
    assert {tier for tier, _ in found["keys"]} == set(torch_text.CACHE_KEY_LETTERS)
    for tier, key in found["keys"]:
        parts = entry_parts(tier, key)
        assert parts is not None, (tier, key)
        assert entry_file_times(str(tmp_path / "cache"), parts), (tier, key)


def _key_lines(trace: Any) -> list[str]:
    """Every line of every cache key's parts torch wrote to its trace (the artifacts'
    ``components``): its own text, not compiletrace's reading of it."""
    lines: list[str] = []
    for log in trace.glob("*.log"):
        entries = log.read_text().split("\n")
        for i, entry in enumerate(entries[:-1]):
            artifact = not entry.startswith("\t") and '{"artifact": ' in entry
            if artifact and ('"name": "fx_graph_cache_' in entry or '"name": "aotautograd_cache_' in entry):
                payload = []
                for line in entries[i + 1 :]:
                    if not line.startswith("\t"):
                        break
                    payload.append(line[1:])
                lines += json.loads("\n".join(payload)).get("components") or []
    return lines


def _check_key_lines(lines: list[str]) -> None:
    """KEY_PART_LINE reads every line; TENSOR_METADATA every tensor's; every attribute torch
    keys is one the module names as the process's or the graph's."""
    assert len(lines) > 100, "the compiles made no key parts to check the patterns against"
    parts = [torch_text.KEY_PART_LINE.match(line) for line in lines]
    assert [line[:80] for line, m in zip(lines, parts, strict=True) if m is None] == []
    attributes = {m[2] for m in parts if m is not None}
    known = torch_text.PROCESS_KEY_ATTRIBUTES | torch_text.GRAPH_KEY_ATTRIBUTES
    assert attributes - known == set(), "attributes of torch's keys the module does not place"
    assert not torch_text.PROCESS_KEY_ATTRIBUTES & torch_text.GRAPH_KEY_ATTRIBUTES
    inputs = [m[4] for m in parts if m is not None and m[2] == "example_inputs"]
    tensors = [value for value in inputs if value.startswith("Tensor")]
    assert tensors and all(torch_text.TENSOR_METADATA.match(t) for t in tensors), tensors[:1]


def test_nothing_is_excused_that_this_torch_writes(written: Written) -> None:
    # An excuse kept after torch starts writing the text would hide nothing, but would lie.
    for (name, alternative), _ in NOT_WRITTEN_HERE.items():
        if name in PATTERNS:
            texts, how = PATTERNS[name]
            compiled = re.compile(alternative, getattr(torch_text, name).flags)
            assert not any(getattr(compiled, how)(t) for t in texts(written)), (name, alternative)
