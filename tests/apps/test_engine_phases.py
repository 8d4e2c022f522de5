"""The engines' start-up phases (``compiletrace._app.engine_phases``) on fake engine modules:
a module imported before the phases are installed is wrapped at once, one imported after is
wrapped as it loads; a wrapper keeps what the method returns, raises and looks like; nothing
is wrapped twice; a missing method warns once and breaks nothing. No torch, no vLLM: real
phases into a real registry, on a fake clock."""

from __future__ import annotations

import importlib
import inspect
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from compiletrace import Registry
from compiletrace._app import engine_phases
from compiletrace._app.engine_phases import VLLM, EntryPoint, Installed, install
from compiletrace._io.state import STATE
from tests.conftest import MS, FakeClock

FAKE = "compiletrace_fake_engine"  # a module name no real package has


class Boom(Exception):
    pass


def _engine(clock: FakeClock, name: str = FAKE) -> ModuleType:
    """A fake engine: a worker whose methods take 10 ms each on ``clock``, and a subclass
    that overrides one of them and calls the base's."""
    module = ModuleType(name)

    class Worker:
        def load_model(self, path: str, *, dummy: bool = False) -> str:
            """Load the weights."""
            clock.advance(10 * MS)
            return f"loaded {path}"

        def profile(self) -> int:
            clock.advance(10 * MS)
            return self.warm_up()

        def warm_up(self) -> int:
            clock.advance(10 * MS)
            return 7

        def execute(self, step: int) -> int:
            clock.advance(10 * MS)
            if step < 0:
                raise Boom(step)
            return step

    class CPUWorker(Worker):
        def warm_up(self) -> int:  # an override calling super(): still one phase
            clock.advance(10 * MS)
            return super().warm_up()

    Worker.__module__ = CPUWorker.__module__ = name
    module.Worker = Worker  # type: ignore[attr-defined]
    module.CPUWorker = CPUWorker  # type: ignore[attr-defined]
    return module


ENTRIES = (
    EntryPoint(FAKE, "Worker.load_model", "load"),
    EntryPoint(FAKE, "Worker.profile", "profile"),
    EntryPoint(FAKE, "Worker.warm_up", "warm up"),
    EntryPoint(FAKE, "CPUWorker.warm_up", "warm up"),
    EntryPoint(FAKE, "Worker.execute", "first request", once=True),
)


@pytest.fixture
def installs() -> Iterator[list[Installed]]:
    """What a test installed, removed after it, with the fake modules it imported."""
    made: list[Installed] = []
    before = set(sys.modules)
    yield made
    for installed in reversed(made):
        installed.remove()
    for name in set(sys.modules) - before:
        if name.startswith(FAKE):
            del sys.modules[name]
    assert not [f for f in sys.meta_path if isinstance(f, engine_phases._WatchModules)]


def _install(made: list[Installed], registry: Registry, clock: FakeClock, **kwargs: Any) -> Installed:
    kwargs.setdefault("entry_points", ENTRIES)
    installed = install(registry, clock=clock, **kwargs)
    made.append(installed)
    return installed


