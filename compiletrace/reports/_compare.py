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
passed: no regression beyond 10% and 0.05 s
"""

from __future__ import annotations

from compiletrace._data.comparison import BENCH, CPU, GATES, Comparison
from compiletrace._io.text import printable
from compiletrace.reports._table import render_table, wrap_prose

__all__ = [
    "comparison_clock",
    "comparison_rule",
    "comparison_text",
    "comparison_verdict",
    "comparison_warning",
]


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
    limits = f"a gated figure regresses when it grows by more than {_limits(comparison)}"
    if comparison.bound_why:
        limits += f" ({printable(comparison.bound_why)})"
    clock = comparison_clock(comparison)
    if comparison.base.kind == BENCH:
        return f"gate: every metric\n{limits}\n{clock}"
    if comparison.counts:
        limits = f"a count that rises fails; {limits}"
    # "function" rows exist only for runs recorded with trace_cost: named when there are some.
    present = {c.scope for c in comparison.changes}
    shown = [g for g in GATES if g not in comparison.gates and (g != "function" or g in present)]
    gate = f"gate: {', '.join(comparison.gates)}"
    if shown:
        gate += f"; shown, not gated: {', '.join(shown)}"
    graphs = " (a new graph regresses too)" if "graph" in comparison.gates else ""
    return f"{gate}\n{limits}{graphs}\n{clock}"


def _limits(comparison: Comparison) -> str:
    """The thresholds in words: "60% and 0.25 s", with the runs' spread where a side has several."""
    limits = f"{comparison.threshold_pct:g}% and {comparison.min_seconds:g} s"
    return f"the runs' spread, {limits}" if min(comparison.runs) > 1 else limits


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _count(value: float) -> str:
    return f"{value:g}"


def _runs(values: tuple[float, ...], show: str = "{:.3f}") -> str:
    return ", ".join(show.format(v) for v in values)


def comparison_verdict(comparison: Comparison) -> str:
    """Why the gate passed or failed, in one line: the counts that rose, else the gated
    figures beyond their bound with their figures, else that none did.

    >>> from compiletrace._data.comparison import Change, CountChange, RunFile
    >>> run = RunFile("a.json", "profile", 4)
    >>> rose = Comparison(run, run, (), 35.0, 0.1, counts=(CountChange("recompiles", 0, 1),))
    >>> comparison_verdict(rose)
    'FAILED: recompiles rose 0 -> 1'
    >>> grew = Comparison(run, run, (Change("total", "compile time", 1.0, 1.5, slower=True),), 35.0, 0.1)
    >>> comparison_verdict(grew)
    'FAILED: total compile time 1.000 -> 1.500 s (+0.500 s, +50.0%), beyond 0.350 s (35% and 0.1 s)'
    """
    rises = [f"{c.name} rose {_count(c.base)} -> {_count(c.new)}" for c in comparison.count_rises]
    grown = []
    for c in comparison.regressions:
        if c.base is None:
            grown.append(f"{c.scope} {c.name} is new ({_seconds(c.new)} s)")
            continue
        bound = (
            c.noise
            if c.noise is not None
            else max(comparison.min_seconds, c.base * comparison.threshold_pct / 100)
        )
        pct = f", {100 * c.delta / c.base:+.1f}%" if c.base >= 0.0005 else ""
        grown.append(
            f"{c.scope} {c.name} {_seconds(c.base)} -> {_seconds(c.new)} s ({c.delta:+.3f} s{pct}), "
            f"beyond {bound:.3f} s ({_limits(comparison)})"
        )
    if rises or grown:
        shown = [*rises, *grown]
        more = f"; and {len(shown) - 3} more" if len(shown) > 3 else ""
        return printable("FAILED: " + "; ".join(shown[:3]) + more)
    kept = ""
    if comparison.counts:
        counted = ", ".join(f"{c.name} {_count(c.new)}" for c in comparison.counts[:3])
        kept = f"no count rose ({counted}, ...); "
    verdict = f"passed: {kept}no regression beyond {_limits(comparison)}"
    others = comparison.ungated_slower
    if others:
        scopes = ", ".join(g for g in GATES if any(c.scope == g for c in others))
        verdict += f"; {len(others)} slower figure(s) not gated ({scopes})"
    return verdict


def comparison_text(comparison: Comparison) -> str:
    """The warning (when the runs differ), the rule, a row per count (profile runs), a row
    per figure (the total first), and the verdict in one line."""
    several = max(comparison.runs) > 1
    parts: list[str] = []
    if comparison.counts:
        count_head: tuple[str, ...] = ("count", "base", "new", "status")
        count_rows = [[c.name, _count(c.base), _count(c.new), c.status] for c in comparison.counts]
        if several:  # each run's count, as the medians were read
            count_head = (*count_head, "base runs", "new runs")
            for cells, counted in zip(count_rows, comparison.counts, strict=True):
                cells += [_runs(counted.base_runs, "{:g}"), _runs(counted.new_runs, "{:g}")]
        parts += [*render_table(count_head, count_rows), ""]
    rows = []
    for c in comparison.changes:
        # A percentage of a base shown as 0.000 s would be noise (+12638496.8%): none.
        pct = f"{100 * c.delta / c.base:+.1f}%" if c.base is not None and c.base >= 0.0005 else "-"
        row = [c.scope, c.name, _seconds(c.base), _seconds(c.new), f"{c.delta:+.3f}", pct, c.status]
        if several:
            row.insert(6, _seconds(c.noise))
        rows.append(row)
    head: tuple[str, ...] = ("scope", "name", "base s", "new s", "delta s", "delta %", "status")
    if several:  # base and new are medians; the growth had to beat the noise
        head = (*head[:6], "noise s", head[6])
    warning = comparison_warning(comparison)
    rule = comparison_rule(comparison)
    if several:
        rule += f"\n{comparison.runs[0]} base run(s), {comparison.runs[1]} new run(s): each side's median"
    prose = wrap_prose([*([warning] if warning else []), *rule.splitlines()])
    optional = ("delta s", "noise s") if several else ("delta s",)
    return "\n".join(
        [
            *prose,
            "",
            *parts,
            *render_table(head, rows, optional=optional),
            "",
            *wrap_prose([comparison_verdict(comparison)]),
        ]
    )
