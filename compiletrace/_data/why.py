"""Why a compile cache did not apply: two runs of one program (BASE, which filled or used
the cache, and CURRENT, which missed it) compared graph by graph, each miss explained by the
part of its key that changed, or, where the keys are equal, by what else kept the entry
from applying (another cache directory, an entry evicted or unreadable, guards that failed).

Graphs are matched by what they are, not by compile id: their code's location, then their
identity (the graph's code, as its key's ``gm`` part, else its structure), then their
order. For each graph CURRENT missed, each tier that missed (AOTAutograd, then the FX graph)
is compared with BASE's lookup of the same graph: equal keys send the search elsewhere,
unequal keys are diffed part by part (inputs aligned by their hashes, so an input added by
``dynamic=True`` shifts nothing), and the parts that changed only because another did (the
graph's code and its input indices when its inputs changed) are kept apart from the cause.
Graphs that missed for one reason are one group; the seconds a miss cost are CURRENT's
compile time of the graph, less BASE's where BASE hit (what a hit costs).

Plain data, free of torch: :func:`explain` takes two :class:`Side` s and gives a
:class:`WhyReport`, which the views (``compiletrace.reports``) render as text, JSON and
HTML, and the doctor's ``cache_miss`` rule quotes.

>>> explain(Side("a.json", ()), Side("b.json", ())).headline()
'no graph missed the compile cache in CURRENT (it compiled none)'
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiletrace._data.cache_keys import CacheFacts, KeyPart, RunCacheKeys
from compiletrace._data.cache_store import entry_file_times, entry_parts
from compiletrace._data.kinds import FileKind
from compiletrace._data.records import NS_PER_S, CacheLookup, CacheOutcome, GraphRecord
from compiletrace._data.run_meta import RunMeta
from compiletrace._data.torch_text import bypass_setting
from compiletrace._io.envelope import envelope
from compiletrace._io.text import shell_word

__all__ = [
    "WHY_KIND",
    "BuildChange",
    "GraphMiss",
    "PartChange",
    "Reason",
    "Side",
    "WhyGroup",
    "WhyReport",
    "explain",
    "fix_for_part",
    "group_line",
    "key_changes",
    "match_graphs",
    "part_kind",
    "parts_reason",
    "process_changes",
]

WHY_KIND = FileKind.WHY.value
TIERS = ("aot_autograd", "fx_graph")
TIER_NAMES = {"aot_autograd": "AOTAutograd", "fx_graph": "FX graph"}
_MISSED = (CacheOutcome.MISS.value, CacheOutcome.BYPASS.value)

# -- sides ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One run of the comparison: its name (the file), its graphs in the order they
    compiled, and its cache keys' process parts and facts (None for a run saved without)."""

    name: str
    records: tuple[GraphRecord, ...]
    keys: RunCacheKeys | None = None
    # A job's processes, each its role ("rank 1", "main") and its graphs, where it has more
    # than one: each is matched with BASE on its own (explain).
    processes: tuple[tuple[str, tuple[GraphRecord, ...]], ...] = ()

    @classmethod
    def of_runs(
        cls,
        name: str,
        runs: Iterable[tuple[Sequence[GraphRecord], RunMeta]],
        roles: Sequence[str] = (),
    ) -> Side:
        """A side of several processes (a job): their graphs, one after another, and their
        keys merged (config sets are named by their content; the first process's facts,
        every process's cache directories); with ``roles`` (one per run), each process's
        graphs kept apart too."""
        records: list[GraphRecord] = []
        sets: dict[str, Mapping[str, KeyPart]] = {}
        facts: CacheFacts | None = None
        dirs: list[str] = []
        runs = list(runs)
        several = len(roles) == len(runs) > 1
        processes = tuple(zip(roles, (tuple(r) for r, _ in runs), strict=True)) if several else ()
        for run_records, meta in runs:
            records.extend(run_records)
            keys = meta.cache_keys
            if keys is None:
                continue
            sets.update(keys.config_sets)
            facts = facts or keys.facts
            dirs += [d for d in keys.facts.cache_dirs or (keys.facts.cache_dir,) if d and d not in dirs]
        if facts is None:
            return cls(name, tuple(records), processes=processes)
        merged = CacheFacts(**{**facts.__dict__, "cache_dirs": tuple(dirs)})
        return cls(name, tuple(records), RunCacheKeys(sets, merged), processes)

    @property
    def facts(self) -> CacheFacts | None:
        return None if self.keys is None else self.keys.facts

    @property
    def cache_dirs(self) -> tuple[str, ...]:
        facts = self.facts
        if facts is None:
            return ()
        return facts.cache_dirs or ((facts.cache_dir,) if facts.cache_dir else ())

    def parts_of(self, lookup: CacheLookup) -> tuple[dict[str, KeyPart], bool]:
        """A lookup's whole key as parts by name (the graph's and its config set's), and
        whether the process parts are known (the set is in this run)."""
        parts: dict[str, KeyPart] = {}
        known = not lookup.config_set
        if lookup.config_set and self.keys is not None:
            found = self.keys.config_sets.get(lookup.config_set)
            if found is not None:
                parts.update(found)
                known = True
        parts.update((p.name, p) for p in lookup.parts)
        return parts, known


# -- what changed ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartChange:
    """One part of a key that differs between BASE and CURRENT, as a person reads it."""

    name: str  # torch's part name, or "input 2" for a graph input
    base: str | None  # its value in BASE (None: BASE's key has no such part)
    current: str | None  # ... in CURRENT
    kind: str  # part_kind(): config, inputs, graph, version, device, threads, options, state, ...
    tiers: tuple[str, ...] = ()  # the caches whose keys it is in ("AOTAutograd", "FX graph")
    source: str = ""  # what set it, where known: "set by TORCHINDUCTOR_SIZE_ASSERTS: unset -> '0'"
    consequence: bool = False  # changed because another part did (the graph's code, its input indices)

    def line(self) -> str:
        """``inductor_config[fallback_random] False -> True`` (and its source)."""
        base = "(none)" if self.base is None else self.base
        current = "(none)" if self.current is None else self.current
        text = f"{self.name}: {base} -> {current}"
        if base == current:
            text += " (differs in a detail not shown)"
        return text + (f", {self.source}" if self.source else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "base": self.base,
            "current": self.current,
            "kind": self.kind,
            "tiers": list(self.tiers),
            "source": self.source,
            "consequence": self.consequence,
        }


