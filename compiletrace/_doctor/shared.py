"""What the rules share: which user function a record belongs to (its owner), grouping
records, the seconds a group cost, and the evidence every finding quotes the same way
(compile ids, frames, modules, file:line, cache keys).

>>> from compiletrace._data.records import GraphRecord
>>> r = GraphRecord("0/1", "lm", "eager", "torch_dynamo_resume_in_forward_at_9", 4, 0, 2_000_000_000,
...                 2_000_000_000, 0, None, code_filename="m.py", code_firstlineno=9)
>>> owners([r]), seconds([r])
([('lm', 'm.py', 'forward', 9)], 2.0)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

from compiletrace._data.findings import Finding
from compiletrace._data.fixes import Fix, parse_fix
from compiletrace._data.records import NS_PER_S, GraphRecord, root_code_name
from compiletrace._data.torch_text import RESUME_PREFIX
from compiletrace._io.errors import UsageError

__all__ = [
    "AUTO_FIX",
    "GATE_FIX",
    "MAX_EXAMPLES",
    "NO_CLASS_LINE",
    "OTHER_FIXES",
    "UNNAMED",
    "Owner",
    "at",
    "automatic_fix",
    "cache_keys",
    "fix_of",
    "fixes_to_verify",
    "frame",
    "frames_of",
    "group",
    "ids",
    "located",
    "model_location",
    "module_forward",
    "modules",
    "owners",
    "seconds",
    "times",
    "unique",
]

MAX_EXAMPLES = 5  # reasons, graphs or keys quoted per finding: evidence, not a dump
AUTO_FIX = "auto_fix"  # the evidence key of a finding's fix that applies with no edit
GATE_FIX = "gate_fix"  # ... and of a setting that stops the program at the problem instead (a gate)
# The evidence key saying a fix changes how the program is deployed, not the program: a
# cold cache is fixed by keeping the filled cache, or shipping it where the program starts.
FIX_KIND, DEPLOYMENT = "fix_kind", "deployment"
OTHER_FIXES = "other_fixes"  # ... and of fixes that also apply, measured only when asked (--verify)
# ... and of what a fix would have named but is not as torch writes it (a run file's
# "L['$(...)']"): left out of every command the doctor prints
UNNAMED = "not_offered"
# Said where a fix would name a block's class that is no Python identifier (a run file's
# "Block$(...)"): regional-compile cannot take it, and no command is printed with it.
NO_CLASS_LINE = "its class name is no Python identifier, which regional-compile cannot take"

K = TypeVar("K", bound=Hashable)

# The user's function a record belongs to: (component, file, function name, first line). A
# graph break turns its rest into resume functions, separate frames to torch; a fix to the
# function is a fix to all of them, so findings about recompiles and breaks are per function.
Owner = tuple[str, str, str, int]


def seconds(records: Iterable[GraphRecord]) -> float:
    """Compile seconds of ``records``, all told (frame and lazy backward)."""
    return sum(r.total_ns for r in records) / NS_PER_S


def unique(items: Iterable[str], limit: int = MAX_EXAMPLES) -> list[str]:
    """The first ``limit`` distinct items, in order."""
    return list(dict.fromkeys(items))[:limit]


def times(n: int) -> str:
    """ "1 time", "3 times"."""
    return f"{n} time{'s' if n != 1 else ''}"


def ids(records: Iterable[GraphRecord]) -> list[str]:
    return [r.compile_id for r in records]


def frame(r: GraphRecord) -> tuple[str, str]:
    """A frame's identity: its code name and where the code is (torch's frame number when
    the location is unknown; those restart after ``torch._dynamo.reset()``)."""
    return r.code_name, r.code_location or f"frame {r.compile_id.partition('/')[0]}"


def group(records: Iterable[GraphRecord], key: Callable[[GraphRecord], K]) -> dict[K, list[GraphRecord]]:
    """``records`` by ``key``, groups and their records in the order first seen."""
    groups: dict[K, list[GraphRecord]] = {}
    for r in records:
        groups.setdefault(key(r), []).append(r)
    return groups


def owners(records: Sequence[GraphRecord]) -> list[Owner]:
    """Each record's :data:`Owner`. The forward of a module (a decorator around it, or its
    resume function after a graph break) is the class's forward, at that forward's own file
    and line: a library's decorator is shared by every forward it wraps, and is not the
    model. Another method of a module is ``Class.method``, its resume functions with it. A
    resume function of any other function goes to the nearest function of that name above
    it in that file. Records without a location (older runs) are their own, by
    torch's frame number."""
    starts: dict[tuple[str, str, str], list[int]] = {}
    for r in records:
        if r.code_filename and not r.code_name.startswith(RESUME_PREFIX):
            starts.setdefault((r.component, r.code_filename, r.code_name), []).append(r.code_firstlineno)
    found: list[Owner] = []
    for r in records:
        forward = module_forward(r)
        if forward is not None:
            found.append((r.component, forward[0], f"{r.module_class}.forward", forward[1]))
            continue
        if not r.code_filename:
            found.append((r.component, f"frame {r.compile_id.partition('/')[0]}", r.code_name, 0))
            continue
        base = (r.component, r.code_filename, root_code_name(r.code_name))
        above = [line for line in starts.get(base, ()) if line <= r.code_firstlineno]
        # Another method of a module (its first part, or the rest after a break) is the
        # module's method: "Qwen2VLModel.get_image_features".
        name = f"{r.module_class}.{r.module_method}" if r.module_class and r.module_method else base[2]
        found.append((base[0], base[1], name, max(above) if above else r.code_firstlineno))
    return found


