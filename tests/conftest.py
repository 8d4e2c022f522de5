"""Shared fixtures: clean Dynamo state around every test, fake clocks, private caches."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest
import torch

# Inductor tests share one private cache directory for the session unless they make
# their own, so runs never touch (or depend on) the user's cache.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="compiletrace-inductor-"))


class FakeClock:
    """An injectable clock: integer nanoseconds that move only when told to."""

    def __init__(self, start_ns: int = 1_000_000_000) -> None:
        self.now = start_ns

    def __call__(self) -> int:
        return self.now

    def advance(self, ns: int) -> None:
        self.now += ns


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(autouse=True)
def clean_dynamo() -> Iterator[None]:
    """Every test starts and ends with a fresh Dynamo and no frame left open."""
    from compiletrace._tracker import get_tracker

    torch._dynamo.reset()
    yield
    assert get_tracker().open_frames() == 0, "a frame compile was left open"
    torch._dynamo.reset()