# The parts that change whenever the graph's inputs do: the graph's code (its sizes), the
# AOT config (its input descriptions) and the indices of the static inputs.
_CONSEQUENCES_OF_INPUTS = frozenset({"gm", "aot_config", "fx_kwargs[static_input_idxs]"})


def part_kind(name: str) -> str:
    """What kind of thing a key part is, which decides its fix.

    >>> [part_kind(n) for n in ("inductor_config[max_autotune]", "example_inputs[0]", "torch_version")]
    ['config', 'inputs', 'version']
    """
    attribute = name.partition("[")[0]
    if attribute in ("example_inputs", "input"):
        return "inputs"
    return _KINDS.get(attribute, "other")


_KINDS = {
    "gm": "graph",
    "inductor_config": "config",
    "inductor_config_comms": "config",
    "autograd_config": "functorch_config",
    "torch_version": "version",
    "system_info": "device",
    "cpp_runtime_thread_count": "threads",
    "fx_kwargs": "options",
    "aot_config": "options",
    "nested_inductor_config_patches": "options",
    "cudagraph_override": "options",
    "cudagraph_annotation": "options",
    "cache_key_tag": "tag",
    "grad_enabled": "state",
    "autocast_state": "state",
    "deterministic_algorithms": "state",
    "deterministic_algorithms_settings": "state",
    "default_dtype": "state",
    "cuda_matmul_settings": "state",
    "default_cuda_device_index": "device",
}


def fix_for_part(change: PartChange) -> str:
    """The fix a changed part calls for: a config (pin it), a path or variable (keep it
    where the key expects it), a version (rebuild once per version), a device (key per
    device), the inputs (compile for what serving sees).

    >>> fix_for_part(PartChange("inductor_config[max_autotune]", "False", "True", "config"))
    'pin torch._inductor.config.max_autotune to one value where the cache is filled and where it is used'
    """
    name, kind = change.name, change.kind
    setting = name.partition("[")[2].rstrip("]")
    by_env = change.source.startswith("set by ")
    env = change.source.removeprefix("set by ").partition(":")[0] if by_env else ""
    if kind == "config":
        fix = f"pin torch._inductor.config.{setting} to one value {_BOTH}"
        return fix + (f" (the environment variable {env} sets it)" if env else "")
    if kind == "functorch_config":
        what = f"torch._functorch.config.{setting}" if setting else "torch._functorch.config"
        return f"keep {what} the same {_BOTH}" + (f" (the environment variable {env} sets it)" if env else "")
    if kind == "threads":
        return (
            "the CPU thread count is in the key: pin OMP_NUM_THREADS (or torch.set_num_threads) to the "
            "count the cache was filled with, or fill one cache per machine type"
        )
    if kind == "version":
        return "another torch build: fill the cache once per torch version (keep one cache per version)"
    if kind == "device":
        return "another device, CUDA or Triton: key the cache per device type (one cache per GPU model)"
    if kind == "inputs":
        return (
            "the graph's inputs changed (dtype, shape, dynamic dimensions): warm the cache with the inputs "
            "serving sees, mark the dimensions that vary dynamic (torch._dynamo.mark_dynamic), keep "
            "dtypes fixed"
        )
    if kind == "graph":
        return "the graph's code changed (the model's code, or what Dynamo traced): no cached entry can apply"
    if kind in ("mode", "dynamic"):
        base, current = (repr(v) if kind == "mode" else v for v in (change.base, change.current))
        return (
            f"torch.compile's {kind}= changed: compile with {kind}={base} {_BOTH} (or fill the cache "
            f"with {kind}={current})"
        )
    if kind == "options":
        return "torch.compile's options changed (mode, dynamic, options=): compile with the same ones"
    if kind == "state":
        return (
            "a global torch state changed (grad mode, autocast, default dtype, matmul precision): compile "
            "under the same"
        )
    if kind == "tag":
        return "torch.compiler.config.cache_key_tag (TORCH_COMPILE_CACHE_KEY_TAG) differs: set it the same"
    return f"keep {name} the same {_BOTH}"


_BOTH = "where the cache is filled and where it is used"


@dataclass(frozen=True)
class Reason:
    """Why one graph's cache did not apply."""

    # "parts", "keys", "cache_dir", "evicted", "unreadable", "gone", "guards", "bypass", "vllm", "unknown"
    kind: str
    summary: str  # one line
    fix: str
    changes: tuple[PartChange, ...] = ()  # for "parts": what changed, causes first
    signature: tuple[Any, ...] = ()  # graphs with equal signatures missed for one reason

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "summary": self.summary,
            "fix": self.fix,
            "changes": [c.to_json() for c in self.changes],
        }


@dataclass(frozen=True)
class GraphMiss:
    """One graph CURRENT missed, matched with BASE's."""

    current: str  # "0/0 forward (model.py:12)"
    base: str  # BASE's graph it was matched with
    matched_by: str  # "identity", "location" or "order"
    tiers: tuple[tuple[str, str, str], ...]  # (tier, BASE's outcome, CURRENT's outcome) of each missed tier
    seconds: float
    reason: Reason
    component: str = ""  # CURRENT's component of the graph
    location: str = ""  # file:line of CURRENT's compiled code

    def to_json(self) -> dict[str, Any]:
        return {
            "current": self.current,
            "base": self.base,
            "matched_by": self.matched_by,
            "tiers": [{"tier": t, "base": b, "current": c} for t, b, c in self.tiers],
            "seconds": self.seconds,
            "reason": self.reason.to_json(),
        }


