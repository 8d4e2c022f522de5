"""The timeout a process group was created with, for ``gather``.

What is used, and why:

- ``ProcessGroup._get_backend(device).options._timeout``: the timeout a process group was
  created with. ``monitored_barrier(timeout=None)`` waits torch's 30-minute default instead,
  so ``gather(timeout=None)`` passes the group's own.
"""

from __future__ import annotations

from typing import Any

from compiletrace._io.state import warn_once

DEFAULT_PROCESS_GROUP_TIMEOUT_S = 1800.0  # torch's default_pg_timeout, 30 minutes


def process_group_timeout(group: Any, device: Any) -> float:
    """The timeout (seconds) ``group`` (the default group if None) was created with, read
    from its backend for ``device``. When torch no longer keeps it there: torch's default
    (30 minutes), with one warning."""
    try:
        import torch.distributed as dist

        pg = group if group is not None else dist.group.WORLD
        seconds = float(pg._get_backend(device).options._timeout.total_seconds())
        if seconds > 0:
            return seconds
    except Exception:
        pass
    warn_once(
        "could not read the process group's timeout; gather() waits up to "
        f"{DEFAULT_PROCESS_GROUP_TIMEOUT_S / 60:g} minutes for the other ranks (pass timeout= to bound it)",
        key="process_group_timeout",
    )
    return DEFAULT_PROCESS_GROUP_TIMEOUT_S
