"""Views of recorded compiles: text, JSON, HTML, Chrome trace. They read records only."""

from compiletrace.reports._chrome import chrome_trace_dict, export_chrome_trace
from compiletrace.reports._html import registry_html_table
from compiletrace.reports._text import (
    component_totals,
    log_summary,
    summary_line,
    summary_table,
)

__all__ = [
    "chrome_trace_dict",
    "component_totals",
    "export_chrome_trace",
    "log_summary",
    "registry_html_table",
    "summary_line",
    "summary_table",
]