@dataclass(frozen=True)
class WhyGroup:
    """Graphs that missed for one reason, and what they cost together."""

    reason: Reason
    graphs: tuple[GraphMiss, ...]

    @property
    def seconds(self) -> float:
        return sum(g.seconds for g in self.graphs)

    @property
    def alike(self) -> bool:
        """Whether every graph's reason reads the same (graphs whose inputs changed are one
        group, each with its own values)."""
        return len({g.reason.summary for g in self.graphs}) == 1

    @property
    def summary(self) -> str:
        """The reason in a line: its changes with their values where every graph's are the
        same, else what kind of change it was (each graph's values are its own)."""
        if self.alike:
            return self.reason.summary
        if self.reason.signature == ("parts", ("inputs",)):
            return "their inputs changed (dtype, shape or dynamic dimensions)"
        return "each its own values"

    @property
    def changes(self) -> tuple[PartChange, ...]:
        """The changes every graph of the group holds, values and all: its reason's, where the
        graphs are alike; else only those they share (each graph's own are in its reason)."""
        if self.alike:
            return self.reason.changes
        others = [set(g.reason.changes) for g in self.graphs[1:]]
        return tuple(c for c in self.reason.changes if all(c in own for own in others))

    def to_json(self) -> dict[str, Any]:
        """The group as ``why --json`` writes it: its reason as the text reads it (where the
        graphs' values differ, the kind of change and the changes they share, not one graph's
        values for all), whether its graphs are alike, and each graph with its own reason."""
        reason = self.reason.to_json()
        if not self.alike:
            reason["summary"] = self.summary
            reason["changes"] = [c.to_json() for c in self.changes]
        return {
            "reason": reason,
            "alike": self.alike,
            "seconds": self.seconds,
            "graphs": [g.to_json() for g in self.graphs],
        }


@dataclass(frozen=True)
class BuildChange:
    """A graph whose FX-graph key is the same in both runs while the code built differs
    (autotuning chose otherwise), or the reverse: another key, the same code."""

    graph: str
    key_base: str
    key_current: str
    code_base: str
    code_current: str
    detail: str = ""  # what else differs: the kernels autotuning chose otherwise for

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class WhyReport:
    """Every miss of CURRENT explained against BASE (see the module's docstring)."""

    base: str
    current: str
    compiled: int  # CURRENT's graphs
    hits: int  # ... that hit the cache (every tier consulted)
    groups: tuple[WhyGroup, ...] = ()  # missed graphs by reason, most seconds first
    new_graphs: tuple[str, ...] = ()  # missed graphs with no graph of BASE to compare with
    gone: tuple[str, ...] = ()  # BASE's graphs CURRENT did not compile
    same_key_other_build: tuple[BuildChange, ...] = ()  # equal FX keys, different code
    other_key_same_build: tuple[BuildChange, ...] = ()  # different FX keys, identical code
    process_changes: tuple[PartChange, ...] = ()  # facts of the process that differ
    notes: tuple[str, ...] = ()  # what could not be told, and why

    @property
    def missed(self) -> int:
        return sum(len(g.graphs) for g in self.groups) + len(self.new_graphs)

    @property
    def seconds(self) -> float:
        return sum(g.seconds for g in self.groups)

    def headline(self) -> str:
        """One line: how many of CURRENT's graphs missed, and what the misses cost."""
        if not self.missed:
            if not self.compiled:
                return "no graph missed the compile cache in CURRENT (it compiled none)"
            graphs = "graph" if self.compiled == 1 else "graphs"
            rest = self.compiled - self.hits  # no cache consulted (a backend without one)
            hits = f"{self.hits} hit" + (f", {rest} looked up no cache" if rest else "")
            return f"no graph missed the compile cache in CURRENT ({self.compiled} {graphs}: {hits})"
        graphs = "graph" if self.compiled == 1 else "graphs"
        new = f", {len(self.new_graphs)} new" if self.new_graphs else ""
        return (
            f"{self.missed} of {self.compiled} {graphs} missed the compile cache in CURRENT{new} "
            f"({self.seconds:.2f} s)"
        )

    def to_json(self) -> dict[str, Any]:
        """The versioned JSON ``compiletrace why --json`` writes."""
        return envelope(
            WHY_KIND,
            FileKind.WHY.schema_version,
            {
                "base": self.base,
                "current": self.current,
                "compiled": self.compiled,
                "hits": self.hits,
                "missed": self.missed,
                "seconds": self.seconds,
                "headline": self.headline(),
                "groups": [g.to_json() for g in self.groups],
                "new_graphs": list(self.new_graphs),
                "gone": list(self.gone),
                "same_key_other_build": [b.to_json() for b in self.same_key_other_build],
                "other_key_same_build": [b.to_json() for b in self.other_key_same_build],
                "process_changes": [c.to_json() for c in self.process_changes],
                "notes": list(self.notes),
            },
        )


# -- matching graphs ------------------------------------------------------------------------------


def _graph_label(r: GraphRecord) -> str:
    where = f"{os.path.basename(r.code_filename)}:{r.code_firstlineno}" if r.code_filename else ""
    return f"{r.compile_id} {r.code_name}" + (f" ({where})" if where else "")


def _location(r: GraphRecord) -> tuple[str, int, str]:
    # The file's name, not its path: the same program checked out elsewhere is the same code.
    return os.path.basename(r.code_filename), r.code_firstlineno, r.code_name


def _identities(r: GraphRecord) -> dict[str, str]:
    """What a graph is, each way the runs may know it: its code as each tier's key has it,
    its structure."""
    found: dict[str, str] = {}
    for c in r.cache_lookups:
        for p in c.parts:
            if p.name == "gm":
                found.setdefault(f"{c.tier}.gm", p.hash)
    if r.structure_hash:
        found["structure"] = r.structure_hash
    return found


def _same_identity(a: dict[str, str], b: dict[str, str]) -> bool:
    shared = [k for k in a if k in b]
    return bool(shared) and a[shared[0]] == b[shared[0]]


