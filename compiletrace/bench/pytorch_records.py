"""``bench startup`` figures as PyTorch benchmark-database records, for the dashboards that
read them.

PyTorch's OSS benchmark database takes a JSON list of records, one metric each::

    {"benchmark": {"name": ..., "extra_info": {"args": {...}, "use_compile": true}},
     "model": {"name": ...},
     "metric": {"name": "avg_cold_startup_time", "benchmark_values": [2.5],
                "extra_info": {"cold_startup_times": [...], "cold_startup_percentiles": {...}}}}

``vllm bench startup --output-json PATH`` writes such a list per metric, beside its own JSON,
as ``<base>.<metric>.pytorch.json`` (``base``: PATH without its extension). These are the same
files with the same keys: per kind of start-up (``cold``, ``warm``, and ``portable`` when
``--cache-artifacts`` added them), ``startup``, ``compilation`` and, when an encoder
compiled, ``encoder_compilation``; then ``portable_artifact_load``. The metric's value is the
average (as vLLM writes it); the per-iteration seconds and the percentiles ride along in the
metric's ``extra_info``. A metric the run has no figures for (no warm iterations, no encoder)
has no file: nothing is written in its place.

>>> data = {"avg_cold_startup_time": 2.5, "cold_startup_times": [2.0, 3.0]}
>>> records = pytorch_benchmark_records(data, args={"model": "pkg.mod:build"})
>>> list(records)
['cold_startup']
>>> records["cold_startup"][0]["metric"]["benchmark_values"]
[2.5]
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from compiletrace._app.profile import DEFAULT_MODEL
from compiletrace._data.bench import BENCH_PREFIXES
from compiletrace._data.kinds import FileKind
from compiletrace._io.envelope import Fields
from compiletrace._io.errors import UsageError
from compiletrace._io.files import check_writable, is_stdout, write_json

__all__ = ["BENCHMARK_NAME", "pytorch_benchmark_records", "record_paths", "write_pytorch_records"]

BENCHMARK_NAME = "compiletrace bench startup"  # benchmark.name; vLLM's own is "vLLM benchmark"
RECORDS_SUFFIX = ".pytorch.json"
_SOURCE = "the bench figures"  # how messages name the dict they read
# The metrics of each kind of start-up, in the order vLLM writes them.
_PER_PREFIX = ("startup", "compilation", "encoder_compilation")


def _metric_keys() -> list[str]:
    keys = [f"{prefix}_{metric}" for prefix in BENCH_PREFIXES for metric in _PER_PREFIX]
    return [*keys, "portable_artifact_load"]


def _json_ready(value: Any) -> Any:
    """``value`` as JSON can hold it: the args a parser gives may hold paths, tuples or
    objects, and a non-finite float is not JSON (``"inf"``, as vLLM writes it)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_json_ready(v) for v in value]
    return str(value)


def _times(fields: Fields, key: str) -> list[float] | None:
    """The per-iteration seconds under ``key``: None when absent or empty (no iterations)."""
    value = fields.data.get(key)
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise fields.fail(key, "a list of finite numbers >= 0", value)
    inner = Fields({str(i): v for i, v in enumerate(value)}, fields.source, key)
    return [inner.number(str(i), minimum=0.0) for i in range(len(value))]


def _model_name(options: Mapping[str, Any], args: Mapping[str, Any]) -> str:
    # The MODEL spec the bench ran (None: the built-in model, named by its factory).
    for source in (args, options):
        model = source.get("model")
        if isinstance(model, str) and model:
            return model
    return DEFAULT_MODEL


def _use_compile(options: Mapping[str, Any], args: Mapping[str, Any]) -> bool | None:
    # The dashboards' "was torch.compile on" flag: compilation mode "none" runs eagerly; a
    # command (bench startup -- COMMAND) compiled where its runs name a backend.
    if "command" in options:
        return bool(options.get("backend"))
    for source in (options, args):
        mode = source.get("compilation_mode")
        if isinstance(mode, str):
            return mode != "none"
    return None


