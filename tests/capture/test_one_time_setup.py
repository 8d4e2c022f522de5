"""The process's one-time set-up inside its first compiles (``GraphRecord.setup_ns``): the
modules a compile imports (``_core.compile_imports``) and torch's once-per-process functions
(``torch_compat.one_time``), timed exactly on injected clocks, then on real compiles."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import compiletrace
from compiletrace._core import torch_compat as tc
from compiletrace._core.compile_imports import ImportTimer
from compiletrace.reports import html_report, summary_table


class Ticks:
    """A clock that moves only when a module's code says so."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def fresh_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on the import path whose modules are imported for the first time."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("ct_fresh"):
            del sys.modules[name]


def _module(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(body))
    importlib.invalidate_caches()


def test_an_import_is_timed_once_outermost_only_and_the_loader_stays_the_real_one(
    fresh_modules: Path,
) -> None:
    clock = Ticks()
    sys.modules["ct_fresh_clock"] = types.SimpleNamespace(clock=clock)  # type: ignore[assignment]
    _module(fresh_modules, "ct_fresh_inner", "import ct_fresh_clock\nct_fresh_clock.clock.now += 30\n")
    _module(
        fresh_modules,
        "ct_fresh_outer",
        "import ct_fresh_clock\nct_fresh_clock.clock.now += 5\n"
        "import ct_fresh_inner\nct_fresh_clock.clock.now += 2\n",
    )
    active = [True]
    timer = ImportTimer(clock, active=lambda: active[0])
    try:
        with timer:
            module = importlib.import_module("ct_fresh_outer")
            assert timer.thread_total_ns() == 37  # 5 + 30 + 2: the inner import once, inside the outer
            active[0] = False
            _module(
                fresh_modules, "ct_fresh_idle", "import ct_fresh_clock\nct_fresh_clock.clock.now += 100\n"
            )
            importlib.import_module("ct_fresh_idle")
            assert timer.thread_total_ns() == 37  # no compile open: not timed
        assert type(module.__loader__).__name__ == "SourceFileLoader"
        assert "exec_module" not in vars(module.__loader__)  # the wrapper is gone after its call
        assert timer not in sys.meta_path
    finally:
        del sys.modules["ct_fresh_clock"]


def test_a_failing_import_raises_its_own_error_and_is_still_timed(fresh_modules: Path) -> None:
    clock = Ticks()
    sys.modules["ct_fresh_clock"] = types.SimpleNamespace(clock=clock)  # type: ignore[assignment]
    _module(fresh_modules, "ct_fresh_broken", "import ct_fresh_clock\nct_fresh_clock.clock.now += 9\n1 / 0\n")
    timer = ImportTimer(clock, active=lambda: True)
    try:
        with timer, pytest.raises(ZeroDivisionError):
            importlib.import_module("ct_fresh_broken")
        assert timer.thread_total_ns() == 9
        with timer, pytest.raises(ModuleNotFoundError):
            importlib.import_module("ct_fresh_not_there")
    finally:
        del sys.modules["ct_fresh_clock"]


def test_a_watched_module_is_handed_over_once_loaded_even_nested(fresh_modules: Path) -> None:
    _module(fresh_modules, "ct_fresh_leaf", "VALUE = 3\n")
    _module(fresh_modules, "ct_fresh_top", "import ct_fresh_leaf\n")
    seen: list[str] = []
    timer = ImportTimer(Ticks(), active=lambda: False)
    timer.watch("ct_fresh_leaf", lambda module: seen.append(f"{module.__name__}={module.VALUE}"))
    with timer:
        importlib.import_module("ct_fresh_top")
    assert seen == ["ct_fresh_leaf=3"]


def _fake_vec_isa_module(clock: Ticks) -> tuple[types.ModuleType, list[int]]:
    module_name, function_name = tc.ONE_TIME_FUNCTIONS[0]
    module = types.ModuleType(module_name)
    calls: list[int] = []

    @functools.cache
    def probe() -> list[str]:
        calls.append(1)
        clock.now += 250  # the probe's work, on the injected clock
        return ["avx2"]

    setattr(module, function_name, probe)
    return module, calls


def test_a_one_time_function_reports_its_first_call_and_is_put_back() -> None:
    clock = Ticks()
    module, calls = _fake_vec_isa_module(clock)
    _, name = tc.ONE_TIME_FUNCTIONS[0]
    real = getattr(module, name)
    timer = ImportTimer(clock, active=lambda: True)
    assert tc.time_one_time_functions(module, timer.timed_block) == 1
    assert tc.time_one_time_functions(module, timer.timed_block) == 0  # never wrapped twice
    wrapped = getattr(module, name)
    assert wrapped is not real and wrapped.cache_clear == real.cache_clear
    assert wrapped() == ["avx2"] and getattr(module, name)() == ["avx2"]
    assert timer.thread_total_ns() == 250 and calls == [1]
    assert getattr(module, name) is real  # every later call is torch's own, unwrapped


def test_an_import_inside_a_one_time_function_is_counted_once(fresh_modules: Path) -> None:
    clock = Ticks()
    sys.modules["ct_fresh_clock"] = types.SimpleNamespace(clock=clock)  # type: ignore[assignment]
    _module(fresh_modules, "ct_fresh_lazy", "import ct_fresh_clock\nct_fresh_clock.clock.now += 100\n")
    timer = ImportTimer(clock, active=lambda: True)
    try:
        with timer, timer.timed_block():
            clock.now += 20  # the probe's own work
            importlib.import_module("ct_fresh_lazy")  # ... and the import it makes on the way
        assert timer.thread_total_ns() == 120
    finally:
        del sys.modules["ct_fresh_clock"]


