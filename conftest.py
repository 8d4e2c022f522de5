"""Fixtures for every test, the package's doctests included: a private compile cache, a
clean Dynamo around each test, and the fast loop's rule.

The fast loop is ``python -m pytest -m "not slow"``. ``slow`` is on every test that starts a
process, compiles with inductor, or loads third-party model code (``inductor`` and
``real_model`` imply it here), or takes more than about two seconds on a two-core machine.
A test without it that starts a process fails, so the fast loop cannot grow a subprocess.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing.process
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from typing import Any

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
# The text views' width is each test's choice (monkeypatch.setenv): not the terminal's, nor
# the COLUMNS=80 that the test runner's parallel workers are started with.
os.environ.pop("COLUMNS", None)


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


# Markers that make a test slow by themselves: seconds of inductor compiles, third-party models.
_SLOW_BY_NATURE = ("inductor", "real_model", "vllm")


# A docstring example that runs a command starts a process: it cannot carry a mark itself.
_STARTS_A_PROCESS = ("sys.executable", "subprocess")


def _starts_a_process(item: pytest.Item) -> bool:
    examples = getattr(getattr(item, "dtest", None), "examples", ())
    return any(word in example.source for example in examples for word in _STARTS_A_PROCESS)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by it
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(name) for name in _SLOW_BY_NATURE) or _starts_a_process(item):
            item.add_marker(pytest.mark.slow)


def _refuse_process(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(
        "this test starts a process but is not marked slow: mark it @pytest.mark.slow "
        "(or pytestmark = pytest.mark.slow for its module) so the fast loop stays fast"
    )


@contextlib.contextmanager
def _no_process_unless_slow(item: pytest.Item) -> Iterator[None]:
    """While a test not marked slow is set up, run and torn down (its module's and session's
    fixtures included), starting a process fails it: a subprocess, a multiprocessing child."""
    if item.get_closest_marker("slow") is not None:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", _refuse_process)
        patch.setattr(multiprocessing.process.BaseProcess, "start", _refuse_process)
        # A bare fork (no new interpreter) costs milliseconds: tests may fork to act as
        # another user; a fork that runs Python code goes through multiprocessing.
        for name in ("system", "posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                patch.setattr(os, name, _refuse_process)
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _no_process_unless_slow(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _no_process_unless_slow(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with _no_process_unless_slow(item):
        return (yield)


# --- Where the suite's CPU goes: COMPILETRACE_TEST_CPU_LOG=FILE appends one JSON line per test
# (its CPU seconds, this process's and every process it started and waited for, and its wall
# seconds). Wall time misleads here: under parallel workers and load, a test's wall is other
# tests' CPU too. .ci/run sets it and prints the costliest (.ci/test_cpu.py).
_CPU_LOG = os.environ.get("COMPILETRACE_TEST_CPU_LOG")


def _cpu_s() -> float:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if not _CPU_LOG:
        return (yield)
    import json
    import time

    cpu, wall = _cpu_s(), time.monotonic()
    try:
        return (yield)
    finally:
        line = {
            "test": item.nodeid,
            "cpu_s": round(_cpu_s() - cpu, 3),
            "wall_s": round(time.monotonic() - wall, 3),
        }
        with open(_CPU_LOG, "a") as log:  # one short append per test: whole lines from every worker
            log.write(json.dumps(line) + "\n")
