"""Views of recorded compiles: text, HTML and the Chrome trace. They take plain data
(records, dicts) and never reach back into torch or the tracker."""

from compiletrace.reports._chrome import chrome_trace_dict, export_chrome_trace
from compiletrace.reports._html import (
    component_chart_svg,
    html_report,
    registry_html_table,
    report_fragment,
    timeline_svg,
)
from compiletrace.reports._text import log_summary, render_table, summary_line, summary_table, totals_line

__all__ = [
    "chrome_trace_dict",
    "component_chart_svg",
    "export_chrome_trace",
    "html_report",
    "log_summary",
    "registry_html_table",
    "render_table",
    "report_fragment",
    "summary_line",
    "summary_table",
    "timeline_svg",
    "totals_line",
]
