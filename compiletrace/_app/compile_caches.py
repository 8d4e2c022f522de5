"""Where the on-disk compile caches a start reads live, as the environment names them.

A trial of ``doctor --verify`` and an iteration of ``bench startup`` each start on caches
of their own (a cold start: all of them empty), so no run warms another: inductor's (its FX
graph and AOTAutograd caches live under ``TORCHINDUCTOR_CACHE_DIR``), Triton's, and vLLM's
own compiled artifacts under its cache root. One table, so a cache added here is emptied
for both.

>>> sorted(cache_environment("/tmp/c"))
['TORCHINDUCTOR_CACHE_DIR', 'TRITON_CACHE_DIR', 'VLLM_CACHE_ROOT']
>>> cache_environment("/tmp/c")["VLLM_CACHE_ROOT"]
'/tmp/c/vllm'
"""

from __future__ import annotations

import os

__all__ = ["CACHE_ENV_DIRS", "cache_environment"]

# Environment variable -> its directory under the root a run's caches share.
CACHE_ENV_DIRS = {
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "VLLM_CACHE_ROOT": "vllm",
}


def cache_environment(root: str | os.PathLike[str]) -> dict[str, str]:
    """The variables that put every compile cache of a run under ``root``."""
    return {var: os.path.join(os.fspath(root), sub) for var, sub in CACHE_ENV_DIRS.items()}
