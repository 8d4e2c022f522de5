"""What a compile cache's key is made of, as small, bounded data: torch's parts of each key
(:class:`KeyPart`), split into the parts of one graph (kept with its cache lookup, a
:class:`~compiletrace._data.records.CacheLookup`) and the parts of the whole process (kept
once per run, in a config set), and the facts of the process that decide whether a cache
can be reused at all (:class:`CacheFacts`: torch's build, the cache directory and how it
was chosen, the environment torch reads into its keys, vLLM's cache-key factors).

Torch describes a key one part a line, ``[<hash>] <name>: <value>`` (the names and the
line's format are torch's text: :mod:`compiletrace._data.torch_text`). A part is kept as
its name, the start of torch's hash (what two keys are compared by) and a short value (what
a person reads): a tensor's metadata as ``float32[4,16] stride(16,1) cpu``, a graph's code
as its line count, bytes as ``<bytes>``.

>>> graph, process, cut = split_key_lines([
...     "[cev5uo2jlwdhw2uyzcm7vr6cl23azjfw437f5r5lskm7spucos6] inductor_config[max_autotune]: True",
...     "[dombconxuz5mfhfib7x7gu3g26hjb5olwk4yccdncdz6hdp4jzh] example_inputs[0]: TensorMetadata("
...     "dtype=torch.float32, shape=torch.Size([4, 16]), stride=(16, 1), device=device(type='cpu'), "
...     "layout=torch.strided, requires_grad=False)",
... ])
>>> graph
(KeyPart(name='example_inputs[0]', hash='dombconxuz5mfhfi', value='float32[4,16] stride(16,1) cpu'),)
>>> process
(KeyPart(name='inductor_config[max_autotune]', hash='cev5uo2jlwdhw2uy', value='True'),)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from compiletrace._data.torch_text import KEY_PART_LINE, PROCESS_KEY_ATTRIBUTES, TENSOR_METADATA
from compiletrace._io.envelope import Fields, parse_json
from compiletrace._io.errors import RunFileError
from compiletrace._io.inputs import open_input
from compiletrace._io.text import shorten

__all__ = [
    "CONFIG_SET_IDS",
    "MAX_CONFIG_SETS",
    "CacheFacts",
    "ConfigSets",
    "KeyPart",
    "RunCacheKeys",
    "VllmFactors",
    "config_set_id",
    "key_part",
    "parts_from_json",
    "parts_to_json",
    "process_env",
    "read_vllm_factors",
    "split_key_lines",
]

HASH_CHARS = 16  # of torch's 51-character part hash: 80 bits, plenty to tell two values apart
MAX_VALUE_CHARS = 80  # a part's shown value
MAX_INPUT_PARTS = 256  # example_inputs[i] kept per lookup; the rest folded into one part
MAX_GRAPH_PARTS = 64  # other parts of one graph kept per lookup
MAX_PROCESS_PARTS = 4096  # parts of one config set (torch 2.13 has about 610)
MAX_CONFIG_SETS = 8  # config sets one run keeps (one process has one, unless its config changed)
MAX_ENV = 256  # environment variables a run keeps
MAX_ENV_CHARS = 200  # ... and each one's value
MAX_FACT_CHARS = 1000  # a path or a version
MAX_CACHE_DIRS = 16  # distinct cache directories one process's lookups used
_MEMO_LIMIT = 16384  # lines whose part is remembered (the process's parts repeat per lookup)
_MEMO_LINE_CHARS = 512  # ... each at most this long (a graph's code is one long line: never twice)

CONFIG_SET_IDS = 16  # hex characters of a config set's id


class KeyPart(NamedTuple):
    """One part of a cache key: torch's name for it, the start of torch's hash of it, and
    its value shortened for reading. Two keys are compared part by part, by ``hash``."""

    name: str  # "inductor_config[fallback_random]", "example_inputs[2]", "gm", "torch_version"
    hash: str  # the first HASH_CHARS characters of torch's hash of the part
    value: str  # what a person reads: "True", "float32[4,16] stride(16,1) cpu", "<graph code, 13 lines>"

    @property
    def attribute(self) -> str:
        """The key's attribute the part belongs to (``inductor_config`` of
        ``inductor_config[fallback_random]``).

        >>> KeyPart("fx_kwargs[cudagraphs]", "x", "y").attribute
        'fx_kwargs'
        """
        return self.name.partition("[")[0]


_TENSOR_DEFAULTS = frozenset({("layout", "torch.strided"), ("memory_format", "torch.contiguous_format")})
_TENSOR_FLAG = re.compile(r"(\w+)=([^,()]+(?:\([^()]*\))?)")


def _tensor_value(found: re.Match[str]) -> str:
    dtype, sizes, strides, device, index, rest = found.groups()
    text = f"{dtype}[{sizes.replace(' ', '')}] stride({strides.replace(' ', '')}) {device}"
    if index is not None:
        text += f":{index}"
    extras = []
    for name, value in _TENSOR_FLAG.findall(rest or ""):
        value = value.strip()
        if value == "True" and name != "is_coalesced":
            extras.append(name)
        elif name == "storage_offset" and value not in ("0", "None"):
            extras.append(f"offset={value}")
        elif (
            (name, value) not in _TENSOR_DEFAULTS and name in ("layout", "memory_format") and value != "None"
        ):
            extras.append(value.removeprefix("torch."))
    return " ".join([text, *extras])


def shown_value(attribute: str, value: str) -> str:
    """A part's value as a person reads it: a tensor's metadata compact, the graph's code
    as its size, bytes as ``<bytes>``, the rest cut to :data:`MAX_VALUE_CHARS`.

    >>> shown_value("torch_version", "\\x10\\ufffdM")
    '<bytes>'
    >>> shown_value("gm", "<lambda>()\\n\\ndef forward(self, x):\\n    return x")
    '<graph code, 4 lines>'
    """
    if attribute == "gm":
        return f"<graph code, {value.count(chr(10)) + 1} lines>"
    tensor = TENSOR_METADATA.match(value)
    if tensor is not None:
        return _tensor_value(tensor)
    if "\ufffd" in value or not value.replace("\n", " ").isprintable():
        return "<bytes>"
    head = value.split("\n", 1)[0]
    return shorten(head + (" …" if head != value else ""), MAX_VALUE_CHARS)


_memo: dict[str, KeyPart | None] = {}


def key_part(line: str) -> KeyPart | None:
    """One of torch's key lines as a :class:`KeyPart`, or None for a line that is not one.

    >>> key_part("[pr5nr4a7dthirgd2ljo3d2xakc63ywxugusu6mkmr6gmpeliyib] cpp_runtime_thread_count: 2")
    KeyPart(name='cpp_runtime_thread_count', hash='pr5nr4a7dthirgd2', value='2')
    >>> key_part("not a key line") is None
    True
    """
    if not isinstance(line, str):
        return None
    found = _memo.get(line)
    if found is not None or line in _memo:
        return found
    matched = KEY_PART_LINE.match(line)
    part = None
    if matched is not None:
        digest, attribute, index, value = matched.groups()
        name = attribute if index is None else f"{attribute}[{shorten(index, MAX_VALUE_CHARS)}]"
        part = KeyPart(name, digest[:HASH_CHARS], shown_value(attribute, value))
    if len(line) <= _MEMO_LINE_CHARS:
        if len(_memo) >= _MEMO_LIMIT:
            _memo.clear()
        _memo[line] = part
    return part


def _fold(parts: Sequence[KeyPart], name: str) -> KeyPart:
    digest = hashlib.sha256("".join(p.hash for p in parts).encode()).hexdigest()[:HASH_CHARS]
    return KeyPart(name, digest, f"<{len(parts)} more>")


def split_key_lines(lines: Iterable[Any]) -> tuple[tuple[KeyPart, ...], tuple[KeyPart, ...], int]:
    """Torch's key lines as (the graph's parts, the process's parts, how many lines were
    not parts or were cut). A graph keeps at most :data:`MAX_INPUT_PARTS` inputs (the rest
    folded into one part, ``example_inputs[256:]``, whose hash is of all of theirs) and
    :data:`MAX_GRAPH_PARTS` other parts; the process at most :data:`MAX_PROCESS_PARTS`."""
    graph: list[KeyPart] = []
    inputs: list[KeyPart] = []
    folded: list[KeyPart] = []
    process: list[KeyPart] = []
    cut = 0
    for line in lines:
        part = key_part(line)
        if part is None:
            cut += 1
            continue
        attribute = part.attribute
        if attribute in PROCESS_KEY_ATTRIBUTES:
            if len(process) < MAX_PROCESS_PARTS:
                process.append(part)
            else:
                cut += 1
        elif attribute == "example_inputs":
            (inputs if len(inputs) < MAX_INPUT_PARTS else folded).append(part)
        elif len(graph) < MAX_GRAPH_PARTS or part.name == "gm":  # the graph's code: what it is
            graph.append(part)
        else:
            cut += 1
    if folded:
        inputs.append(_fold(folded, f"example_inputs[{MAX_INPUT_PARTS}:]"))
    # The inputs where torch lists them: after the graph's code.
    head = [p for p in graph if p.name == "gm"]
    rest = [p for p in graph if p.name != "gm"]
    return (*head, *inputs, *rest), tuple(process), cut


def config_set_id(parts: Iterable[KeyPart]) -> str:
    """The id of a set of process parts: a digest of its names and hashes (not its shown
    values, which two releases may write differently).

    >>> config_set_id([KeyPart("a", "h1", "1")]) == config_set_id([KeyPart("a", "h1", "one")])
    True
    """
    text = "\n".join(sorted(f"{p.name}={p.hash}" for p in parts))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:CONFIG_SET_IDS]


class ConfigSets:
    """The process parts of the keys a process computed, each distinct set once, by id
    (one set per process unless its config changed between compiles). Thread-safe.

    >>> sets = ConfigSets()
    >>> sid = sets.add((KeyPart("torch_version", "abc", "<bytes>"),))
    >>> sets.snapshot([sid])[sid]["torch_version"]
    KeyPart(name='torch_version', hash='abc', value='<bytes>')
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sets: dict[str, dict[str, KeyPart]] = {}
        self._ids: dict[tuple[KeyPart, ...], str] = {}  # the parts seen, and their set's id

    def add(self, parts: tuple[KeyPart, ...], limit: int | None = None) -> str:
        """Keep ``parts`` (if new, and fewer than ``limit`` sets are kept) and return their
        set's id ("" for no parts)."""
        if not parts:
            return ""
        sid = self._ids.get(parts)  # the parts are the memoised KeyParts: their hashes are cached
        if sid is not None:
            return sid
        sid = config_set_id(parts)
        with self._lock:
            if sid not in self._sets and (limit is None or len(self._sets) < limit):
                self._sets[sid] = {p.name: p for p in parts}
            if len(self._ids) < 4 * MAX_CONFIG_SETS:
                self._ids[parts] = sid
        return sid

    def snapshot(self, ids: Iterable[str] | None = None) -> dict[str, dict[str, KeyPart]]:
        """The sets named by ``ids`` (every set when None), copied."""
        with self._lock:
            wanted = self._sets if ids is None else {i: self._sets[i] for i in ids if i in self._sets}
            return {sid: dict(parts) for sid, parts in wanted.items()}

    def clear(self) -> None:
        with self._lock:
            self._sets.clear()
            self._ids.clear()


