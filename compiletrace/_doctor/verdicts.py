"""How ``doctor --verify`` reads a fix's before and after: the verdict words, what a trial
must tell (:class:`Measured`), the judgements rules share, and the seconds. Each rule with a
fix that applies from outside the program names its judge (``Rule.judge``); running the
trials is ``compiletrace._app.verify``'s.

Two readings make a verdict. The counts (frame compiles, graph nodes, the finding found
again: the same on a busy machine as on an idle one) say whether the fix did what it says.
The seconds say whether that saved the user anything: the program runs as it is and with
the fix in turn, several rounds (base, fix, base, fix, ...), and each round's pair, run side
by side under the same load, gives one difference in compile CPU seconds
(:func:`seconds_effect`). A fix is verified only when the median difference beats the
differences' spread (and a floor: 3% of the compile, 0.05 s); one that costs seconds made
it slower, whatever it did to the counts. A fix whose point is to compile code that ran
uncompiled costs compile seconds by design: when its counts verify it, its verdict is
"compiles now", never "verified" (which promises seconds saved).

Before either reading, what the fix did to the *compiled program*: a trial with the fix in
which code runs uncompiled that compiled as it is (a frame past torch's recompile limit, a
frame torch gave up on, blocks of a regional compile left uncompiled) "runs uncompiled"
(:func:`uncompiled_why`), whatever its seconds: a saving made by not compiling is no
saving. A gate (the program stopped at a compile after ready) that held says "gate held":
it is no fix, and saves no seconds. Every verdict but "verified" says why
(:func:`why_not_verified`).

>>> seconds_effect([5.0, 5.4, 5.1], [3.9, 4.0, 4.2]).effect
<Effect.SAVES: 'saves'>
>>> with_seconds(VERIFIED, seconds_effect([5.0, 5.4, 5.1], [6.9, 7.0, 7.2]))
'made it slower'
"""

from __future__ import annotations

import enum
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from compiletrace._data.findings import Finding
from compiletrace._data.fixes import Fix
from compiletrace._data.records import GraphRecord
from compiletrace._doctor.shared import DEPLOYMENT, FIX_KIND, fix_of

__all__ = [
    "BROKE",
    "COMPILES",
    "DID_NOT_HELP",
    "GATE_HELD",
    "MANUAL",
    "NOT_JUDGED",
    "PARTLY",
    "SLOWER",
    "UNCOMPILED",
    "VERDICTS",
    "VERIFIED",
    "Effect",
    "Judge",
    "Measured",
    "SecondsEffect",
    "baseline_move",
    "by_counts",
    "partly",
    "recompiles_of",
    "regional_by_counts",
    "same_finding",
    "seconds_effect",
    "still_there",
    "uncompiled_why",
    "why_not_verified",
    "with_seconds",
]

VERIFIED = "verified"
DID_NOT_HELP = "did not help"
PARTLY = "helped in part"
BROKE = "broke the program"
SLOWER = "made it slower"
MANUAL = "cannot be applied automatically"
# What ran uncompiled compiles with the fix: the counts say so, and the seconds are not
# judged (compiling costs them; what the program gains is its calls', not its start's).
COMPILES = "compiles now"
# With the fix, code runs uncompiled that compiled as it is: never verified, whatever it saved.
UNCOMPILED = "runs uncompiled"
# A gate (fail-after-ready) stopped the program at a compile after ready, as it should: no fix.
GATE_HELD = "gate held"
# What the rounds cannot decide: --budget left one round where more were asked (no spread to
# read the seconds against), or the job's finding did not show in the trials' baseline.
NOT_JUDGED = "not judged"
# every word a row may say
VERDICTS = (
    VERIFIED,
    PARTLY,
    COMPILES,
    DID_NOT_HELP,
    SLOWER,
    UNCOMPILED,
    BROKE,
    MANUAL,
    GATE_HELD,
    NOT_JUDGED,
)

FLOOR_S = 0.05  # a saving must beat this many CPU seconds ...
FLOOR_SHARE = 0.03  # ... and this share of the compile, whatever the spread


class Effect(str, enum.Enum):
    """What a fix did to the compile's seconds, read against the runs' own spread."""

    SAVES = "saves"
    COSTS = "costs"
    NOISE = "within noise"
    NOT_JUDGED = "not judged"  # one round: no spread to read a difference against