def test_a_probe_neither_disarms_a_watch_nor_times_the_wrong_import(fresh_modules: Path) -> None:
    """importlib.util.find_spec asks the finders and runs nothing: the watched module is
    still handed over when it is really imported, and a wrapper a probe left on a loader
    decides what to do when a module really runs."""
    clock = Ticks()
    sys.modules["ct_fresh_clock"] = types.SimpleNamespace(clock=clock)  # type: ignore[assignment]
    _module(fresh_modules, "ct_fresh_later", "import ct_fresh_clock\nct_fresh_clock.clock.now += 7\n")
    seen: list[str] = []
    active = [True]
    timer = ImportTimer(clock, active=lambda: active[0])
    timer.watch("ct_fresh_later", lambda module: seen.append(module.__name__))
    try:
        with timer:
            assert importlib.util.find_spec("ct_fresh_later") is not None  # a probe, during a compile
            assert seen == []
            active[0] = False  # the compile ended before the real import
            importlib.import_module("ct_fresh_later")
        assert seen == ["ct_fresh_later"]
        assert timer.thread_total_ns() == 0  # imported outside any compile: not set-up
    finally:
        del sys.modules["ct_fresh_clock"]


@pytest.mark.slow
def test_the_real_vector_probe_is_wrapped_and_restored_with_its_own_answer() -> None:
    module_name, name = tc.ONE_TIME_FUNCTIONS[0]
    isa = importlib.import_module(module_name)
    real = getattr(isa, name)
    answer = isa.pick_vec_isa()  # cached from here on: the wrapped call below is a cache hit
    timer = ImportTimer(time.perf_counter_ns, active=lambda: True)
    assert tc.time_one_time_functions(isa, timer.timed_block) == 1
    try:
        assert isa.pick_vec_isa() == answer
    finally:
        setattr(isa, name, real)
    assert timer.thread_total_ns() > 0  # its one call, timed
    assert getattr(isa, name) is real


def test_the_first_compile_carries_the_set_up_the_second_does_not(fresh_modules: Path) -> None:
    """A real compile whose traced code imports a module (Dynamo runs the import while it
    traces): the import's time is the record's set-up, and a later compile has none of it."""
    _module(fresh_modules, "ct_fresh_slow", "import time\ntime.sleep(0.2)\nSCALE = 2.0\n")

    def first(x: torch.Tensor) -> torch.Tensor:
        import ct_fresh_slow  # type: ignore[import-not-found]

        return x * ct_fresh_slow.SCALE

    def second(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    reg = compiletrace.Registry()
    with compiletrace.observe(registry=reg):
        torch.compile(first, backend="eager")(torch.ones(3))
        torch.compile(second, backend="eager")(torch.ones(3))
    one, two = reg.records()
    assert one.setup_ns >= 200_000_000  # the sleep is a lower bound, on any machine
    assert two.setup_ns < 200_000_000
    text = summary_table(reg.records())
    assert "one-time set-up:" in text and f"{one.component} {one.compile_id}" in text
    assert '<p class="setup">one-time set-up:' in html_report(reg.records())
    assert compiletrace.GraphRecord.from_dict(one.to_dict()).setup_ns == one.setup_ns


def _first_cpp_compile_s(trace: Path) -> float:
    """torch's own region of the process's first C++ compile (``compile_file``), from the
    chromium events of its TORCH_TRACE log, in seconds."""
    (log,) = trace.glob("*.log")
    lines = log.read_text().splitlines()
    begun: float | None = None
    for i, line in enumerate(lines):
        if '"chromium_event"' not in line:
            continue
        payload = []
        for more in lines[i + 1 :]:
            if not more.startswith("\t"):
                break
            payload.append(more[1:])
        event = json.loads("\n".join(payload))
        if event.get("name") != "compile_file":
            continue
        if event["ph"] == "B" and begun is None:
            begun = float(event["ts"])
        elif event["ph"] == "E" and begun is not None:
            return (float(event["ts"]) - begun) / 1e6
    raise AssertionError("no C++ compile in the trace")


@pytest.mark.slow
def test_the_first_cpp_compile_is_one_time_set_up_where_it_lands_a_lazy_backward_too(tmp_path: Path) -> None:
    """Training a bare Linear under inductor: its forward is one matrix call, so the
    process's first C++ compile (its precompiled header) lands in the lazy backward. The
    one-time set-up holds it, within 10% of torch's own region for it."""
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache"),  # cold, whatever ran before
        "TORCH_TRACE": str(tmp_path / "trace"),
    }
    program = Path(__file__).resolve().parent.parent / "programs" / "inductor_backward.py"
    command = [sys.executable, "-m", "compiletrace", "run", "--json", str(tmp_path / "job.json"), "--"]
    done = subprocess.run(
        [*command, sys.executable, str(program), "linear"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    job = compiletrace.load(tmp_path / "job.json")
    assert isinstance(job, compiletrace.ProfileJob)
    (process,) = job.compiling()
    (record,) = process.run.graph_records
    first_cpp = _first_cpp_compile_s(tmp_path / "trace")
    in_frame = sum(ns for line, _, ns in record.frame_lines if line == "one-time set-up") / 1e9
    assert record.backward_ns / 1e9 > first_cpp  # it landed in the backward
    assert abs(record.setup_ns / 1e9 - in_frame - first_cpp) <= 0.1 * first_cpp
    assert "one-time set-up:" in summary_table(process.run.graph_records)