def parts_to_json(parts: Iterable[KeyPart]) -> list[list[str]]:
    """The compact form saved in run files: ``[[name, hash, value], ...]``."""
    return [[p.name, p.hash, p.value] for p in parts]


def parts_from_json(value: Any, f: Fields, key: str) -> tuple[KeyPart, ...]:
    """Read :func:`parts_to_json`'s form back from field ``key`` of ``f``, checking it."""
    limit = MAX_INPUT_PARTS + MAX_GRAPH_PARTS + 2
    if not isinstance(value, list) or len(value) > max(limit, MAX_PROCESS_PARTS):
        raise f.fail(key, f"a list of at most {max(limit, MAX_PROCESS_PARTS)} [name, hash, value]", value)
    parts = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 3 and all(isinstance(v, str) for v in item)):
            raise f.fail(key, "a list of [name, hash, value] strings", item)
        name, digest, shown = item
        if len(name) > MAX_FACT_CHARS or len(digest) > 64 or len(shown) > MAX_FACT_CHARS:
            raise f.fail(key, "parts of short strings", item)
        parts.append(KeyPart(name, digest, shown))
    return tuple(parts)


# -- the facts of a process that decide cache reuse ----------------------------------------

# The environment variables a run keeps: those torch, Triton and vLLM read into their keys
# or their cache directories, and those that choose the default cache directory. Values of
# names that look like secrets are never kept.
_ENV_PREFIXES = ("TORCH", "INDUCTOR", "AOT_INDUCTOR", "AOTINDUCTOR", "TRITON", "VLLM_", "PYTORCH_")
_ENV_NAMES = frozenset(
    {
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "CI",
        "CXX",
        "CC",
        "TMPDIR",
        "TEMP",
        "TMP",
        "USER",
        "LOGNAME",
        "USERNAME",
        "HOME",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "CUDA_VISIBLE_DEVICES",
        "FAKE_ALLOW_META",
        "AOT_PARTITIONER_DEBUG",
        "PARTITIONER_MEMORY_BUDGET_PARETO",
        "PARTITIONER_MEMORY_BUDGET_PARETO_DIR",
        "LOG_TLPARSE",
    }
)
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
REDACTED = "<redacted>"


