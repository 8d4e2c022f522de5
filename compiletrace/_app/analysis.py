"""Reading records for what they mean: which cache hits were expensive
(:mod:`compiletrace._data.cache_hits`, where they live), which graph is which across two
runs (:func:`compiletrace._data.records.graph_keys`). Kept for the callers that import them
from here."""

from __future__ import annotations

from compiletrace._data.cache_hits import ExpensiveHit, compile_ns, find_expensive_hits
from compiletrace._data.records import GraphKey, graph_keys

__all__ = ["ExpensiveHit", "GraphKey", "compile_ns", "find_expensive_hits", "graph_keys"]
