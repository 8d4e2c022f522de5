"""Views of recorded compiles: text, HTML, the Chrome trace, flame files. They take plain
data (records, a run, a job, the dataclasses of ``compiletrace._data``) and never reach back
into torch, the tracker or an application.

This is the views' one door, and it exports pages: what a command prints or writes, or a
notebook shows, whole. Each loads with its own module when first asked for (PEP 562), so
a command that prints one page loads no other view (``compiletrace run``'s summary loads
no HTML). Where a view is drawn:

- ``_text``, ``_table``: a run's text report and the table every text view prints;
- ``_html``, ``_svg``: the one-file HTML report, its charts and what they are drawn with;
- ``_timeline``: the start-up timeline (text and HTML), and a job's processes on one axis;
- ``_findings``, ``_verify``: the doctor's findings, ``doctor --verify``'s before/after table;
- ``_job``: a job's summary and its Chrome trace; ``_chrome``: a run's Chrome trace;
- ``_flame``: Dynamo's tracing cost as speedscope and collapsed stacks;
- ``_ledger``: a warm start's ledger, what it still paid line by line;
- ``_why``: ``compiletrace why``, each cache miss by the key part that changed;
- ``_compare``, ``_gather``, ``_bench``, ``_cache``, ``_env``: the tables of ``compare``,
  of a distributed job, of ``bench startup``, of ``cache inspect`` and of ``env``.

The pieces pages are made of (``render_table``, the charts alone, ``summary_line``, ...)
still resolve here by name, for code written against earlier releases; they are not
exported.

>>> from compiletrace import reports
>>> "html_report" in reports.__all__, "render_table" in reports.__all__, callable(reports.render_table)
(True, False, True)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compiletrace.reports._bench import bench_text as bench_text
    from compiletrace.reports._cache import cache_artifacts_text as cache_artifacts_text
    from compiletrace.reports._chrome import chrome_trace_dict as chrome_trace_dict
    from compiletrace.reports._chrome import export_chrome_trace as export_chrome_trace
    from compiletrace.reports._compare import comparison_rule as comparison_rule
    from compiletrace.reports._compare import comparison_text as comparison_text
    from compiletrace.reports._compare import comparison_warning as comparison_warning
    from compiletrace.reports._env import env_text as env_text
    from compiletrace.reports._findings import findings_html as findings_html
    from compiletrace.reports._findings import findings_text as findings_text
    from compiletrace.reports._flame import collapsed_stacks as collapsed_stacks
    from compiletrace.reports._flame import component_trees as component_trees
    from compiletrace.reports._flame import speedscope_dict as speedscope_dict
    from compiletrace.reports._flame import top_functions_lines as top_functions_lines
    from compiletrace.reports._flame import write_collapsed as write_collapsed
    from compiletrace.reports._flame import write_speedscope as write_speedscope
    from compiletrace.reports._gather import gather_table as gather_table
    from compiletrace.reports._html import component_chart_svg as component_chart_svg
    from compiletrace.reports._html import doctor_html_report as doctor_html_report
    from compiletrace.reports._html import graph_timeline_svg as graph_timeline_svg
    from compiletrace.reports._html import html_report as html_report
    from compiletrace.reports._html import job_html_report as job_html_report
    from compiletrace.reports._html import registry_html_table as registry_html_table
    from compiletrace.reports._html import report_fragment as report_fragment
    from compiletrace.reports._html import trace_cost_svg as trace_cost_svg
    from compiletrace.reports._job import job_chrome_trace_dict as job_chrome_trace_dict
    from compiletrace.reports._job import job_findings_line as job_findings_line
    from compiletrace.reports._job import job_summary_lines as job_summary_lines
    from compiletrace.reports._ledger import job_ledger_lines as job_ledger_lines
    from compiletrace.reports._ledger import ledger_lines as ledger_lines
    from compiletrace.reports._ledger import run_ledger_lines as run_ledger_lines
    from compiletrace.reports._table import render_table as render_table
    from compiletrace.reports._table import wrap_prose as wrap_prose
    from compiletrace.reports._text import log_summary as log_summary
    from compiletrace.reports._text import profile_text as profile_text
    from compiletrace.reports._text import summary_line as summary_line
    from compiletrace.reports._text import summary_table as summary_table
    from compiletrace.reports._text import totals_line as totals_line
    from compiletrace.reports._timeline import timeline_html as timeline_html
    from compiletrace.reports._timeline import timeline_lines as timeline_lines
    from compiletrace.reports._timeline import timeline_text as timeline_text
    from compiletrace.reports._verify import verify_lines as verify_lines
    from compiletrace.reports._verify import verify_table as verify_table
    from compiletrace.reports._why import why_html as why_html
    from compiletrace.reports._why import why_text as why_text

    timeline_svg = graph_timeline_svg

# Each page: the module that renders it.
_PAGES = {
    "bench_text": "_bench",
    "cache_artifacts_text": "_cache",
    "chrome_trace_dict": "_chrome",
    "collapsed_stacks": "_flame",
    "comparison_text": "_compare",
    "doctor_html_report": "_html",
    "env_text": "_env",
    "export_chrome_trace": "_chrome",
    "findings_text": "_findings",
    "gather_table": "_gather",
    "html_report": "_html",
    "job_chrome_trace_dict": "_job",
    "job_html_report": "_html",
    "job_ledger_lines": "_ledger",
    "job_findings_line": "_job",
    "job_summary_lines": "_job",
    "ledger_lines": "_ledger",
    "log_summary": "_text",
    "profile_text": "_text",
    "registry_html_table": "_html",
    "report_fragment": "_html",
    "run_ledger_lines": "_ledger",
    "speedscope_dict": "_flame",
    "summary_table": "_text",
    "timeline_html": "_timeline",
    "timeline_text": "_timeline",
    "verify_lines": "_verify",
    "why_html": "_why",
    "why_text": "_why",
    "write_collapsed": "_flame",
    "write_speedscope": "_flame",
}
# The pieces pages are made of, by name (module, and its name there): resolved, not exported.
_PIECES = {
    "comparison_rule": ("_compare", "comparison_rule"),
    "comparison_warning": ("_compare", "comparison_warning"),
    "component_chart_svg": ("_html", "component_chart_svg"),
    "component_trees": ("_flame", "component_trees"),
    "findings_html": ("_findings", "findings_html"),
    "graph_timeline_svg": ("_html", "graph_timeline_svg"),
    "render_table": ("_table", "render_table"),
    "summary_line": ("_text", "summary_line"),
    "timeline_lines": ("_timeline", "timeline_lines"),
    "timeline_svg": ("_html", "graph_timeline_svg"),  # the graphs' compile chart, by its former name
    "top_functions_lines": ("_flame", "top_functions_lines"),
    "totals_line": ("_text", "totals_line"),
    "trace_cost_svg": ("_html", "trace_cost_svg"),
    "verify_table": ("_verify", "verify_table"),
    "wrap_prose": ("_table", "wrap_prose"),
}

__all__ = [
    "bench_text",
    "cache_artifacts_text",
    "chrome_trace_dict",
    "collapsed_stacks",
    "comparison_text",
    "doctor_html_report",
    "env_text",
    "export_chrome_trace",
    "findings_text",
    "gather_table",
    "html_report",
    "job_chrome_trace_dict",
    "job_findings_line",
    "job_html_report",
    "job_ledger_lines",
    "job_summary_lines",
    "ledger_lines",
    "log_summary",
    "profile_text",
    "registry_html_table",
    "report_fragment",
    "run_ledger_lines",
    "speedscope_dict",
    "summary_table",
    "timeline_html",
    "timeline_text",
    "verify_lines",
    "why_html",
    "why_text",
    "write_collapsed",
    "write_speedscope",
]


def __getattr__(name: str) -> Any:
    if name in _PAGES:
        module, attribute = _PAGES[name], name
    elif name in _PIECES:
        module, attribute = _PIECES[name]
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value  # once: later reads do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
