"""Text views of a registry: the per-component / per-graph table and the one-line summary."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from compiletrace._core.phases import PHASES
from compiletrace._core.records import LANGUAGE_MODEL, NS_PER_S, GraphRecord, component_totals

__all__ = ["log_summary", "render_table", "summary_line", "summary_table"]

logger = logging.getLogger("compiletrace")


def summary_line(records: Sequence[GraphRecord]) -> str:
    """``compilation took 12.34 s (language_model: 8.00 s, encoder: 4.34 s)``.

    The language model is always named; other components only when they compiled.
    """
    totals = {LANGUAGE_MODEL: 0, **component_totals(records)}
    overall = sum(totals.values()) / NS_PER_S
    parts = ", ".join(f"{name}: {ns / NS_PER_S:.2f} s" for name, ns in totals.items())
    return f"compilation took {overall:.2f} s ({parts})"


def log_summary(records: Sequence[GraphRecord]) -> str:
    """Log the one-line summary on the "compiletrace" logger (INFO) and return it."""
    line = summary_line(records)
    logger.info(line)
    return line


def _fmt_s(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / NS_PER_S:.3f}"


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A plain-text table: a header, a rule, one line per row, columns two spaces apart.

    >>> print("\\n".join(render_table(["name", "s"], [["encoder", "1.50"]])))
    name     s
    -------  ----
    encoder  1.50
    """
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(r) for r in rows)
    return out


GRAPH_HEADERS = (
    "compile id",
    "component",
    "code",
    "nodes",
    "dynamo s",
    "backend s",
    "backward s",
    "total s",
    "cache",
    "status",
    "recompile reason",
)


def graph_rows(records: Sequence[GraphRecord]) -> list[list[str]]:
    return [
        [
            r.compile_id,
            r.component,
            r.code_name,
            str(r.graph_node_count),
            _fmt_s(r.dynamo_ns),
            _fmt_s(r.backend_ns),
            _fmt_s(r.backward_ns),
            _fmt_s(r.total_ns),
            r.cache_outcome.value,
            r.status.value if r.error_type is None else f"{r.status.value} ({r.error_type})",
            r.recompile_reason or "",
        ]
        for r in records
    ]


COMPONENT_HEADERS = ("component", "graphs", "recompiles", "dynamo s", "backend s", "backward s", "total s")


def component_rows(records: Sequence[GraphRecord]) -> list[list[str]]:
    """Per component: graphs, recompiles, and seconds of Dynamo, backend, backward, total."""
    rows = []
    for name, ns in component_totals(records).items():
        mine = [r for r in records if r.component == name]
        rows.append(
            [
                name,
                str(len(mine)),
                str(sum(r.is_recompile for r in mine)),
                _fmt_s(sum(r.dynamo_ns or 0 for r in mine)),
                _fmt_s(sum(r.backend_ns for r in mine)),
                _fmt_s(sum(r.backward_ns for r in mine)),
                _fmt_s(ns),
            ]
        )
    return rows


def summary_table(records: Sequence[GraphRecord]) -> str:
    """A readable table per component, then per graph, then the one-line summary."""
    lines = ["Per component"]
    lines += render_table(COMPONENT_HEADERS, component_rows(records))
    lines += ["", "Per graph"]
    lines += render_table(GRAPH_HEADERS, graph_rows(records))
    if any(r.phases for r in records):
        lines += ["", "Backend phases per graph (seconds)"]
        lines += render_table(PHASE_HEADERS, phase_rows(records))
    lines += ["", summary_line(records)]
    return "\n".join(lines)


PHASE_HEADERS = ("compile id", "component", *PHASES, "backend s")


def phase_rows(records: Sequence[GraphRecord]) -> list[list[str]]:
    """Each graph's backend time split into phases (they add up to the backend time)."""
    return [
        [r.compile_id, r.component, *(_fmt_s(r.phase_ns.get(p, 0)) for p in PHASES), _fmt_s(r.backend_ns)]
        for r in records
        if r.phases
    ]