def match_graphs(
    base: Sequence[GraphRecord], current: Sequence[GraphRecord]
) -> tuple[list[tuple[GraphRecord, GraphRecord, str]], list[GraphRecord], list[GraphRecord]]:
    """(BASE graph, CURRENT graph, how matched) pairs, CURRENT's unmatched, BASE's unmatched:
    first by location and identity, then by location in order, then by order."""
    free = list(range(len(base)))
    matched: dict[int, tuple[int, str]] = {}
    ids = [_identities(r) for r in base]
    for rule in ("identity", "location", "order"):
        for ci, cur in enumerate(current):
            if ci in matched:
                continue
            cur_ids = _identities(cur) if rule == "identity" else {}
            for bi in free:
                same_place = _location(base[bi]) == _location(cur)
                if (
                    (rule == "identity" and same_place and _same_identity(ids[bi], cur_ids))
                    or (rule == "location" and same_place)
                    or rule == "order"
                ):
                    matched[ci] = (bi, rule)
                    free.remove(bi)
                    break
    pairs = [(base[bi], current[ci], rule) for ci, (bi, rule) in sorted(matched.items())]
    new = [cur for ci, cur in enumerate(current) if ci not in matched]
    return pairs, new, [base[bi] for bi in free]


def _match_sides(
    base: Side, current: Side
) -> tuple[list[tuple[GraphRecord, GraphRecord, str]], list[GraphRecord], list[GraphRecord], dict[int, str]]:
    """:func:`match_graphs` of two sides, a job's processes each on its own: a process of
    CURRENT with a namesake in BASE ("rank 1") is matched with it, any other with all of
    BASE's graphs, which several processes may share (one process filled the cache that
    every rank of a job used). Also each graph's label prefix by ``id``, where a side has
    several processes ("rank 1: ")."""
    if not current.processes:
        pairs, new, gone = match_graphs(base.records, current.records)
        prefixes = {id(r): f"{role}: " for role, records in base.processes for r in records}
        return pairs, new, gone, prefixes
    by_role = dict(base.processes)
    pairs, new, used = [], [], set()
    for role, records in current.processes:
        found, unmatched, _ = match_graphs(by_role.get(role) or base.records, records)
        pairs += found
        new += unmatched
        used |= {id(b) for b, _, _ in found}
    prefixes = {
        id(r): f"{role}: " for side in (base, current) for role, records in side.processes for r in records
    }
    return pairs, new, [b for b in base.records if id(b) not in used], prefixes


# -- comparing two keys ------------------------------------------------------------------------


def _lookup(r: GraphRecord, tier: str, *, deciding: bool) -> CacheLookup | None:
    """A graph's lookup of ``tier``: the one that decided its outcome (the last torch looked
    up), or, for comparing with, the one whose parts are known (a stored one will do)."""
    lookups = [c for c in r.cache_lookups if c.tier == tier]
    if not lookups:
        return None
    direct = [c for c in lookups if c.source == "lookup"]
    if deciding:
        return (direct or lookups)[-1]
    with_parts = [c for c in direct if c.parts] or [c for c in lookups if c.parts]
    return (with_parts or direct or lookups)[-1]


def _inputs(parts: Mapping[str, KeyPart]) -> list[KeyPart]:
    return [p for name, p in parts.items() if name.startswith("example_inputs[")]


def _input_changes(base: list[KeyPart], current: list[KeyPart]) -> list[PartChange]:
    """The inputs that changed, aligned by their hashes: an input added in front shifts the
    others without changing them."""
    changes = []
    matcher = difflib.SequenceMatcher(a=[p.hash for p in base], b=[p.hash for p in current], autojunk=False)
    for op, b0, b1, c0, c1 in matcher.get_opcodes():
        if op == "equal":
            continue
        for k in range(max(b1 - b0, c1 - c0)):
            bp = base[b0 + k] if b0 + k < b1 else None
            cp = current[c0 + k] if c0 + k < c1 else None
            index = (c0 + k) if cp is not None else (b0 + k)
            changes.append(
                PartChange(
                    f"input {index}",
                    None if bp is None else bp.value,
                    None if cp is None else cp.value,
                    "inputs",
                )
            )
    return changes


def _part_changes(
    base: Mapping[str, KeyPart], current: Mapping[str, KeyPart], base_known: bool, current_known: bool
) -> list[PartChange]:
    """The parts of two keys that differ, inputs aligned; a process part missing on a side
    whose process parts are unknown is not a difference."""
    changes = _input_changes(_inputs(base), _inputs(current))
    names = [*current, *(n for n in base if n not in current)]
    for name in names:
        if name.startswith("example_inputs["):
            continue
        b, c = base.get(name), current.get(name)
        if b is not None and c is not None and b.hash == c.hash:
            continue
        if (b is None and not base_known) or (c is None and not current_known):
            continue  # that side's process parts are not in its run
        shown = [None if p is None else p.value for p in (b, c)]
        if b is not None and c is not None and b.value == c.value:  # bytes, a graph's code: the hashes tell
            shown = [f"{b.value} #{b.hash[:8]}", f"{c.value} #{c.hash[:8]}"]
        changes.append(PartChange(name, shown[0], shown[1], part_kind(name)))
    if any(c.kind == "inputs" for c in changes):
        changes = [_replace(c, consequence=c.name in _CONSEQUENCES_OF_INPUTS) for c in changes]
    # torch's system_info[hash] is a digest of the other system_info parts.
    if any(c.name.startswith("system_info[") and c.name != "system_info[hash]" for c in changes):
        changes = [c for c in changes if c.name != "system_info[hash]"]
    return _with_release(changes)


def _with_release(changes: list[PartChange]) -> list[PartChange]:
    """Another torch build brings its own config entries, defaults and decompositions (the
    graph's code): with torch's version among the changes, the rest changed with it."""
    if any(c.kind == "version" for c in changes):
        return [c if c.kind == "version" else _replace(c, consequence=True) for c in changes]
    return changes


