"""HTML views: tables for notebooks (``_repr_html_``)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from compiletrace._records import GraphRecord
from compiletrace.reports._text import GRAPH_HEADERS, graph_rows

__all__ = ["registry_html_table"]


def registry_html_table(records: Sequence[GraphRecord]) -> str:
    """One HTML table of every graph (what a notebook shows for a registry)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in GRAPH_HEADERS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in graph_rows(records)
    )
    return f'<table class="compiletrace"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
