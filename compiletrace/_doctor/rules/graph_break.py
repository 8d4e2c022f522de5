"""``graph_break``: Dynamo split a function (or gave up on a frame, or raised at the break
under ``fullgraph=True``), with torch's reason, the user's line and the fix for a known
cause; breaks a library's own one-time code makes are one finding per cause.

What removing a break saves is the part the break adds, not the whole graph: each graph
after a break is compiled on its own, and merged into one it still compiles. Measured: half
of the resume frames' compile time (four Llama layers and three prints, aot_eager: 1.34 s
estimated, 1.69 s saved); a frame Dynamo gave up on, or that compiled no graph, whole.

>>> break_fix("Unsupported Tensor.item() call with capture_scalar_outputs=False")[:43]
'set torch._dynamo.config.capture_scalar_out'
>>> break_auto_fix("Failed to trace builtin operator: cannot trace `print`")
<Fix.REORDERABLE_PRINT: 'reorderable-print'>
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.fixes import Fix
from compiletrace._data.records import CompileStatus, GraphBreak, GraphRecord
from compiletrace._data.torch_text import (
    BREAK_CONTEXT_MANAGER,
    BREAK_DATA_DEPENDENT,
    BREAK_EXPLANATION,
    BREAK_EXPLICIT,
    BREAK_HINT,
    BREAK_ITEM,
    BREAK_LOGGING,
    BREAK_PAGE,
    BREAK_PRINT,
    RESUME_PREFIX,
    UNSUPPORTED,
)
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.shared import AUTO_FIX, MAX_EXAMPLES, Owner
from compiletrace._doctor.stake import Claim, named_records
from compiletrace._doctor.verdicts import by_counts

__all__ = [
    "RULE",
    "break_auto_fix",
    "break_fix",
    "break_summary",
    "library_break_fix",
    "recorded_break_auto_fix",
    "recorded_break_fix",
]

KIND = FindingKind.GRAPH_BREAK
FIXES = (Fix.REORDERABLE_PRINT, Fix.CAPTURE_SCALAR_OUTPUTS)
RESUME_SHARE = 0.5  # of a resume frame's compile, what removing the break before it saves
_BRANCHED_SCALAR_FIX = (
    "the value read with .item() decides a branch (an if, a loop's exit): captured as a scalar it "
    "would break the graph again at the branch, so keep the decision a tensor (torch.where, "
    "torch.cond), move the check out of the compiled code, or compile the loop's body on its own"
)

# A break's known cause: its fix, and the fix that applies it from outside the program,
# where one does.
_BREAK_FIXES: tuple[tuple[re.Pattern[str], str, Fix | None], ...] = (
    (
        BREAK_PRINT,
        "remove the print from the compiled code, or let Dynamo move it out of the graph: "
        "torch._dynamo.config.reorderable_logging_functions.add(print)",
        Fix.REORDERABLE_PRINT,
    ),
    (
        BREAK_LOGGING,
        "remove the log call from the compiled code, or let Dynamo move it out of the graph: "
        "torch._dynamo.config.reorderable_logging_functions.add(the logging function)",
        None,
    ),
    (
        BREAK_ITEM,
        "set torch._dynamo.config.capture_scalar_outputs = True, or keep the value a tensor "
        "instead of calling .item()",
        Fix.CAPTURE_SCALAR_OUTPUTS,
    ),
    (BREAK_EXPLICIT, "remove the torch._dynamo.graph_break() call", None),
    (
        BREAK_DATA_DEPENDENT,
        "branch on tensors with torch.where or torch.cond instead of a Python if on a tensor's value",
        None,
    ),
)


# Breaks a library's own code makes once, on a model's first call: the library's file, and
# either the break's reason there or the name of the library's function the frame is.
class _LibraryBreak(NamedTuple):
    file: re.Pattern[str]
    reason: re.Pattern[str]  # a break at a line of the file, for this reason
    function: re.Pattern[str]  # or any break in a frame of the file's functions so named
    fix: str


_LIBRARY_BREAKS: tuple[_LibraryBreak, ...] = (
    # transformers (5.x) installs its output-capturing hooks on a model's first call, under a
    # threading lock, setting attributes on classes: Dynamo traces none of it. Its per-call
    # code in the same file (reading a context variable) is not this.
    _LibraryBreak(
        re.compile(r"transformers[/\\]utils[/\\]output_capturing\.py"),
        BREAK_CONTEXT_MANAGER,
        re.compile(r"install"),
        "transformers installs its output-capturing hooks on the model's first call (under a lock, "
        "setting attributes Dynamo cannot trace): call the model once before compiling it, so the "
        "hooks are in place and the compiled code never installs them",
    ),
)


def library_break_fix(
    location: str, reason: str, frame_location: str = "", frame_name: str = ""
) -> str | None:
    """The fix for a break a library's own one-time code makes: by the break's file and
    reason, or the library's function the frame is.

    >>> where = "/venv/site-packages/transformers/utils/output_capturing.py:239"
    >>> library_break_fix(where, "Unsupported context manager: ... a `lock` context manager")[:38]
    'transformers installs its output-captu'
    >>> library_break_fix(where, "Unsupported Tensor.item() call") is None  # the user's own break
    True
    """
    for rule in _LIBRARY_BREAKS:
        at_line = rule.file.search(location) and rule.reason.search(reason)
        in_function = rule.file.search(frame_location) and rule.function.search(frame_name)
        if at_line or in_function:
            return rule.fix
    return None


def recorded_break_fix(b: GraphBreak) -> str:
    """The change that removes a recorded break: :func:`break_fix`, but for a ``.item()``
    whose value the code branches on, which capturing scalars cannot keep in the graph."""
    if b.scalar_in_branch and BREAK_ITEM.search(b.reason):
        return _BRANCHED_SCALAR_FIX
    return break_fix(b.reason)


def recorded_break_auto_fix(b: GraphBreak) -> Fix | None:
    """:func:`break_auto_fix` of a recorded break; none for a scalar the code branches on."""
    return None if b.scalar_in_branch and BREAK_ITEM.search(b.reason) else break_auto_fix(b.reason)


def break_fix(reason: str) -> str:
    """The change that removes a graph break: a known cause's fix, else torch's own hint."""
    for pattern, fix, _ in _BREAK_FIXES:
        if pattern.search(reason):
            return fix
    hint = BREAK_HINT.search(reason)
    return hint[1].strip() if hint else "rewrite the line so that Dynamo can trace it (see torch's reason)"


def break_auto_fix(reason: str) -> Fix | None:
    """The fix for a graph break that applies from outside the program, if any."""
    for pattern, _, fix in _BREAK_FIXES:
        if pattern.search(reason):
            return fix
    return None


def break_summary(reason: str) -> str:
    """Torch's graph-break reason in one line: its first line, with its explanation when the
    first line alone is vague.

    >>> break_summary("Failed to trace builtin operator\\n  Explanation: cannot trace `print`\\nHint: x")
    'Failed to trace builtin operator: cannot trace `print`'
    """
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    if not lines:
        return "(torch gave no reason)"
    explanation = next((line for line in lines[1:] if line.startswith(BREAK_EXPLANATION)), None)
    page = BREAK_PAGE.search(reason)
    title = f"{lines[0]} ({page[1]})" if page else lines[0]  # torch's graph-break code
    if explanation is None:
        return title
    return f"{title}: {explanation.removeprefix(BREAK_EXPLANATION).strip()}"


def _sites(items: list[Break]) -> str:
    """The breaks counted by their place in the code, as torch's tools count them: a site
    compiled twice (a recompile) is one site."""
    sites = len(dict.fromkeys(item["location"] for item in items))
    return f"graph breaks at {sites} sites" if sites > 1 else "a graph break"


# One break as a finding's evidence quotes it: where, torch's reason in a line, whether Dynamo
# gave up on the frame, its fix, and the compile ids it was seen in.
Break = dict[str, Any]


def _unsupported(error_type: str | None) -> bool:
    return (error_type or "").rpartition(".")[2] == UNSUPPORTED


def check(evidence: Evidence) -> Iterator[Finding]:
    frames = evidence.by_owner()
    breaks: dict[Owner, dict[tuple[str, str], Break]] = {}
    library_made: set[int] = set()  # the breaks a library's one-time code made (by id)
    for r, owner in evidence.owned():
        for b in r.graph_breaks:
            where = b.location or r.code_location
            seen = breaks.setdefault(owner, {}).setdefault((where, b.reason), {})
            if not seen:
                library = library_break_fix(where, b.reason, r.code_location, r.code_name)
                branched = recorded_break_auto_fix(b) is None and break_auto_fix(b.reason) is not None
                page = BREAK_PAGE.search(b.reason)
                seen.update(
                    location=where,
                    reason=break_summary(b.reason),
                    **({"page": page[0]} if page else {}),
                    frame_skipped=b.frame_skipped,
                    fix=library or recorded_break_fix(b),
                    seen_in=[],
                    **({"scalar_in_branch": True} if branched else {}),
                )
                if library is not None:
                    library_made.add(id(seen))
            seen["seen_in"].append(r.compile_id)
    # Frames whose every break is a library's one-time code: one finding per component and
    # cause, not one per internal function of the library's.
    by_library: dict[tuple[str, str], list[tuple[Owner, list[Break]]]] = {}
    for key, by_place in breaks.items():
        items = list(by_place.values())
        if all(id(item) in library_made for item in items):
            by_library.setdefault((key[0], items[0]["fix"]), []).append((key, items))
            continue
        yield _user_break(key, frames[key], by_place, items)
    for (component, fix), owned in by_library.items():
        yield _library_break(component, fix, owned, frames)


def _user_break(
    key: Owner,
    frame: list[GraphRecord],
    by_place: dict[tuple[str, str], Break],
    items: list[Break],
) -> Finding:
    component, _, root, _ = key
    first = items[0]
    branched = {reason for (_, reason), item in by_place.items() if item.get("scalar_in_branch")}
    auto_fixes = [fix for _, reason in by_place if reason not in branched and (fix := break_auto_fix(reason))]
    graphs = sum(1 for g in frame if g.graph_node_count > 0)
    pieces = len({g.code_name for g in frame if g.graph_node_count > 0})
    fixes = list(dict.fromkeys(item["fix"].rstrip(". ") for item in items))
    pages = dict.fromkeys(item["page"] for item in items if "page" in item)
    fixes += [f"torch's page on it: {page}" for page in pages]
    n = _sites(items)
    root = f"{root}{shared.at(frame)}"
    # Dynamo's own Unsupported, raised at the break: what fullgraph=True makes of a break
    # (a backend's error is no break's doing).
    failed = [g for g in frame if g.status is CompileStatus.ERROR and _unsupported(g.error_type)]
    if failed:
        # The break raised (fullgraph=True, or error_on_graph_break): the user saw torch's
        # exception, and nothing of the frame compiled.
        where = first["location"] or "?"
        title = f"{root} failed to compile: torch raised Unsupported at the break at {where}"
        fixes.append(
            "with fullgraph=True (or torch._dynamo.config.error_on_graph_break) a graph break is an "
            "error: remove the break, or compile without fullgraph=True so Dynamo splits the graph there"
        )
    elif any(item["frame_skipped"] for item in items):
        title = f"{root} runs eagerly: Dynamo gave up on the whole frame at {first['location'] or '?'}"
        fixes.append(
            "a break inside a loop or a context manager skips the whole frame: move the call out of "
            "it, or compile the loop's body on its own"
        )
    else:
        compiled = f" ({graphs} compiled, recompiles included)" if graphs != pieces else ""
        if pieces == 0:
            title = f"{n} left {root} with no graph{compiled}"
        elif pieces == 1:  # one side of the break compiled, the other nothing: a cut
            only = next(g.code_name for g in frame if g.graph_node_count > 0)
            side = "before" if only.startswith(RESUME_PREFIX) else "past"
            title = f"{n} in {root} left it one graph, none {side} the break{compiled}"
        else:
            title = f"{n} split {root} into {pieces} graphs{compiled}"
    return Finding(
        KIND,
        component,
        shared.seconds(frame),
        f"{title}: {first['reason']}",
        "; ".join(fixes),
        first["location"],
        {
            "breaks": items,
            "frame": f"{key[2]} ({shared.located(key) or key[1]})",
            "modules": shared.modules(frame),
            "graphs": graphs,
            "frame_compile_ids": shared.ids(frame),
            **({AUTO_FIX: auto_fixes[0].spelled()} if auto_fixes else {}),
        },
    )


def _library_break(
    component: str,
    fix: str,
    owned: list[tuple[Owner, list[Break]]],
    frames: dict[Owner, list[GraphRecord]],
) -> Finding:
    frame = [r for key, _ in owned for r in frames[key]]
    items = [item for _, found_items in owned for item in found_items]
    roots = list(dict.fromkeys(f"{key[2]}{shared.at(frames[key])}" for key, _ in owned))
    n = _sites(items)
    return Finding(
        KIND,
        component,
        shared.seconds(frame),
        f"{n} in a library's one-time code, in {len(roots)} frame{'s' if len(roots) != 1 else ''} "
        f"({', '.join(roots[:MAX_EXAMPLES])}): {items[0]['reason']}",
        fix,
        items[0]["location"],
        {
            "breaks": items,
            "frames": roots[: MAX_EXAMPLES * 4],
            "modules": shared.modules(frame),
            "graphs": sum(1 for g in frame if g.graph_node_count > 0),
            "frame_compile_ids": shared.ids(frame),
        },
    )


def claims(finding: Finding, evidence: Evidence) -> list[Claim]:
    """Half of each graph after a break (what merging it saves), and the whole of a frame
    that compiled nothing (Dynamo gave up on it, or it broke before any operation)."""
    return [
        Claim(r, RESUME_SHARE if r.graph_node_count and r.code_name.startswith(RESUME_PREFIX) else 1.0)
        for r in named_records(finding, evidence)
        if not r.graph_node_count or r.code_name.startswith(RESUME_PREFIX)
    ]


RULE = Rule(KIND, check, FIXES, by_counts, claims)