# What torch.compile's modes set (torch._inductor.list_mode_options, torch 2.11-2.15): a
# changed mode changes these parts of the key, which the mode explains.
_MODE_SETS = frozenset(
    {
        "inductor_config[max_autotune]",
        "inductor_config[coordinate_descent_tuning]",
        "inductor_config[triton.cudagraphs]",
        "fx_kwargs[cudagraphs]",
    }
)
_COMPILE_ARGUMENTS = ("mode", "dynamic")  # of GraphRecord.settings, which a key reflects


def _with_compile_arguments(
    changes: list[PartChange], base: GraphRecord, cur: GraphRecord
) -> list[PartChange]:
    """``changes`` led by the torch.compile arguments that differ between the two graphs'
    compiles (their ``mode`` and ``dynamic``, where both runs recorded them), and the parts
    those set marked as changed with them: a mode sets inductor settings the user never
    touched, ``dynamic=True`` turns the inputs symbolic."""
    b, c = dict(base.settings), dict(cur.settings)
    moved = [a for a in _COMPILE_ARGUMENTS if a in b and a in c and b[a] != c[a]]
    if not moved or not changes:
        return changes

    def explained(change: PartChange) -> bool:
        if "mode" in moved and (change.name in _MODE_SETS or change.kind == "options"):
            return True
        return "dynamic" in moved and change.kind in ("inputs", "options", "graph")

    led = [PartChange(f"torch.compile {a}", b[a], c[a], a) for a in moved]
    return led + [_replace(x, consequence=True) if explained(x) else x for x in changes]


def _replace(change: PartChange, **fields: Any) -> PartChange:
    return PartChange(**{**change.__dict__, **fields})


def _merge_tiers(per_tier: list[tuple[str, list[PartChange]]]) -> list[PartChange]:
    """The changes of each tier's key as one list, a part that changed in both keys once
    (with both tiers named), causes first. The inputs are the FX graph's where its key
    changed (the graph inductor compiled; the AOTAutograd key lists the same tensors, the
    parameters with requires_grad)."""
    fx_inputs = any(t == "fx_graph" and any(c.kind == "inputs" for c in cs) for t, cs in per_tier)
    merged: dict[tuple[str, str | None, str | None], PartChange] = {}
    for tier, changes in per_tier:
        for c in changes:
            if fx_inputs and tier == "aot_autograd" and c.kind == "inputs":
                continue
            k = (c.name, c.base, c.current)
            old = merged.get(k)
            tiers = (*old.tiers, TIER_NAMES[tier]) if old is not None else (TIER_NAMES[tier],)
            merged[k] = _replace(c, tiers=tiers)
    return sorted(merged.values(), key=lambda c: c.consequence)


def _summary(causes: Sequence[PartChange]) -> str:
    """The causes in a line: each part, or the inputs as a count past three."""
    inputs = [c for c in causes if c.kind == "inputs"]
    others = [c.line() for c in causes if c.kind != "inputs"]
    if len(inputs) > 3:
        others.append(f"{len(inputs)} inputs changed ({inputs[0].line()}, ...)")
    else:
        others += [c.line() for c in inputs]
    more = f"; {len(others) - 3} more" if len(others) > 3 else ""
    return "; ".join(others[:3]) + more


# -- where a part came from ------------------------------------------------------------------------


def _env_value(facts: CacheFacts | None, name: str) -> str:
    if facts is None or not facts.env_known:
        return "?"
    return repr(facts.env[name]) if name in facts.env else "unset"


def _with_source(change: PartChange, base: CacheFacts | None, current: CacheFacts | None) -> PartChange:
    """A change with what set it, where the runs say: an environment variable torch reads
    into that part, the thread count's variables."""
    candidates: list[str] = []
    for facts in (current, base):
        if facts is None:
            continue
        for env, names in facts.env_to_config.items():
            if change.name in names:
                candidates.append(env)
    if change.kind == "config":
        setting = change.name.partition("[")[2].rstrip("]")
        candidates.append("TORCHINDUCTOR_" + setting.replace(".", "_").upper())
    if change.kind == "threads":
        candidates += ["OMP_NUM_THREADS", "MKL_NUM_THREADS"]
    if change.kind == "version" and base is not None and current is not None and base.torch and current.torch:
        same = " (the same version: torch's files differ)" if base.torch == current.torch else ""
        return _replace(change, source=f"torch {base.torch} -> {current.torch}{same}")
    for env in dict.fromkeys(candidates):
        b, c = _env_value(base, env), _env_value(current, env)
        if b != c and "?" not in (b, c):
            return _replace(change, source=f"set by {env}: {b} -> {c}")
    return change


def _functorch_changes(base: CacheFacts | None, current: CacheFacts | None) -> list[PartChange]:
    """functorch's config entries that differ (the AOTAutograd key holds them as one opaque
    part, ``autograd_config``)."""
    if base is None or current is None or not base.functorch_config or not current.functorch_config:
        return []
    names = sorted(set(base.functorch_config) | set(current.functorch_config))
    return [
        PartChange(
            f"autograd_config[{n}]",
            base.functorch_config.get(n),
            current.functorch_config.get(n),
            "functorch_config",
            ("AOTAutograd",),
        )
        for n in names
        if base.functorch_config.get(n) != current.functorch_config.get(n)
    ]


def process_changes(base: CacheFacts | None, current: CacheFacts | None) -> list[PartChange]:
    """The facts of the two processes that differ: builds, device, thread count, cache
    directory, the environment torch and vLLM read."""
    if base is None or current is None:
        return []
    out = []
    for name, kind in (
        ("torch", "version"),
        ("triton", "version"),
        ("cuda", "version"),
        ("python", "version"),
        ("device", "device"),
        ("num_threads", "threads"),
        ("cache_dir", "cache_dir"),
    ):
        b, c = getattr(base, name), getattr(current, name)
        if b and c and b != c:
            out.append(PartChange(name, str(b), str(c), kind))
    if not (base.env_known and current.env_known):
        return out  # one run keeps no environment (torch's trace): unknown, not unset
    for env in sorted(set(base.env) | set(current.env)):
        b, c = base.env.get(env), current.env.get(env)
        if b != c and env not in _NOT_KEYED:
            out.append(PartChange(f"env {env}", b, c, "env"))
    return out


