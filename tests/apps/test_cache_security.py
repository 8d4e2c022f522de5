"""Cache-artifacts files from elsewhere: inspecting runs nothing, loading refuses what it
cannot vouch for, ``--trust`` is the way past, and ``cache save``'s digest catches damage.

The crafted files are harmless: their payload creates a marker file in tmp_path when
unpickled, placed where torch unpickles while loading (an inductor entry), so a test sees
whether anything ran. Building them needs no compile; one test module fixture saves real
artifacts from one tiny inductor compile in a child process.
"""

from __future__ import annotations

import base64
import binascii
import os
import pickle
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from compiletrace import RunFileError, cli
from compiletrace._app.cache import (
    check_cache_artifacts,
    inspect_cache_artifacts,
    load_cache_artifacts,
)
from compiletrace._app.profile import profile
from compiletrace._core.torch_compat import CACHE_ARTIFACT_GLOBALS
from compiletrace._io.artifacts import digest_path, pack_container, read_pickle, write_digest
from compiletrace._io.signing import KEY_ENV, key_file, load_signing_key

ROOT = Path(__file__).resolve().parents[2]
MODEL = "tests.tiny_models:tiny"
INDUCTOR_KEY = "fabcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrs"  # shaped like torch's keys


class _Touch:
    """Unpickling it creates ``path``: the harmless stand-in for code a file would run."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.path,))


def _save(
    path: Path, sections: dict[str, list[tuple[str, bytes]]], *, digest: bool = True, sign: bool = True
) -> Path:
    """Write a container as ``cache save`` would: its digest beside it, signed with this
    run's key (so a test reaches the content checks), unless told otherwise."""
    data = pack_container(sections)
    path.write_bytes(data)
    if digest:
        key = load_signing_key(create=True) if sign else None
        signature = None if key is None else (key.sign(data), key.key_id)
        write_digest(
            path, data, torch_version=str(torch.__version__), compiletrace_version="test", signature=signature
        )
    return path


def _text(s: str) -> bytes:
    raw = s.encode("utf-8")
    return pickle.BINUNICODE + len(raw).to_bytes(4, "little") + raw


def _body(value: Any) -> bytes:
    # Protocol 3: no framing, bytes as BINBYTES; drop its PROTO header and STOP.
    return pickle.dumps(value, protocol=3)[2:-1]


def _instance(module: str, name: str, state: dict[str, Any]) -> bytes:
    """A pickle of an instance of ``module.name`` with ``state``, written opcode by opcode
    (the class need not be importable here)."""
    glob = _text(module) + _text(name) + pickle.STACK_GLOBAL
    return (
        pickle.PROTO
        + b"\x04"
        + glob
        + pickle.EMPTY_TUPLE
        + pickle.NEWOBJ
        + _body(state)
        + pickle.BUILD
        + b"."
    )


def _call(module: str, name: str, args: tuple[Any, ...]) -> bytes:
    """A pickle that calls ``module.name(*args)`` when unpickled."""
    glob = _text(module) + _text(name) + pickle.STACK_GLOBAL
    return pickle.PROTO + b"\x04" + glob + _body(args) + pickle.REDUCE + b"."


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "ran.marker"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "c"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(path))
    return path


@pytest.fixture
def crafted(tmp_path: Path, marker: Path) -> Path:
    """An artifacts file with a valid digest whose inductor entry runs code when unpickled."""
    return _save(tmp_path / "crafted.cache", {"inductor": [(INDUCTOR_KEY, pickle.dumps(_Touch(marker)))]})


def _one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- a crafted payload -----------------------------------------------------------------------


