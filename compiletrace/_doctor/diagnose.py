"""The doctor's one entry point: :func:`diagnose_evidence` runs every rule of
:data:`~compiletrace._doctor.rules.RULES` on one :class:`~compiletrace._doctor.evidence.Evidence`,
folds the findings a finding of what did not compile explains under it, gives each finding
the seconds its fix can save with each compile's seconds claimed once
(:mod:`compiletrace._doctor.stake`), and ranks them: what did not compile first, then most
seconds at stake. Every caller goes through it: ``compiletrace.diagnose``
(a registry), ``ProfileRun.diagnose`` and ``compiletrace doctor`` (a run), ``ProfileJob.diagnose``
(each process of a job, and its ranks), ``GatherResult.diagnose`` (ranks). :func:`judge`
reads a fix's before and after with the judge of the finding's rule (``doctor --verify``).

>>> diagnose_evidence(gather_evidence([]))
[]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.gather import RankTimes
from compiletrace._data.job import Job
from compiletrace._data.nodes import node_of_process
from compiletrace._data.records import GraphRecord
from compiletrace._data.registry import Registry, get_registry
from compiletrace._data.run import Run, WarmupResult
from compiletrace._data.run_meta import RunMeta
from compiletrace._data.timeline import Timeline
from compiletrace._data.why import Side
from compiletrace._doctor.evidence import Evidence, RunContext, gather_evidence, job_evidence
from compiletrace._doctor.rule import Rule
from compiletrace._doctor.rules import RULES
from compiletrace._doctor.shared import DEPLOYMENT, FIX_KIND
from compiletrace._doctor.stake import Claim, claim_once, named_records, whole_claims
from compiletrace._doctor.verdicts import BROKE, Measured, by_counts

__all__ = [
    "baseline_evidence",
    "diagnose",
    "diagnose_against",
    "diagnose_evidence",
    "diagnose_job",
    "diagnose_ranks",
    "diagnose_records",
    "diagnose_run",
    "judge",
    "rule_for",
]


def diagnose_evidence(evidence: Evidence, rules: Sequence[Rule] = RULES) -> list[Finding]:
    """Every finding ``rules`` (all of them by default) make of ``evidence``, each with the
    seconds its fix can save (no compile's seconds counted twice), what did not compile
    first, then most seconds at stake; each names the job's process the evidence is of, if
    any."""
    found = _folded([(rule, finding) for rule in rules for finding in rule.check(evidence)], evidence)
    # The rules that claim first, then the rest, each in its order (a stable sort).
    claiming = sorted(found, key=lambda pair: not pair[0].claims_first)
    findings = claim_once((finding, _claims(rule, finding, evidence)) for rule, finding in claiming)
    if evidence.process:
        findings = [replace(f, evidence={**f.evidence, "process": evidence.process}) for f in findings]
    return _ranked(findings)


def _claims(rule: Rule, finding: Finding, evidence: Evidence) -> Sequence[Claim] | None:
    if rule.claims is not None:
        return rule.claims(finding, evidence)
    return whole_claims(finding, evidence) if named_records(finding, evidence) else None


EXPLAINED = "explains"  # the evidence key of the findings a finding of what did not compile explains


def _folded(found: list[tuple[Rule, Finding]], evidence: Evidence) -> list[tuple[Rule, Finding]]:
    """The findings, with those whose every record a finding of what did not compile covers
    folded under it (its evidence lists their titles): the graph breaks inside a DDP
    wrapper are its cause, not things to fix one by one."""
    covering = [
        (finding, {id(r) for r in named_records(finding, evidence)})
        for rule, finding in found
        if rule.explains_others
    ]
    if not covering:
        return found
    kept: list[tuple[Rule, Finding]] = []
    explained: dict[int, list[str]] = {}
    for rule, finding in found:
        named = {id(r) for r in named_records(finding, evidence)}
        cover = next(
            (i for i, (_, ids) in enumerate(covering) if not rule.explains_others and named and named <= ids),
            None,
        )
        if cover is None:
            kept.append((rule, finding))
        else:
            explained.setdefault(cover, []).append(f"{finding.kind}: {finding.title}")
    out = []
    for rule, finding in kept:
        index = next((i for i, (f, _) in enumerate(covering) if f is finding), None)
        if index is not None and index in explained:
            finding = replace(finding, evidence={**finding.evidence, EXPLAINED: explained[index]})
        out.append((rule, finding))
    return out


_ORDER = {kind: i for i, kind in enumerate(FindingKind)}
_FIRST = frozenset({FindingKind.NOTHING_COMPILED})  # what did not compile, before any seconds


def _ranked(findings: Iterable[Finding]) -> list[Finding]:
    """What did not compile first; then most seconds first; of equal seconds, in
    :class:`FindingKind` order, then as found."""
    return sorted(findings, key=lambda f: (f.kind not in _FIRST, -f.seconds, _ORDER.get(f.kind, len(_ORDER))))


def diagnose(registry: Registry | None = None) -> list[Finding]:
    """The doctor's findings on a registry's records and phases (the process registry by
    default): why the compile time went where it went and what to change, most seconds at
    stake first.

    >>> import torch, compiletrace
    >>> reg = compiletrace.Registry()
    >>> f = compiletrace.compile(lambda x: x * 2, backend="eager", dynamic=False, registry=reg)
    >>> _ = f(torch.ones(2)), f(torch.ones(3))
    >>> [(str(d.kind), list(d.evidence["guards"])) for d in compiletrace.diagnose(reg)]
    [('recompiles', ['tensor shape/stride'])]
    """
    return diagnose_evidence(gather_evidence(registry if registry is not None else get_registry()))


def diagnose_records(records: Sequence[GraphRecord], context: RunContext | None = None) -> list[Finding]:
    """Every finding in ``records`` (a run's, in the order compiles finished), most seconds
    at stake first; ``context`` (the run's meta) fits the cache advice to what the run did.

    >>> import compiletrace
    >>> diagnose_records(compiletrace.Registry().records())
    []
    """
    return diagnose_evidence(gather_evidence(records, context=context))


def diagnose_run(
    records: Sequence[GraphRecord],
    warmup: WarmupResult | None = None,
    timeline: Timeline | None = None,
    meta: RunMeta | Mapping[str, Any] | None = None,
) -> list[Finding]:
    """The findings of a whole run: its records, its warm-up and start-up timeline
    (warm-ups that ran and compiled nothing), and its meta (loaded artifacts, the device,
    which fit the cache advice), most seconds at stake first.

    >>> from compiletrace._data.records import CompilationTimes
    >>> [f.kind.value for f in diagnose_run([], WarmupResult(False, 2.5, CompilationTimes()))]
    ['useless_warmup']
    """
    return diagnose_evidence(gather_evidence(records, warmup=warmup, timeline=timeline, meta=meta))


def diagnose_ranks(ranks: Sequence[RankTimes]) -> list[Finding]:
    """Findings on a gathered multi-rank result: ranks whose graphs or cache outcomes differ
    from the others', per component (``rank_divergence``).

    >>> diagnose_ranks([])
    []
    """
    return diagnose_evidence(gather_evidence(ranks=ranks))


def diagnose_job(job: Job) -> list[Finding]:
    """The findings of every process of a job (a finding's evidence names its process), and
    across the ranks of a distributed job, most seconds at stake first."""
    findings = [finding for evidence in job_evidence(job) for finding in diagnose_evidence(evidence)]
    return _ranked(_fold_ranks(_explained_by_nodes(findings, job), job))


def _explained_by_nodes(findings: list[Finding], job: Job) -> list[Finding]:
    """Without the cold-cache findings of the ranks on a node that ``node_cache_miss`` says
    missed what another node hit: their cache was not cold but filled under another key, and
    that finding names the part of the key and its fix (and puts those seconds at stake)."""
    explained = {
        str(node)
        for f in findings
        if f.kind is FindingKind.NODE_CACHE_MISS
        for node in f.evidence.get("nodes", ())
    }
    if not explained:
        return findings
    node_of = {p.info.label: node_of_process(p) for p in job.ranks().values()}
    return [
        f
        for f in findings
        if not (
            f.kind is FindingKind.CACHE_MISS
            and f.evidence.get(FIX_KIND) == DEPLOYMENT
            and node_of.get(str(f.evidence.get("process", ""))) in explained
        )
    ]


def baseline_evidence(baseline: Run | Job) -> Evidence:
    """A run to compare with (``doctor --baseline``): a run's evidence, or a job's every
    process's records with their cache keys merged.

    >>> baseline_evidence(Job((), 0, ())).records
    ()
    """
    if isinstance(baseline, Run):
        return gather_evidence(baseline)
    side = Side.of_runs("baseline", [(p.run.graph_records, p.run.meta) for p in baseline.processes])
    return gather_evidence(side.records, cache_keys=side.keys)


def diagnose_against(source: Run | Job, baseline: Evidence) -> list[Finding]:
    """The findings of a run or a job (each process's) with ``baseline`` to compare with:
    the cache misses are then each explained by the part of its key that changed
    (``doctor --baseline``), most seconds at stake first."""
    if isinstance(source, Run):
        return diagnose_evidence(gather_evidence(source, baseline=baseline))
    evidence = [replace(e, baseline=baseline) for e in job_evidence(source)]
    return sorted((f for e in evidence for f in diagnose_evidence(e)), key=lambda f: -f.seconds)


def _fold_ranks(findings: list[Finding], job: Job) -> list[Finding]:
    """One finding for what several ranks found alike (same kind, component, title, fix and
    place): its evidence names them (``"ranks 0-7"``) and its seconds are the slowest
    rank's, as ranks compile side by side."""
    rank_of = {process.info.label: rank for rank, process in job.ranks().items()}
    groups: dict[tuple[str, ...], list[tuple[int, Finding]]] = {}
    folded: list[Finding] = []
    for f in findings:
        rank = rank_of.get(str(f.evidence.get("process", "")))
        if rank is None:
            folded.append(f)
            continue
        key = (f.kind.value, f.component, f.title, f.fix, f.location)
        groups.setdefault(key, []).append((rank, f))
    for found in groups.values():
        if len(found) == 1:
            folded.append(found[0][1])
            continue
        ranks = sorted(rank for rank, _ in found)
        slowest = max((f for _, f in found), key=lambda f: f.seconds)
        evidence = {**slowest.evidence, "process": f"ranks {_ranges(ranks)}"}
        folded.append(replace(slowest, evidence=evidence))
    return folded


def _ranges(numbers: Sequence[int]) -> str:
    """``[0, 1, 2, 3, 5]`` -> ``"0-3, 5"``.

    >>> _ranges([0, 1, 2, 3, 5, 7, 8])
    '0-3, 5, 7-8'
    """
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def rule_for(kind: FindingKind | str) -> Rule:
    """The rule that makes findings of ``kind``.

    >>> rule_for("recompiles").fixes[0].value
    'mark-dynamic'
    """
    return _BY_KIND[FindingKind(kind)]


_BY_KIND = {rule.kind: rule for rule in RULES}


def judge(finding: Finding, before: Measured, after: Measured) -> str:
    """The verdict on one finding from the runs without and with its fix: "broke the
    program" when the command ended otherwise with the fix (a crash compiles less too: never
    a fix), else the judge of the finding's rule (which reads the exit status itself where
    its fix is a gate that ends the program on purpose)."""
    rule = _BY_KIND.get(finding.kind)
    if after.exit_status != before.exit_status and not (rule is not None and rule.reads_exit_status):
        return BROKE
    return (rule.judge if rule is not None and rule.judge is not None else by_counts)(finding, before, after)