# Variables kept for what they tell, which no key reads: the cache directory (a fact of
# its own above), torch's trace and logs.
_NOT_KEYED = frozenset({"TORCHINDUCTOR_CACHE_DIR", "TORCH_TRACE", "TORCH_LOGS", "TORCH_LOGS_OUT"})

# -- equal keys, still a miss ---------------------------------------------------------------------


def _same_key_reason(tier: str, cur: CacheLookup, base_side: Side, cur_side: Side, since_ns: int) -> Reason:
    """CURRENT missed a key BASE had: what else kept the entry from applying."""
    name = TIER_NAMES[tier]
    if cur.status == "guard_miss":
        return Reason(
            "guards",
            f"{name}: the entry was found, but its guards failed ({cur.detail or 'no expression given'})",
            "the cached graph was specialised on values these inputs do not meet: mark the varying "
            "dimensions dynamic, or warm the cache with the inputs serving sees",
            signature=("guards", tier, cur.detail),
        )
    if tier == "aot_autograd" and cur.status == "hit":
        return Reason(
            "evicted",
            "AOTAutograd: the entry was found, but the FX graph entry it names was gone (evicted or deleted)",
            "keep the cache directory whole: its aotautograd/ entries name entries in fxgraph/; copy or "
            "restore both, and keep the cache under a size that evicts nothing",
            signature=("evicted", tier),
        )
    base_dirs, cur_dirs = base_side.cache_dirs, cur_side.cache_dirs
    bf, cf = base_side.facts, cur_side.facts
    if bf is not None and cf is not None and bf.vllm is not None and cf.vllm is not None:
        changes = _vllm_changes(bf, cf)
        if changes:
            return Reason(
                "vllm",
                "the key is the same, but vLLM chose another cache directory: its cache-key factors differ ("
                + "; ".join(c.line() for c in changes[:3])
                + ")",
                "vLLM names its cache directory after a hash of these factors: keep them the same "
                f"{_BOTH} (or point compilation_config.cache_dir at the filled cache)",
                tuple(changes),
                ("vllm", tuple((c.name, c.base, c.current) for c in changes)),
            )
    moved = bool(base_dirs and cur_dirs and not set(base_dirs) & set(cur_dirs))
    where = cur_dirs[0] if cur_dirs else ""
    state = _entry_state(where, tier, cur.key, since_ns) if where else "unknown"
    if state == "there before":
        return Reason(
            "unreadable",
            f"{name}: the entry is in {where}, but torch could not load it (damaged or unreadable)",
            "fill the cache again: delete the damaged entry (or the directory) and run once",
            signature=("unreadable", tier),
        )
    if moved:
        return Reason(
            "cache_dir",
            f"the key is the same, but CURRENT looked in another cache directory: {base_dirs[0]} -> "
            f"{cur_dirs[0]}",
            _cache_dir_fix(bf, cf),
            tuple(_dir_changes(base_dirs[0], cur_dirs[0], bf, cf)),
            signature=("cache_dir", base_dirs[0], cur_dirs[0]),
        )
    return Reason(
        "gone",
        f"{name}: the key is the same, but its entry was not in {where or 'the cache directory'} "
        "(evicted or deleted)",
        "keep the cache directory whole between runs (no cleaner of temporary files, no size limit "
        "that evicts)",
        signature=("gone", tier),
    )


def _entry_state(directory: str, tier: str, key: str, since_ns: int) -> str:
    """Whether ``key``'s entry is in ``directory`` on this machine: "there before" (a file
    older than the compile that missed it: torch could not read it), "written by the miss"
    (every file is newer: the miss wrote it), "absent", or "unknown" (no such directory here,
    or a key torch does not make: :func:`~compiletrace._data.cache_store.entry_parts`).
    """
    parts = entry_parts(tier, key)
    if parts is None or not os.path.isdir(directory):  # not torch's key: no path is made of it
        return "unknown"
    times = entry_file_times(directory, parts)  # a link is none of torch's entries: not followed
    if not times:
        return "absent"
    return "there before" if min(times) < since_ns else "written by the miss"


def _dir_changes(
    base_dir: str, current_dir: str, base: CacheFacts | None, current: CacheFacts | None
) -> list[PartChange]:
    """The directory that moved, how each run chose its own, and the variables that moved it."""
    how = {
        "default": "torch's default (temp dir + user)",
        "TORCHINDUCTOR_CACHE_DIR": "TORCHINDUCTOR_CACHE_DIR",
    }
    chosen = [
        f"{side}'s {how.get(facts.cache_dir_from, facts.cache_dir_from)}"
        for side, facts in (("BASE", base), ("CURRENT", current))
        if facts is not None and facts.cache_dir_from
    ]
    out = [PartChange("cache directory", base_dir, current_dir, "cache_dir", source=", ".join(chosen))]
    # (TORCHINDUCTOR_CACHE_DIR is the line above: torch writes the directory it chose into it.)
    for name in ("TMPDIR", "TEMP", "TMP", "LOGNAME", "USER", "USERNAME"):
        b, c = _env_value(base, name), _env_value(current, name)
        if "?" not in (b, c) and b != c:
            out.append(PartChange(f"env {name}", b, c, "env"))
    return out


def _setting(name: str, value: str, what: str) -> str:
    """``NAME=VALUE`` to paste, the value (a path from a run file) quoted for a shell
    (``TORCHINDUCTOR_CACHE_DIR='/tmp/a b'``), so that pasting it sets exactly that and runs
    nothing; ``NAME to WHAT`` where the value is not known, or holds what a text view would
    change (a backslash, which it doubles; a control character)."""
    if not value:
        return f"{name} to {what}"
    if not value.isprintable() or "\\" in value:
        return (
            f"{name} to {what} (its name holds a backslash or a control character, which this "
            "line cannot show as it is: --json has it)"
        )
    return f"{name}={shell_word(value)}"


