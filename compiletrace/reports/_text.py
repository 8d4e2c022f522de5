"""Text views of a registry or a run: a header (how the run was made, what the compile
caches did), the per-component / per-graph tables costliest first with each one's share of
the compile time, and the one-line summary."""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from compiletrace._data.cache_hits import find_expensive_hits
from compiletrace._data.findings import Finding
from compiletrace._data.phases import PHASES
from compiletrace._data.records import (
    NS_PER_S,
    CacheOutcome,
    GraphRecord,
    component_totals,
)
from compiletrace._data.run import Run, RunOrRecords, run_parts
from compiletrace._data.run_meta import CompilationMode, LoadedArtifacts, RunMeta
from compiletrace._data.torch_trace import TRACE_SOURCE
from compiletrace._io.text import printable, text_width
from compiletrace._version import __version__
from compiletrace.reports._findings import findings_text
from compiletrace.reports._flame import top_functions_lines
from compiletrace.reports._table import (
    COMPONENT_HEADERS,
    GRAPH_HEADERS,
    PHASE_HEADERS,
    by_cost,
    component_order,
    component_rows,
    costliest,
    graph_rows,
    phase_rows,
    render_table,
    rest_line,
    setup_line,
    share,
    wrap_prose,
)

__all__ = [
    "cache_line",
    "cache_state",
    "eager_baseline_lines",
    "header_lines",
    "log_summary",
    "profile_text",
    "summary_line",
    "summary_table",
    "totals_line",
    "warmup_lines",
]

logger = logging.getLogger("compiletrace")


def summary_line(records: Sequence[GraphRecord]) -> str:
    """``compilation took 12.34 s (language_model: 8.00 s, encoder: 4.34 s)``: the
    components that compiled, no other (a component with no compile was not measured)."""
    return totals_line({name: ns / NS_PER_S for name, ns in component_totals(records).items()})


def totals_line(seconds_by_component: Mapping[str, float]) -> str:
    """The one-line summary from seconds per component (a registry's exact running totals).

    >>> totals_line({"encoder": 1.5})
    'compilation took 1.50 s (encoder: 1.50 s)'
    >>> totals_line({})
    'compilation took 0.00 s (nothing compiled)'
    """
    parts = ", ".join(f"{printable(name)}: {s:.2f} s" for name, s in seconds_by_component.items())
    return f"compilation took {sum(seconds_by_component.values()):.2f} s ({parts or 'nothing compiled'})"


def log_summary(records: Sequence[GraphRecord]) -> str:
    """Log the one-line summary on the "compiletrace" logger (INFO) and return it."""
    line = summary_line(records)
    logger.info(line)
    return line


def cache_state(records: Sequence[GraphRecord]) -> str:
    """What the compile caches did for the run: "cold" (every graph missed), "warm" (every
    graph hit), "none" (no graph consulted a cache, or none compiled), "mixed" otherwise.

    >>> cache_state([])
    'none'
    """
    outcomes = [r.cache_outcome for r in records]
    if all(o is CacheOutcome.NONE for o in outcomes):
        return "none"
    if all(o is CacheOutcome.MISS for o in outcomes):
        return "cold"
    if all(o is CacheOutcome.HIT for o in outcomes):
        return "warm"
    return "mixed"


def _graphs(n: int) -> str:
    return f"{n} graph" if n == 1 else f"{n} graphs"


def cache_line(records: Sequence[GraphRecord]) -> str:
    """The cache state in words, with the graph counts behind it.

    >>> cache_line([])
    'cache: none (no graph compiled)'
    """
    state = cache_state(records)
    n = len(records)
    if n == 0:
        return "cache: none (no graph compiled)"
    if state == "none":
        return f"cache: none ({_graphs(n)}, none consulted a compile cache)"
    if state == "cold":
        return f"cache: cold ({_graphs(n)}, every one a miss)"
    if state == "warm":
        # A hit that still compiles (a portable cache holding no kernels) is warm in name only.
        hits = find_expensive_hits(records)
        if hits:
            compiling_s = sum(hit.dominant_ns for hit in hits) / NS_PER_S
            return (
                f"cache: warm in name ({_graphs(n)}, every one a hit, but {len(hits)} still "
                f"compiled for {compiling_s:.2f} s)"
            )
        return f"cache: warm ({_graphs(n)}, every one a hit)"
    counts = {o: sum(r.cache_outcome is o for r in records) for o in CacheOutcome}
    parts = ", ".join(f"{counts[o]} {o.value}" for o in CacheOutcome if counts[o])
    return f"cache: mixed ({parts})"


