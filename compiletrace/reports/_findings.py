"""The doctor's findings as text and as an HTML fragment.

A view: it takes the doctor's findings as plain data (:class:`compiletrace._data.findings.Finding`)
and reaches back into nothing.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from compiletrace._data.findings import Finding
from compiletrace._io.text import printable, shorten, text_width
from compiletrace.reports._table import wrap_prose

__all__ = ["evidence_lines", "findings_html", "findings_text"]

LINE_WIDTH = 160  # one evidence line, at most
MAX_ITEMS = 3  # items of a list shown before "(+N more)"


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value.strip().splitlines()[0] if value.strip() else '""'
    if isinstance(value, (list, tuple)):
        shown = "; ".join(_compact(v) for v in value[:MAX_ITEMS])
        more = f" (+{len(value) - MAX_ITEMS} more)" if len(value) > MAX_ITEMS else ""
        return shown + more
    if isinstance(value, Mapping):
        items = list(value.items())
        shown = "; ".join(f"{k}: {_compact(v)}" for k, v in items[:MAX_ITEMS])
        more = f" (+{len(items) - MAX_ITEMS} more)" if len(items) > MAX_ITEMS else ""
        return shown + more
    if isinstance(value, float):
        return f"{value:.3f}"
    return json.dumps(value)


def evidence_lines(evidence: Mapping[str, Any], width: int = LINE_WIDTH) -> list[str]:
    """One short line per evidence entry (lists and mappings shortened, first lines of
    multi-line reasons only).

    >>> evidence_lines({"compile_ids": ["0/1", "0/2", "0/3", "0/4"], "limit": 8})
    ['compile_ids: 0/1; 0/2; 0/3 (+1 more)', 'limit: 8']
    >>> evidence_lines({"guards": {"grad mode": {"count": 2, "fix": "one grad mode"}}})
    ['guards:', '  grad mode: count: 2; fix: one grad mode']
    """
    lines = []
    for key, value in evidence.items():
        if isinstance(value, Mapping):
            items = list(value.items())
        elif isinstance(value, (list, tuple)):
            items = [("-", v) for v in value]
        else:
            items = []
        if items and all(isinstance(v, Mapping) for _, v in items):
            # A list or table of records (breaks, guards by kind, graphs): one line each.
            lines.append(f"{key}:")
            lines.extend(f"  {k}: {_compact(v)}".replace("-: ", "- ") for k, v in items[:MAX_ITEMS])
            if len(items) > MAX_ITEMS:
                lines.append(f"  (+{len(items) - MAX_ITEMS} more)")
        else:
            lines.append(f"{key}: {_compact(value)}")
    return [shorten(printable(line), width) for line in lines]


def findings_text(findings: Sequence[Finding], limit: int | None = None) -> str:
    """The findings as text, in the order given (the doctor gives most seconds first), the
    first ``limit`` of them when given.

    >>> print(findings_text([]))
    No findings: nothing here to change.
    """
    if not findings:
        return "No findings: nothing here to change."
    shown = findings if limit is None else findings[:limit]
    lines = [f"Findings, what did not compile first, then most seconds at stake ({len(findings)}):"]
    for i, f in enumerate(shown, 1):
        component = f" {printable(f.component)}" if f.component else ""
        lines.append(f"{i}. [{f.kind}]{component} {f.seconds:.2f} s{_unit(f)}: {printable(f.title)}")
        if f.location:
            lines.append(f"   at {printable(f.location)}")
        # Evidence is a summary, a line an entry, cut to the width; the prose is wrapped whole.
        width = max(text_width() - 3, 40)
        lines.extend(f"   {line}" for line in evidence_lines(f.evidence, min(width, LINE_WIDTH)))
        lines.append(f"   fix: {printable(f.fix)}")
    rest = len(findings) - len(shown)
    if rest > 0:
        lines.append(f"... and {rest} more finding{'s' if rest > 1 else ''} ('compiletrace doctor RUN.json')")
    return "\n".join(wrap_prose(lines, indent="   "))


def _unit(f: Finding) -> str:
    """ " CPU at stake" where the doctor weighed the finding in CPU seconds (what its fix can
    save; "" for a finding weighed otherwise, or from an older file)."""
    stake = f.evidence.get("at_stake")
    if not isinstance(stake, Mapping):
        return ""
    return " CPU at stake" if stake.get("unit") == "cpu" else " at stake"


def _wrappable(text: str, after: str = "/") -> str:
    """Escaped, with a line-break opportunity after each of ``after``: a long path (or, in
    a narrow column, a long name) wraps at its parts, not mid-word; the page's CSS breaks
    any other long token where it must."""
    text = html.escape(text)
    for sep in after:
        text = text.replace(sep, sep + "<wbr>")
    return text


def findings_html(findings: Sequence[Finding]) -> str:
    """The findings as an HTML fragment (a ``<section>`` holding a table; the evidence in
    ``<details>``), every string escaped. Each cell carries its header as ``data-label``:
    where the report is narrow, its CSS shows each finding as a labelled block.

    >>> findings_html([]).startswith('<section class="ct-findings">')
    True
    """
    if not findings:
        return (
            '<section class="ct-findings"><h2>Findings</h2>'
            "<p>No findings: nothing here to change.</p></section>"
        )
    rows = []
    for f in findings:
        where = f"<br><code>{_wrappable(f.location)}</code>" if f.location else ""
        evidence = "".join(f"<li>{_wrappable(line)}</li>" for line in evidence_lines(f.evidence))
        rows.append(
            "<tr>"
            f'<td data-label="kind">{_wrappable(f.kind, "_")}</td>'
            f'<td data-label="component">{_wrappable(f.component, "_./")}</td>'
            f'<td class="num" data-label="seconds">{f.seconds:.2f}</td>'
            f'<td class="ct-prose" data-label="what">{_wrappable(f.title)}{where}'
            f"<details><summary>evidence</summary><ul>{evidence}</ul></details></td>"
            f'<td class="ct-prose" data-label="fix">{_wrappable(f.fix)}</td>'
            "</tr>"
        )
    head = '<th scope="col">kind</th><th scope="col">component</th><th scope="col" class="num">seconds</th>'
    return (
        '<section class="ct-findings"><h2>Findings</h2>'
        f'<table class="compiletrace" data-table="findings"><thead><tr>{head}'
        '<th scope="col">what</th><th scope="col">fix</th></tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table></section>"
    )
