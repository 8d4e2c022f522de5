"""What ``compiletrace compare`` prints: the gate and its thresholds, a row per compared
figure (the total first), and the verdict, from a
:class:`~compiletrace._data.comparison.Comparison`.

>>> from compiletrace._data.comparison import Change, Comparison, RunFile
>>> run = RunFile("a.json", "profile", 1)
>>> same = Comparison(run, run, (Change("total", "compile time", 1.0, 1.02, slower=False),), 10.0, 0.05)
>>> print(comparison_text(same))
gate: total, component; shown, not gated: phase, graph
a gated figure regresses when it grows by more than 10% and 0.05 s
judged in wall seconds
<BLANKLINE>
scope  name          base s  new s  delta s  delta %  status
-----  ------------  ------  -----  -------  -------  ------
total  compile time  1.000   1.020  +0.020   +2.0%    ok
<BLANKLINE>
no regression beyond 10% and 0.05 s
"""

from __future__ import annotations

from compiletrace._data.comparison import BENCH, CPU, GATES, Comparison
from compiletrace._io.text import printable
from compiletrace.reports._table import render_table, wrap_prose

__all__ = ["comparison_clock", "comparison_rule", "comparison_text", "comparison_warning"]


def comparison_warning(comparison: Comparison) -> str | None:
    """One line when the runs differ in what they ran (model, backend, torch), else None."""
    if not comparison.differences:
        return None
    differ = "; ".join(comparison.differences)
    return printable(f"warning: the runs differ ({differ}): a change may be that, not a regression")


def comparison_clock(comparison: Comparison) -> str:
    """Which clock the seconds were judged on, and why (the third line of the table).

    >>> from compiletrace._data.comparison import RunFile
    >>> run = RunFile("a.json", "profile", 4)
    >>> comparison_clock(Comparison(run, run, (), 10.0, 0.05, clock="cpu", clock_why="both runs have them"))
    'judged in CPU seconds (both runs have them; --clock wall for wall seconds); phases in wall seconds'
    """
    if comparison.base.kind == BENCH:
        return "judged in wall seconds (the runs' averages)"
    why = printable(comparison.clock_why)
    if comparison.clock == CPU:
        return f"judged in CPU seconds ({why}; --clock wall for wall seconds); phases in wall seconds"
    return f"judged in wall seconds ({why})" if why else "judged in wall seconds"


def comparison_rule(comparison: Comparison) -> str:
    """The gate, its thresholds and its clock in words (the first three lines of the table)."""
    limits = f"a gated figure regresses when it grows by more than {comparison.threshold_pct:g}% and "
    limits += f"{comparison.min_seconds:g} s"
    clock = comparison_clock(comparison)
    if comparison.base.kind == BENCH:
        return f"gate: every metric\n{limits}\n{clock}"
    # "function" rows exist only for runs recorded with trace_cost: named when there are some.
    present = {c.scope for c in comparison.changes}
    shown = [g for g in GATES if g not in comparison.gates and (g != "function" or g in present)]
    gate = f"gate: {', '.join(comparison.gates)}"
    if shown:
        gate += f"; shown, not gated: {', '.join(shown)}"
    graphs = " (a new graph regresses too)" if "graph" in comparison.gates else ""
    return f"{gate}\n{limits}{graphs}\n{clock}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def comparison_text(comparison: Comparison) -> str:
    """The warning (when the runs differ), the rule, a row per figure (the total first),
    and the verdict."""
    rows = []
    for c in comparison.changes:
        # A percentage of a base shown as 0.000 s would be noise (+12638496.8%): none.
        pct = f"{100 * c.delta / c.base:+.1f}%" if c.base is not None and c.base >= 0.0005 else "-"
        rows.append([c.scope, c.name, _seconds(c.base), _seconds(c.new), f"{c.delta:+.3f}", pct, c.status])
    head = ("scope", "name", "base s", "new s", "delta s", "delta %", "status")
    limits = f"beyond {comparison.threshold_pct:g}% and {comparison.min_seconds:g} s"
    n = len(comparison.regressions)
    verdict = f"{n} regression(s) {limits}" if n else f"no regression {limits}"
    others = comparison.ungated_slower
    if others:
        scopes = ", ".join(g for g in GATES if any(c.scope == g for c in others))
        verdict += f"; {len(others)} slower figure(s) not gated ({scopes})"
    warning = comparison_warning(comparison)
    rule = comparison_rule(comparison)
    prose = wrap_prose([*([warning] if warning else []), *rule.splitlines()])
    return "\n".join(
        [*prose, "", *render_table(head, rows, optional=("delta s",)), "", *wrap_prose([verdict])]
    )