def _shown(value: str | None) -> str | None:
    return None if value is None or value == "" else printable(value)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _artifacts_line(info: LoadedArtifacts) -> str:
    facts = [f"{info.size_bytes / 1e6:.2f} MB"]
    if info.artifacts:
        facts.append(", ".join(f"{n} {printable(k)}" for k, n in sorted(info.artifacts.items())))
    facts.append("checked" if info.checked else "unchecked (--trust)")
    return (
        f"cache artifacts: loaded {printable(info.path)} ({'; '.join(facts)}) in {info.seconds:.2f} s, "
        "before compiling"
    )


def settings_text(settings: Sequence[tuple[str, str]]) -> str:
    """What a compile used, in torch.compile's words.

    >>> settings_text((("mode", "max-autotune-no-cudagraphs"), ("dynamic", "None"), ("fullgraph", "False")))
    'mode max-autotune-no-cudagraphs, dynamic=None, fullgraph=False'
    """
    words = (f"mode {value}" if key == "mode" else f"{key}={value}" for key, value in settings)
    return printable(", ".join(words))


def _settings_by_component(records: Sequence[GraphRecord]) -> dict[str, str]:
    """Each component's settings in words (several, where its compiles differ); where the
    records name more than one backend, each names its backend too."""
    several_backends = len({r.backend for r in records}) > 1
    seen: dict[str, dict[str, None]] = {}
    for r in records:
        text = settings_text(r.settings)
        if several_backends:
            text = f"backend {printable(r.backend)}" + (f", {text}" if text else "")
        seen.setdefault(r.component, {})[text] = None
    return {name: "; ".join(texts) for name, texts in seen.items()}


def header_lines(records: Sequence[GraphRecord], meta: RunMeta | None = None) -> list[str]:
    """The lines above the tables: what ran and how (model, device, backend, mode,
    compilation mode when not stock), the torch and compiletrace versions and the cache
    state, and the cache artifacts loaded first, if any. Without ``meta`` (a registry
    has none), the cache line alone.

    >>> meta = RunMeta(model="m:f", device="cpu", backend="eager", torch_version="2.13.0",
    ...                compiletrace_version="0.1.0")
    >>> print("\\n".join(header_lines([], meta)))
    model m:f on cpu: backend eager
    torch 2.13.0, compiletrace 0.1.0; cache: none (no graph compiled)
    """
    if meta is None or meta.empty:
        return [cache_line(records)]
    what = f"model {_shown(meta.model) or '?'}"
    device = _shown(meta.device)
    if device is not None:
        what += f" on {device}"
    backend = _shown(meta.backend) or "?"
    how = [f"backend {backend}"]
    used = _settings_by_component(records)
    alike = set(used.values())
    mode = _shown(meta.mode)
    if mode is None and meta.source is None and backend == "inductor":
        mode = "default"  # profile() compiled it, and was given no mode
    several_backends = len({r.backend for r in records}) > 1
    if len(alike) == 1 and next(iter(alike)) and not several_backends:
        text = next(iter(alike))  # what every compile used: its mode, dynamic, fullgraph
        how += [f"mode {mode}", text] if mode is not None and not text.startswith("mode ") else [text]
    elif mode is not None:  # inductor's mode; other backends have none unless one was given
        how.append(f"mode {mode}")
    if meta.compilation_mode is CompilationMode.NONE:
        how.append(f"compilation mode {meta.compilation_mode.value}")
    versions = [f"torch {_shown(meta.torch_version) or '?'}"]
    if meta.compiletrace_version is None and meta.source == TRACE_SOURCE:
        versions.append(f"read by compiletrace {__version__}")  # torch wrote it, not compiletrace
    else:
        versions.append(f"compiletrace {_shown(meta.compiletrace_version) or '?'}")
    lines = [f"{what}: {', '.join(how)}"]
    if len(alike) > 1 or (several_backends and any(alike)):  # compiled differently: each says how
        lines += [f"  {printable(name)}: {text or 'not recorded'}" for name, text in used.items()]
    lines.append(f"{', '.join(versions)}; {cache_line(records)}")
    if meta.cache_artifacts is not None:
        lines.append(_artifacts_line(meta.cache_artifacts))
    return lines


def steady_state_line(meta: RunMeta) -> str | None:
    """The compiled model's steady-state call time, when the run measured it
    (``profile --steady-calls N``).

    >>> steady_state_line(RunMeta(steady_call_s=0.00125, steady_calls=20))
    'steady state: 1.250 ms per call (median of 20 calls after the warm-up)'
    """
    if meta.steady_call_s is None or meta.steady_calls is None:
        return None
    calls, seconds = meta.steady_calls, meta.steady_call_s
    return f"steady state: {seconds * 1000:.3f} ms per call (median of {calls} calls after the warm-up)"


