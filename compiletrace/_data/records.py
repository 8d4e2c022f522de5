"""The plain data compiletrace produces: one immutable record per compiled graph.

Records are built by the tracker (torch events -> records), stored in a
:class:`~compiletrace.Registry`, and read by every view (text, JSON, HTML, OTel,
Chrome trace). Views never reach back into torch.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, NamedTuple

from compiletrace._data.cache_keys import KeyPart, parts_from_json, parts_to_json
from compiletrace._data.kinds import FileKind
from compiletrace._data.torch_text import RESUME_NAME, RESUME_PREFIX
from compiletrace._io.envelope import Fields
from compiletrace._io.errors import RunFileError

__all__ = [
    "ENCODER",
    "LANGUAGE_MODEL",
    "RESUME_PREFIX",
    "TRACE_OTHER",
    "CacheLookup",
    "CacheOutcome",
    "CompilationTimes",
    "CompileStatus",
    "GraphBreak",
    "GraphKey",
    "GraphRecord",
    "RepeatedBlock",
    "RuntimeEvent",
    "TraceNode",
    "component_totals",
    "graph_keys",
    "ordered_components",
    "root_code_name",
    "top_self_times",
    "walk_trace",
]

NS_PER_S = 1_000_000_000

NEWEST_RUN_VERSION = FileKind.RUN.schema_version  # what a record's reader reads by default

# The two standard components: a vision or audio encoder beside a language-model backbone.
ENCODER = "encoder"
LANGUAGE_MODEL = "language_model"


def ordered_components(names: Iterable[str]) -> list[str]:
    """Component names in the one order every view uses: the language model and the
    encoder first, the rest as first seen.

    >>> ordered_components(["vision", "encoder", "language_model", "vision"])
    ['language_model', 'encoder', 'vision']
    """
    seen = list(dict.fromkeys(names))
    head = [n for n in (LANGUAGE_MODEL, ENCODER) if n in seen]
    return head + [n for n in seen if n not in head]


class CacheOutcome(str, enum.Enum):
    """What a compile cache did for one graph."""

    HIT = "hit"  # every lookup hit
    MISS = "miss"  # at least one lookup missed and was compiled afresh
    BYPASS = "bypass"  # the cache declined the graph (uncacheable content)
    NONE = "none"  # no lookup happened (cache off, or a backend without one)


class CompileStatus(str, enum.Enum):
    """How one graph's compile ended."""

    OK = "ok"
    ERROR = "error"  # the backend raised; the user saw the exception
    EAGER_FALLBACK = "eager_fallback"  # the backend raised; Dynamo ran the frame eagerly


def qualified_type_name(exc: BaseException) -> str:
    """An exception's class as recorded (``error_type``, the ``error.type`` attribute):
    ``ValueError`` for builtins, ``module.Qualname`` otherwise."""
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def root_code_name(code_name: str) -> str:
    """The user's function behind Dynamo's resume functions.

    >>> root_code_name("torch_dynamo_resume_in_torch_dynamo_resume_in_forward_at_12_at_15")
    'forward'
    """
    while True:
        match = RESUME_NAME.match(code_name)
        if match is None:
            return code_name
        code_name = match[1]


def notebook_cell(number: int) -> str:
    """The name a notebook cell's code goes by in records, as the notebook numbers it.

    >>> notebook_cell(3)
    'In [3]'
    """
    return f"In [{number}]"


def source_location(filename: str, line: int) -> str:
    """Where code is, for people: ``file:line``, or a notebook cell's ``In [3], line 5``
    ("" where the file is not known).

    >>> source_location("model.py", 12), source_location(notebook_cell(3), 5)
    ('model.py:12', 'In [3], line 5')
    """
    if not filename:
        return ""
    if filename.startswith("In [") and filename.endswith("]") and filename[4:-1].isdecimal():
        return f"{filename}, line {line}"
    return f"{filename}:{line}"


class GraphBreak(NamedTuple):
    """Where and why Dynamo split a frame (torch's own graph-break record), or gave up on it.

    >>> GraphBreak("Unsupported Tensor.item() call", "model.py", 12).location
    'model.py:12'
    """

    reason: str  # torch's reason, its hints included (e.g. "Failed to trace builtin operator ...")
    filename: str  # the user's file where the break happened ("" if torch gave none)
    lineno: int  # ... and its line (0 if unknown)
    frame_skipped: bool = False  # torch gave up on the whole frame: it runs eagerly
    # A .item() break whose value the user's code tests (an if, a while, an early exit):
    # capturing the scalar cannot keep it in the graph, the branch breaks it again.
    scalar_in_branch: bool = False

    @property
    def location(self) -> str:
        return source_location(self.filename, self.lineno)


