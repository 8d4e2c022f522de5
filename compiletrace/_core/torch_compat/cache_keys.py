"""Torch's compile-cache keys and the parts they are made of, caught as torch computes them,
and the facts of the process that decide whether a cache applies (where the caches are,
how that place was chosen, the environment torch reads into its keys).

Each lookup a backend call makes is assembled in one thread-local collector
(:func:`collect_cache_lookups`) from what torch hands these places; outside a collector
every hook passes straight through:

- the event logger's instant events ``fx_graph_cache_*`` / ``autograd_cache_*`` (teed in
  ``event_logger``): each direct lookup's outcome, key, torch's detailed status, a
  bypass's reason, a guard that failed, what a hit saved, and the FX-graph key's parts;
- ``FxGraphCache.load_with_key``: every FX-graph lookup that has a key, the ones an
  AOTAutograd hit makes with the parts stored in its entry included (those log no instant
  event), whether it is a backward, and the generated code's hash of what it loaded;
- ``FxGraphCache._save_graph``: the generated code's hash of what a miss built;
- ``autograd_cache._get_debug_lines_for_cache_key``: the AOTAutograd key's parts, which
  torch computes only when that module's logger is at DEBUG (turning it on would print
  some 650 lines to the program's stderr). Torch's own return value is passed on
  unchanged; the parts are computed for compiletrace only when no entry exists for the key
  on local disk (a miss for sure, followed by a compile of seconds) and no remote cache is
  on, so a hit costs a directory listing and nothing more.

The parts are bounded and split into the graph's and the process's as the collector
closes (:mod:`compiletrace._data.cache_keys`); the process's go to one store per process
(:data:`CONFIG_SETS`), from which a run keeps the sets its records name.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import inspect
import os
import platform
import sys
import threading
import types
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from compiletrace._data.cache_keys import (
    MAX_CACHE_DIRS,
    MAX_CONFIG_SETS,
    MAX_ENV,
    CacheFacts,
    ConfigSets,
    RunCacheKeys,
    process_env,
    read_vllm_factors,
    split_key_lines,
)
from compiletrace._data.cache_store import autotune_choices
from compiletrace._data.records import CacheLookup, GraphRecord
from compiletrace._data.torch_text import CACHE_EVENT_OUTCOMES, CACHE_EVENT_TIERS, PROCESS_KEY_ATTRIBUTES
from compiletrace._io.state import warn_once
from compiletrace._io.text import shorten

__all__ = [
    "CONFIG_SETS",
    "CacheLookups",
    "cache_key_hooks_available",
    "collect_cache_lookups",
    "install_cache_key_hooks",
    "note_cache_event",
    "run_cache_keys",
]

MAX_PENDING = 64  # lookups one backend call keeps (a frame has a handful)
MAX_DETAIL_CHARS = 200

# The process parts of every key this process computed, each distinct set once.
CONFIG_SETS = ConfigSets()
# The directories torch's caches were under at this process's lookups, in order.
_cache_dirs: list[str] = []


@dataclass
class _Pending:
    """One lookup as its pieces arrive (the hooks, then torch's instant event)."""

    tier: str
    key: str
    outcome: str = ""
    status: str = ""
    detail: str = ""
    role: str = ""
    source: str = "lookup"
    lines: Sequence[Any] | None = None  # torch's key lines, parsed when the collector closes
    code_hash: str = ""
    note: str = ""
    saved_ns: int = 0
    announced: bool = False  # its instant event has been seen


class CacheLookups:
    """The cache lookups torch makes on one thread inside :func:`collect_cache_lookups`;
    :meth:`records` assembles them."""

    def __init__(self, parts: bool = True) -> None:
        self.parts = parts  # compute and keep the keys' parts (else outcomes and keys only)
        self.pending: list[_Pending] = []

    def _latest(self, tier: str, key: str, *, unannounced: bool = False) -> _Pending | None:
        for pending in reversed(self.pending):
            if pending.tier == tier and pending.key == key and not (unannounced and pending.announced):
                return pending
        return None

    def _add(self, pending: _Pending) -> _Pending | None:
        if len(self.pending) >= MAX_PENDING:
            return None
        self.pending.append(pending)
        return pending

    def records(self) -> list[CacheLookup]:
        """Each lookup as a record, its key's parts bounded and split (the process's into
        :data:`CONFIG_SETS`); those no outcome was seen for (a key computed for a lookup
        that never ran) are left out."""
        out = []
        for p in self.pending:
            if not p.outcome:
                continue
            graph_parts: tuple[Any, ...] = ()
            config_set = ""
            note = p.note
            if p.lines and self.parts:
                try:
                    graph_parts, process, _ = split_key_lines(p.lines)
                    config_set = CONFIG_SETS.add(process)
                except Exception as exc:  # never break a compile over its description
                    warn_once(f"reading a cache key's parts failed and was skipped: {exc!r}")
                    note = "unreadable"
            elif not note and self.parts and p.outcome != "bypass":
                note = "torch gave none"
            out.append(
                CacheLookup(
                    p.tier,
                    p.outcome,
                    p.key,
                    p.detail,
                    p.status,
                    p.role,
                    p.source,
                    graph_parts,
                    config_set,
                    p.code_hash,
                    note,
                    p.saved_ns,
                )
            )
        return out


class _Sink(threading.local):
    lookups: CacheLookups | None = None


_sink = _Sink()


@contextmanager
def collect_cache_lookups(parts: bool = True) -> Iterator[CacheLookups]:
    """Collect the cache lookups torch makes on this thread inside the ``with`` block
    (``parts``: with their keys' parts, where the hooks are in: installed here if an
    import of torch's in progress kept them out when the tracker was made)."""
    if parts and _hooks_installed is None:
        install_cache_key_hooks()
    previous = _sink.lookups
    lookups = CacheLookups(parts)
    _sink.lookups = lookups
    try:
        yield lookups
    finally:
        _sink.lookups = previous


def _detail(text: Any) -> str:
    return shorten(str(text), MAX_DETAIL_CHARS) if text else ""


def _ns(value: Any, scale: int = 1) -> int:
    return int(value * scale) if isinstance(value, (int, float)) and value > 0 else 0


def note_cache_event(name: str, metadata: Any) -> None:
    """One of torch's instant events: a lookup's outcome (``fx_graph_cache_hit``, ...),
    merged into the lookup the hooks saw with the same key, if any."""
    lookups = _sink.lookups
    if lookups is None:
        return
    try:
        for prefix, tier in CACHE_EVENT_TIERS:
            outcome = name[len(prefix) :]
            if not name.startswith(prefix) or outcome not in CACHE_EVENT_OUTCOMES:
                continue
            info = metadata if isinstance(metadata, Mapping) else {}
            key = str(info.get("key") or "")
            pending = lookups._latest(tier, key, unannounced=True) if key else None
            if pending is None:
                pending = lookups._add(_Pending(tier, key))
                if pending is None:
                    return
            pending.announced = True
            pending.source = "lookup"
            pending.outcome = outcome
            pending.status = str(info.get("cache_status_detailed") or pending.status or "")
            pending.detail = _detail(
                info.get("cache_bypass_reason") or info.get("cache_status_guard_expr") or pending.detail
            )
            saved = _ns(info.get("time_saved_ns")) or _ns(info.get("time_saved_ms"), 1_000_000)
            pending.saved_ns = saved or pending.saved_ns
            components = info.get("components")
            if pending.lines is None and isinstance(components, list) and components and lookups.parts:
                pending.lines = components
            return
    except Exception as exc:  # measuring never breaks a compile
        warn_once(f"reading a cache lookup failed and was skipped: {exc!r}")


# -- the hooks ----------------------------------------------------------------------------------


def _note_cache_dir() -> None:
    directory = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if directory and directory not in _cache_dirs and len(_cache_dirs) < MAX_CACHE_DIRS:
        _cache_dirs.append(directory)


def _fx_loaded(key: Any, lines: Any, is_backward: Any, result: Any) -> None:
    lookups = _sink.lookups
    if lookups is None:
        return
    try:
        graph, info = result
        info = info if isinstance(info, Mapping) else {}
        pending = lookups._add(_Pending("fx_graph", str(key), source="stored"))
        if pending is None:
            return
        pending.outcome = str(info.get("cache_state") or "")
        pending.status = str(info.get("cache_status_detailed") or "")
        pending.detail = _detail(info.get("cache_status_guard_expr"))
        pending.role = "backward" if is_backward else "forward"
        pending.saved_ns = _ns(info.get("time_saved_ns"))
        if lookups.parts and isinstance(lines, list):
            pending.lines = lines
        if graph is not None:
            pending.code_hash = _detail(getattr(graph, "cache_key", "") or "")
        _note_cache_dir()
    except Exception as exc:
        warn_once(f"reading an FX-graph cache lookup failed and was skipped: {exc!r}")


def _fx_saved(key: Any, compiled_graph: Any) -> None:
    lookups = _sink.lookups
    if lookups is None:
        return
    try:
        pending = lookups._latest("fx_graph", str(key))
        if pending is not None:
            pending.code_hash = _detail(getattr(compiled_graph, "cache_key", "") or "")
    except Exception as exc:
        warn_once(f"reading an FX-graph cache entry failed and was skipped: {exc!r}")


def _has_local_entry(cache: Any, key: str) -> bool:
    """Whether the AOTAutograd cache has an entry for ``key`` on local disk (a listing)."""
    try:
        with os.scandir(cache._get_tmp_dir_for_key(key)) as entries:
            return any(not e.name.startswith(".") for e in entries)
    except OSError:
        return False


def _aot_key_computed(module: Any, pickler: Any, details: Any, key: Any, lines: Any) -> None:
    lookups = _sink.lookups
    if lookups is None:
        return
    pending = lookups._add(_Pending("aot_autograd", str(key)))
    if pending is None or not lookups.parts:
        return
    try:
        _note_cache_dir()
        if lines:
            pending.lines = lines
        elif module.should_use_remote_autograd_cache():
            pending.note = "not computed: a remote cache is on"
        elif _has_local_entry(module.AOTAutogradCache, str(key)):
            pending.note = "not computed: an entry existed for the key"
        else:  # a sure miss: the parts say why (those only this key holds; see _AOT_LEFT_OUT)
            kept = {k: v for k, v in vars(details).items() if k not in _AOT_LEFT_OUT}
            pending.lines = pickler.debug_lines(types.SimpleNamespace(**kept))
    except Exception as exc:
        pending.note = "unreadable"
        warn_once(f"computing an AOTAutograd cache key's parts failed and was skipped: {exc!r}")


# What the AOTAutograd key's parts leave out: the process's parts the FX graph key holds too
# (the config, torch's build: a lookup of the FX graph key follows every AOTAutograd miss,
# and torch computes that key's parts anyway), and the Dynamo graph's code (the FX graph
# key's code tells the graph; hashing this one again cost more than the rest together).
# What is left, the inputs, the options and what only this key holds (functorch's config,
# grad mode, autocast), costs about a fifth of the whole (benchmarks/bench_cache_keys.py).
_AOT_LEFT_OUT = (PROCESS_KEY_ATTRIBUTES - {"autograd_config", "deterministic_algorithms"}) | {"gm"}

_HOOKED = "_compiletrace_hooked"
# None: not yet (torch's modules were still importing); True: in; False: this torch lacks them.
_hooks_installed: bool | None = None


def _static(owner: Any, name: str) -> Any:
    """``owner.name`` as defined (a staticmethod's function), or None."""
    found = inspect.getattr_static(owner, name, None)
    return found.__func__ if isinstance(found, staticmethod) else None


def torch_importing() -> bool:
    """Whether a module of torch's is still being imported in this process (a tracker made
    by the job's bootstrap inside such an import, ``torch._inductor.standalone_compile`` say):
    torch's compile modules cannot be imported until it ends."""
    return any(
        getattr(getattr(module, "__spec__", None), "_initializing", False)
        for name, module in list(sys.modules.items())
        if name == "torch" or name.startswith("torch.")
    )


def install_cache_key_hooks() -> bool:
    """Catch each cache key's parts as torch computes them (see the module's docstring).
    Returns False, with one warning, when this torch lacks what they need: records then
    carry keys and outcomes only."""
    global _hooks_installed
    try:
        import torch._functorch._aot_autograd.autograd_cache as aot_cache
        from torch._inductor.codecache import FxGraphCache
    except ImportError:
        if torch_importing():
            return False  # the tracker was made mid-import: installed at the first lookup
        aot_cache = FxGraphCache = None  # type: ignore[assignment]
    if aot_cache is None or not cache_key_hooks_available():
        if torch_importing():
            return False  # a module they import is mid-import: installed at the first lookup
        _hooks_installed = False
        warn_once(
            "this torch does not hand its cache keys' parts where compiletrace reads them: records "
            "keep each key and outcome, and 'why' compares keys only",
            key="cache_key_hooks",
        )
        return False
    load = _static(FxGraphCache, "load_with_key")
    if getattr(load, _HOOKED, False):
        _hooks_installed = True
        return True
    save = _static(FxGraphCache, "_save_graph")
    debug_lines = aot_cache._get_debug_lines_for_cache_key
    load_signature = inspect.signature(load)

    # functools.wraps: the probes read torch's signatures through the hooks (__wrapped__).
    @functools.wraps(load)
    def load_with_key(*args: Any, **kwargs: Any) -> Any:
        result = load(*args, **kwargs)
        if _sink.lookups is not None:
            try:
                bound = load_signature.bind(*args, **kwargs).arguments
            except TypeError:
                bound = {}
            _fx_loaded(bound.get("key"), bound.get("debug_lines"), bound.get("is_backward"), result)
        return result

    @functools.wraps(save)
    def _save_graph(key: Any, compiled_graph: Any, *args: Any, **kwargs: Any) -> Any:
        _fx_saved(key, compiled_graph)
        return save(key, compiled_graph, *args, **kwargs)

    @functools.wraps(debug_lines)
    def _get_debug_lines_for_cache_key(pickler: Any, details: Any, key: Any) -> Any:
        lines = debug_lines(pickler, details, key)
        if _sink.lookups is not None:
            _aot_key_computed(aot_cache, pickler, details, key, lines)
        return lines

    for hook in (load_with_key, _save_graph, _get_debug_lines_for_cache_key):
        setattr(hook, _HOOKED, True)
    FxGraphCache.load_with_key = staticmethod(load_with_key)  # type: ignore[method-assign,assignment]
    FxGraphCache._save_graph = staticmethod(_save_graph)  # type: ignore[method-assign,assignment]
    aot_cache._get_debug_lines_for_cache_key = _get_debug_lines_for_cache_key
    _hooks_installed = True
    return True


def cache_key_hooks_available() -> bool:
    """Whether this torch computes its cache keys where the hooks catch them (a probe of
    the capability table)."""
    try:
        import torch._functorch._aot_autograd.autograd_cache as aot_cache
        from torch._inductor.codecache import FxGraphCache

        load = _static(FxGraphCache, "load_with_key")
        save = _static(FxGraphCache, "_save_graph")
        if load is None or save is None:
            return False
        wanted = {"key", "debug_lines", "is_backward"}
        if not wanted <= set(inspect.signature(load).parameters):
            return False
        params = list(inspect.signature(aot_cache._get_debug_lines_for_cache_key).parameters)
        return (
            params[:3] == ["pickler", "details", "key"]
            and callable(aot_cache.should_use_remote_autograd_cache)
            and callable(aot_cache.AOTAutogradCache._get_tmp_dir_for_key)
        )
    except Exception:
        return False


# -- the process's facts --------------------------------------------------------------------------


def _env_names(node: ast.AST) -> list[str]:
    """The environment variables an expression of a config module reads."""
    names = []
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            called = ast.unparse(n.func)
            if called.endswith(("environ.get", "getenv", "get_tristate_env")) and n.args:
                first = n.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    names.append(first.value)
            for kw in n.keywords:
                if kw.arg in ("env_name_force", "env_name_default"):
                    values = kw.value.elts if isinstance(kw.value, (ast.List, ast.Tuple)) else [kw.value]
                    names += [
                        v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)
                    ]
        elif (
            isinstance(n, ast.Subscript)
            and ast.unparse(n.value).endswith("environ")
            and isinstance(n.slice, ast.Constant)
            and isinstance(n.slice.value, str)
        ):
            names.append(n.slice.value)
    return names


