"""A cache key's parts as data (``_data/cache_keys``), a cache directory's entries read
without running them (``_data/cache_store``), and the comparison of two keys (``_data/why``):
torch's lines and torch's entries as torch writes them, the bounds, what old and hostile
files do."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import pickle
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from compiletrace._data.cache_keys import (
    MAX_GRAPH_PARTS,
    MAX_INPUT_PARTS,
    CacheFacts,
    KeyPart,
    RunCacheKeys,
    process_env,
    read_vllm_factors,
    split_key_lines,
)
from compiletrace._data.cache_store import autotune_choices, entry_parts, stored_entries
from compiletrace._data.files import read
from compiletrace._data.records import CacheLookup, CacheOutcome, GraphRecord
from compiletrace._data.run import Run
from compiletrace._data.why import Side, explain
from compiletrace._io.envelope import Fields
from compiletrace._io.errors import RunFileError

INPUTS = Path(__file__).parents[1] / "inputs"
H = "cev5uo2jlwdhw2uyzcm7vr6cl23azjfw437f5r5lskm7spucos6"  # a hash as torch writes one (51 characters)
TENSOR = (
    "TensorMetadata(dtype=torch.float32, shape=torch.Size([4, 16]), stride=(16, 1), "
    "device=device(type='cuda', index=1), layout=torch.strided, memory_format=torch.channels_last, "
    "storage_offset=3, storage_bytes=None, requires_grad=True, is_quantized=False, is_conj=False)"
)


def test_lines_split_into_the_graphs_and_the_processs_parts() -> None:
    graph, process, cut = split_key_lines(
        [
            f"[{H}] gm: <lambda>()\n\ndef forward(self, x):\n    return x",
            f"[{H}] example_inputs[0]: {TENSOR}",
            f"[{H}] fx_kwargs[static_input_idxs]: [0, 1]",
            f"[{H}] inductor_config[triton.cudagraphs]: False",
            f"[{H}] torch_version: \x10\ufffdM",
            f"[{H}] a_new_release_attribute: 7",
            "no key line",
        ]
    )
    assert [p.name for p in graph] == [
        "gm",
        "example_inputs[0]",
        "fx_kwargs[static_input_idxs]",
        "a_new_release_attribute",
    ]
    assert graph[0].value == "<graph code, 4 lines>"
    # A tensor's metadata compact: what differs from a contiguous CPU tensor is named.
    assert graph[1].value == "float32[4,16] stride(16,1) cuda:1 channels_last offset=3 requires_grad"
    assert [(p.name, p.value) for p in process] == [
        ("inductor_config[triton.cudagraphs]", "False"),
        ("torch_version", "<bytes>"),
    ]
    assert all(p.hash == H[:16] for p in (*graph, *process)) and cut == 1


def test_a_graphs_parts_are_bounded() -> None:
    inputs = [f"[{H[:-3]}{i:03d}] example_inputs[{i}]: {i}" for i in range(MAX_INPUT_PARTS + 40)]
    others = [f"[{H}] fx_kwargs[k{i}]: {i}" for i in range(MAX_GRAPH_PARTS + 5)]
    graph, _, cut = split_key_lines([*inputs, *others, f"[{H}] gm: " + "x" * 100_000])
    names = [p.name for p in graph]
    # The graph's code (kept whatever the bound: it is what the graph is), the inputs, the
    # rest folded into one part, then the other parts up to their bound.
    assert names[0] == "gm" and len(graph) == 1 + MAX_INPUT_PARTS + 1 + MAX_GRAPH_PARTS
    folded = graph[1 + MAX_INPUT_PARTS]
    assert folded.name == f"example_inputs[{MAX_INPUT_PARTS}:]" and folded.value == "<40 more>"
    assert cut == 5  # the other parts past their bound
    assert all(len(p.value) <= 80 for p in graph)


def test_run_keys_read_back_and_refuse_what_no_run_writes() -> None:
    facts = CacheFacts(torch="2.13.0+cpu", cache_dir="/c", cache_dirs=("/c",), env={"CI": "1"})
    keys = RunCacheKeys({"s1": {"a": KeyPart("a", "h", "1")}, "s2": {"b": KeyPart("b", "h", "2")}}, facts)
    data = json.loads(json.dumps(keys.to_json()))
    assert RunCacheKeys.from_json(data, "run.json") == keys
    bad = copy.deepcopy(data)
    bad["config_sets"]["s2"]["like"] = "nowhere"
    with pytest.raises(
        RunFileError, match=r"'meta\.cache_keys\.config_sets\.s2\.like' must be the id of a set"
    ):
        RunCacheKeys.from_json(bad, "run.json")
    bad = copy.deepcopy(data)
    bad["config_sets"]["s1"] = [["a", "h"]]
    with pytest.raises(RunFileError, match=r"\[name, hash, value\]"):
        RunCacheKeys.from_json(bad, "run.json")
    bad = copy.deepcopy(data)
    bad["facts"]["cache_dirs"] = ["/d"] * 100
    with pytest.raises(RunFileError, match="cache_dirs"):
        RunCacheKeys.from_json(bad, "run.json")


def test_a_run_saved_before_cache_keys_still_loads_and_compares() -> None:
    # The doctor's saved run predates the parts: its lookups have tier, outcome and key only.
    old = read(INPUTS / "runs" / "cache_miss.run.json")
    assert isinstance(old, Run) and old.meta.cache_keys is None
    (record,) = old.graph_records
    assert {c.tier for c in record.cache_lookups} == {"fx_graph", "aot_autograd"}
    assert all(c.parts == () and c.source == "lookup" for c in record.cache_lookups)
    report = explain(Side("old.json", old.graph_records), Side("old.json", old.graph_records))
    assert report.missed == 1  # the cold miss, compared with itself: keys equal, nothing more known
    assert any("saved without its cache keys' parts" in n for n in report.notes)


def test_a_lookup_with_parts_round_trips_through_a_record() -> None:
    lookup = CacheLookup("fx_graph", "miss", "fkey", status="full_miss", role="forward",
                         parts=(KeyPart("gm", "h", "<graph code, 3 lines>"),), config_set="s1",
                         code_hash="cabc", saved_ns=5)  # fmt: skip
    record = GraphRecord("0/0", "lm", "inductor", "forward", 1, 0, 10, 1, 2, 0, cache_lookups=(lookup,))
    assert GraphRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    data = record.to_dict()
    data["cache_lookups"][0]["parts"] = [["gm", "h"]]
    with pytest.raises(RunFileError, match="cache_lookups"):
        GraphRecord.from_dict(data, "run.json")


def test_the_environment_kept_is_what_keys_and_directories_read() -> None:
    env = process_env(
        {"TORCHINDUCTOR_FX_GRAPH_CACHE": "1", "OMP_NUM_THREADS": "4", "USER": "a", "PATH": "/bin",
         "HF_TOKEN": "x", "VLLM_API_KEY": "secret", "TORCH_X": "y" * 500}
    )  # fmt: skip
    assert env == {
        "OMP_NUM_THREADS": "4",
        "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
        "TORCH_X": "y" * 199 + "…",
        "USER": "a",
        "VLLM_API_KEY": "<redacted>",
    }


VLLM_FACTORS = INPUTS / "vllm" / "cache_key_factors.json"


def test_vllms_factors_are_read_from_the_directory_it_keys(tmp_path: Path) -> None:
    # vLLM 0.32 keeps torch's cache in rank_i_j/inductor_cache, each component's factors
    # in rank_i_j/<prefix>/.
    rank = tmp_path / "torch_compile_cache" / "d1e4a5b6c7" / "rank_0_0"
    local = rank / "backbone"
    (rank / "inductor_cache").mkdir(parents=True)
    local.mkdir()
    (local / "cache_key_factors.json").write_bytes(VLLM_FACTORS.read_bytes())
    factors = read_vllm_factors(str(rank / "inductor_cache"))
    assert factors is not None and factors.path == str(local / "cache_key_factors.json")
    # vLLM 0.32's file: the environment it hashed, raw, and three digests.
    assert factors.env["VLLM_CPU_OMP_THREADS_BIND"] == "auto" and factors.env["VLLM_CPU_CI_ENV"] == "false"
    assert set(factors.hashes) == {"code_hash", "compiler_hash", "config_hash"}
    assert factors.config == {} and factors.compiler == {}
    # A link is never followed; what is not vLLM's file is none.
    (local / "cache_key_factors.json").unlink()
    (local / "cache_key_factors.json").symlink_to(VLLM_FACTORS)
    assert read_vllm_factors(str(rank / "inductor_cache")) is None
    (local / "cache_key_factors.json").unlink()
    (local / "cache_key_factors.json").write_text("[1, 2]")
    assert read_vllm_factors(str(rank / "inductor_cache")) is None


def test_two_vllm_runs_whose_factors_differ(tmp_path: Path) -> None:
    """A vLLM warm start that missed with torch's keys equal: the reason is in the factors."""
    data = json.loads(VLLM_FACTORS.read_text())
    other = {**data, "env": {**data["env"], "VLLM_CPU_OMP_THREADS_BIND": "nobind"}}
    facts = []
    for name, factors in (("a", data), ("b", other)):
        local = tmp_path / name
        (local / "inductor_cache").mkdir(parents=True)
        (local / "cache_key_factors.json").write_text(json.dumps(factors))
        found = read_vllm_factors(str(local / "inductor_cache"))
        facts.append(
            CacheFacts(
                cache_dir=str(local / "inductor_cache"),
                cache_dirs=(str(local / "inductor_cache"),),
                vllm=found,
            )
        )
    lookup = CacheLookup("fx_graph", "miss", "fsame", status="full_miss")
    base = GraphRecord(
        "0/0",
        "lm",
        "inductor",
        "forward",
        1,
        0,
        10,
        1,
        2,
        0,
        fx_graph_cache=CacheOutcome.MISS,
        cache_lookups=(lookup,),
    )
    report = explain(
        Side("a", (base,), RunCacheKeys({}, facts[0])), Side("b", (base,), RunCacheKeys({}, facts[1]))
    )
    (group,) = report.groups
    assert group.reason.kind == "vllm"
    assert [c.line() for c in group.reason.changes] == ["vLLM VLLM_CPU_OMP_THREADS_BIND: auto -> nobind"]
    assert "vLLM chose another cache directory" in group.reason.summary