@dataclass(frozen=True)
class SecondsEffect:
    """The paired differences of interleaved runs (base minus fix, one per round): their
    median (the saving), half their range (the spread), and what that makes of the fix."""

    effect: Effect
    saving: float  # seconds; negative: the fix cost seconds
    spread: float
    noise: float  # what a saving had to beat: the spread, or the floor
    rounds: int


def seconds_effect(
    base: Sequence[float], fix: Sequence[float], floor_s: float = FLOOR_S, floor_share: float = FLOOR_SHARE
) -> SecondsEffect:
    """Read the rounds' pairs (``base[i]`` ran beside ``fix[i]``): "saves" when the median
    saving beats the noise, "costs" when the median loss does, else "within noise"; one
    round is "not judged". The noise is the largest of the pairs' half range, the floor,
    and what the program as it is moved by itself from round to round (:func:`baseline_move`):
    a saving no larger than the baseline's own move is not one the rounds can show.

    >>> e = seconds_effect([4.99, 4.24, 6.06], [3.65, 3.64, 3.93])
    >>> e.effect.value, round(e.saving, 2), round(e.spread, 2)
    ('saves', 1.34, 0.76)

    Two rounds, a baseline that moved 1.53 s between them: a saving of 1.00 s is not shown.

    >>> e = seconds_effect([5.00, 6.53], [4.97, 4.56])
    >>> e.effect.value, round(e.saving, 2), round(e.spread, 2), round(e.noise, 2)
    ('within noise', 1.0, 0.97, 1.53)
    """
    pairs = [b - f for b, f in zip(base, fix, strict=False)]
    if not pairs:
        return SecondsEffect(Effect.NOT_JUDGED, 0.0, 0.0, 0.0, 0)
    saving = statistics.median(pairs)
    spread = (max(pairs) - min(pairs)) / 2
    paired_base = list(base[: len(pairs)])
    noise = max(spread, baseline_move(paired_base), floor_s, floor_share * statistics.median(base))
    if len(pairs) < 2:
        return SecondsEffect(Effect.NOT_JUDGED, saving, spread, noise, len(pairs))
    effect = Effect.SAVES if saving > noise else Effect.COSTS if saving < -noise else Effect.NOISE
    return SecondsEffect(effect, saving, spread, noise, len(pairs))


def baseline_move(base: Sequence[float]) -> float:
    """How far the program as it is moved by itself across the rounds: half its range from
    three rounds on (the median then stands between the extremes), its whole range with two
    (their mean is the median, and nothing tells which of the two was the odd one).

    >>> baseline_move([5.0, 6.5]), baseline_move([5.0, 6.0, 5.5]), baseline_move([5.0])
    (1.5, 0.5, 0.0)
    """
    if len(base) < 2:
        return 0.0
    whole = max(base) - min(base)
    return whole if len(base) == 2 else whole / 2


def with_seconds(counts: str, seconds: SecondsEffect) -> str:
    """The verdict of the counts, read with the seconds: a fix that costs seconds made it
    slower; one whose saving is within noise did not help; a broken program and a fix that
    needs an edit stay as they are, and so does every verdict when one round left the
    seconds unjudged."""
    if counts in (BROKE, MANUAL) or seconds.effect is Effect.NOT_JUDGED:
        return counts
    if seconds.effect is Effect.COSTS:
        return SLOWER
    if counts in (VERIFIED, PARTLY) and seconds.effect is not Effect.SAVES:
        return DID_NOT_HELP
    return counts


class Measured(Protocol):
    """One run of the program (with no fix, or with one), as the judges read it."""

    @property
    def fix(self) -> str | None:
        """The fix this run was made with (None: the baseline)."""
        ...

    @property
    def exit_status(self) -> int: ...

    @property
    def refused_after_ready(self) -> bool:
        """Whether torch's stance refused a compile after ready (run --apply fail-after-ready)."""
        ...

    @property
    def frame_compiles(self) -> int: ...

    @property
    def graph_nodes(self) -> int:
        """Nodes of every graph compiled: what Dynamo traced, as a count."""
        ...

    @property
    def recompile_limit_hit(self) -> bool:
        """Whether any code hit torch's recompile limit (and runs eagerly)."""
        ...

    @property
    def findings(self) -> Sequence[Finding]: ...

    @property
    def records(self) -> Sequence[GraphRecord]:
        """Every frame compile of the run, in every process."""
        ...


Judge = Callable[[Finding, Measured, Measured], str]  # (finding, before, after) -> a verdict


def _identity(f: Finding) -> tuple[str, str, str]:
    return (f.kind.value, f.component, f.location)


