"""Profiling a model end to end: load a MODEL spec, compile its components, warm up, and
keep the outcome as a :class:`ProfileRun` (plain data that saves to and loads from JSON).

The CLI's ``profile`` and ``report`` commands and the start-up benchmark's child processes
are thin layers over this module.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib
import inspect
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from compiletrace._compile import CompilationMode
from compiletrace._compile import compile as ct_compile
from compiletrace._records import CompilationTimes, GraphRecord
from compiletrace._registry import Registry
from compiletrace._warmup import WarmupResult, warm_up

__all__ = [
    "DEFAULT_MODEL",
    "RUN_SCHEMA_VERSION",
    "ProfileRun",
    "UsageError",
    "check_writable",
    "load_factory",
    "parse_component",
    "profile",
    "write_json_atomic",
]

DEFAULT_MODEL = "compiletrace.models:build_demo"
RUN_SCHEMA_VERSION = 1
RUN_KIND = "compiletrace.run"
ROOT = "."  # the component path that means the whole model


class UsageError(ValueError):
    """Bad input from the user: a malformed MODEL spec, a missing module, a factory that
    raised, an unwritable output path. The CLI prints it on one line and exits with 2."""


# -- loading a model ---------------------------------------------------------------------


def load_factory(spec: str) -> Callable[..., Any]:
    """The callable named by ``package.module:factory``.

    >>> load_factory("compiletrace.models:build_demo").__name__
    'build_demo'
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr or ":" in attr:
        raise UsageError(f"MODEL must look like 'package.module:factory', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise UsageError(f"cannot import module {module_name!r} of MODEL {spec!r}: {exc}") from exc
    except Exception as exc:
        raise UsageError(f"importing {module_name!r} raised {type(exc).__name__}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"module {module_name!r} has no attribute {attr!r} (MODEL {spec!r})")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UsageError(f"MODEL {spec!r} names a {type(obj).__name__}, not a callable factory")
    return obj  # type: ignore[no-any-return]


def _call_factory(factory: Callable[..., Any], spec: str, device: str) -> Any:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    takes_device = "device" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    try:
        built = factory(device=device) if takes_device else factory()
    except Exception as exc:
        raise UsageError(f"factory {spec!r} raised {type(exc).__name__}: {exc}") from exc
    missing = [a for a in ("model", "example_inputs") if not hasattr(built, a)]
    if missing:
        raise UsageError(
            f"factory {spec!r} returned a {type(built).__name__} without {', '.join(missing)}; "
            "see the factory contract in compiletrace.models"
        )
    if not isinstance(built.model, torch.nn.Module):
        raise UsageError(
            f"factory {spec!r}: model must be a torch.nn.Module, got {type(built.model).__name__}"
        )
    return built


def parse_component(text: str) -> tuple[str, str]:
    """``"vision=encoder"`` -> ``("vision", "encoder")`` (``--component PATH=NAME``).

    >>> parse_component("language_model=language_model")
    ('language_model', 'language_model')
    """
    path, sep, name = text.partition("=")
    if not sep or not path.strip() or not name.strip():
        raise UsageError(f"--component must look like PATH=NAME (e.g. vision=encoder), got {text!r}")
    return path.strip(), name.strip()


def _resolve_components(model: torch.nn.Module, components: Mapping[str, str]) -> dict[str, str]:
    if not components:
        raise UsageError("no components to compile: the factory gave none; pass --component PATH=NAME")
    resolved: dict[str, str] = {}
    for path, name in components.items():
        if path != ROOT:
            try:
                model.get_submodule(path)
            except AttributeError:
                raise UsageError(
                    f"component path {path!r} is not a submodule of {type(model).__name__}"
                ) from None
        if not isinstance(name, str) or not name.strip():
            raise UsageError(f"component name for {path!r} must be a non-empty string, got {name!r}")
        resolved[path] = name
    if ROOT in resolved and len(resolved) > 1:
        raise UsageError(f"component path {ROOT!r} (the whole model) cannot be combined with other paths")
    return resolved


# -- output paths ----------------------------------------------------------------------


def check_writable(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Fail early (before anything compiles) when ``path`` cannot be written."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{what} path {str(p)!r} is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"cannot write {what} {str(p)!r}: directory {str(parent)!r} does not exist")
    try:
        fd, probe = tempfile.mkstemp(prefix=".compiletrace-probe-", dir=parent)
    except OSError as exc:
        raise UsageError(f"cannot write {what} {str(p)!r}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(probe)
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"cannot write {what} {str(p)!r}: permission denied")
    return p


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write through a temporary file in the same directory, then rename over ``path``."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write through a temporary file in the same directory, then rename over ``path``:
    readers see the old file or the whole new one."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent if str(p.parent) else ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    """``json.dump`` atomically: readers see the old file or the whole new one."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


# -- the run -----------------------------------------------------------------------------


@dataclass
class ProfileRun:
    """One profiled start-up: the graph records, the warm-up result, and how it was run.

    Saves to versioned JSON (:meth:`save`, :meth:`load`) and renders as text
    (:meth:`summary`), a self-contained HTML page (:meth:`html`) and, in a notebook, as
    HTML tables and a chart.

    >>> run = profile(backend="eager")
    >>> sorted(run.registry.by_component())
    ['encoder', 'language_model']
    >>> ProfileRun.from_dict(run.to_dict()).records() == run.records()
    True
    """

    registry: Registry  # the records of this run only
    warmup: WarmupResult
    meta: dict[str, Any] = field(default_factory=dict)  # model, backend, mode, device, versions

    def records(self) -> tuple[GraphRecord, ...]:
        return self.registry.records()

    def summary(self) -> str:
        """The text tables and the one-line summary."""
        from compiletrace.reports import summary_table

        return summary_table(self.records())

    def html(self, title: str = "compiletrace report") -> str:
        """The one-file HTML report (no network access needed to view it)."""
        from compiletrace.reports._html import html_report

        return html_report(self.records(), warmup=self.warmup, meta=self.meta, title=title)

    def _repr_html_(self) -> str:
        from compiletrace.reports._html import report_fragment

        return report_fragment(self.records(), warmup=self.warmup, meta=self.meta)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": RUN_KIND,
            "schema_version": RUN_SCHEMA_VERSION,
            "meta": dict(self.meta),
            "registry": self.registry.to_dict(),
            "warmup": self.warmup.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Any) -> ProfileRun:
        if not isinstance(data, dict) or data.get("kind") != RUN_KIND:
            raise ValueError(
                "not a compiletrace run: expected the JSON that 'compiletrace profile --json' writes"
            )
        version = data.get("schema_version")
        if version != RUN_SCHEMA_VERSION:
            raise ValueError(
                f"run schema version {version!r} is not supported; this compiletrace reads "
                f"version {RUN_SCHEMA_VERSION}"
            )
        w = data["warmup"]
        warmup = WarmupResult(
            skipped=bool(w["skipped"]),
            duration_s=float(w["duration_s"]),
            compilation_times=CompilationTimes(**w.get("compilation_times", {})),
            by_component=dict(w.get("by_component", {})),
            mode=CompilationMode.parse(w.get("mode", "stock")),
            device=str(w.get("device", "cpu")),
        )
        return cls(Registry.from_dict(data["registry"]), warmup, dict(data.get("meta", {})))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the run as JSON, atomically."""
        write_json_atomic(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ProfileRun:
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))


@contextlib.contextmanager
def _announce(model: torch.nn.Module, name: str, on_compile: Callable[[str], None] | None) -> Iterator[None]:
    # A pre-hook on the compiled wrapper runs eagerly, before Dynamo sees the call: the
    # moment to say which component may be compiling now.
    if on_compile is None:
        yield
        return
    handle = model.register_forward_pre_hook(lambda *_: on_compile(name))
    try:
        yield
    finally:
        handle.remove()


def profile(
    model: str | None = None,
    *,
    backend: str = "inductor",
    mode: str | None = None,
    compilation_mode: CompilationMode | str = CompilationMode.STOCK_TORCH_COMPILE,
    device: str = "cpu",
    components: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
    registry: Registry | None = None,
    on_compile: Callable[[str], None] | None = None,
    cache_artifacts: str | os.PathLike[str] | None = None,
) -> ProfileRun:
    """Build the model a MODEL spec names (the built-in demo by default), compile each of
    its components through compiletrace, run the guarded warm-up, and return the run.

    ``components`` (path -> name) replaces the factory's own mapping when given.
    ``on_compile(component)`` is called before each component's forward (for progress).
    ``cache_artifacts`` names a file saved by ``compiletrace cache save``, loaded into the
    compile caches before anything compiles (a portable warm start).
    Raises :class:`UsageError` for bad input, before anything compiles.

    >>> run = profile(backend="eager")
    >>> run.warmup.skipped, len(run.records())
    (False, 2)
    """
    spec = model or DEFAULT_MODEL
    cmode = CompilationMode.parse(compilation_mode)
    factory = load_factory(spec)
    built = _call_factory(factory, spec, device)
    wanted = dict(components) if components else dict(getattr(built, "components", {}) or {})
    resolved = _resolve_components(built.model, wanted)
    reg = registry if registry is not None else Registry()
    loaded = None
    if cache_artifacts is not None:
        from compiletrace._cache import load_cache_artifacts

        try:
            loaded = load_cache_artifacts(cache_artifacts)
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot load cache artifacts: {exc}") from exc

    hooks = contextlib.ExitStack()
    with hooks:
        for path, name in resolved.items():
            try:
                target = built.model if path == ROOT else built.model.get_submodule(path)
                compiled = ct_compile(
                    target, component=name, backend=backend, mode=mode, registry=reg, compilation_mode=cmode
                )
            except (TypeError, ValueError) as exc:
                raise UsageError(str(exc).splitlines()[0]) from exc
            if path == ROOT:
                built.model = compiled
            else:
                parent_path, _, leaf = path.rpartition(".")
                parent = built.model.get_submodule(parent_path) if parent_path else built.model
                setattr(parent, leaf, compiled)
            hooks.enter_context(_announce(compiled, name, on_compile))

        run_fn: Callable[[], Any] | None = getattr(built, "run", None)
        if run_fn is None or not callable(run_fn):
            inputs = tuple(built.example_inputs)

            def run_fn() -> Any:
                with torch.no_grad():
                    return built.model(*inputs)

        result = warm_up(run_fn, mode=cmode, device=device, registry=reg)

    meta = {
        "model": spec,
        "backend": backend,
        "mode": mode,
        "compilation_mode": cmode.value,
        "device": device,
        "components": resolved,
        "created_unix_s": time.time(),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch_version": str(torch.__version__),
        "compiletrace_version": _version(),
    }
    if loaded is not None:
        meta["cache_artifacts"] = loaded.to_dict()
    return ProfileRun(reg, result, meta)


def _version() -> str:
    from compiletrace import __version__

    return __version__
