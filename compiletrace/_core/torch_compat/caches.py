"""Torch's compile caches: their hit and miss counters, and the directory they live under.
Each lookup's key comes from the event logger (``event_logger``); what a cache-artifact
file may hold is in ``artifacts``.

What is used, and why:

- ``torch._dynamo.utils.counters``: FX-graph-cache and AOTAutograd-cache counters, diffed
  around one backend call to learn that graph's cache outcome.
- ``torch._inductor.runtime.cache_dir_utils.cache_dir``: the inductor cache directory,
  under which ``compiletrace._app.cache`` checks where an artifact would be written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from compiletrace._io.state import warn_once


@dataclass(frozen=True)
class CacheCounts:
    """Process-global cache counters at one instant."""

    fx_hit: int = 0
    fx_miss: int = 0
    fx_bypass: int = 0
    aot_hit: int = 0
    aot_miss: int = 0
    aot_bypass: int = 0

    def __sub__(self, other: CacheCounts) -> CacheCounts:
        return CacheCounts(
            self.fx_hit - other.fx_hit,
            self.fx_miss - other.fx_miss,
            self.fx_bypass - other.fx_bypass,
            self.aot_hit - other.aot_hit,
            self.aot_miss - other.aot_miss,
            self.aot_bypass - other.aot_bypass,
        )


def cache_counts() -> CacheCounts:
    try:
        from torch._dynamo.utils import counters

        ind: Mapping[str, int] = counters["inductor"]
        aot: Mapping[str, int] = counters["aot_autograd"]
        return CacheCounts(
            fx_hit=ind.get("fxgraph_cache_hit", 0),
            fx_miss=ind.get("fxgraph_cache_miss", 0),
            fx_bypass=ind.get("fxgraph_cache_bypass", 0),
            aot_hit=aot.get("autograd_cache_hit", 0),
            aot_miss=aot.get("autograd_cache_miss", 0) + aot.get("autograd_cache_guard_miss", 0),
            aot_bypass=aot.get("autograd_cache_bypass", 0),
        )
    except Exception:
        return CacheCounts()


def inductor_cache_dir() -> str | None:
    """The directory torch's on-disk compile caches live under now (created if missing),
    or None, with one warning, when this torch does not say."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        return str(cache_dir())
    except Exception as exc:
        warn_once(
            f"cannot tell where torch keeps its compile caches ({exc!r}); cache artifacts are "
            "checked for absolute paths and '..' only",
            key="inductor_cache_dir",
        )
        return None
