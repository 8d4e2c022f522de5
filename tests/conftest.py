"""Fixtures for the tests (the clean Dynamo and private cache for every test, doctests
included, are in the root conftest.py)."""

from __future__ import annotations

import pytest


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