class _Planted:
    """What a hostile entry would name: unpickling it for real would call os.system."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch planted",))


def test_stored_entries_are_read_without_running_them(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    entry = cache / "fxgraph" / "ab" / "fabkey" / "e1"
    entry.parent.mkdir(parents=True)
    lines = [f"[{H}] gm: code", f"[{H}] inductor_config[x]: True"]
    state = {"_fx_graph_cache_debug_lines": lines, "_fx_graph_cache_key": "fabkey", "_time_taken_ns": 7,
             "hook": _Planted()}  # fmt: skip
    entry.write_bytes(pickle.dumps(state))
    (cache / "fxgraph" / "ab" / "linked").symlink_to(entry.parent)  # never followed
    (found,) = stored_entries(str(cache))
    assert (found.key, found.lines, found.time_taken_ns) == ("fabkey", tuple(lines), 7)
    assert not (tmp_path / "planted").exists() and not Path("planted").exists()
    entry.write_bytes(b"\x80\x04not a pickle")
    assert stored_entries(str(cache)) == []


def test_a_fields_check_names_the_bad_part() -> None:
    with pytest.raises(RunFileError, match="parts"):
        lookup = {"tier": "fx_graph", "outcome": "hit", "key": "f1", "detail": "", "parts": "x"}
        CacheLookup.from_fields(Fields(lookup, "run.json"))
    with pytest.raises(RunFileError, match="detail"):  # version 1's four fields are in every file
        CacheLookup.from_fields(Fields({"tier": "fx_graph", "outcome": "hit", "key": "f1"}, "run.json"))


def test_same_key_other_build(tmp_path: Path) -> None:
    """The reverse failure: both runs hit the same keys, and built other kernels. Not made on
    the CPU (inductor's CPU code is deterministic and nothing autotunes there): the two
    signals are the FX graph entry's code (its module's name) and autotuning's choices."""
    lookup = CacheLookup("fx_graph", "hit", "fsame", status="hit", code_hash="caaa")
    other = lookup._replace(code_hash="cbbb")
    r = GraphRecord("0/0", "lm", "inductor", "forward", 1, 0, 10, 1, 2, 0, cache_lookups=(lookup,))
    report = explain(Side("a", (r,)), Side("b", (dataclasses.replace(r, cache_lookups=(other,)),)))
    (built,) = report.same_key_other_build
    assert (built.key_base, built.code_base, built.code_current) == ("fsame", "caaa", "cbbb")
    assert report.missed == 0  # a hit in both: no miss to explain, one build to question
    # Triton's autotune results beside the kernels: the choice, not how long choosing took.
    for name, cache, block in (("a", tmp_path / "a", 64), ("b", tmp_path / "b", 128)):
        (cache / "xy").mkdir(parents=True)
        config = {"XBLOCK": block, "num_warps": 4, "time_taken_ms": 3, "triton_cache_hash": name}
        (cache / "xy" / "k1.best_config").write_text(json.dumps(config))
        (cache / "xy" / "k2.best_config").write_text(json.dumps({"XBLOCK": 8, "time_taken_ms": block}))
    a, b = autotune_choices(str(tmp_path / "a")), autotune_choices(str(tmp_path / "b"))
    assert a["k2.best_config"] == b["k2.best_config"] and a["k1.best_config"] != b["k1.best_config"]
    sides = [Side(n, (r,), RunCacheKeys({}, CacheFacts(autotune=c))) for n, c in (("a", a), ("b", b))]
    (built,) = explain(*sides).same_key_other_build
    assert built.detail == "autotuning chose otherwise for 1 kernel(s): k1.best_config"