class CacheLookup(NamedTuple):
    """One compile-cache lookup torch made during a backend call, with its key and, where
    torch computed them, the parts of the key that describe this graph (the process's
    parts are the run's, in the config set the lookup names: compiletrace._data.cache_keys).
    """

    tier: str  # "fx_graph" or "aot_autograd"
    outcome: str  # "hit", "miss" or "bypass" (a CacheOutcome value)
    key: str  # torch's cache key ("" where torch gave none, e.g. a bypass)
    detail: str = ""  # why the cache was bypassed, or the guard that failed, where torch says
    status: str = ""  # torch's cache_status_detailed: "hit", "full_miss", "guard_miss" ("" unknown)
    role: str = ""  # of an FX-graph lookup: "forward" or "backward" ("" unknown)
    # "lookup": torch looked the key up; "stored": an AOTAutograd hit loaded this FX-graph
    # entry, and the parts are those its writer stored with it.
    source: str = "lookup"
    parts: tuple[KeyPart, ...] = ()  # the key's parts that describe this graph
    config_set: str = ""  # the run's set of the key's process parts ("" none)
    code_hash: str = ""  # the FX-graph entry's generated code (its module's name): what was built
    note: str = ""  # why there are no parts, where there are none
    saved_ns: int = 0  # torch's figure of what a hit on this entry saves (the entry's compile time)

    def to_json(self) -> dict[str, Any]:
        """The form saved in run files: tier, outcome, key and detail (version 1's fields,
        always), then those run file version 2 added where they differ from their defaults
        (a lookup whose parts were not recorded has none of them)."""
        defaults = self._field_defaults
        data = {k: v for k, v in self._asdict().items() if k in _V1_LOOKUP or v != defaults[k]}
        if self.parts:
            data["parts"] = parts_to_json(self.parts)
        return data

    @classmethod
    def from_fields(cls, c: Fields) -> CacheLookup:
        """Read :meth:`to_json`'s form, every field checked: version 1's four always, the
        rest where the lookup's file holds them (absent: their defaults)."""
        return cls(
            c.string("tier"),
            c.choice("outcome", CacheOutcome).value,
            c.string("key"),
            c.string("detail"),
            c.string("status", ""),
            c.string("role", ""),
            c.string("source", "lookup"),
            parts_from_json(c.data.get("parts", []), c, "parts"),
            c.string("config_set", ""),
            c.string("code_hash", ""),
            c.string("note", ""),
            c.integer("saved_ns", 0, minimum=0),
        )


# A lookup's fields every run file holds (version 1's); the others are written where set.
_V1_LOOKUP = frozenset({"tier", "outcome", "key", "detail"})

# The root beside a frame's function in its tracing-cost tree: Dynamo time not spent tracing.
TRACE_OTHER = "(other: guards, bytecode, bookkeeping)"
# ... and Python's garbage collections while Dynamo traced: a pause in whichever function ran.
TRACE_GC = "(garbage collection)"


class TraceNode(NamedTuple):
    """One user function in a frame's tracing-cost tree: the time Dynamo spent tracing it
    (``total_ns``, its inlined callees included), merged over its ``calls`` from one caller.
    torch's and Python's own functions are folded into the user function that called them.

    >>> leaf = TraceNode("helper", "m.py", 3, 700, 2)
    >>> TraceNode("forward", "m.py", 9, 1000, 1, (leaf,)).self_ns
    300
    """

    name: str  # qualified function name ("Block.forward"), or OTHER for the unattributed rest
    filename: str
    lineno: int
    total_ns: int
    calls: int
    children: tuple[TraceNode, ...] = ()

    @property
    def self_ns(self) -> int:
        return max(self.total_ns - sum(c.total_ns for c in self.children), 0)

    @property
    def location(self) -> str:
        return source_location(self.filename, self.lineno)

    def to_json(self) -> list[Any]:
        """The compact form saved in run files: ``[name, file, line, total_ns, calls, [children]]``."""
        return [
            self.name,
            self.filename,
            self.lineno,
            self.total_ns,
            self.calls,
            [c.to_json() for c in self.children],
        ]

    @classmethod
    def from_json(cls, data: Any, source: str = "record", where: str = "trace_cost") -> TraceNode:
        """Read :meth:`to_json`'s form back, checking each field."""
        ok = (
            isinstance(data, list)
            and len(data) == 6
            and isinstance(data[0], str)
            and isinstance(data[1], str)
            and all(type(v) is int and v >= 0 for v in data[2:5])
            and isinstance(data[5], list)
        )
        if not ok:
            raise RunFileError(
                f"{source}: {where} should be [name, file, line, total_ns, calls, [children]], "
                f"got {data!r:.80}"
            )
        children = tuple(cls.from_json(c, source, f"{where}/{data[0]}") for c in data[5])
        return cls(data[0], data[1], data[2], data[3], data[4], children)