def eager_baseline_lines(meta: RunMeta) -> list[str]:
    """What a run in compilation mode none measured: one eager run of the model (the
    request path), the baseline a compiled start-up is weighed against.

    >>> eager_baseline_lines(RunMeta(eager_run_s=0.25))
    ['nothing was compiled (compilation mode none)', 'eager run (the baseline): 0.250 s']
    """
    lines = ["nothing was compiled (compilation mode none)"]
    seconds = meta.eager_run_s
    if seconds is None:
        lines.append("eager run (the baseline): not recorded in this run")
    else:
        lines.append(f"eager run (the baseline): {seconds:.3f} s")
    return lines


def warmup_fact(skipped: bool, duration_s: float, meta: RunMeta) -> str:
    """The warm-up in a few words, for a report's facts: its seconds, or why there was none.

    >>> warmup_fact(True, 0.0, RunMeta(source="TORCH_TRACE"))
    'none: TORCH_TRACE recorded the program as it ran'
    """
    if not skipped:
        return f"{duration_s:.3f} s"
    if meta.compilation_mode is CompilationMode.NONE:
        return "skipped (compilation mode none: eager)"
    if meta.source:
        return f"none: {printable(meta.source)} recorded the program as it ran"
    return "skipped"


def warmup_lines(warmup: Mapping[str, Any], compile_s: float | None = None) -> list[str]:
    """The warm-up in words: how long it took and how much of it was compiling; when it
    was skipped (compilation mode none), what it would have cost a compiled start-up:
    ``compile_s`` seconds of compiling when a compiled run measured them, else unknown.

    >>> warmup_lines({"skipped": False, "duration_s": 2.5, "by_component": {"encoder": 2.0}})
    ['warm-up took 2.50 s (2.00 s of it compiling)']
    >>> warmup_lines({"skipped": True}, compile_s=9.5)[1]
    '  and run the model once: about 9.50 s of compiling, measured by a compiled run'
    """
    if not warmup.get("skipped", False):
        duration = _number(warmup.get("duration_s")) or 0.0
        by_component = warmup.get("by_component")
        compiling = (
            sum(v for v in by_component.values() if _number(v) is not None)
            if isinstance(by_component, Mapping)
            else 0.0
        )
        return [f"warm-up took {duration:.2f} s ({compiling:.2f} s of it compiling)"]
    lines = ["warm-up skipped (compilation mode none): in a compiled start-up it would compile every graph"]
    if compile_s is None:
        lines.append("  and run the model once; that compile time is unknown without a compiled run")
    else:
        lines.append(
            f"  and run the model once: about {compile_s:.2f} s of compiling, measured by a compiled run"
        )
    return lines


# Columns a text table leaves out when no row has anything in them ("0.000", "-", empty):
# ``backward s`` in inference, ``recompile reason`` without recompiles. JSON keeps them all.
_DROPPABLE = frozenset({"dynamo s", "backend s", "backward s", "recompile reason", *PHASES})
_BLANK = frozenset({"", "-", "0.000"})


def _without_blank_columns(
    headers: Sequence[str], rows: Sequence[Sequence[str]]
) -> tuple[list[str], list[list[str]]]:
    keep = [
        i for i, h in enumerate(headers) if h not in _DROPPABLE or any(row[i] not in _BLANK for row in rows)
    ]
    return [headers[i] for i in keep], [[row[i] for i in keep] for row in rows]


def _with_share(
    headers: Sequence[str], rows: Sequence[Sequence[str]], shares: Sequence[str]
) -> tuple[list[str], list[list[str]]]:
    # The share goes right after the total it is a share of.
    at = list(headers).index("total s") + 1
    return (
        [*headers[:at], "share", *headers[at:]],
        [[*row[:at], s, *row[at:]] for row, s in zip(rows, shares, strict=True)],
    )


def _component_table(records: Sequence[GraphRecord]) -> list[str]:
    totals = component_totals(records)
    overall = sum(totals.values())
    by_name = {row[0]: row for row in component_rows(records)}
    names = component_order(records)
    headers, rows = _with_share(
        COMPONENT_HEADERS, [by_name[n] for n in names], [share(totals[n], overall) for n in names]
    )
    return render_table(
        *_without_blank_columns(headers, rows), optional=_COMPONENT_OPTIONAL, cramped=_COMPONENT_CRAMPED
    )


# The per-graph and per-component tables' columns a narrow screen leaves out first.
# "optional": left out rather than cut a name; "cramped": only where names would be unreadable.
_GRAPH_OPTIONAL = ("nodes", "cache", "status")
_GRAPH_CRAMPED = ("share", "backward s", "dynamo s", "backend s")
_COMPONENT_OPTIONAL = ("recompiles",)
_COMPONENT_CRAMPED = ("backward s", "dynamo s", "backend s")
_REASON = "recompile reason"