def test_a_directory_is_listed_within_a_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache directory of any size costs at most MAX_LISTED directory entries to look at:
    the bound holds across the levels walked, not per directory."""
    from compiletrace._data import cache_store

    for sub in ("aa", "bb", "cc"):
        (tmp_path / sub).mkdir()
        for i in range(4):
            (tmp_path / sub / f"{sub}{i}.best_config").write_text(json.dumps({"XBLOCK": i}))
    assert len(autotune_choices(str(tmp_path))) == 12
    monkeypatch.setattr(cache_store, "MAX_LISTED", 5)  # 3 directories, then 2 files
    assert len(autotune_choices(str(tmp_path))) == 2


def test_an_entry_that_is_a_link_is_absent(tmp_path: Path) -> None:
    """torch writes each key's entry as a directory: a link in its place (someone else's,
    pointing anywhere) is no entry, and is not followed to judge when it was written."""
    from compiletrace._data.why import _entry_state

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "entry").write_bytes(b"x")
    (tmp_path / "cache" / "aotautograd").mkdir(parents=True)
    (tmp_path / "cache" / "aotautograd" / AOT_KEY).symlink_to(elsewhere)
    assert _entry_state(str(tmp_path / "cache"), "aot_autograd", AOT_KEY, since_ns=1 << 62) == "absent"
    (tmp_path / "cache" / "aotautograd" / AOT_KEY).unlink()
    (tmp_path / "cache" / "aotautograd" / AOT_KEY).mkdir()
    (tmp_path / "cache" / "aotautograd" / AOT_KEY / "entry").write_bytes(b"x")
    assert _entry_state(str(tmp_path / "cache"), "aot_autograd", AOT_KEY, since_ns=1 << 62) == "there before"


AOT_KEY = "a" + H  # keys as torch makes them: the tier's letter, then 51 characters of base32
FX_KEY = "f" + H


def _same_key_miss(tmp_path: Path, tier: str, key: str) -> str:
    """The reason ``why`` gives for a graph that missed ``key`` in ``tier`` while the base
    run, on the same cache directory, had it."""
    lookup = CacheLookup(tier, "miss", key, status="full_miss")
    outcome = (
        {"fx_graph_cache": CacheOutcome.MISS}
        if tier == "fx_graph"
        else {"aot_autograd_cache": CacheOutcome.MISS}
    )
    at = 1 << 62  # after every file the test writes: those are there before the compile
    record = GraphRecord(
        "0/0", "lm", "inductor", "forward", 1, at, at, 1, 2, 0, cache_lookups=(lookup,), **outcome
    )
    cache = str(tmp_path / "cache")
    facts = CacheFacts(cache_dir=cache, cache_dirs=(cache,))
    report = explain(
        Side("a", (record,), RunCacheKeys({}, facts)), Side("b", (record,), RunCacheKeys({}, facts))
    )
    (group,) = report.groups
    return group.reason.kind


def test_a_key_from_a_file_makes_no_path(tmp_path: Path) -> None:
    """A key is read from a run file: one that is no key torch makes (absolute, '..', a
    separator, a final line break) is joined into no path, so an old directory elsewhere
    is never listed and never blamed as an entry "torch could not load"."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "old").write_bytes(b"x")  # older than the compile: read as an unloadable entry
    (tmp_path / "cache" / "aotautograd").mkdir(parents=True)
    (tmp_path / "cache" / "fxgraph").mkdir()
    for tier in ("aot_autograd", "fx_graph"):
        for key in (str(victim), "a/../../victim", "f/../../../victim", "../victim", AOT_KEY[:-1] + "/"):
            assert entry_parts(tier, key) is None, key
            assert _same_key_miss(tmp_path, tier, key) == "gone", (tier, key)
    for key in ("", "a", "A" + H.upper(), AOT_KEY + "\n", "a" + H[:-1] + "\u00e9", "f" + H, "a" * 80):
        assert entry_parts("aot_autograd", key) is None, key
    # A key torch makes, whose entry was there before the miss: torch could not load it.
    (tmp_path / "cache" / "aotautograd" / AOT_KEY).mkdir()
    (tmp_path / "cache" / "aotautograd" / AOT_KEY / "entry").write_bytes(b"x")
    assert _same_key_miss(tmp_path, "aot_autograd", AOT_KEY) == "unreadable"
    (tmp_path / "cache" / "fxgraph" / FX_KEY[1:3] / FX_KEY).mkdir(parents=True)
    (tmp_path / "cache" / "fxgraph" / FX_KEY[1:3] / FX_KEY / "entry").write_bytes(b"x")
    assert _same_key_miss(tmp_path, "fx_graph", FX_KEY) == "unreadable"