def _kept_env_name(name: str) -> bool:
    return name in _ENV_NAMES or name.startswith(_ENV_PREFIXES) or name.startswith("ENABLE_")


def process_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` that decide a compile cache's key or directory (torch's,
    Triton's, vLLM's, the thread counts, the temporary directory and the user's name), sorted,
    values cut to :data:`MAX_ENV_CHARS`, those of secret-looking names redacted.

    >>> process_env({"TORCHINDUCTOR_MAX_AUTOTUNE": "1", "PATH": "/bin", "VLLM_API_KEY": "s3cret"})
    {'TORCHINDUCTOR_MAX_AUTOTUNE': '1', 'VLLM_API_KEY': '<redacted>'}
    """
    kept: dict[str, str] = {}
    for name in sorted(environ):
        if len(kept) >= MAX_ENV:
            break
        if _kept_env_name(name) and len(name) <= MAX_ENV_CHARS:
            value = str(environ[name])
            kept[name] = REDACTED if _SECRET.search(name) else shorten(value, MAX_ENV_CHARS)
    return kept


@dataclass(frozen=True)
class VllmFactors:
    """vLLM's ``cache_key_factors.json``, written beside the cache it keys (the first run
    of a key writes it): the environment vLLM hashed (raw values), and the digests of its
    config, compiler and code factors, with the config's and the compiler's own entries."""

    path: str  # where it was read
    env: Mapping[str, str] = field(default_factory=dict)
    hashes: Mapping[str, str] = field(default_factory=dict)  # config_hash, compiler_hash, code_hash
    config: Mapping[str, str] = field(default_factory=dict)  # config factors, each as short JSON
    compiler: Mapping[str, str] = field(default_factory=dict)  # compiler factors, each as short JSON

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "env": dict(self.env),
            "hashes": dict(self.hashes),
            "config": dict(self.config),
            "compiler": dict(self.compiler),
        }

    @classmethod
    def from_json(cls, f: Fields) -> VllmFactors:
        return cls(
            f.string("path"),
            _short_strings(f, "env", {}),
            _short_strings(f, "hashes", {}),
            _short_strings(f, "config", {}),
            _short_strings(f, "compiler", {}),
        )


VLLM_FACTORS_FILE = "cache_key_factors.json"
_MAX_VLLM_FACTORS_BYTES = 4 << 20
_VLLM_HASHES = ("config_hash", "compiler_hash", "code_hash")


def _short_json(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return shorten(text, MAX_ENV_CHARS)


def _vllm_section(data: Any) -> dict[str, str]:
    if not isinstance(data, dict):
        return {}
    out = {}
    for name in sorted(data)[:MAX_ENV]:
        if isinstance(name, str) and len(name) <= MAX_ENV_CHARS:
            out[name] = REDACTED if _SECRET.search(name) else _short_json(data[name])
    return out


def _vllm_factors_paths(cache_dir: str) -> list[str]:
    """Where vLLM's factors for a torch cache directory it chose may be: beside it, or in
    a component's directory beside it (vLLM 0.32 keeps torch's cache in
    ``rank_i_j/inductor_cache`` and each component's factors in ``rank_i_j/<prefix>/``)."""
    directory = os.path.abspath(cache_dir)
    parent = os.path.dirname(directory)
    paths = [os.path.join(d, VLLM_FACTORS_FILE) for d in (directory, parent)]
    try:
        with os.scandir(parent) as found:
            prefixes = sorted(
                e.path for e in found if e.is_dir(follow_symlinks=False) and e.path != directory
            )
    except OSError:
        prefixes = []
    return paths + [os.path.join(p, VLLM_FACTORS_FILE) for p in prefixes[:64]]


def read_vllm_factors(cache_dir: str) -> VllmFactors | None:
    """vLLM's ``cache_key_factors.json`` for a torch cache directory vLLM chose (beside
    it, or in a component's directory beside it), read as untrusted JSON (a regular file,
    no link, at most 4 MiB); None where there is none or it is not what vLLM writes.

    >>> read_vllm_factors("/no/such/dir") is None
    True
    """
    for path in _vllm_factors_paths(cache_dir):
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        try:
            with open_input(path, pipes=False, links=False) as source:
                data = parse_json(source.read_all(_MAX_VLLM_FACTORS_BYTES), path)
        except (RunFileError, OSError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("env"), dict):
            return None
        hashes = {k: _short_json(data[k]) for k in _VLLM_HASHES if isinstance(data.get(k), str)}
        return VllmFactors(
            path,
            _vllm_section(data["env"]),
            hashes,
            _vllm_section(data.get("config")),
            _vllm_section(data.get("compiler")),
        )
    return None


def _short_strings(f: Fields, key: str, default: Any) -> dict[str, str]:
    inner = f.obj(key, default)
    if len(inner.data) > MAX_ENV * 4:
        raise f.fail(key, f"an object of at most {MAX_ENV * 4} entries", inner.data)
    out = {}
    for name in inner.data:
        value = inner.string(name)
        if len(name) > MAX_FACT_CHARS or len(value) > MAX_FACT_CHARS:
            raise inner.fail(name, f"a string of at most {MAX_FACT_CHARS} characters", value)
        out[name] = value
    return out


@dataclass(frozen=True)
class CacheFacts:
    """What decides whether a process's compile caches can be reused, besides the keys:
    where the caches are and how that place was chosen, the environment torch reads into
    its keys, and the builds and device the keys hold (as readable versions beside the
    keys' opaque hashes).

    >>> CacheFacts.from_json(Fields(CacheFacts(torch="2.13.0").to_json(), "x")).torch
    '2.13.0'
    """

    torch: str = ""  # torch.__version__
    python: str = ""
    triton: str = ""  # Triton's version ("" without Triton)
    cuda: str = ""  # torch.version.cuda (or hip), "" on a CPU build
    device: str = ""  # the GPU's name where one was in use, else "cpu"
    num_threads: int = 0  # torch.get_num_threads(): the key's cpp_runtime_thread_count on CPU
    cache_dir: str = ""  # the directory torch's caches were under at the first lookup
    cache_dir_from: str = ""  # "TORCHINDUCTOR_CACHE_DIR", or "default" (temporary dir + user name)
    default_cache_dir: str = ""  # where torch would look without TORCHINDUCTOR_CACHE_DIR
    cache_dirs: tuple[str, ...] = ()  # every directory the process's lookups used, in order
    triton_cache_dir: str = ""  # TRITON_CACHE_DIR where set
    env: Mapping[str, str] = field(default_factory=dict)  # process_env() of the process
    env_to_config: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # var -> key parts it set
    functorch_config: Mapping[str, str] = field(default_factory=dict)  # in the AOTAutograd key, opaque there
    vllm: VllmFactors | None = None  # vLLM's cache_key_factors.json, where one keys the cache
    autotune: Mapping[str, str] = field(default_factory=dict)  # kernel's .best_config -> digest of the choice
    # Whether ``env`` is the process's (False where the source keeps no environment: torch's
    # trace): an unknown environment is not an empty one.
    env_known: bool = True

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "torch": self.torch,
            "python": self.python,
            "triton": self.triton,
            "cuda": self.cuda,
            "device": self.device,
            "num_threads": self.num_threads,
            "cache_dir": self.cache_dir,
            "cache_dir_from": self.cache_dir_from,
            "default_cache_dir": self.default_cache_dir,
            "cache_dirs": list(self.cache_dirs),
            "triton_cache_dir": self.triton_cache_dir,
            "env": dict(self.env),
            "env_to_config": {k: list(v) for k, v in self.env_to_config.items()},
            "functorch_config": dict(self.functorch_config),
            "autotune": dict(self.autotune),
        }
        if self.vllm is not None:
            data["vllm"] = self.vllm.to_json()
        if not self.env_known:  # written only where it is news: files stay as they were
            data["env_known"] = False
        return data

    @classmethod
    def from_json(cls, f: Fields) -> CacheFacts:
        def text(key: str) -> str:
            value: str = f.string(key, "")
            if len(value) > MAX_FACT_CHARS:
                raise f.fail(key, f"a string of at most {MAX_FACT_CHARS} characters", value)
            return value

        dirs = f.strings("cache_dirs", [])
        if len(dirs) > MAX_CACHE_DIRS or any(len(d) > MAX_FACT_CHARS for d in dirs):
            raise f.fail("cache_dirs", f"at most {MAX_CACHE_DIRS} paths", dirs)
        mapping = f.obj("env_to_config", {})
        if len(mapping.data) > MAX_ENV:
            raise f.fail("env_to_config", f"at most {MAX_ENV} entries", mapping.data)
        env_to_config = {}
        for name in mapping.data:
            names = mapping.strings(name)
            if len(names) > 16 or any(len(n) > MAX_FACT_CHARS for n in names):
                raise mapping.fail(name, "at most 16 short names", names)
            env_to_config[name] = tuple(names)
        return cls(
            torch=text("torch"),
            python=text("python"),
            triton=text("triton"),
            cuda=text("cuda"),
            device=text("device"),
            num_threads=f.integer("num_threads", 0, minimum=0),
            cache_dir=text("cache_dir"),
            cache_dir_from=text("cache_dir_from"),
            default_cache_dir=text("default_cache_dir"),
            cache_dirs=tuple(dirs),
            triton_cache_dir=text("triton_cache_dir"),
            env=_short_strings(f, "env", {}),
            env_to_config=env_to_config,
            functorch_config=_short_strings(f, "functorch_config", {}),
            autotune=_short_strings(f, "autotune", {}),
            vllm=VllmFactors.from_json(f.obj("vllm")) if f.data.get("vllm") is not None else None,
            env_known=f.boolean("env_known", True),
        )


@dataclass(frozen=True)
class RunCacheKeys:
    """A run's share of its cache keys: the process parts of its lookups, each distinct set
    once by id (the lookups name theirs), and the process's :class:`CacheFacts`. Saved in
    the run's meta (``cache_keys``); runs saved before it have none.

    >>> keys = RunCacheKeys({"c1": {"torch_version": KeyPart("torch_version", "h", "<bytes>")}})
    >>> RunCacheKeys.from_json(keys.to_json(), "run.json") == keys
    True
    """

    config_sets: Mapping[str, Mapping[str, KeyPart]] = field(default_factory=dict)
    facts: CacheFacts = field(default_factory=CacheFacts)

    def to_json(self) -> dict[str, Any]:
        """The saved form. A process's sets are nearly one (the AOTAutograd key's is the FX
        graph key's and two parts more): each set after the first is saved as its
        difference from the first, ``{"like": id, "parts": [...], "without": [names]}``."""
        sets: dict[str, Any] = {}
        first: Mapping[str, KeyPart] | None = None
        first_id = ""
        for sid, parts in self.config_sets.items():
            if first is None:
                first, first_id = parts, sid
                sets[sid] = parts_to_json(parts.values())
                continue
            changed = [p for name, p in parts.items() if first.get(name) != p]
            without = [name for name in first if name not in parts]
            sets[sid] = {"like": first_id, "parts": parts_to_json(changed), "without": without}
        return {"config_sets": sets, "facts": self.facts.to_json()}

    @classmethod
    def from_json(cls, data: Any, source: str, where: str = "meta.cache_keys") -> RunCacheKeys:
        """Read :meth:`to_json`'s form, every field checked; raises
        :class:`~compiletrace.RunFileError` naming the first bad one."""
        f = Fields(data, source, where)
        sets = f.obj("config_sets", {})
        if len(sets.data) > MAX_CONFIG_SETS:
            raise f.fail("config_sets", f"at most {MAX_CONFIG_SETS} sets", sets.data)
        config_sets: dict[str, dict[str, KeyPart]] = {}
        for sid, value in sets.data.items():
            if not (isinstance(sid, str) and len(sid) <= 64):
                raise sets.fail(str(sid)[:64], "named by a short id", sid)
            if isinstance(value, list):
                config_sets[sid] = {p.name: p for p in parts_from_json(value, sets, sid)}
                continue
            delta = sets.obj(sid)
            like = config_sets.get(delta.string("like"))
            if like is None:
                raise delta.fail("like", "the id of a set saved before it", delta.data.get("like"))
            parts = {name: p for name, p in like.items() if name not in set(delta.strings("without", []))}
            parts.update((p.name, p) for p in parts_from_json(delta.data.get("parts", []), delta, "parts"))
            config_sets[sid] = parts
        return cls(config_sets, CacheFacts.from_json(f.obj("facts", {})))