def _graph_table(shown: Sequence[GraphRecord], overall_ns: int) -> list[str]:
    """The per-graph table; where its recompile reasons would be cut, they leave the table
    for lines of their own under it, whole."""
    headers, rows = _with_share(
        GRAPH_HEADERS, graph_rows(shown), [share(r.total_ns, overall_ns) for r in shown]
    )
    headers, rows = _without_blank_columns(headers, rows)
    reasons: list[str] = []
    if _REASON in headers:
        i = headers.index(_REASON)
        table = render_table(headers, rows, optional=_GRAPH_OPTIONAL, cramped=_GRAPH_CRAMPED)
        whole = [printable(row[i]) for row in rows]
        if all(not reason or any(reason in line for line in table) for reason in whole):
            return table  # every reason fits the table whole
        reasons = [f"  {r.compile_id}: {printable(r.first_reason_line)}" for r in shown if r.recompile_reason]
        headers = headers[:i] + headers[i + 1 :]
        rows = [row[:i] + row[i + 1 :] for row in rows]
    lines = render_table(headers, rows, optional=_GRAPH_OPTIONAL, cramped=_GRAPH_CRAMPED)
    if reasons:
        lines += ["", "Recompile reasons", *wrap_prose(reasons, indent="    ")]
    return lines


def _phase_table(shown: Sequence[GraphRecord]) -> list[str]:
    headers, rows = _without_blank_columns(PHASE_HEADERS, phase_rows(shown))
    if not rows or not any(h in PHASES for h in headers):
        return []  # no graph spent measurable time in any phase: the table says nothing
    return render_table(headers, rows)


def summary_table(run: RunOrRecords) -> str:
    """The text report of a run (or of records alone): the header (:func:`header_lines`),
    then per component and per graph, costliest first, each with its share of the compile
    time (columns no row uses left out), the backend phases, the functions Dynamo spent
    most time tracing (when recorded with ``trace_cost``), and last the one-line summary
    (:func:`summary_line`).

    In a run in compilation mode none, where nothing compiles, the eager baseline
    (:func:`eager_baseline_lines`) stands in for the tables and the summary line.

    >>> print(summary_table([]))
    cache: none (no graph compiled)
    <BLANKLINE>
    no graph was compiled
    <BLANKLINE>
    compilation took 0.00 s (nothing compiled)
    """
    records, _, meta, _ = run_parts(run)
    lines = [*header_lines(records, meta), ""]
    if meta.compilation_mode is CompilationMode.NONE and not records:
        return "\n".join(wrap_prose([*lines, *eager_baseline_lines(meta)]))
    if not records:
        lines += ["no graph was compiled", "", summary_line(records)]
        return "\n".join(wrap_prose(lines))
    shown, rest = costliest(records)
    shown = by_cost(shown)
    lines += ["Per component", *_component_table(records)]
    setup = setup_line(records)
    if setup is not None:
        lines += textwrap.wrap(setup, text_width(), subsequent_indent="  ")
    lines += ["", "Per graph", *_graph_table(shown, sum(r.total_ns for r in records))]
    if rest:
        lines.append(rest_line(rest))
    phases = _phase_table(shown)
    if phases:
        lines += ["", "Backend phases per graph (seconds)", *phases]
    functions = top_functions_lines(records)
    if functions:
        lines += ["", *functions]
    lines += ["", summary_line(records)]
    return "\n".join(wrap_prose(lines))


def profile_text(
    run: Run, findings: Sequence[Finding] = (), expensive_hits: Sequence[str] = (), *, top_findings: int = 3
) -> str:
    """What ``compiletrace profile`` prints of its run, in reading order: the header, tables
    and summary line (:func:`summary_table`), the warm-up, the steady-state speed when
    measured, then the notes: the expensive cache hits (each one's explanation) and the
    doctor's first ``top_findings`` findings.

    >>> from compiletrace._data.records import CompilationTimes
    >>> from compiletrace._data.run import WarmupResult
    >>> meta = RunMeta(steady_call_s=0.002, steady_calls=5)
    >>> run = Run((), WarmupResult(False, 1.5, CompilationTimes()), meta)
    >>> text = profile_text(run, expensive_hits=["0/0 encoder: a hit that took 2.1 s"])
    >>> print(text[text.index("warm-up took") :])
    warm-up took 1.50 s (0.00 s of it compiling)
    steady state: 2.000 ms per call (median of 5 calls after the warm-up)
    <BLANKLINE>
    Expensive cache hits (a hit that still compiles):
      0/0 encoder: a hit that took 2.1 s
    """
    lines = [summary_table(run), *warmup_lines(run.warmup.to_dict())]
    steady = steady_state_line(run.meta)
    if steady is not None:
        lines.append(steady)
    if expensive_hits:
        lines += ["", "Expensive cache hits (a hit that still compiles):"]
        lines += [f"  {printable(hit)}" for hit in expensive_hits]
    if findings:
        lines += ["", findings_text(findings, limit=top_findings)]
    return "\n".join(wrap_prose("\n".join(lines).splitlines()))