def walk_trace(
    roots: Iterable[TraceNode], prefix: tuple[TraceNode, ...] = ()
) -> Iterable[tuple[TraceNode, ...]]:
    """Every node of a tracing-cost tree as its path from the root, depth first.

    >>> [len(p) for p in walk_trace([TraceNode("f", "", 0, 1, 1, (TraceNode("g", "", 0, 1, 1),))])]
    [1, 2]
    """
    for node in roots:
        path = (*prefix, node)
        yield path
        yield from walk_trace(node.children, path)


def top_self_times(roots: Iterable[TraceNode], limit: int | None = 10) -> list[tuple[str, str, int, int]]:
    """Functions by the Dynamo time spent tracing their own bytecode, summed over the tree:
    ``(name, location, self_ns, calls)``, costliest first (the OTHER node left out).

    >>> top_self_times([TraceNode("f", "m.py", 1, 10, 1, (TraceNode("g", "m.py", 5, 8, 4),))])
    [('g', 'm.py:5', 8, 4), ('f', 'm.py:1', 2, 1)]
    """
    totals: dict[tuple[str, str], list[int]] = {}
    for path in walk_trace(roots):
        node = path[-1]
        if node.name == TRACE_OTHER:
            continue
        entry = totals.setdefault((node.name, node.location), [0, 0])
        entry[0] += node.self_ns
        entry[1] += node.calls
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])[:limit]
    return [(name, loc, ns, calls) for (name, loc), (ns, calls) in ranked]