def same_finding(a: Finding, b: Finding) -> bool:
    """Whether two runs' findings are one: the same kind, component and place (their extent,
    compiles or frames, may differ)."""
    return _identity(a) == _identity(b)


def still_there(finding: Finding, after: Measured) -> Finding | None:
    """The finding as the run with the fix found it again (same kind, component and place)."""
    return next((f for f in after.findings if same_finding(f, finding)), None)


def recompiles_of(finding: Finding) -> int:
    """How many compiles a finding counts (its compile ids)."""
    found = finding.evidence.get("compile_ids")
    return len(found) if isinstance(found, list) else 0


def _extent(finding: Finding) -> int:
    """How much of a thing a finding groups: its compiles, its frames, its breaks."""
    for key in ("compile_ids", "frame_compile_ids", "breaks"):
        found = finding.evidence.get(key)
        if isinstance(found, list):
            return len(found)
    return 0


def partly(finding: Finding, before: Measured, after: Measured) -> bool:
    """The fix removed part of a grouped finding: it is still there, smaller (fewer
    compiles, frames or breaks), and the program compiled fewer frames."""
    still = still_there(finding, after)
    return (
        still is not None
        and _extent(still) < _extent(finding)
        and after.frame_compiles < before.frame_compiles
    )


def by_counts(finding: Finding, before: Measured, after: Measured) -> str:
    """The judgement most fixes get (marking an input dynamic, a setting that removes a
    recompile or a break: each lowers the frame count): verified when the finding is gone
    and fewer frames compiled, with no code left running eagerly that compiled before."""
    if still_there(finding, after) is not None:
        return PARTLY if partly(finding, before, after) else DID_NOT_HELP
    if after.recompile_limit_hit and not before.recompile_limit_hit:
        return DID_NOT_HELP  # the fix left code running eagerly that compiled before
    return VERIFIED if after.frame_compiles < before.frame_compiles else DID_NOT_HELP


def regional_by_counts(finding: Finding, before: Measured, after: Measured) -> str:
    """Regional compilation's count judge, which compiles the block's frame in place of the
    model's, so the frame count is no judge of it: for a block found repeated inside one
    graph (the finding's ``instances``), the block gone from the graph in no more frames
    than the baseline's plus one per block (where each block specialises on its own cache
    layer or index, each compiles its own graph, as regional compilation does by design);
    else fewer graph nodes in no more frames (the block's code traced once instead of once
    per block). Blocks left uncompiled past torch's recompile limit are
    :func:`uncompiled_why`'s. A finding whose fix is another: :func:`by_counts`."""
    fix = fix_of(finding)
    if fix is None or fix[0] is not Fix.REGIONAL_COMPILE:
        return by_counts(finding, before, after)
    if still_there(finding, after) is not None:
        return DID_NOT_HELP
    if after.recompile_limit_hit and not before.recompile_limit_hit:
        return DID_NOT_HELP  # the fix left code running eagerly that compiled before
    if after.frame_compiles < before.frame_compiles:
        return VERIFIED
    instances = finding.evidence.get("instances")
    if isinstance(instances, int) and instances > 0:
        # The block found repeated inside one graph: gone, with at most a frame per block (each
        # block specialised on its own cache layer traces its own copy, as many nodes as before).
        return VERIFIED if after.frame_compiles <= before.frame_compiles + instances else DID_NOT_HELP
    fewer_nodes = after.graph_nodes < before.graph_nodes and after.frame_compiles <= before.frame_compiles
    return VERIFIED if fewer_nodes else DID_NOT_HELP


def _blocks_compiled(block: str, after: Measured) -> set[str]:
    """The paths of the ``block`` modules the run with the fix compiled a graph for."""
    return {
        r.module_path
        for r in after.records
        if r.module_class.rpartition(".")[2] == block and not r.recompile_limit_hit and r.graph_node_count
    }


def _eager_frames(trial: Measured) -> dict[tuple[str, str], str]:
    """Code the run left uncompiled, keyed by frame and module: each frame past torch's
    recompile limit, and each frame torch gave up on, with why."""
    found: dict[tuple[str, str], str] = {}
    for r in trial.records:
        where = f"{r.code_name}" + (f" at {r.module_path}" if r.module_path else "")
        if r.module_class:
            where += f" ({r.module_class.rpartition('.')[2]})"
        key = (f"{r.code_filename}:{r.code_firstlineno}:{r.code_name}", r.module_path)
        if r.recompile_limit_hit:
            limit = "?" if r.recompile_limit is None else r.recompile_limit
            found.setdefault(key, f"{where} hit torch's recompile limit ({limit})")
        elif any(b.frame_skipped for b in r.graph_breaks):
            found.setdefault(key, f"{where} fell back to eager (torch gave up on the frame)")
    return found


