"""``expensive_hit``: a cache hit that still compiled (its kernels, its lowering), with the
phase that took the time; the advice fits the run (on the CPU, torch's artifacts do not
carry the kernels inductor builds)."""

from __future__ import annotations

from collections.abc import Iterator

from compiletrace._data.cache_hits import compile_ns, find_expensive_hits
from compiletrace._data.findings import Finding, FindingKind
from compiletrace._data.phases import KERNEL_COMPILE, OTHER
from compiletrace._data.records import NS_PER_S
from compiletrace._doctor import shared
from compiletrace._doctor.evidence import Evidence, RunContext
from compiletrace._doctor.rule import Rule

KIND = FindingKind.EXPENSIVE_HIT

_HIT_FIXES = {
    KERNEL_COMPILE: (
        "the graph hit but its kernels compiled again: carry the kernel caches with the graph cache "
        "(the whole TORCHINDUCTOR_CACHE_DIR, or 'compiletrace cache save' and --cache-artifacts)"
    ),
    OTHER: (
        "the time went elsewhere in the backend: the first graph of a process pays for importing the "
        "compiler (import torch._inductor early, before timing matters)"
    ),
}
_HIT_FIX = (
    "lowering ran again despite the hit: one tier hit and the other missed; compare both tiers' keys "
    "with the cold run's"
)


# A hit that compiled its kernels again where the kernels were never in the artifacts: on the
# CPU inductor builds C++ kernels into its cache directory, which torch's portable artifacts
# do not carry (they bundle Triton kernels, the GPU's): loading them again changes nothing.
_CPU_KERNELS_FIX = (
    "the graph hit but its C++ kernels compiled again: on the CPU, torch's cache artifacts carry "
    "the graphs but not the kernels inductor builds from them, which live only in the cache "
    "directory; keep the whole TORCHINDUCTOR_CACHE_DIR between starts (a persistent volume, or a "
    "copy of the filled directory): saving and loading the artifacts again will not remove this"
)
_KERNELS_DIR_FIX = (
    "the graph hit but its kernels compiled again: carry the kernel caches with the graph cache, "
    "keeping the whole TORCHINDUCTOR_CACHE_DIR between starts (on the CPU only the directory holds "
    "the compiled kernels; on a GPU 'compiletrace cache save' and --cache-artifacts carry Triton's too)"
)


def _hit_fix(phase: str, context: RunContext) -> str:
    if phase == KERNEL_COMPILE and (context.on_cpu or context.loaded_artifacts):
        return _CPU_KERNELS_FIX if context.on_cpu else _KERNELS_DIR_FIX
    return _HIT_FIXES.get(phase, _HIT_FIX)


def check(evidence: Evidence) -> Iterator[Finding]:
    for hit in find_expensive_hits(evidence.records):
        yield Finding(
            KIND,
            hit.record.component,
            compile_ns(hit.record) / NS_PER_S,
            hit.explanation(),
            _hit_fix(hit.dominant_phase, evidence.context),
            shared.model_location(hit.record),
            {
                "compile_id": hit.record.compile_id,
                "module": hit.record.module_label,
                "dominant_phase": hit.dominant_phase,
                "dominant_s": hit.dominant_ns / NS_PER_S,
                "keys": shared.cache_keys(hit.record),
            },
        )


RULE = Rule(KIND, check)