def _phases(registry: Registry) -> list[tuple[str, int, str]]:
    """(name, duration in ms, status) of each phase, in the order they ended."""
    return [(p.name, (p.end_unix_ns - p.start_unix_ns) // MS, p.status) for p in registry.phase_records()]


def test_a_module_imported_already_is_wrapped_at_once(
    installs: list[Installed], fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _engine(fake_clock)
    monkeypatch.setitem(sys.modules, FAKE, module)
    original = vars(module.Worker)["load_model"]
    reg = Registry()
    installed = _install(installs, reg, fake_clock)
    assert installed.finder is None  # nothing left to watch for
    worker = module.CPUWorker()
    assert worker.load_model("/m", dummy=True) == "loaded /m"
    assert worker.profile() == 7
    # Exact durations on the fake clock; the CPU worker's warm-up (calling the base's) is
    # one phase, nested in the profiling that called it.
    assert _phases(reg) == [("load", 10, "ok"), ("warm up", 20, "ok"), ("profile", 30, "ok")]
    load, warm, profile = reg.phase_records()
    assert warm.parent_id == profile.phase_id and load.parent_id is None
    # The wrapper looks like the method: name, docstring, signature.
    wrapped = module.Worker.load_model
    assert wrapped is not original and wrapped.__wrapped__ is original
    assert wrapped.__name__ == "load_model" and wrapped.__doc__ == "Load the weights."
    assert inspect.signature(wrapped) == inspect.signature(original)


def test_an_exception_leaves_unchanged_and_the_phase_says_so(
    installs: list[Installed], fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _engine(fake_clock)
    monkeypatch.setitem(sys.modules, FAKE, module)
    reg = Registry()
    _install(installs, reg, fake_clock)
    with pytest.raises(Boom) as raised:
        module.Worker().execute(-1)
    assert raised.value.args == (-1,)
    (record,) = reg.phase_records()
    assert (record.name, record.status, record.error_type) == ("first request", "error", f"{__name__}.Boom")


def test_the_first_request_is_the_first_call_only(
    installs: list[Installed], fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _engine(fake_clock)
    monkeypatch.setitem(sys.modules, FAKE, module)
    reg = Registry()
    _install(installs, reg, fake_clock)
    worker = module.Worker()
    assert [worker.execute(step) for step in range(3)] == [0, 1, 2]
    assert _phases(reg) == [("first request", 10, "ok")]


def test_nothing_is_wrapped_twice(
    installs: list[Installed], fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _engine(fake_clock)
    monkeypatch.setitem(sys.modules, FAKE, module)
    reg = Registry()
    first = _install(installs, reg, fake_clock)
    once = module.Worker.load_model
    second = _install(installs, Registry(), fake_clock)  # a second install changes nothing
    # ... nor does an entry for a subclass that inherits a wrapped method.
    inherited = _install(
        installs, Registry(), fake_clock, entry_points=[EntryPoint(FAKE, "CPUWorker.load_model", "load")]
    )
    assert module.Worker.load_model is once and "load_model" not in vars(module.CPUWorker)
    assert second.wrapped == [] and inherited.wrapped == []
    assert len(first.wrapped) == len(ENTRIES)
    module.CPUWorker().load_model("/m")
    assert _phases(reg) == [("load", 10, "ok")]


def test_a_method_this_version_lacks_is_skipped_with_one_warning(
    installs: list[Installed], fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _engine(fake_clock)
    monkeypatch.setitem(sys.modules, FAKE, module)
    module.Worker.speed = 3  # not a function: not wrappable
    missing = [
        EntryPoint(FAKE, "Worker.capture_graphs", "capture"),
        EntryPoint(FAKE, "GoneWorker.load_model", "load"),
        EntryPoint(FAKE, "Worker.speed", "speed"),
    ]
    reg = Registry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        installed = _install(installs, reg, fake_clock, entry_points=[*missing, *ENTRIES])
    assert len(caught) == 1 and "Worker.capture_graphs" in str(caught[0].message)
    assert installed.wrapped == list(ENTRIES)  # the rest are wrapped
    assert module.Worker().load_model("/m") == "loaded /m"
    assert [p.name for p in reg.phase_records()] == ["load"]
    # Even a warnings filter set to "error" cannot turn a missing method into an exception.
    STATE.forget_warnings()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _install(installs, reg, fake_clock, entry_points=[EntryPoint(FAKE, "Worker.gone_too", "x")])


def _write_engine(directory: Path, name: str) -> None:
    (directory / f"{name}.py").write_text(
        textwrap.dedent(
            """
            class Worker:
                def load_model(self, path):
                    return "loaded " + path
            """
        )
    )


def test_a_module_imported_later_is_wrapped_as_it_loads(
    installs: list[Installed], fake_clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"{FAKE}_later"
    _write_engine(tmp_path, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry()
    installed = _install(
        installs, reg, fake_clock, entry_points=[EntryPoint(name, "Worker.load_model", "load")]
    )
    finder = installed.finder
    assert finder is not None and sys.meta_path[0] is finder
    # Any other import is not its business.
    assert finder.find_spec("json") is None and finder.find_spec(f"{name}_other") is None
    module = importlib.import_module(name)
    assert module.Worker().load_model("/m") == "loaded /m"
    assert [p.name for p in reg.phase_records()] == ["load"]
    # The module keeps its own loader, and the finder left once nothing was left to watch.
    assert type(module.__loader__).__name__ == "SourceFileLoader"
    assert module.__spec__ is not None and module.__spec__.loader is module.__loader__
    assert installed.finder is None and finder not in sys.meta_path
    assert inspect.getsource(module.Worker).startswith("class Worker:")


def test_a_module_that_fails_to_import_raises_its_own_error(
    installs: list[Installed], fake_clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"{FAKE}_broken"
    (tmp_path / f"{name}.py").write_text("raise Boom_is_not_defined\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _install(installs, Registry(), fake_clock, entry_points=[EntryPoint(name, "Worker.load_model", "load")])
    with pytest.raises(NameError, match="Boom_is_not_defined"):
        importlib.import_module(name)


def test_remove_puts_every_method_back(
    installs: list[Installed], fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _engine(fake_clock)
    monkeypatch.setitem(sys.modules, FAKE, module)
    own = dict(vars(module.Worker))
    sub_own = dict(vars(module.CPUWorker))
    inherited = EntryPoint(FAKE, "CPUWorker.execute", "first request")  # wrapped on the subclass
    installed = install(Registry(), entry_points=[inherited, *ENTRIES], clock=fake_clock)
    assert "execute" in vars(module.CPUWorker)
    installed.remove()
    assert dict(vars(module.Worker)) == own and dict(vars(module.CPUWorker)) == sub_own


def test_the_vllm_table_names_one_phase_per_stage_in_order() -> None:
    # Each entry is a "Class.method" of a vllm.v1 module; the phases, in the order vLLM's
    # engine core runs them.
    assert all(e.module.startswith("vllm.v1.") and e.attribute.count(".") == 1 for e in VLLM)
    assert len(set(VLLM)) == len(VLLM)
    stages = list(dict.fromkeys(e.phase for e in VLLM))
    assert stages == [
        engine_phases.VLLM_LOAD,
        engine_phases.VLLM_PROFILE,
        engine_phases.VLLM_KV_CACHE,
        engine_phases.VLLM_WARM_UP,
        engine_phases.VLLM_FIRST_REQUEST,
    ]
    assert [e.phase for e in VLLM if e.once] == [engine_phases.VLLM_FIRST_REQUEST]