class RepeatedBlock(NamedTuple):
    """One module class whose calls make up much of a graph: Dynamo traced the block once per
    call inside the one frame (a model of N identical layers compiled whole). Read from the
    module stack Dynamo leaves on the graph's nodes.

    >>> b = RepeatedBlock("Qwen2DecoderLayer", "transformers.models.qwen2", 10, 610, 61, 61, 654)
    >>> round(b.share, 3), RepeatedBlock.from_dict(b.to_dict()) == b, "reads_own_cache" in b.to_dict()
    (0.933, True, False)
    """

    class_name: str  # the block's class (its qualified name)
    module: str  # the module the class is defined in
    instances: int  # distinct calls of the class in the graph (layers.0, layers.1, ...)
    nodes: int  # the graph's operations inside those calls
    smallest: int  # operations of the smallest call ...
    largest: int  # ... and of the largest: equal for identical layers
    graph_ops: int  # every operation of the graph
    # Each call reads and updates a cache layer of its own (transformers' cache, use_cache=True):
    # compiled on its own, the block specialises on its layer and compiles a graph per call.
    reads_own_cache: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The fields as a file holds them: ``reads_own_cache`` only where it is true, so a
        record without it reads and writes back as it was."""
        data = self._asdict()
        if not self.reads_own_cache:
            del data["reads_own_cache"]
        return data

    @property
    def share(self) -> float:
        """The share of the graph's operations inside the block's calls."""
        return self.nodes / self.graph_ops if self.graph_ops else 0.0

    @classmethod
    def from_dict(cls, data: Any, source: str = "record", where: str = "repeated_block") -> RepeatedBlock:
        """Read :meth:`_asdict` output, every field checked."""
        f = Fields(data, source, where)
        return cls(
            f.string("class_name"),
            f.string("module"),
            f.integer("instances", minimum=0),
            f.integer("nodes", minimum=0),
            f.integer("smallest", minimum=0),
            f.integer("largest", minimum=0),
            f.integer("graph_ops", minimum=0),
            f.boolean("reads_own_cache", False),  # absent from files written before it
        )


class CompilationTimes(NamedTuple):
    """Compile seconds split two ways, as a serving engine reports them: the encoder (the
    component named ``"encoder"``, what ``compiletrace.compile(..., is_encoder=True)``
    records) and the language model, which counts every other component, so that the two
    always add up to the whole. ``by_component()`` (on a registry, a run or a warm-up
    result) is the full split by name that every view shows.

    >>> CompilationTimes(language_model=8.0, encoder=4.34).total
    12.34
    """

    language_model: float = 0.0
    encoder: float = 0.0

    @classmethod
    def from_components(cls, by_component: Mapping[str, float]) -> CompilationTimes:
        """The two-way split of seconds per component: ``"encoder"`` is the encoder, every
        other component (the language model, a vision tower named otherwise, ...) counts as
        the language model, so nothing is dropped.

        >>> CompilationTimes.from_components({"encoder": 1.5, "vision": 9.0, "language_model": 0.5})
        CompilationTimes(language_model=9.5, encoder=1.5)
        """
        rest = sum((seconds for name, seconds in by_component.items() if name != ENCODER), 0.0)
        return cls(language_model=rest, encoder=by_component.get(ENCODER, 0.0))

    @property
    def total(self) -> float:
        return self.language_model + self.encoder


@dataclass(frozen=True, slots=True)
class GraphRecord:
    """One frame compile by Dynamo (one compile id) and its backward, if compiled lazily.

    Durations are integer nanoseconds from the tracker's clock, so figures computed from
    a fake clock are exact; the ``*_s`` properties give seconds. Timestamps are Unix epoch
    nanoseconds (the clock's reading shifted by an offset taken once), usable as span times.
    """

    compile_id: str  # torch's "frame/attempt" id, e.g. "0/0", "0/1" (a recompile), "1/0"
    component: str  # "encoder", "language_model" or a user's name
    backend: str  # the inner backend's name ("inductor", "aot_eager", ...)
    code_name: str  # the compiled frame's code name ("forward", "torch_dynamo_resume_in_...")
    graph_node_count: int  # FX nodes across the frame's graphs (0 if it produced none)
    start_unix_ns: int  # frame compile start
    end_unix_ns: int  # frame compile end (guards built)
    dynamo_ns: int | None  # Dynamo tracing + guards: frame time minus backend time (None if unknown)
    backend_ns: int  # time inside the backend (AOTAutograd, inductor, cache loads)
    backend_start_unix_ns: int | None  # first backend call start, if any
    backward_ns: int = 0  # lazy backward compile at the first .backward()
    backward_start_unix_ns: int | None = None
    is_recompile: bool = False
    recompile_reason: str | None = None  # torch's reason, e.g. "tensor 'x' size mismatch ..."
    fx_graph_cache: CacheOutcome = CacheOutcome.NONE
    aot_autograd_cache: CacheOutcome = CacheOutcome.NONE
    status: CompileStatus = CompileStatus.OK
    error_type: str | None = None  # qualified exception type when status is not OK
    rank: int = 0  # torch.distributed rank that compiled this graph
    world_size: int = 1
    # Backend time split into phases (see compiletrace._data.phases), sorted (name, ns) pairs
    # that add up to backend_ns: aot_autograd, inductor, kernel_compile, cache, other.
    phases: tuple[tuple[str, int], ...] = ()
    frame_attempt: int = 0  # torch's attempt in the compile id: > 0 means torch had compiled the frame
    shared_with: str | None = None  # another component that compiled this frame first (same code)
    restart_reasons: tuple[str, ...] = ()  # Dynamo restarted its analysis (not an error), and why
    discarded_ns: int = 0  # backend time of the attempts Dynamo threw away on those restarts
    # What the doctor (compiletrace._doctor) reads, saved so a run can be diagnosed elsewhere:
    code_filename: str = ""  # the compiled code's file ("" if unknown)
    code_firstlineno: int = 0  # ... and its first line
    graph_breaks: tuple[GraphBreak, ...] = ()  # breaks Dynamo made while compiling this frame
    structure_hash: str | None = None  # the FX graph's ops, targets and shapes (not names or values)
    graph_block: str = ""  # the class of the one submodule call the graph is ("Block"), or ""
    cache_lookups: tuple[CacheLookup, ...] = ()  # per cache tier: outcome and key
    after_warmup: bool = False  # compiled after warm_up returned: a latency spike in serving
    recompile_limit: int | None = None  # torch's recompile_limit when this frame compiled
    recompile_limit_hit: bool = False  # torch refused to compile past its limit: the frame runs eagerly
    # The module whose forward the compiled code is, or whose call it runs in (the resume
    # function after a graph break, a function the forward calls): its class, its attribute
    # path from the outermost module that called it ("" for that module itself, or unknown),
    # and file:line of the class's own forward, behind the decorators a library wraps it in.
    module_class: str = ""
    module_path: str = ""
    module_forward: str = ""
    # Of this graph's time, the process's one-time set-up (see compiletrace._core.compile_imports):
    # modules its compile imported and torch's cache keys computed, which only the first
    # compiles of a process pay. Included in the figures above, never subtracted from them.
    setup_ns: int = 0
    # Dynamo's time per user function (opt-in, trace_cost=True): the frame's function, then
    # an OTHER node for guards and bookkeeping; the roots' totals add up to dynamo_ns.
    trace_cost: tuple[TraceNode, ...] = ()
    # The frame's time per line of the warm-start ledger (compiletrace._data.ledger), adding
    # up to frame_ns: (line, the line torch's regions alone give that time, ns). The two
    # lines differ where compiletrace timed what torch does not (imports, the CPU probe).
    frame_lines: tuple[tuple[str, str, int], ...] = ()
    # CPU time of the compile work (compiletrace._core.cpu_clock): the compiling thread's, and
    # its child processes' (inductor's C++ compiler runs) reaped during the frame, and its
    # lazy backward's; set-up's share of it. None where not measured (run files before version 4):
    # the wall figures stand for it.
    cpu_ns: int | None = None
    setup_cpu_ns: int = 0
    # The module class whose calls make up most of the graph, when it was called more than
    # once inside it (one frame traced the block N times), else None.
    repeated_block: RepeatedBlock | None = None
    # torch's automatic-dynamic state of the compiled code after this frame: the inputs and
    # dimensions it saw change, as TORCH_COMPILE_DYNAMIC_SOURCES entries ("L['x']:0").
    dynamic_sources: tuple[str, ...] = ()
    # What the compile used, as torch.compile's arguments name it: ("mode", "max-autotune"),
    # ("dynamic", "None"), ("fullgraph", "False"); () where not recorded. Optional in a file
    # (older files lack it, and an older reader leaves it), so no new version of the run file.
    settings: tuple[tuple[str, str], ...] = ()
    # The module's method the compiled code is, or continues after a graph break ("forward",
    # "get_image_features"); "" for a function that is no method of module_class. Optional in
    # a file, as settings is.
    module_method: str = ""
    # What a decorator's ``*args`` stand for, from the signature of the method it wraps:
    # torch's guard on ``args[0]`` is the user's ``pixel_values``. Optional in a file, as
    # settings is.
    arg_names: tuple[str, ...] = ()
    # The backward was compiled ahead of time, inside this frame's backend call (AOTAutograd
    # does so for dynamic shapes whose backward saves sizes): its seconds are in backend_ns,
    # and no lazy backward follows. Optional in a file, as settings is.
    backward_in_forward: bool = False

    @property
    def frame_ns(self) -> int:
        """Frame compile time: Dynamo + backend + guards (no lazy backward)."""
        return self.end_unix_ns - self.start_unix_ns

    @property
    def total_ns(self) -> int:
        """Everything this graph cost: the frame compile plus its lazy backward."""
        return self.frame_ns + self.backward_ns

    @property
    def frame_s(self) -> float:
        return self.frame_ns / NS_PER_S

    @property
    def total_s(self) -> float:
        return self.total_ns / NS_PER_S

    @property
    def setup_s(self) -> float:
        return self.setup_ns / NS_PER_S

    @property
    def cpu_or_wall_ns(self) -> int:
        """What the compile cost, as the doctor weighs it: CPU time where measured (a busy
        machine barely moves it), else the wall figure (``total_ns``)."""
        return self.total_ns if self.cpu_ns is None else self.cpu_ns

    @property
    def setup_cpu_or_wall_ns(self) -> int:
        """The one-time set-up's share of :attr:`cpu_or_wall_ns`, in the same unit."""
        return self.setup_ns if self.cpu_ns is None else min(self.setup_cpu_ns, self.cpu_ns)

    @property
    def dynamo_s(self) -> float | None:
        return None if self.dynamo_ns is None else self.dynamo_ns / NS_PER_S

    @property
    def backend_s(self) -> float:
        return self.backend_ns / NS_PER_S

    @property
    def backward_s(self) -> float:
        return self.backward_ns / NS_PER_S

    @property
    def phase_ns(self) -> dict[str, int]:
        """Backend nanoseconds per phase."""
        return dict(self.phases)

    @property
    def cache_outcome(self) -> CacheOutcome:
        """One outcome for the graph: a miss anywhere is a miss; else a hit; else bypass."""
        outcomes = (self.fx_graph_cache, self.aot_autograd_cache)
        for outcome in (CacheOutcome.MISS, CacheOutcome.HIT, CacheOutcome.BYPASS):
            if outcome in outcomes:
                return outcome
        return CacheOutcome.NONE

    @property
    def code_location(self) -> str:
        """``file:line`` of the compiled code ("" if unknown)."""
        return source_location(self.code_filename, self.code_firstlineno)

    @property
    def module_label(self) -> str:
        """The module a person knows the compile by: ``"LlamaDecoderLayer at model.layers.3"``,
        ``"ViTModel"``, or "" when the compiled code is no module's.

        >>> GraphRecord("0/0", "lm", "eager", "forward", 1, 0, 1, 1, 0, None,
        ...             module_class="LlamaDecoderLayer", module_path="model.layers.3").module_label
        'LlamaDecoderLayer at model.layers.3'
        """
        if not self.module_class:
            return ""
        return f"{self.module_class} at {self.module_path}" if self.module_path else self.module_class

    @property
    def first_reason_line(self) -> str:
        """The failed guard itself: the first line of torch's recompile reason (which can
        carry a multi-line "User stack trace:" block), for views with one row per graph."""
        reason = self.recompile_reason or ""
        return reason.strip().splitlines()[0] if reason.strip() else ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["fx_graph_cache"] = self.fx_graph_cache.value
        data["aot_autograd_cache"] = self.aot_autograd_cache.value
        data["status"] = self.status.value
        data["phases"] = dict(self.phases)
        data["restart_reasons"] = list(self.restart_reasons)
        data["graph_breaks"] = [b._asdict() for b in self.graph_breaks]
        data["cache_lookups"] = [c.to_json() for c in self.cache_lookups]
        data["trace_cost"] = [n.to_json() for n in self.trace_cost]
        data["frame_lines"] = [list(line) for line in self.frame_lines]
        data["repeated_block"] = None if self.repeated_block is None else self.repeated_block.to_dict()
        data["dynamic_sources"] = list(self.dynamic_sources)
        if self.settings:
            data["settings"] = dict(self.settings)
        else:
            del data["settings"]  # not recorded: the file is as one written before settings were
        if not self.module_method:
            del data["module_method"]  # as settings: a file as one written before it
        data["arg_names"] = list(self.arg_names)
        if not self.arg_names:
            del data["arg_names"]
        if not self.backward_in_forward:
            del data["backward_in_forward"]
        return data

    @classmethod
    def from_dict(
        cls, data: Any, source: str = "record", where: str = "", version: int = NEWEST_RUN_VERSION
    ) -> GraphRecord:
        """Read a record written by :meth:`to_dict`, checking every field (a file may come
        from anywhere); ``version``: the run file's (what each version added:
        :data:`compiletrace._data.kinds.VERSIONS`). Raises :class:`~compiletrace.RunFileError`
        naming the bad field."""
        f = Fields(data, source, where)
        missing = sorted(_fields_of(version) - set(f.data))
        if missing:
            at = f" (at {where})" if where else ""
            raise RunFileError(f"{source}: graph record lacks {missing}{at}")
        start = f.integer("start_unix_ns", minimum=0)
        end = f.integer("end_unix_ns", minimum=0)
        if end < start:
            raise f.fail("end_unix_ns", f"at least start_unix_ns ({start})", end)
        phases = f.obj("phases")
        return cls(
            compile_id=f.string("compile_id"),
            component=_non_empty(f, "component"),
            backend=f.string("backend"),
            code_name=f.string("code_name"),
            graph_node_count=f.integer("graph_node_count", minimum=0),
            start_unix_ns=start,
            end_unix_ns=end,
            dynamo_ns=f.integer("dynamo_ns", optional=True, minimum=0),
            backend_ns=f.integer("backend_ns", minimum=0),
            backend_start_unix_ns=f.integer("backend_start_unix_ns", optional=True, minimum=0),
            backward_ns=f.integer("backward_ns", minimum=0),
            backward_start_unix_ns=f.integer("backward_start_unix_ns", optional=True, minimum=0),
            is_recompile=f.boolean("is_recompile"),
            recompile_reason=f.string("recompile_reason", optional=True),
            fx_graph_cache=f.choice("fx_graph_cache", CacheOutcome),
            aot_autograd_cache=f.choice("aot_autograd_cache", CacheOutcome),
            status=f.choice("status", CompileStatus),
            error_type=f.string("error_type", optional=True),
            rank=f.integer("rank", minimum=0),
            world_size=f.integer("world_size", minimum=1),
            phases=tuple(sorted((name, phases.integer(name, minimum=0)) for name in phases.data)),
            frame_attempt=f.integer("frame_attempt", minimum=0),
            shared_with=f.string("shared_with", optional=True),
            restart_reasons=tuple(f.strings("restart_reasons")),
            discarded_ns=f.integer("discarded_ns", minimum=0),
            code_filename=f.string("code_filename"),
            code_firstlineno=f.integer("code_firstlineno", minimum=0),
            graph_breaks=tuple(
                GraphBreak(
                    b.string("reason"),
                    b.string("filename"),
                    b.integer("lineno", minimum=0),
                    b.boolean("frame_skipped"),
                    b.boolean("scalar_in_branch") if version >= 4 else False,
                )
                for b in f.items("graph_breaks")
            ),
            structure_hash=f.string("structure_hash", optional=True),
            graph_block=f.string("graph_block"),
            cache_lookups=tuple(CacheLookup.from_fields(c) for c in f.items("cache_lookups")),
            after_warmup=f.boolean("after_warmup"),
            recompile_limit=f.integer("recompile_limit", optional=True, minimum=0),
            recompile_limit_hit=f.boolean("recompile_limit_hit"),
            module_class=f.string("module_class"),
            module_path=f.string("module_path"),
            module_forward=f.string("module_forward"),
            setup_ns=f.integer("setup_ns", minimum=0),
            trace_cost=_trace_cost(f),
            frame_lines=_frame_lines(f) if version >= 3 else (),
            **(_added_in_4(f) if version >= 4 else {}),
            settings=_settings(f) if "settings" in f.data else (),
            module_method=f.string("module_method") if "module_method" in f.data else "",
            arg_names=_arg_names(f) if "arg_names" in f.data else (),
            backward_in_forward=f.boolean("backward_in_forward")
            if "backward_in_forward" in f.data
            else False,
        )


def _arg_names(f: Fields) -> tuple[str, ...]:
    names = f.strings("arg_names", max_items=64, limit=200)
    for name in names:
        if not name.isidentifier():
            raise f.fail("arg_names", "a list of parameter names", name)
    return tuple(names)


def _settings(f: Fields) -> tuple[tuple[str, str], ...]:
    given = f.obj("settings")
    return tuple((key, given.string(key)) for key in ("mode", "dynamic", "fullgraph") if key in given.data)


# Every field: a record file holds each one (a field added is a new version of the run file),
# but for the optional ones (_OPTIONAL: a reader of any version leaves them).
_OPTIONAL = frozenset({"settings", "module_method", "arg_names", "backward_in_forward"})
_FIELDS = frozenset(f.name for f in fields(GraphRecord)) - _OPTIONAL
_ADDED_IN = {
    3: frozenset({"frame_lines"}),
    4: frozenset({"cpu_ns", "setup_cpu_ns", "repeated_block", "dynamic_sources"}),
}


def _fields_of(version: int) -> frozenset[str]:
    """The fields a record in a run file of ``version`` holds."""
    later = (names for added, names in _ADDED_IN.items() if added > version)
    return _FIELDS.difference(*later)


def _added_in_4(f: Fields) -> dict[str, Any]:
    """Version 4's fields: each record's CPU time, the block repeated inside its graph, and
    torch's automatic-dynamic sources for its code."""
    block = f.data["repeated_block"]
    return {
        "cpu_ns": f.integer("cpu_ns", optional=True, minimum=0),
        "setup_cpu_ns": f.integer("setup_cpu_ns", minimum=0),
        "repeated_block": None
        if block is None
        else RepeatedBlock.from_dict(block, f.source, f.path("repeated_block")),
        "dynamic_sources": tuple(f.strings("dynamic_sources")),
    }


def _trace_cost(f: Fields) -> tuple[TraceNode, ...]:
    value = f.data["trace_cost"]
    if not isinstance(value, list):
        raise f.fail("trace_cost", "a list", value)
    return tuple(TraceNode.from_json(n, f.source, f.path("trace_cost")) for n in value)


MAX_FRAME_LINES = 64  # lines of one frame's ledger split (the ledger has about twenty)


def _frame_lines(f: Fields) -> tuple[tuple[str, str, int], ...]:
    value = f.data["frame_lines"]
    ok = (
        isinstance(value, list)
        and len(value) <= MAX_FRAME_LINES
        and all(
            isinstance(v, list)
            and len(v) == 3
            and all(isinstance(name, str) and len(name) <= 200 for name in v[:2])
            and type(v[2]) is int
            and v[2] >= 0
            for v in value
        )
    )
    if not ok:
        raise f.fail("frame_lines", f"at most {MAX_FRAME_LINES} [line, torch's line, ns]", value)
    return tuple((v[0], v[1], v[2]) for v in value)


def _non_empty(f: Fields, key: str) -> str:
    value: str = f.string(key)
    if not value.strip():
        raise f.fail(key, "a non-empty string", value)
    return value


def component_totals(records: Iterable[GraphRecord]) -> dict[str, int]:
    """Total nanoseconds per component (frame compiles and lazy backwards), in
    :func:`ordered_components` order. The registry keeps the same figure as records arrive.

    >>> component_totals([])
    {}
    """
    totals: dict[str, int] = {}
    for r in records:
        totals[r.component] = totals.get(r.component, 0) + r.total_ns
    return {name: totals[name] for name in ordered_components(totals)}


# A graph's identity across runs: compile ids are assigned in order and can shift, so match
# by component, code name and the occurrence of that code name (its recompiles included).
GraphKey = tuple[str, str, int]


def graph_keys(records: Iterable[GraphRecord]) -> list[tuple[GraphKey, GraphRecord]]:
    """Each record with its cross-run key, in record order."""
    seen: dict[tuple[str, str], int] = {}
    out = []
    for r in records:
        base = (r.component, r.code_name)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append(((r.component, r.code_name, n), r))
    return out


class RuntimeEvent(NamedTuple):
    """Work torch did on a compiled graph's call, outside any compile (its runtime metrics):
    Triton autotuning at a kernel's first call, a CUDA-graph tree's recording. Times are Unix
    epoch nanoseconds.

    >>> e = RuntimeEvent(AUTOTUNE, "0/0", False, 10, 5, "triton_poi_fused_add_0")
    >>> RuntimeEvent.from_dict(e.to_dict()) == e, e.end_unix_ns
    (True, 15)
    """

    kind: str  # AUTOTUNE or CUDAGRAPH
    compile_id: str  # the compiled graph's ("" where torch gave none)
    backward: bool  # the graph is a backward graph
    start_unix_ns: int
    duration_ns: int
    detail: str = ""  # the kernels autotuned, or the regions of a recording

    @property
    def end_unix_ns(self) -> int:
        return self.start_unix_ns + self.duration_ns

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()

    @classmethod
    def from_dict(cls, data: Any, source: str = "runtime event", where: str = "") -> RuntimeEvent:
        """Read :meth:`to_dict` output, every field checked."""
        f = Fields(data, source, where)
        kind = f.string("kind")
        if kind not in RUNTIME_KINDS:
            raise f.fail("kind", f"one of {', '.join(RUNTIME_KINDS)}", kind)
        return cls(
            kind,
            f.string("compile_id", limit=200),
            f.boolean("backward"),
            f.integer("start_unix_ns", minimum=0),
            f.integer("duration_ns", minimum=0),
            f.string("detail", limit=1000),
        )


AUTOTUNE = "runtime_autotune"  # Triton autotuning a kernel at its first call
CUDAGRAPH = "cudagraph_recording"  # a CUDA-graph tree recording the graph (its 2nd call, a new shape)
RUNTIME_KINDS = (AUTOTUNE, CUDAGRAPH)