def module_forward(r: GraphRecord) -> tuple[str, int] | None:
    """(file, line) of the forward of the module the record's code belongs to, if known."""
    filename, _, line = r.module_forward.rpartition(":")
    if not r.module_class or not filename or not (line.isascii() and line.isdecimal()):  # int('²') fails
        return None
    return filename, int(line)


def at(records: Iterable[GraphRecord], limit: int = 3) -> str:
    """ " at model.layers.0, model.layers.1": where the group's modules sit in the model."""
    paths = list(dict.fromkeys(r.module_path for r in records if r.module_path))
    if not paths:
        return ""
    more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
    return f" at {', '.join(paths[:limit])}{more}"


def modules(records: Iterable[GraphRecord]) -> list[str]:
    """The modules a group compiled, for the evidence ("LlamaDecoderLayer at model.layers.0")."""
    return unique((r.module_label for r in records if r.module_label), limit=MAX_EXAMPLES * 4)


def model_location(r: GraphRecord) -> str:
    """Where the record's code is in the model: its module's own forward, not a decorator
    around it; else the compiled code's location."""
    return r.module_forward if module_forward(r) is not None else r.code_location


def located(owner: Owner) -> str:
    """file:line of an owner ("" when unknown)."""
    _, filename, _, line = owner
    return "" if filename.startswith("frame ") else f"{filename}:{line}"


def frames_of(records: Sequence[GraphRecord]) -> list[str]:
    """Each distinct frame of a group, "forward (m.py:3)"."""
    return unique((f"{name} ({where})" for name, where in map(frame, records)), limit=len(records))


def cache_keys(r: GraphRecord) -> dict[str, Any]:
    """The record's cache key per tier, or a note that torch announced none."""
    keys: dict[str, Any] = {c.tier: c.key for c in r.cache_lookups if c.key}
    return keys or {"note": "torch announced no cache key for this graph (an older run or torch)"}


def automatic_fix(finding: Finding) -> str | None:
    """The name of the fix (``compiletrace run --apply NAME``) that applies a finding's
    advice with no edit to the program, if there is one.

    >>> automatic_fix(Finding("recompiles", "lm", 1.0, "t", "f", evidence={"auto_fix": "dynamic-shapes"}))
    'dynamic-shapes'
    """
    name = finding.evidence.get(AUTO_FIX)
    return name if isinstance(name, str) else None


def fixes_to_verify(finding: Finding) -> list[str]:
    """The fixes ``doctor --verify`` tries for a finding: its automatic fix, then its gate.

    >>> fixes_to_verify(Finding("compile_after_ready", "lm", 1.0, "t", "f",
    ...                         evidence={AUTO_FIX: "eager-after-ready", GATE_FIX: "fail-after-ready"}))
    ['eager-after-ready', 'fail-after-ready']
    """
    found = [finding.evidence.get(AUTO_FIX), finding.evidence.get(GATE_FIX)]
    return [name for name in dict.fromkeys(found) if isinstance(name, str)]


def fix_of(finding: Finding) -> tuple[Fix, str | None] | None:
    """The :class:`~compiletrace._data.fixes.Fix` a finding names, and its argument; None
    for none, or for a name that is no fix (a file from elsewhere).

    >>> fix_of(Finding("repeated_graph", "lm", 1.0, "t", "f", evidence={AUTO_FIX: "regional-compile=Block"}))
    (<Fix.REGIONAL_COMPILE: 'regional-compile'>, 'Block')
    """
    name = automatic_fix(finding)
    if name is None:
        return None
    try:
        return parse_fix(name)
    except UsageError:
        return None