def uncompiled_why(finding: Finding, before: Measured, after: Measured) -> str | None:
    """Why the run with the fix runs code uncompiled that the run as it is compiled (None
    when it does not): frames past the recompile limit or given up on that the baseline
    did not leave, and, for regional compilation, the blocks left without a graph.

    A fix that raises the recompile limit or compiles what did not compile is judged the
    same way: only code newly left uncompiled counts."""
    new = {k: v for k, v in _eager_frames(after).items() if k not in _eager_frames(before)}
    parts = list(new.values())
    fix = fix_of(finding)
    instances = finding.evidence.get("instances")
    if fix is not None and fix[0] is Fix.REGIONAL_COMPILE and isinstance(instances, int) and parts:
        compiled = _blocks_compiled(str(finding.evidence.get("block", fix[1] or "")), after)
        if len(compiled) < instances:
            parts.append(
                f"{instances - len(compiled)} of the {instances} {finding.evidence.get('block')} blocks "
                "run no compiled graph"
            )
    if not parts:
        return None
    shown = "; ".join(parts[:3]) + (f"; and {len(parts) - 3} more" if len(parts) > 3 else "")
    return f"with the fix, code that compiled as it is runs uncompiled: {shown}"


def why_not_verified(
    verdict: str,
    counts: str,
    finding: Finding,
    before: Measured,
    after: Measured | None,
    cpu: SecondsEffect | None,
) -> str:
    """Why a verdict is not "verified", in a line ("" for "verified"): what the counts
    (``counts``, the judge's word) or the seconds (``cpu``) said.

    >>> why_not_verified(MANUAL, MANUAL, Finding("graph_break", "lm", 1.0, "t", "f"), None, None, None)
    'the fix is an edit to the program (the finding says which): nothing was run'
    >>> cold = Finding("cache_miss", "lm", 1.0, "t", "f", "", {"fix_kind": "deployment"})
    >>> why_not_verified(MANUAL, MANUAL, cold, None, None, None).split(" (")[0]
    'the fix is a change to how the program is deployed'
    """
    if verdict == VERIFIED:
        return ""
    if (verdict == MANUAL or after is None) and finding.evidence.get(FIX_KIND) == DEPLOYMENT:
        return (
            "the fix is a change to how the program is deployed (keep the filled cache, or ship it to "
            "where it starts), not to the program: nothing was run"
        )
    if verdict == MANUAL or after is None:
        return "the fix is an edit to the program (the finding says which): nothing was run"
    if verdict == UNCOMPILED:
        return (
            "with the fix, the calls that would have compiled run uncompiled, eagerly: the request "
            "pays no compile and runs no compiled graph; warm that call up to keep it compiled"
        )
    if verdict == GATE_HELD:
        return (
            "the program stopped at the compile after ready, as the gate should: a gate, not a fix "
            "(no seconds saved)"
        )
    if verdict == BROKE:
        return (
            f"a run with the fix ended with exit status {after.exit_status} (as it is: {before.exit_status})"
        )
    if verdict == COMPILES:
        return (
            "it compiles what ran uncompiled, which costs compile seconds by design: the seconds are "
            "not judged"
        )
    if verdict == SLOWER and cpu is not None:
        return f"the compile cost {-cpu.saving:.2f} ± {cpu.spread:.2f} CPU s more with the fix"
    still = still_there(finding, after)
    if verdict == PARTLY:
        left = (
            f" ({_extent(still)} of {_extent(finding)} left)"
            if still is not None and _extent(finding)
            else ""
        )
        return f"the finding is still there, smaller{left}"
    if counts not in (VERIFIED, PARTLY):
        if still is not None:
            return "the finding is still there with the fix"
        if after.recompile_limit_hit and not before.recompile_limit_hit:
            return "the fix left code past torch's recompile limit"
        frames = f"{before.frame_compiles} -> {after.frame_compiles}"
        return f"the counts did not move as the fix says: frame compiles {frames}, graph nodes " + (
            f"{before.graph_nodes} -> {after.graph_nodes}"
        )
    if cpu is not None and cpu.effect is Effect.NOISE:
        return (
            f"saved {cpu.saving:.2f} ± {cpu.spread:.2f} CPU s: within the rounds' spread or the floor "
            f"({cpu.noise:.2f} s)"
        )
    return ""