def test_crafted_payload_is_refused_everywhere_and_never_runs(
    crafted: Path,
    marker: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(ROOT)
    for argv in (
        ["cache", "inspect", str(crafted)],
        ["cache", "load", str(crafted)],
        ["profile", MODEL, "--backend", "eager", "--cache-artifacts", str(crafted)],
        # Refused before any child starts (a cold child would run first otherwise).
        ["bench", "startup", MODEL, "--backend", "eager", "--num-iters-cold", "1", "--num-iters-warm", "0",
         "--cache-artifacts", str(crafted)],
    ):  # fmt: skip
        assert cli.main(argv) == 2, argv
        line = _one_line_error(capsys.readouterr().err)
        assert str(crafted) in line and "pathlib.Path.touch" in line, line
        assert "--trust" in line
    with pytest.raises(RunFileError, match=r"pathlib\.Path\.touch"):
        profile(MODEL, backend="eager", cache_artifacts=crafted)
    assert not marker.exists()
    assert not (cache_dir / "fxgraph").exists()  # nothing reached torch's caches


def test_trust_hands_the_file_to_torch_which_runs_it(
    tmp_path: Path, marker: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A payload torch's loader accepts: it reads ``_triton_bundle`` off what it unpickled.
    payload = pickle.dumps(types.SimpleNamespace(_triton_bundle=None, ran=_Touch(marker)))
    path = _save(tmp_path / "trusted.cache", {"inductor": [(INDUCTOR_KEY, payload)]}, digest=False)
    assert cli.main(["cache", "load", str(path)]) == 2
    assert "no digest" in capsys.readouterr().err
    assert not marker.exists()

    assert cli.main(["cache", "load", "--trust", str(path)]) == 0
    assert "unchecked (--trust)" in capsys.readouterr().out
    assert list((cache_dir / "fxgraph").rglob("*"))  # torch wrote the entry into its cache
    # The file is code either way; only when it runs differs between releases.
    if torch.__version__ < "2.14":
        # 2.13 unpickles an inductor entry while loading it (populate_cache -> _emit_triton_bundle).
        assert marker.exists()
        return
    # 2.14 and 2.15 only write it, and unpickle it at the first FX-graph-cache lookup of its
    # key: the next compile whose graph has that key. That lookup, run here, runs the payload.
    from torch._inductor.codecache import FxGraphCache

    assert not marker.exists()
    next(FxGraphCache.iterate_over_candidates(True, None, INDUCTOR_KEY))
    assert marker.exists()


def test_refused_globals_name_their_reason_and_nested_pickles_are_read_the_same_way(
    tmp_path: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # torch's own way of saving a backward graph: exec of source from the file.
    graph = _call("torch.fx.graph_module", "reduce_graph_module", ({"code": "import os"}, ""))
    path = _save(tmp_path / "backward.cache", {"aot_autograd": [("aabc", graph)]})
    assert cli.main(["cache", "inspect", str(path)]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "torch.fx.graph_module.reduce_graph_module" in line and "rebuilds a graph module" in line

    # An admitted class whose state carries a pickle: read with the same reader, not run.
    inner = pickle.dumps(_Touch(marker))
    outer = _instance("torch._inductor.output_code", "CompiledFxGraph", {"blob": inner})
    path = _save(tmp_path / "nested.cache", {"inductor": [(INDUCTOR_KEY, outer)]})
    with pytest.raises(RunFileError, match=r"a pickle inside it\) refers to pathlib\.Path\.touch"):
        inspect_cache_artifacts(path)
    with pytest.raises(RunFileError, match=r"pathlib\.Path\.touch"):
        load_cache_artifacts(path)
    assert not marker.exists()


def test_unknown_kinds_and_persistent_ids_are_refused(tmp_path: Path) -> None:
    path = _save(tmp_path / "pre.cache", {"precompile": [("k", pickle.dumps({}))]})
    with pytest.raises(RunFileError, match="does not know 'precompile' artifacts"):
        check_cache_artifacts(path)
    assert check_cache_artifacts(path, trust=True).checked is False
    persistent = pickle.PROTO + b"\x04" + _text("x") + pickle.BINPERSID + b"."
    with pytest.raises(RunFileError, match="persistent reference"):
        read_pickle(persistent, CACHE_ARTIFACT_GLOBALS["inductor"], "x.cache")


# -- paths -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "key", "why"),
    [
        ("autotune", "../../escape/x.best_config", "holds '..'"),
        ("autotune", "/tmp/escape/x.best_config", "absolute path"),
        ("inductor", "f/../../../escape", "holds '..'"),
        ("inductor", "f..x", "'..' path part"),
        ("aot_autograd", "a/b", "path separator"),
        ("autotune", "ab/c\x00d", "NUL byte"),
        ("inductor", "fab\x1b[2J", "control character"),
    ],
)
def test_keys_that_leave_the_cache_directory_are_refused(
    kind: str, key: str, why: str, tmp_path: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    content = b'{"x": 1}' if kind == "autotune" else pickle.dumps({})
    path = _save(tmp_path / "escape.cache", {kind: [(key, content)]})
    for argv in (["cache", "inspect", str(path)], ["cache", "load", str(path)]):
        assert cli.main(argv) == 2
        line = _one_line_error(capsys.readouterr().err)
        assert "outside the cache directory" in line and why in line, line
    assert not (tmp_path / "escape").exists() and not Path("/tmp/escape/x.best_config").exists()


def test_a_symlink_out_of_the_cache_directory_is_refused_on_load(tmp_path: Path, cache_dir: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cache_dir.mkdir()
    (cache_dir / "ab").symlink_to(outside)
    path = _save(tmp_path / "link.cache", {"autotune": [("ab/x.best_config", b"{}")]})
    inspect_cache_artifacts(path)  # the names are fine: inspect resolves nothing
    with pytest.raises(RunFileError, match=r"resolves to .*outside"):
        load_cache_artifacts(path)
    assert list(outside.iterdir()) == []


def test_a_compiled_graph_whose_cache_key_leaves_the_cache_is_refused(tmp_path: Path) -> None:
    graph = _instance("torch._inductor.output_code", "CompiledFxGraph", {"cache_key": "x/../../../../evil"})
    path = _save(tmp_path / "key.cache", {"inductor": [(INDUCTOR_KEY, graph)]})
    with pytest.raises(RunFileError, match=r"CompiledFxGraph\.cache_key .* outside the cache directory"):
        inspect_cache_artifacts(path)


# -- what torch does with an allowed class's fields -------------------------------------------


def _graph(**fields: Any) -> Any:
    """A real CompiledFxGraph holding only ``fields`` (pickled by torch's own class)."""
    from torch._inductor.output_code import CompiledFxGraph

    graph = CompiledFxGraph.__new__(CompiledFxGraph)
    graph.__dict__.update(compiled_fn_runner=None, **fields)
    return graph


def _boxed(**attributes: Any) -> Any:
    """A real BoxedBool given attributes it does not have: a duck-typed stand-in."""
    from torch._inductor.utils import BoxedBool

    box = BoxedBool(True)
    box.__dict__.update(attributes)
    return box


def test_a_triton_bundle_of_duck_typed_stand_ins_writes_nowhere(
    tmp_path: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The critical one: allowed classes only (TritonBundle, BoxedBool posing as Triton's
    kernel-artifact classes), and torch, unpacking the bundle while it loads the file,
    writes the payload at whatever absolute path ``filename`` names."""
    from torch._inductor.triton_bundler import TritonBundle

    target = tmp_path / "outside" / "evil.pth"
    target.parent.mkdir()
    artifact = _boxed(filename=str(target), payload=b"import os\n")
    kernels = _boxed(kernel_hash="../../moved", device=0, artifacts=[artifact])
    payload = pickle.dumps(_graph(_triton_bundle=TritonBundle([kernels], [])), protocol=4)
    path = _save(tmp_path / "evil.cache", {"inductor": [(INDUCTOR_KEY, payload)]})
    for argv in (["cache", "inspect", str(path)], ["cache", "load", str(path)]):
        assert cli.main(argv) == 2, argv
        line = _one_line_error(capsys.readouterr().err)
        assert "TritonBundle object has entries in kernel_artifacts" in line, line
    assert not target.exists()
    assert not (cache_dir / "fxgraph").exists()

    # Each guard alone stops it: the stand-in's attributes are not a BoxedBool's ...
    boxed_only = pickle.dumps(_graph(inputs_to_check=[kernels]), protocol=4)
    path = _save(tmp_path / "boxed.cache", {"inductor": [(INDUCTOR_KEY, boxed_only)]})
    with pytest.raises(RunFileError, match=r"BoxedBool object sets attributes its class does not have \(art"):
        inspect_cache_artifacts(path)
    # ... and a bundle's kernel list must be empty even when made of allowed classes.
    from torch.utils._ordered_set import OrderedSet

    listed = pickle.dumps(_graph(_triton_bundle=TritonBundle([OrderedSet()], [])), protocol=4)
    path = _save(tmp_path / "listed.cache", {"inductor": [(INDUCTOR_KEY, listed)]})
    with pytest.raises(RunFileError, match="has entries in kernel_artifacts"):
        inspect_cache_artifacts(path)

    # The attack is real. Trusted, torch 2.13 unpacks the bundle while loading the file and
    # writes outside the cache.
    load_cache_artifacts(_save(tmp_path / "evil2.cache", {"inductor": [(INDUCTOR_KEY, payload)]}), trust=True)
    if torch.__version__ < "2.14":
        assert target.exists()
        return
    # 2.14 and 2.15 only write the entry into the cache; a compile that hits its key unpickles
    # it at the lookup and unpacks the bundle first thing on the hit (cache_hit_post_compile).
    # Both run here: the write happens before torch reaches what the stand-in graph lacks.
    from torch._inductor.codecache import FxGraphCache

    assert not target.exists()
    graph, _, _ = next(FxGraphCache.iterate_over_candidates(True, None, INDUCTOR_KEY))
    with pytest.raises(AttributeError, match="cache_key"):
        FxGraphCache.cache_hit_post_compile(graph, {}, None)
    assert target.exists()


def _two_builds(module: str, name: str, first: dict[str, Any], second: dict[str, Any]) -> bytes:
    glob = _text(module) + _text(name) + pickle.STACK_GLOBAL
    return (
        pickle.PROTO + b"\x04" + glob + pickle.EMPTY_TUPLE + pickle.NEWOBJ
        + _body(first) + pickle.BUILD + _body(second) + pickle.BUILD + b"."
    )  # fmt: skip


def test_a_second_build_cannot_hide_what_the_first_one_set(tmp_path: Path) -> None:
    # Unpickling applies both BUILDs: the absolute cache_key of the first one survives.
    data = _two_builds(
        "torch._inductor.output_code", "CompiledFxGraph", {"cache_key": "/tmp/evil"}, {"source_code": ""}
    )
    path = _save(tmp_path / "two.cache", {"inductor": [(INDUCTOR_KEY, data)]})
    with pytest.raises(RunFileError, match=r"CompiledFxGraph object is built 2 times"):
        inspect_cache_artifacts(path)
    from compiletrace._io.artifacts import standin_fields

    scan = read_pickle(data, CACHE_ARTIFACT_GLOBALS["inductor"], "x")
    assert standin_fields(scan.root) == {"cache_key": "/tmp/evil", "source_code": ""}


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("__import__('os').system('id')", "calls what an expression returns"),
        ("torch.ops.aten.sin(1)", "calls torch.ops.aten.sin"),
        ("math.__loader__", "names math.__loader__"),
        ("L['t0'].__class__", "names an attribute"),
        ("L['__builtins__']", "subscripts something other than"),
        ("[x for x in ()]", "uses ListComp"),
        ("(lambda: 0)()", "calls what an expression returns"),
        ("9 ** 9 ** 9", "raises to something other than a small constant"),
        # Each power small, the whole 2**36 bits: 27 GiB for torch to evaluate at the first lookup.
        (
            "(((((10**64)**64)**64)**64)**64)**64 < L['t0']",
            "computes a number of up to 13,607 bits, more than 8,192",
        ),
        ("(L['t0'] ** 64) ** 64 > 0", "computes a number of up to 262,144 bits"),
        ("round(5, -10**18) < L['t0']", "computes a number of up to"),  # 10**(10**18) on the way
        ("L['t0'] == 'a'", "holds the literal 'a'"),
        ("max(L['t0'], key=print)", "passes keywords"),
        ("2 <=", "not a Python expression"),
    ],
)
def test_guard_expressions_torch_evaluates_are_only_the_ones_torch_writes(
    expression: str, why: str, tmp_path: Path
) -> None:
    graph = pickle.dumps(_graph(guards_expr=expression), protocol=4)
    path = _save(tmp_path / "guards.cache", {"inductor": [(INDUCTOR_KEY, graph)]})
    with pytest.raises(RunFileError, match="has a guards_expr torch would evaluate") as caught:
        inspect_cache_artifacts(path)
    assert why in str(caught.value)


def test_guard_expressions_of_the_shapes_torch_writes_pass(tmp_path: Path) -> None:
    written = [
        "2 <= L['t0'] and L['t0'] <= 4096",
        "(L['t1'] % 8) == 0 and L['t0'] != 1",
        "math.floor(L['t0'] / 2) <= max(L['t1'], 3) and torch.sym_float(L['t0']) < math.inf",
        "L['t0'] >= (-1 << 63) and abs(-L['t0']) <= 2 ** 10",
        # A cat of many inputs, the numel of many dimensions: sums and products of sizes.
        " + ".join(f"L['t{i}']" for i in range(500)) + " <= 9223372036854775807",
        "*".join(f"L['t{i}']" for i in range(8)) + " <= (L['t9'] ** 2) * 2 ** 64",
    ]
    for i, expression in enumerate(written):
        graph = pickle.dumps(_graph(guards_expr=expression, cache_key=INDUCTOR_KEY), protocol=4)
        inspect_cache_artifacts(_save(tmp_path / f"ok{i}.cache", {"inductor": [(INDUCTOR_KEY, graph)]}))


# -- a harmless file, the digest, garbage -----------------------------------------------------


@pytest.mark.slow
def test_a_checked_file_loads_and_the_digest_guards_it(
    tmp_path: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _save(tmp_path / "tune.cache", {"autotune": [("ab/cd.best_config", b'{"XBLOCK": 8}')]})
    info = inspect_cache_artifacts(path)
    assert (info.artifacts, info.digest, info.torch_version) == (
        {"autotune": 1},
        "verified",
        torch.__version__,
    )
    assert cli.main(["cache", "load", str(path)]) == 0
    assert "checked against tune.cache.sha256" in capsys.readouterr().out
    assert (cache_dir / "ab" / "cd.best_config").read_bytes() == b'{"XBLOCK": 8}'
    if shutil.which("sha256sum"):  # the digest is in the format the standard tool checks
        subprocess.run(["sha256sum", "--check", "--strict", digest_path(path).name], cwd=tmp_path, check=True)

    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    for argv in (
        ["cache", "inspect", str(path)],
        ["cache", "load", str(path)],
        ["cache", "load", "--trust", str(path)],
    ):
        assert cli.main(argv) == 2
        assert "does not match its digest" in _one_line_error(capsys.readouterr().err)


GARBAGE = b"\x80\x04garbage"


def _overrun() -> bytes:
    """A container with a valid checksum whose first key length runs past the end (torch
    2.13's own reader loops on it forever)."""
    kind = base64.b64encode(b"inductor")
    body = (1).to_bytes(8, "big") + len(kind).to_bytes(8, "big") + kind + (1).to_bytes(8, "big")
    body += (1000).to_bytes(8, "big") + b"=" * 20
    return binascii.crc32(body).to_bytes(4, "big") + body


@pytest.mark.parametrize(
    ("data", "message", "container"),
    [
        (b"not an artifact file", "not a torch cache-artifacts file", False),
        (b"", "not a torch cache-artifacts file", False),
        (os.urandom(4096), "not a torch cache-artifacts file", False),
        (
            pack_container({"inductor": [(INDUCTOR_KEY, GARBAGE)]})[:-3],
            "not a torch cache-artifacts file",
            False,
        ),
        (_overrun(), "runs past the end", False),
        (pack_container({"inductor": [(INDUCTOR_KEY, GARBAGE)]}), "not a readable pickle", True),
        (pack_container({"autotune": [("ab/c.best_config", b"{nope")]}), "is not JSON", True),
    ],
)
def test_garbage_is_one_line_and_exit_2(
    data: bytes,
    message: str,
    container: bool,
    tmp_path: Path,
    cache_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "junk.cache"
    path.write_bytes(data)
    key = load_signing_key(create=True)
    assert key is not None
    write_digest(
        path, data, torch_version="x", compiletrace_version="x", signature=(key.sign(data), key.key_id)
    )
    argvs = [["cache", "inspect", str(path)], ["cache", "load", str(path)]]
    if not container:  # even trusted, what is not a container never reaches torch's traceback
        argvs.append(["cache", "load", "--trust", str(path)])
    for argv in argvs:
        assert cli.main(argv) == 2
        assert message in _one_line_error(capsys.readouterr().err)


# -- real artifacts from one tiny inductor compile --------------------------------------------


@pytest.fixture(scope="module")
def real_artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Artifacts saved by ``cache save``'s own function after one tiny inductor compile, in
    a child process with a private cache (nothing else this process compiled gets in)."""
    work = tmp_path_factory.mktemp("real")
    path = work / "real.cache"
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(work / "c")}
    subprocess.run(
        [sys.executable, "-m", "tests.portable_cache_child", "save", str(path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    return path


@pytest.mark.inductor
def test_real_artifacts_inspect_and_load(
    real_artifacts: Path, tmp_path: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert digest_path(real_artifacts).is_file()
    info = inspect_cache_artifacts(real_artifacts)
    assert info.artifacts.get("inductor", 0) >= 1 and info.artifacts.get("aot_autograd", 0) >= 1
    assert (info.digest, info.torch_version) == ("verified", str(torch.__version__))
    assert "torch._inductor.output_code.CompiledFxGraph" in info.globals
    assert cli.main(["cache", "inspect", str(real_artifacts)]) == 0
    out = capsys.readouterr().out
    assert f"saved by: torch {torch.__version__}" in out and "nothing in the file was run" in out

    loaded = load_cache_artifacts(real_artifacts)
    assert loaded.checked and loaded.artifacts == info.artifacts
    assert len(list((cache_dir / "fxgraph").rglob("*/*/*"))) >= 1  # fxgraph/<ab>/<key>/<entry>


@pytest.mark.inductor
def test_real_artifacts_with_one_byte_flipped_are_caught(
    real_artifacts: Path, tmp_path: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "flipped.cache"
    shutil.copy(real_artifacts, path)
    shutil.copy(digest_path(real_artifacts), digest_path(path))
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x40
    path.write_bytes(bytes(data))
    with pytest.raises(RunFileError, match="does not match its digest"):
        inspect_cache_artifacts(path)
    assert cli.main(["cache", "load", str(path)]) == 2
    assert "damaged or replaced" in _one_line_error(capsys.readouterr().err)
    # Without its digest, torch's own checksum still catches it, on one line.
    digest_path(path).unlink()
    assert cli.main(["cache", "load", "--trust", str(path)]) == 2
    assert "checksum does not match" in _one_line_error(capsys.readouterr().err)
    assert not (cache_dir / "fxgraph").exists()


# -- signatures: your own files by construction ----------------------------------------------


@pytest.mark.inductor
def test_signed_files_load_on_the_same_key_and_are_refused_otherwise(
    real_artifacts: Path,
    tmp_path: Path,
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Saved by 'cache save' in a child process with this run's key file: signed by it.
    sidecar = digest_path(real_artifacts).read_text()
    key = load_signing_key(create=False)
    assert key is not None and f"key {key.key_id}" in sidecar
    assert inspect_cache_artifacts(real_artifacts).signature == "yours"
    assert cli.main(["cache", "load", str(real_artifacts)]) == 0
    assert "checked against real.cache.sha256" in capsys.readouterr().out

    # The same file and digest, signed by another key (a team key that is not set here).
    monkeypatch.setenv(KEY_ENV, "another team's key, long enough to count")
    info = inspect_cache_artifacts(real_artifacts)
    assert info.signature == "another key" and "refuses it without --trust" in info.report()
    assert cli.main(["cache", "load", str(real_artifacts)]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert f"signed by another key ({key.key_id})" in line and KEY_ENV in line
    assert cli.main(["cache", "load", "--trust", str(real_artifacts)]) == 0
    capsys.readouterr()
    monkeypatch.delenv(KEY_ENV)

    # Unsigned: the digest without its signature line still passes 'sha256sum -c'.
    unsigned = tmp_path / "unsigned.cache"
    shutil.copy(real_artifacts, unsigned)
    digest_path(unsigned).write_text(
        "".join(
            x for x in sidecar.replace("real.cache", "unsigned.cache").splitlines(True) if "hmac" not in x
        )
    )
    assert inspect_cache_artifacts(unsigned).signature == "unsigned"
    assert cli.main(["cache", "load", str(unsigned)]) == 2
    assert "it is not signed" in _one_line_error(capsys.readouterr().err)

    # Forged: the digest recomputed for a changed file, the old signature kept.
    forged = tmp_path / "forged.cache"
    body = pack_container({"autotune": [("ab/cd.best_config", b"{}")]})
    forged.write_bytes(body)
    old_signature = sidecar.split("# hmac-sha256 ")[1].split()[0]
    write_digest(
        forged, body, torch_version="x", compiletrace_version="x", signature=(old_signature, key.key_id)
    )
    assert cli.main(["cache", "load", str(forged)]) == 2
    assert "signature does not verify" in _one_line_error(capsys.readouterr().err)


def test_the_key_is_made_once_private_and_a_shared_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert load_signing_key(create=False) is None
    made = load_signing_key(create=True)
    assert made is not None and made.source == str(key_file())
    assert key_file().stat().st_mode & 0o777 == 0o600
    assert key_file().parent.stat().st_mode & 0o777 == 0o700
    again = load_signing_key(create=True)
    assert again is not None and again.key_id == made.key_id  # made once, then read

    path = _save(tmp_path / "tune.cache", {"autotune": [("ab/cd.best_config", b"{}")]})
    key_file().chmod(0o644)
    assert cli.main(["cache", "inspect", str(path)]) == 2
    assert "can be read or written by others (mode 0644)" in _one_line_error(capsys.readouterr().err)
    key_file().chmod(0o600)
    monkeypatch.setenv(KEY_ENV, "short")
    assert cli.main(["cache", "load", str(path)]) == 2
    assert f"{KEY_ENV} holds 5 bytes" in _one_line_error(capsys.readouterr().err)