def pytorch_benchmark_records(
    data: dict[str, Any], *, args: Mapping[str, Any], benchmark_name: str = BENCHMARK_NAME
) -> dict[str, list[dict[str, Any]]]:
    """Metric name (``cold_startup``, ...) -> its PyTorch benchmark-database records (one),
    from the figures :meth:`StartupBenchResult.to_dict` gives (what ``--output-json``
    writes). ``args`` are the benchmark's arguments (``vars(args)`` of the parser), kept in
    ``benchmark.extra_info.args``; ``model.name`` is their ``model`` (the built-in model's
    factory when none). Only metrics with figures appear. Raises :class:`RunFileError` (a
    :class:`UsageError`) naming the field when a figure is not a finite number >= 0.

    >>> data = {"avg_warm_compilation_time": 0.5, "warm_compilation_times": [0.25, 0.75],
    ...         "warm_compilation_percentiles": {"50": 0.5}, "options": {"compilation_mode": "stock"}}
    >>> record = pytorch_benchmark_records(data, args={"backend": "eager"})["warm_compilation"][0]
    >>> record["benchmark"]
    {'name': 'compiletrace bench startup', 'extra_info': {'args': {'backend': 'eager'}, 'use_compile': True}}
    >>> record["model"], record["metric"]["name"], record["metric"]["benchmark_values"]
    ({'name': 'compiletrace.models:build_demo'}, 'avg_warm_compilation_time', [0.5])
    >>> record["metric"]["extra_info"]
    {'warm_compilation_times': [0.25, 0.75], 'warm_compilation_percentiles': {'50': 0.5}}
    """
    fields = Fields(data, _SOURCE)
    if "kind" in fields.data:  # what to_dict gives; a dict without one is read as its keys say
        FileKind.BENCH.check(fields)
    options = fields.data.get("options")
    options = options if isinstance(options, Mapping) else {}
    benchmark_extra: dict[str, Any] = {"args": _json_ready(args)}
    use_compile = _use_compile(options, args)
    if use_compile is not None:
        benchmark_extra["use_compile"] = use_compile
    model = {"name": _model_name(options, args)}

    out: dict[str, list[dict[str, Any]]] = {}
    for key in _metric_keys():
        avg_key, times_key, pcts_key = f"avg_{key}_time", f"{key}_times", f"{key}_percentiles"
        times = _times(fields, times_key)
        if avg_key not in fields.data or times is None:
            continue  # no iterations of this kind, or no encoder: no figure to report
        metric_extra: dict[str, Any] = {times_key: times}
        if pcts_key in fields.data:
            metric_extra[pcts_key] = fields.seconds_by_name(pcts_key)
        record = {
            "benchmark": {"name": benchmark_name, "extra_info": _json_ready(benchmark_extra)},
            "model": dict(model),
            "metric": {
                "name": avg_key,
                "benchmark_values": [fields.number(avg_key, minimum=0.0)],
                "extra_info": metric_extra,
            },
        }
        out[key] = [record]
    return out


def record_paths(output_json: str | os.PathLike[str], metrics: list[str]) -> dict[str, Path]:
    """Where each metric's records go: ``<base>.<metric>.pytorch.json`` beside
    ``output_json``, ``base`` being that path without its extension (as vLLM names them).

    >>> str(record_paths("out/bench.json", ["cold_startup"])["cold_startup"])
    'out/bench.cold_startup.pytorch.json'
    """
    text = os.fspath(output_json)
    if is_stdout(text):
        raise UsageError(
            "PyTorch benchmark records are written beside the --output-json file; "
            f"give it a file name, not standard output ({text!r})"
        )
    base = os.path.splitext(text)[0]
    return {metric: Path(f"{base}.{metric}{RECORDS_SUFFIX}") for metric in metrics}


def write_pytorch_records(
    data: dict[str, Any],
    output_json: str | os.PathLike[str],
    *,
    args: Mapping[str, Any],
    benchmark_name: str = BENCHMARK_NAME,
) -> list[Path]:
    """Write :func:`pytorch_benchmark_records` of ``data``, one file per metric, at
    :func:`record_paths` of ``output_json``; each file atomically. Returns the paths
    written, in metric order (none for a run with no figures). Every path is checked before
    any is written: an unwritable one (a directory that does not exist) raises
    :class:`UsageError` saying why, and nothing is written.

    >>> import json, os, tempfile
    >>> out = os.path.join(tempfile.mkdtemp(), "bench.json")
    >>> data = {"avg_cold_startup_time": 2.5, "cold_startup_times": [2.0, 3.0]}
    >>> [p.name for p in write_pytorch_records(data, out, args={})]
    ['bench.cold_startup.pytorch.json']
    >>> json.load(open(out[:-5] + ".cold_startup.pytorch.json"))[0]["metric"]["name"]
    'avg_cold_startup_time'
    """
    records = pytorch_benchmark_records(data, args=args, benchmark_name=benchmark_name)
    paths = record_paths(output_json, list(records))
    for path in paths.values():
        check_writable(path, "PyTorch benchmark records")
    for metric, path in paths.items():
        write_json(path, records[metric])
    return list(paths.values())
