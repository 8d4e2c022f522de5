"""Fixtures for every test, the package's doctests included: a private compile cache and a
clean Dynamo around each test."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest
import torch

# One private inductor cache for the whole run (tests that need a cold or warm cache make
# their own): a run never reads or fills the user's cache, and leaves nothing behind.
_CACHE = tempfile.mkdtemp(prefix="compiletrace-test-inductor-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
# A private configuration directory: the signing key that 'cache save' creates on first use
# lands there, never in the user's own, and a key set in the environment does not leak in.
_CONFIG = tempfile.mkdtemp(prefix="compiletrace-test-config-")
os.environ["XDG_CONFIG_HOME"] = _CONFIG
os.environ.pop("COMPILETRACE_SIGNING_KEY", None)
atexit.register(shutil.rmtree, _CONFIG, ignore_errors=True)


@pytest.fixture(autouse=True)
def clean_dynamo() -> Iterator[None]:
    """Every test starts and ends with a fresh Dynamo and a clean process state (no frame
    left open, no providers left set, no start-up span left open), and may see any of
    compiletrace's once-per-cause warnings again."""
    from compiletrace._io.state import STATE

    torch._dynamo.reset()
    STATE.forget_warnings()
    assert STATE.unsettled() == [], "an earlier test left the process state unclean"
    yield
    assert STATE.unsettled() == [], "this test left the process state unclean"
    torch._dynamo.reset()
