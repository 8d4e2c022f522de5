"""Views of recorded compiles: text, HTML, the Chrome trace, the doctor's findings and the
start-up timeline. They take plain data (records, findings, timelines, dicts) and never
reach back into torch or the tracker.

This is the views' one door: what a command prints or writes is a page exported here
(``profile_text``, ``summary_table``, ``timeline_text``, ``findings_text``,
``job_summary_lines``, ``env_text``, ``html_report``, ``doctor_html_report``, the Chrome
trace, the flame files); the CLI imports no module of the package. The pieces a page is
made of that other views and notebooks use (``render_table``, the charts) are here too.
"""

from compiletrace.reports._chrome import chrome_trace_dict, export_chrome_trace
from compiletrace.reports._env import env_text
from compiletrace.reports._findings import findings_html, findings_text
from compiletrace.reports._flame import (
    collapsed_stacks,
    component_trees,
    speedscope_dict,
    top_functions_lines,
    write_collapsed,
    write_speedscope,
)
from compiletrace.reports._html import (
    component_chart_svg,
    doctor_html_report,
    graph_timeline_svg,
    html_report,
    registry_html_table,
    report_fragment,
    trace_cost_svg,
)
from compiletrace.reports._job import job_summary_lines
from compiletrace.reports._ledger import job_ledger_lines, ledger_lines, run_ledger_lines
from compiletrace.reports._table import render_table
from compiletrace.reports._text import log_summary, profile_text, summary_line, summary_table, totals_line
from compiletrace.reports._timeline import timeline_html, timeline_text

# The chart of the graphs' compiles over time, by its former name (the start-up timeline is
# timeline_html / timeline_text).
timeline_svg = graph_timeline_svg

__all__ = [
    "chrome_trace_dict",
    "collapsed_stacks",
    "component_chart_svg",
    "component_trees",
    "doctor_html_report",
    "env_text",
    "export_chrome_trace",
    "findings_html",
    "findings_text",
    "graph_timeline_svg",
    "html_report",
    "job_ledger_lines",
    "job_summary_lines",
    "ledger_lines",
    "log_summary",
    "profile_text",
    "registry_html_table",
    "render_table",
    "report_fragment",
    "run_ledger_lines",
    "speedscope_dict",
    "summary_line",
    "summary_table",
    "timeline_html",
    "timeline_svg",
    "timeline_text",
    "top_functions_lines",
    "totals_line",
    "trace_cost_svg",
    "write_collapsed",
    "write_speedscope",
]