def _cache_dir_fix(base: CacheFacts | None, current: CacheFacts | None) -> str:
    target = base.cache_dir if base is not None else ""
    if current is not None and current.cache_dir_from == "default":
        return (
            f"set {_setting('TORCHINDUCTOR_CACHE_DIR', target, 'the filled directory')} where the cache is "
            "used: the default directory is named after the temporary directory and the user, which change "
            "between machines and users"
        )
    if _VLLM_DIR in target and current is not None and _VLLM_DIR in current.cache_dir:
        base_root, _, base_named = target.partition(_VLLM_DIR)
        current_root, _, current_named = current.cache_dir.partition(_VLLM_DIR)
        if base_named == current_named:
            root = _setting("VLLM_CACHE_ROOT", base_root, "BASE's root")
            return f"vLLM's cache root moved ({base_root} -> {current_root}): set {root}"
        return (
            "vLLM named the two directories after different hashes of its config, environment and code: "
            f"keep those the same {_BOTH} (vLLM writes them to cache_key_factors.json beside a cache its "
            "backend filled)"
        )
    where = target or "where BASE kept it"
    return f"point TORCHINDUCTOR_CACHE_DIR at the filled cache ({where}), or copy it there"


_VLLM_DIR = f"{os.sep}torch_compile_cache{os.sep}"  # where vLLM keeps the caches it names


def _vllm_changes(base: CacheFacts, current: CacheFacts) -> list[PartChange]:
    b, c = base.vllm, current.vllm
    assert b is not None and c is not None
    out = []
    for section, kind in (("env", "env"), ("hashes", "vllm"), ("config", "vllm"), ("compiler", "vllm")):
        bs, cs = getattr(b, section), getattr(c, section)
        for name in sorted(set(bs) | set(cs)):
            if bs.get(name) != cs.get(name):
                label = name if section in ("env", "hashes") else f"{section}.{name}"
                out.append(PartChange(f"vLLM {label}", bs.get(name), cs.get(name), kind))
    return out


# -- one graph ------------------------------------------------------------------------------


def _seconds(base: GraphRecord, cur: GraphRecord) -> float:
    """What CURRENT's miss cost: its compile time of the graph, less BASE's when BASE hit."""
    cost = cur.backend_ns + cur.backward_ns
    if base.cache_outcome is CacheOutcome.HIT:
        cost -= base.backend_ns + base.backward_ns
    return max(cost, 0) / NS_PER_S


def _outcome(r: GraphRecord, tier: str) -> str:
    value = r.aot_autograd_cache if tier == "aot_autograd" else r.fx_graph_cache
    return value.value


def _missed_tiers(r: GraphRecord) -> list[str]:
    return [t for t in TIERS if _outcome(r, t) in _MISSED]


def parts_reason(changes: Sequence[PartChange]) -> Reason:
    """The reason a key changed in ``changes`` (causes and their consequences): its line,
    the fixes its causes call for, and a signature that groups graphs with the same causes."""
    causes = [x for x in changes if not x.consequence]
    fixes = list(dict.fromkeys(fix_for_part(x) for x in causes))
    signature = sorted(
        ("inputs",) if x.kind == "inputs" else (x.name, x.base or "", x.current or "") for x in causes
    )
    return Reason(
        "parts", _summary(causes), "; ".join(fixes[:3]), tuple(changes), ("parts", *dict.fromkeys(signature))
    )


def key_changes(
    base: tuple[Mapping[str, KeyPart], bool],
    current: tuple[Mapping[str, KeyPart], bool],
    tier: str = "fx_graph",
) -> list[PartChange]:
    """The parts of two keys of one tier that differ (each key as its parts and whether its
    process parts are known), consequences told apart, causes first."""
    return _merge_tiers([(tier, _part_changes(base[0], current[0], base[1], current[1]))])


def _explain_pair(base: GraphRecord, cur: GraphRecord, base_side: Side, cur_side: Side) -> Reason:
    per_tier: list[tuple[str, list[PartChange]]] = []
    same_key: list[Reason] = []
    unknown: list[str] = []
    for tier in _missed_tiers(cur):
        c = _lookup(cur, tier, deciding=True)
        b = _lookup(base, tier, deciding=False)
        if c is None:
            unknown.append(f"{TIER_NAMES[tier]}: CURRENT recorded no key")
            continue
        if c.outcome == CacheOutcome.BYPASS.value:
            setting = bypass_setting(c.detail)
            fix = (
                "the graph holds something torch will not cache (the reason says what): remove it from the "
                "compiled region, or accept the compile"
            )
            if setting is not None:  # a setting, not the graph: every start bypasses the cache
                fix = (
                    f"{setting[1]}=1 ({setting[2]}) makes torch bypass its cache on every start, "
                    f"{setting[0]}: unset it to let the cache keep this graph, or accept the compile"
                )
            return Reason(
                "bypass",
                f"{TIER_NAMES[tier]}: torch bypassed its cache ({c.detail or 'no reason given'})",
                fix,
                signature=("bypass", tier, c.detail),
            )
        if b is None or not b.key:
            unknown.append(f"{TIER_NAMES[tier]}: BASE recorded no key for this graph")
            continue
        if b.key == c.key:
            same_key.append(_same_key_reason(tier, c, base_side, cur_side, cur.start_unix_ns))
            continue
        b_parts, b_known = base_side.parts_of(b)
        c_parts, c_known = cur_side.parts_of(c)
        if not b.parts or not c.parts:
            # torch's trace keeps no AOTAutograd parts; what only that key holds beside the
            # graph, functorch's config, the runs may still tell.
            config = _functorch_changes(base_side.facts, cur_side.facts) if tier == "aot_autograd" else []
            if config:
                per_tier.append((tier, config))
                continue
            missing = "BASE" if not b.parts else "CURRENT"
            note = (b if not b.parts else c).note or "none recorded"
            unknown.append(f"{TIER_NAMES[tier]}: the keys differ; {missing}'s parts are unknown ({note})")
            continue
        changes = _part_changes(b_parts, c_parts, b_known, c_known)
        if tier == "aot_autograd":
            opaque = [x for x in changes if x.name == "autograd_config"]
            expanded = _functorch_changes(base_side.facts, cur_side.facts) if opaque else []
            if expanded:
                changes = _with_release([x for x in changes if x.name != "autograd_config"] + expanded)
        per_tier.append((tier, changes))
    changes = _with_compile_arguments(_with_release(_merge_tiers(per_tier)), base, cur)
    changes = sorted(changes, key=lambda c: c.consequence)
    if not changes and not same_key and not unknown and per_tier:
        unknown.append("the keys differ in no part either run recorded")
    if changes:
        return parts_reason([_with_source(x, base_side.facts, cur_side.facts) for x in changes])
    if same_key:
        return same_key[0]
    if unknown:
        facts = process_changes(base_side.facts, cur_side.facts)
        hint = f"; the processes differ in: {', '.join(x.name for x in facts[:5])}" if facts else ""
        return Reason(
            "keys",
            "; ".join(unknown) + hint,
            "record both runs with this compiletrace (it keeps each key's parts) to see which part differs",
            signature=("keys", tuple(unknown)),
        )
    return Reason(
        "unknown",
        "CURRENT missed, and no lookup of it was recorded",
        "record both runs with this compiletrace",
        signature=("unknown",),
    )


