"""The fast loop (``python -m pytest -m "not slow"``) holds what it should: no test in it
starts a process, compiles with inductor or loads third-party model code (the rule is in
the root conftest.py)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import pytest

REFUSED = "starts a process but is not marked slow"


def test_a_test_not_marked_slow_cannot_start_a_process() -> None:
    with pytest.raises(AssertionError, match=REFUSED):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    with pytest.raises(AssertionError, match=REFUSED):
        multiprocessing.get_context("fork").Process(target=print).start()
    with pytest.raises(AssertionError, match=REFUSED):
        os.system("true")


@pytest.mark.slow
def test_a_slow_test_can() -> None:
    done = subprocess.run([sys.executable, "-c", "print('ran')"], capture_output=True, text=True, check=True)
    assert done.stdout == "ran\n"


def test_inductor_and_third_party_models_are_never_in_the_fast_loop(request: pytest.FixtureRequest) -> None:
    """Over the tests this session runs: in the whole suite, each such test is slow; in the
    fast loop, there is none."""
    items = request.session.items
    assert request.node in items
    heavy = [i for i in items if any(i.get_closest_marker(m) for m in ("inductor", "real_model", "vllm"))]
    assert all(i.get_closest_marker("slow") for i in heavy), [i.nodeid for i in heavy]
