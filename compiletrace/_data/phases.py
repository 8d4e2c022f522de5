"""Split one backend call's time into the phases torch itself times.

Torch times its compile stages with nested, named regions (``create_aot_dispatcher_function``
around ``compile_fx_inner`` around ``GraphLowering.codegen`` around ``compile_file`` ...).
Each region that ran during a backend call belongs to that call's graph (Dynamo compiles
one frame at a time). This module maps region names to phases and gives every instant of
the call to the innermost region that has a phase, so the phases never double count and,
with "other" taking the remainder, add up to the backend time exactly.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from compiletrace._data.torch_text import (
    AOT_AUTOGRAD_REGIONS,
    CACHE_REGIONS,
    INDUCTOR_REGIONS,
    KERNEL_COMPILE_REGIONS,
    ONE_TIME_REGIONS,
)

__all__ = ["ONE_TIME_REGIONS", "PHASES", "TimedRegion", "one_time_ns", "phase_of", "split_phases"]

# (region name, start ns, end ns), on one clock
TimedRegion = tuple[str, int, int]

AOT_AUTOGRAD = "aot_autograd"  # AOTAutograd: joint graph tracing, partitioning, functionalisation
INDUCTOR = "inductor"  # Inductor: lowering, scheduling, code generation
KERNEL_COMPILE = "kernel_compile"  # compiling generated kernels (C++ with the host compiler, or Triton)
CACHE = "cache"  # compile-cache lookups and loading compiled artifacts
OTHER = "other"  # the rest of the backend call

PHASES = (AOT_AUTOGRAD, INDUCTOR, KERNEL_COMPILE, CACHE, OTHER)

# First matching rule wins; a name matches a rule when it starts with one of its prefixes
# (torch's region names: compiletrace._data.torch_text).
_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (KERNEL_COMPILE, KERNEL_COMPILE_REGIONS),
    (CACHE, CACHE_REGIONS),
    (INDUCTOR, INDUCTOR_REGIONS),
    (AOT_AUTOGRAD, AOT_AUTOGRAD_REGIONS),
)


def one_time_ns(regions: Iterable[TimedRegion], window_start: int, window_end: int) -> int:
    """Nanoseconds of torch's once-per-process regions inside the window (overlaps once).

    >>> one_time_ns([("inductor_codecache_torch_key", 10, 40), ("compile_file", 0, 90),
    ...              ("CacheBase.get_system.triton_key", 30, 50)], 0, 45)
    35
    """
    spans = sorted(
        (max(start, window_start), min(end, window_end))
        for name, start, end in regions
        if name.startswith(ONE_TIME_REGIONS)
    )
    total, reached = 0, window_start
    for start, end in spans:
        start = max(start, reached)
        if end > start:
            total += end - start
            reached = end
    return total


def phase_of(region_name: str) -> str | None:
    """The phase a torch timed region belongs to, or None for regions that only group others.

    >>> phase_of("compile_file"), phase_of("GraphLowering.codegen"), phase_of("gc")
    ('kernel_compile', 'inductor', None)
    """
    for phase, prefixes in _RULES:
        if region_name.startswith(prefixes):
            return phase
    return None


def split_phases(regions: Iterable[TimedRegion], window_start: int, window_end: int) -> dict[str, int]:
    """Nanoseconds per phase inside ``[window_start, window_end]``; "other" is the rest.

    Each instant goes to the innermost covering region that has a phase (the one that
    started last), so nested regions are not counted twice.

    >>> split_phases([("create_aot_dispatcher_function", 0, 100), ("compile_fx_inner", 10, 90),
    ...               ("compile_file", 20, 50)], 0, 120)
    {'aot_autograd': 20, 'inductor': 50, 'kernel_compile': 30, 'cache': 0, 'other': 20}
    """
    spans: list[tuple[int, int, str]] = []
    for name, start, end in regions:
        phase = phase_of(name)
        start, end = max(start, window_start), min(end, window_end)
        if phase is not None and end > start:
            spans.append((start, end, phase))
    totals = dict.fromkeys(PHASES, 0)
    if window_end <= window_start:
        return totals
    bounds = sorted({window_start, window_end, *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    for lo, hi in itertools.pairwise(bounds):
        innermost = _innermost(spans, lo, hi)
        totals[innermost if innermost is not None else OTHER] += hi - lo
    return totals


def _innermost(spans: Sequence[tuple[int, int, str]], lo: int, hi: int) -> str | None:
    best: tuple[int, int] | None = None
    phase = None
    for start, end, name in spans:
        if start <= lo and end >= hi:
            key = (start, -end)  # later start is more inner; on a tie, the shorter region
            if best is None or key > best:
                best, phase = key, name
    return phase


def fit_to(phases: dict[str, int], total_ns: int) -> dict[str, int]:
    """Rescale phases measured on the wall clock so they add up to ``total_ns`` measured on
    the tracker's clock: named phases keep their share, "other" takes the remainder and is
    never negative."""
    named = {k: v for k, v in phases.items() if k != OTHER}
    measured = sum(phases.values())
    if measured <= 0:
        return {**dict.fromkeys(PHASES, 0), OTHER: total_ns}
    scale = total_ns / measured
    fitted = {k: int(v * scale) for k, v in named.items()}
    fitted[OTHER] = total_ns - sum(fitted.values())
    return fitted


def lay_out(start_ns: int, phase_ns: dict[str, int]) -> list[tuple[str, int, int]]:
    """Place each non-zero phase's total end to end from ``start_ns``, in :data:`PHASES`
    order, for views that draw phases as nested blocks (trace events, child spans). The
    blocks show how long each phase took in all, not the instants it ran. A split with
    nothing but "other" (a backend torch does not time, such as "eager") lays out nothing.

    >>> lay_out(100, {"inductor": 5, "aot_autograd": 3, "other": 0})
    [('aot_autograd', 100, 103), ('inductor', 103, 108)]
    >>> lay_out(100, {"other": 7})
    []
    """
    if not any(ns > 0 for phase, ns in phase_ns.items() if phase != OTHER):
        return []
    out = []
    t = start_ns
    for phase in PHASES:
        ns = phase_ns.get(phase, 0)
        if ns > 0:
            out.append((phase, t, t + ns))
            t += ns
    return out
