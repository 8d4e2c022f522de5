"""Why a compile cache did not apply, as text and as a self-contained HTML page: a view of
:class:`compiletrace._data.why.WhyReport`, plain data, reaching back into nothing.

>>> from compiletrace._data.why import WhyReport
>>> print(why_text(WhyReport("a.json", "b.json", 3, 3)))
why: BASE a.json -> CURRENT b.json
no graph missed the compile cache in CURRENT (3 graphs: 3 hit)
"""

from __future__ import annotations

from compiletrace._data.why import BuildChange, PartChange, WhyReport, group_line
from compiletrace._io.text import printable, shorten
from compiletrace.reports._html import _esc, _page, _table
from compiletrace.reports._table import wrap_prose

__all__ = ["why_html", "why_text"]

MAX_GRAPHS_SHOWN = 5  # graphs listed under a group
MAX_SHOWN_CHANGES = 8  # parts that changed with a cause, listed under it
MAX_LINE = 2000  # a value from a file is cut here: a bound, never the screen's width


def _line(text: str) -> str:
    return shorten(printable(text), MAX_LINE)


def _tiers(tiers: tuple[tuple[str, str, str], ...]) -> str:
    return ", ".join(f"{tier} {base} -> {current}" for tier, base, current in tiers)


def _change(c: PartChange) -> str:
    where = f" [{', '.join(c.tiers)}]" if c.tiers else ""
    return c.line() + where


def _build(b: BuildChange, same_key: bool) -> str:
    if same_key and b.detail:
        return f"{b.graph}: key {b.key_current[:12]}..., {b.detail}"
    if same_key:
        return f"{b.graph}: key {b.key_current[:12]}..., code {b.code_base} -> {b.code_current}"
    return f"{b.graph}: keys {b.key_base[:12]}... -> {b.key_current[:12]}..., code {b.code_current} in both"


def why_text(report: WhyReport, width: int | None = None) -> str:
    """The report as text: the headline, each reason with its graphs, what changed and the
    fix, then the graphs only one run has, builds that differ, and the processes' facts
    that differ; each line wrapped at ``width`` (default: ``COLUMNS``, the terminal's, or
    100 for a pipe), whole (a fix is never cut)."""
    lines = [_line(f"why: BASE {report.base} -> CURRENT {report.current}"), _line(report.headline())]
    for i, group in enumerate(report.groups, 1):
        reason = group.reason
        lines += ["", _line(f"{i}. {group_line(group, report.missed)}")]
        for g in group.graphs[:MAX_GRAPHS_SHOWN]:
            matched = "" if g.matched_by == "identity" else f", matched by {g.matched_by}"
            lines.append(_line(f"   {g.current}: {_tiers(g.tiers)} ({g.seconds:.2f} s{matched})"))
            if not group.alike:  # each graph's own values, not the first one's for all
                lines.append(_line(f"      {g.reason.summary}"))
        if len(group.graphs) > MAX_GRAPHS_SHOWN:
            lines.append(f"   (+{len(group.graphs) - MAX_GRAPHS_SHOWN} more graphs)")
        causes = [c for c in reason.changes if not c.consequence]
        after = [c for c in reason.changes if c.consequence]
        # A group whose graphs changed each in their own way shows each graph's line above
        # (every change of each is in --json), not the first graph's changes for all.
        shown = len(reason.changes) > 1 or after or (reason.changes and reason.kind != "parts")
        if group.alike and shown:
            lines += [_line(f"   changed: {_change(c)}") for c in causes]
            lines += [_line(f"   changed with it: {_change(c)}") for c in after[:MAX_SHOWN_CHANGES]]
            if len(after) > MAX_SHOWN_CHANGES:
                lines.append(
                    f"   (+{len(after) - MAX_SHOWN_CHANGES} more changed with it: --json lists them)"
                )
        lines.append(_line(f"   fix: {reason.fix}"))
    if report.new_graphs:
        lines += ["", "missed, with no graph of BASE to compare with (new in CURRENT):"]
        lines += [_line(f"   {g}") for g in report.new_graphs]
    if report.gone:
        lines += ["", "compiled in BASE, not in CURRENT:"] + [_line(f"   {g}") for g in report.gone]
    if report.same_key_other_build:
        lines += ["", "same key, different build (the FX graph key matched, the code built differs):"]
        lines += [_line(f"   {_build(b, True)}") for b in report.same_key_other_build]
    if report.other_key_same_build:
        lines += ["", "different key, same build (the miss rebuilt identical code):"]
        lines += [_line(f"   {_build(b, False)}") for b in report.other_key_same_build]
    if report.process_changes:
        lines += ["", "the processes differ in (a cause only where a miss above says so):"]
        lines += [_line(f"   {c.line()}") for c in report.process_changes]
    if report.notes:
        lines += [""] + [_line(f"note: {n}") for n in report.notes]
    return "\n".join(wrap_prose(lines, width, indent="   "))


def why_html(report: WhyReport, *, title: str = "compiletrace why") -> str:
    """The report as a self-contained HTML page, every string escaped."""
    body = [
        f"<h1>{_esc(title)}</h1>",
        f"<p>BASE <code>{_esc(report.base)}</code> &rarr; CURRENT <code>{_esc(report.current)}</code></p>",
        f"<p><strong>{_esc(report.headline())}</strong></p>",
    ]
    if report.groups:
        rows = []
        for group in report.groups:
            shown = group.graphs[:MAX_GRAPHS_SHOWN]
            graphs = "; ".join(g.current + ("" if group.alike else f": {g.reason.summary}") for g in shown)
            if len(group.graphs) > MAX_GRAPHS_SHOWN:
                graphs += f" (+{len(group.graphs) - MAX_GRAPHS_SHOWN} more)"
            rows.append(
                [
                    group.summary,
                    str(len(group.graphs)),
                    f"{group.seconds:.2f}",
                    graphs,
                    group.reason.fix,
                ]
            )
        body.append('<section class="ct-why"><h2>Why each miss</h2>')
        body.append(_table(["reason", "graphs", "seconds", "which", "fix"], rows, name="why"))
        changes = [
            [
                c.name,
                c.base or "(none)",
                c.current or "(none)",
                ", ".join(c.tiers),
                c.source,
                "yes" if c.consequence else "",
            ]
            for g in report.groups
            for c in g.changes  # what every graph of it holds; each graph's own are under "which"
        ]
        if changes:
            body.append("<h3>What changed</h3>")
            body.append(
                _table(
                    ["part", "BASE", "CURRENT", "in the key of", "set by", "changed with another"],
                    changes,
                    name="why-parts",
                )
            )
        body.append("</section>")
    for heading, items in (
        ("Missed, with no graph of BASE to compare with", report.new_graphs),
        ("Compiled in BASE, not in CURRENT", report.gone),
        ("Same key, different build", [_build(b, True) for b in report.same_key_other_build]),
        ("Different key, same build", [_build(b, False) for b in report.other_key_same_build]),
        ("The processes differ in", [c.line() for c in report.process_changes]),
        ("Notes", report.notes),
    ):
        if items:
            body.append(
                f"<h2>{_esc(heading)}</h2><ul>" + "".join(f"<li>{_esc(i)}</li>" for i in items) + "</ul>"
            )
    return _page(title, "".join(body))