def _config_env(module: Any, part: str) -> dict[str, list[str]]:
    """Environment variable -> the key parts (``part[name]``) a config module sets from it,
    read from the module's source."""
    found: dict[str, list[str]] = {}
    tree = ast.parse(inspect.getsource(module))

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for statement in body:
            if isinstance(statement, ast.ClassDef):
                walk(statement.body, f"{prefix}{statement.name}.")
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        for env in _env_names(statement.value):
                            found.setdefault(env, []).append(f"{part}[{prefix}{target.id}]")

    walk(tree.body, "")
    return found


@functools.cache
def _env_to_config() -> dict[str, tuple[str, ...]]:
    """Environment variable -> the key parts torch sets from it (inductor's config in the
    FX-graph key, functorch's in the AOTAutograd key's ``autograd_config``), once per process."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    merged: dict[str, list[str]] = {}
    for module, part in ((inductor_config, "inductor_config"), (functorch_config, "autograd_config")):
        for env, names in _config_env(module, part).items():
            merged.setdefault(env, []).extend(names)
    return {env: tuple(dict.fromkeys(names)) for env, names in merged.items()}


def _triton_version() -> str:
    for name in ("triton", "pytorch-triton", "pytorch-triton-rocm", "triton-xpu"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


def cache_facts() -> CacheFacts:
    """This process's facts that decide whether a compile cache applies (read when a run
    is saved, never during a compile). Returns what could be read, with one warning for the
    rest."""
    import torch

    env = process_env(os.environ)
    facts: dict[str, Any] = {
        "torch": str(torch.__version__),
        "python": platform.python_version(),
        "triton": _triton_version(),
        "cuda": str(torch.version.cuda or getattr(torch.version, "hip", None) or ""),
        "num_threads": torch.get_num_threads(),
        "env": env,
        "triton_cache_dir": os.environ.get("TRITON_CACHE_DIR", ""),
    }
    try:
        facts["device"] = torch.cuda.get_device_name() if torch.cuda.is_initialized() else "cpu"
    except Exception:
        facts["device"] = ""
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir

        default = os.path.abspath(default_cache_dir())
        dirs = list(_cache_dirs)
        current = dirs[0] if dirs else os.environ.get("TORCHINDUCTOR_CACHE_DIR") or default
        facts["default_cache_dir"] = default
        facts["cache_dir"] = current
        facts["cache_dirs"] = tuple(dirs or [current])
        # torch writes the directory it chose back into TORCHINDUCTOR_CACHE_DIR: the
        # variable naming the default is torch's own doing.
        chosen_by_default = os.path.abspath(current) == default
        facts["cache_dir_from"] = "default" if chosen_by_default else "TORCHINDUCTOR_CACHE_DIR"
        facts["vllm"] = read_vllm_factors(current)
        facts["autotune"] = autotune_choices(current)
    except Exception as exc:
        warn_once(f"cannot tell where torch keeps its compile caches ({exc!r})", key="cache_facts_dir")
    try:
        import torch._functorch.config as functorch_config

        facts["functorch_config"] = {
            name: shorten(repr(value), 80)
            for name, value in sorted(functorch_config.get_config_copy().items())
            if not name.startswith("_") and name != "TYPE_CHECKING"
        }
        mapping = _env_to_config()
        facts["env_to_config"] = {name: mapping[name] for name in env if name in mapping}
    except Exception as exc:
        warn_once(f"cannot read which environment variables torch keys ({exc!r})", key="cache_facts_env")
    if len(facts.get("functorch_config", {})) > MAX_ENV:
        facts["functorch_config"] = dict(list(facts["functorch_config"].items())[:MAX_ENV])
    return CacheFacts(**facts)


def run_cache_keys(records: Sequence[GraphRecord]) -> RunCacheKeys | None:
    """What a run keeps of its records' cache keys, as its meta's ``cache_keys``: the
    config sets they name (the first :data:`MAX_CONFIG_SETS`), and this process's facts.
    None, with one warning, when they cannot be read (the run is saved without them)."""
    try:
        ids = list(dict.fromkeys(c.config_set for r in records for c in r.cache_lookups if c.config_set))
        sets = CONFIG_SETS.snapshot(ids[:MAX_CONFIG_SETS])
        return RunCacheKeys(sets, cache_facts())
    except Exception as exc:  # a run is saved whatever its cache keys' facts
        warn_once(f"reading the process's cache facts failed; the run is saved without them: {exc!r}")
        return None