def test_an_entry_is_looked_for_inside_the_cache_directory_and_within_a_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No directory below the cache directory is followed through a link (torch makes
    them; someone else's link would lead the listing anywhere), and a key's entry
    directory costs at most MAX_ENTRY_FILES files to look at, however many it holds."""
    from compiletrace._data import cache_store

    elsewhere = tmp_path / "elsewhere"
    (elsewhere / AOT_KEY).mkdir(parents=True)
    (elsewhere / AOT_KEY / "old").write_bytes(b"x")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "aotautograd").symlink_to(elsewhere)
    assert _same_key_miss(tmp_path, "aot_autograd", AOT_KEY) == "gone"
    # The same for the entries the doctor compares with: a link at fxgraph/ is not read.
    entry = elsewhere / "ab" / "fabkey" / "e1"
    entry.parent.mkdir(parents=True)
    entry.write_bytes(
        pickle.dumps({"_fx_graph_cache_debug_lines": [f"[{H}] gm: code"], "_fx_graph_cache_key": "fabkey"})
    )
    (cache / "fxgraph").symlink_to(elsewhere)
    assert stored_entries(str(cache)) == []
    (cache / "fxgraph").unlink()
    (cache / "fxgraph").mkdir()
    (cache / "fxgraph" / "ab").symlink_to(elsewhere / "ab")  # below: never followed, as before
    assert stored_entries(str(cache)) == []
    (cache / "fxgraph" / "ab").unlink()
    (elsewhere / "ab").rename(cache / "fxgraph" / "ab")  # the same entry, inside: read
    assert [found.key for found in stored_entries(str(cache))] == ["fabkey"]
    (cache / "aotautograd").unlink()
    many = cache / "aotautograd" / AOT_KEY
    many.mkdir(parents=True)
    for i in range(10):
        (many / f"e{i}").write_bytes(b"x")
    assert len(cache_store.entry_file_times(str(cache), ("aotautograd", AOT_KEY)) or []) == 10
    monkeypatch.setattr(cache_store, "MAX_ENTRY_FILES", 4)
    assert len(cache_store.entry_file_times(str(cache), ("aotautograd", AOT_KEY)) or []) == 4


# A one-byte opcode that builds a new empty set each (216 bytes): 4 MiB of it built about 1 GB.
EMPTY_SETS = b"\x80\x04" + b"\x8f" * (4 << 20)


def test_an_entry_stops_at_what_it_may_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What unpickling an entry builds is bounded, not only the bytes read: a crafted entry is
    read as far as its budget of opcodes and said unreadable, with why; the memory it took
    stays within that budget's worth."""
    from compiletrace._data.cache_store import read_store
    from compiletrace._io import artifacts

    cache = tmp_path / "cache"
    bomb = cache / "fxgraph" / "zz" / "fzzkey" / "entry"
    bomb.parent.mkdir(parents=True)
    bomb.write_bytes(EMPTY_SETS)
    monkeypatch.setattr(artifacts, "MAX_PICKLE_OPS", 20_000)
    tracemalloc.start()
    try:
        reading = read_store(str(cache))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert reading.entries == []
    (bad,) = reading.unreadable
    assert bad.path == str(bomb)
    assert bad.why == (
        f"{bomb} would build more than 20,000 objects when unpickled (a cache entry of torch's builds "
        "far fewer); compiletrace stopped reading it there"
    )
    # 20,000 empty sets are about 4.3 MB; the whole 4 MiB built (4.2 million sets) about 900 MB.
    assert peak < 16 << 20, peak


def test_the_budget_spans_the_pickles_nested_in_one() -> None:
    """A pickle inside a bytes value of another is read on the same budget: nesting does not
    multiply what one file may build."""
    from compiletrace._io.artifacts import PickleBudget, PickleTooLarge, read_pickle

    inner = pickle.dumps([set() for _ in range(300)], protocol=4)
    outer = pickle.dumps([inner, inner[:1] + inner[1:]], protocol=4)  # two distinct bytes objects
    read_pickle(outer, set(), "x", budget=PickleBudget(2_000))  # both fit in 2,000
    with pytest.raises(PickleTooLarge, match=r"x \(a pickle inside it\) would build more than 700 objects"):
        read_pickle(outer, set(), "x", budget=PickleBudget(700))  # each alone fits in 700


def test_an_entry_of_torchs_reads_well_within_the_budget(tmp_path: Path) -> None:
    """The budget leaves room for torch's own entries: a transformer block's FX graph entry,
    with its kernels' source, built here as torch's entries are (a graph module's state,
    its debug lines, its source code), runs a few thousand opcodes."""
    from compiletrace._data.cache_store import read_store
    from compiletrace._io.artifacts import MAX_PICKLE_OPS, PickleBudget, RestrictedUnpickler

    lines = [f"[{H}] gm: code {i}" for i in range(640)]
    state = {
        "_fx_graph_cache_debug_lines": lines,
        "_fx_graph_cache_key": "fabkey",
        "_time_taken_ns": 9,
        "source_code": "def call(args):\n" + "    pass\n" * 20_000,
        "constants": {f"c{i}": (i, float(i), [i] * 4) for i in range(2_000)},
    }
    data = pickle.dumps(state, protocol=4)
    budget = PickleBudget()
    RestrictedUnpickler(data, set(), "entry", budget=budget).load()
    used = budget.limit - budget.left
    assert 10_000 < used < MAX_PICKLE_OPS // 20, used
    entry = tmp_path / "cache" / "fxgraph" / "ab" / "fabkey" / "e1"
    entry.parent.mkdir(parents=True)
    entry.write_bytes(data)
    reading = read_store(str(tmp_path / "cache"))
    assert [e.key for e in reading.entries] == ["fabkey"] and reading.unreadable == []


# Dict keys whose hash has no end: a tuple nested 300,000 deep overflows the C stack when
# hashed (a crash); 100 aliased pairs, (DUP, TUPLE2) 100 times, make 2**100 parts to hash in
# C, where neither Ctrl-C nor SIGTERM acts (207 bytes).
DEEP_KEY = b"\x80\x04}N" + pickle.TUPLE1 * 300_000 + b"Ns."
ALIASED_KEY = b"\x80\x04}N" + (pickle.DUP + pickle.TUPLE2) * 100 + b"Ns."


def _key_entry(key: bytes) -> bytes:
    """A pickle of a dict whose one key is the object the opcodes ``key`` leave on the stack."""
    return b"\x80\x04}" + key + b"Ns."


def test_an_entry_hashes_no_more_than_it_may(tmp_path: Path) -> None:
    """A dict key or set member is hashed only where hashing it is bounded: a tuple nested
    at most MAX_KEY_DEPTH deep, of at most MAX_KEY_PARTS parts (an alias counted each time it
    is used, as hashing counts it), and at most MAX_BUILT_KEYS of them in one file (a crafted
    file can give as many as it likes one hash, and inserting them is then quadratic). Past
    a bound the entry is unreadable, with why, before the costly hash is taken. Each crafted
    entry here is small enough to read whole on code without the bounds."""
    from compiletrace._data.cache_store import read_store
    from compiletrace._io.artifacts import MAX_BUILT_KEYS, MAX_KEY_DEPTH, MAX_KEY_PARTS

    assert (MAX_KEY_DEPTH, MAX_KEY_PARTS, MAX_BUILT_KEYS) == (16, 256, 256)
    deep = _key_entry(b"N" + pickle.TUPLE1 * (MAX_KEY_DEPTH + 1))
    aliased = _key_entry(b"N" + (pickle.DUP + pickle.TUPLE2) * 8)  # 2**8 leaves, 8 deep
    prime = (1 << 61) - 1  # ints hash modulo this prime: all of these hash to 0
    collide = {prime * (i + 9): None for i in range(MAX_BUILT_KEYS + 1)}  # each beyond 64 bits
    members = frozenset((i, str(i)) for i in range(MAX_BUILT_KEYS + 1))
    entries = {
        "deep": (deep, f"keys a dict or set by a tuple nested more than {MAX_KEY_DEPTH} deep"),
        "aliased": (aliased, f"keys a dict or set by a tuple of more than {MAX_KEY_PARTS} parts"),
        "collide": (
            pickle.dumps(collide, protocol=4),
            f"by more than {MAX_BUILT_KEYS} values built of parts",
        ),
        "members": (
            pickle.dumps(members, protocol=4),
            f"by more than {MAX_BUILT_KEYS} values built of parts",
        ),
    }
    cache = tmp_path / "cache"
    for name, (data, _) in entries.items():
        path = cache / "fxgraph" / "zz" / f"fzz{name}" / "entry"
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
    reading = read_store(str(cache))
    whys = {Path(u.path).parent.name[3:]: u.why for u in reading.unreadable}
    assert set(whys) == set(entries) and reading.entries == []
    for name, (_, why) in entries.items():
        assert why in whys[name] and whys[name].endswith("; compiletrace stopped reading it there")
    # Within the bounds: read, as torch's own keys (names, small ints, 64-bit ints, floats,
    # short tuples) are.
    fine = {"a": 1, 7: 2, -(1 << 63): 3, 0.5: 4, (1, ("x", 2.0)): 5, frozenset({1}): 6}
    path = cache / "fxgraph" / "ok" / "fokkey" / "entry"
    path.parent.mkdir(parents=True)
    lines = [f"[{H}] gm: x"]
    path.write_bytes(
        pickle.dumps({"_fx_graph_cache_debug_lines": lines, "_fx_graph_cache_key": "fokkey", "k": fine})
    )
    assert [e.key for e in read_store(str(cache)).entries] == ["fokkey"]


@pytest.mark.slow
def test_entries_that_would_crash_or_hang_the_doctor_are_unreadable(tmp_path: Path) -> None:
    """The two keys of the report, in a shared cache directory, read as the doctor (and
    run's doctor at the end of a job) reads it, and the same pickles in an artifacts file
    under ``cache inspect``: named unreadable at once. In a child process with a time
    limit, so that code without the bounds fails (a crash, a timeout) rather than taking
    the test run with it."""
    from compiletrace._io.artifacts import pack_container

    cache = tmp_path / "cache"
    for name, data in (("deep", DEEP_KEY), ("aliased", ALIASED_KEY)):
        path = cache / "fxgraph" / "zz" / f"fzz{name}" / "entry"
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
    read = (
        "import sys\n"
        "from compiletrace._data.cache_store import read_store\n"
        "for u in read_store(sys.argv[1]).unreadable: print(u.why)\n"
    )
    root = Path(__file__).parents[2]
    done = subprocess.run(
        [sys.executable, "-c", read, str(cache)], capture_output=True, text=True, timeout=120, cwd=root
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    whys = done.stdout.splitlines()
    assert len(whys) == 2 and all("keys a dict or set by a tuple nested more than 16 deep" in w for w in whys)
    for name, data in (("deep", DEEP_KEY), ("aliased", ALIASED_KEY)):
        artifacts = tmp_path / f"{name}.cache"
        artifacts.write_bytes(pack_container({"inductor": [("f" + H, data)]}))
        done = subprocess.run(
            [sys.executable, "-m", "compiletrace", "cache", "inspect", str(artifacts)],
            capture_output=True, text=True, timeout=120, cwd=root,
        )  # fmt: skip
        assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
        (line,) = done.stderr.strip().splitlines()
        assert "keys a dict or set by a tuple nested more than 16 deep" in line, line


def test_an_entry_names_no_more_globals_than_it_may(tmp_path: Path) -> None:
    """Each global a pickle names becomes a stand-in class (about 2.3 KB, where any other
    opcode's object is 216 bytes at most), and protocol 0 names a new one in ten bytes: a
    10.4 MiB entry of them took 2.3 GB within the opcode budget. Stopped at
    MAX_PICKLE_GLOBALS distinct ones, the memory of reading it stays within the 249 MiB
    that docs/security.md promises for a whole budget."""
    from compiletrace._data.cache_store import read_store
    from compiletrace._io.artifacts import MAX_PICKLE_GLOBALS, MAX_PICKLE_OPS

    cache = tmp_path / "cache"
    entry = cache / "fxgraph" / "zz" / "fzzglobals" / "entry"
    entry.parent.mkdir(parents=True)
    entry.write_bytes(b"".join(b"cm\nc%d\n" % i for i in range(MAX_PICKLE_OPS)))  # GLOBAL m.cN
    assert entry.stat().st_size > 10 << 20
    tracemalloc.start()
    try:
        reading = read_store(str(cache))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (bad,) = reading.unreadable
    assert bad.why == (
        f"{entry} names more than {MAX_PICKLE_GLOBALS:,} distinct classes and functions (a cache entry "
        "of torch's names a few dozen); compiletrace stopped reading it there"
    )
    assert peak < 249 << 20, peak