def _builds(base: GraphRecord, cur: GraphRecord, label: str) -> tuple[BuildChange | None, BuildChange | None]:
    """(same key, other build), (other key, same build) of one graph's FX-graph entries."""

    def built(r: GraphRecord) -> CacheLookup | None:
        found = [c for c in r.cache_lookups if c.tier == "fx_graph" and c.code_hash]
        return found[-1] if found else None

    b, c = built(base), built(cur)
    if b is None or c is None:
        return None, None
    change = BuildChange(label, b.key, c.key, b.code_hash, c.code_hash)
    if b.key == c.key and b.code_hash != c.code_hash:
        return change, None
    if b.key != c.key and b.code_hash == c.code_hash:
        return None, change
    return None, None


def _autotuned_otherwise(
    base: Side,
    current: Side,
    pairs: Sequence[tuple[GraphRecord, GraphRecord, str]],
    label: Callable[[GraphRecord], str],
) -> list[BuildChange]:
    """Same keys, different kernels: the graphs whose FX graph keys are equal in both runs,
    when autotuning chose otherwise for kernels both runs tuned (their .best_config)."""
    b, c = base.facts, current.facts
    if b is None or c is None:
        return []
    differ = sorted(k for k in set(b.autotune) & set(c.autotune) if b.autotune[k] != c.autotune[k])
    if not differ:
        return []
    out = []
    for rb, rc, _ in pairs:
        kb = [x.key for x in rb.cache_lookups if x.tier == "fx_graph" and x.key]
        kc = [x.key for x in rc.cache_lookups if x.tier == "fx_graph" and x.key]
        if kb and kc and kb[-1] == kc[-1]:
            what = f"autotuning chose otherwise for {len(differ)} kernel(s): {', '.join(differ[:3])}"
            out.append(BuildChange(label(rc), kb[-1], kc[-1], "", "", what))
    return out


# -- the report -------------------------------------------------------------------------------


def explain(base: Side, current: Side) -> WhyReport:
    """Every graph CURRENT missed, explained against BASE (see the module's docstring);
    a job's processes are matched each on its own (:func:`_match_sides`)."""
    pairs, new, gone, prefixes = _match_sides(base, current)

    def label(r: GraphRecord) -> str:
        return prefixes.get(id(r), "") + _graph_label(r)

    misses: list[GraphMiss] = []
    same_key: list[BuildChange] = []
    same_build: list[BuildChange] = []
    for b, c, how in pairs:
        one, other = _builds(b, c, label(c))
        if one is not None:
            same_key.append(one)
        if other is not None:
            same_build.append(other)
        if not _missed_tiers(c):
            continue
        reason = _explain_pair(b, c, base, current)
        tiers = tuple((TIER_NAMES[t], _outcome(b, t), _outcome(c, t)) for t in _missed_tiers(c))
        misses.append(
            GraphMiss(label(c), label(b), how, tiers, _seconds(b, c), reason, c.component, c.code_location)
        )
    groups: dict[tuple[Any, ...], list[GraphMiss]] = {}
    for miss in misses:
        groups.setdefault(miss.reason.signature, []).append(miss)
    ordered = sorted(
        (WhyGroup(graphs[0].reason, tuple(graphs)) for graphs in groups.values()), key=lambda g: -g.seconds
    )
    notes = []
    same_key += _autotuned_otherwise(base, current, pairs, label)
    for side, run in (("BASE", base), ("CURRENT", current)):
        if run.keys is None:
            notes.append(
                f"{side} ({run.name}) was saved without its cache keys' parts: keys are compared whole"
            )
    hits = sum(1 for r in current.records if r.cache_outcome is CacheOutcome.HIT)
    return WhyReport(
        base.name,
        current.name,
        len(current.records),
        hits,
        tuple(ordered),
        tuple(label(r) for r in new if _missed_tiers(r)),
        tuple(label(r) for r in gone),
        tuple(same_key),
        tuple(same_build),
        tuple(process_changes(base.facts, current.facts)),
        tuple(notes),
    )


def group_line(group: WhyGroup, missed: int) -> str:
    """One group as a line: "all 14 graphs: inductor_config[max_autotune] False -> True (41.2 s)";
    graphs whose inputs changed each in their own way are named by kind, each graph's values
    under it ("all 3 graphs: their inputs changed (dtype, shape or dynamic dimensions)")."""
    n = len(group.graphs)
    if n == missed:
        who = "the graph" if n == 1 else f"all {n} graphs"
    else:
        who = f"{n} graph{'s' if n != 1 else ''}"
    return f"{who}: {group.summary} ({group.seconds:.2f} s)"
