"""The fixes ``run --apply`` makes: one vocabulary (``compiletrace._data.fixes.Fix``), each
member made by torch's settings or by a change to how a program calls a public API
(regional compilation of a repeated block, transformers' static generation cache). The
program fixes are tested in this process (installed, then undone) on real compiles;
``tests/apps/test_verify.py`` proves them on unmodified programs through ``doctor --verify``."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import compiletrace
from compiletrace import cli
from compiletrace._app.environment_fixes import ENVIRONMENT_FIXES
from compiletrace._app.job import check_fix_names, fix_names, run_command
from compiletrace._app.program_fixes import PROGRAM_FIXES, installed_for_test, regional_targets
from compiletrace._core import torch_compat as tc
from compiletrace._data.fixes import Fix, fixes_help, parse_fix
from compiletrace._io.errors import UsageError


def test_each_fix_is_spelled_as_the_command_line_and_the_json_have_always_spelled_it() -> None:
    # These strings are in users' scripts (run --apply NAME) and in saved doctor files
    # (evidence["auto_fix"]): renaming a member's value must fail here.
    assert {fix.name: fix.value for fix in Fix} == {
        "DYNAMIC_SHAPES": "dynamic-shapes",
        "CAPTURE_SCALAR_OUTPUTS": "capture-scalar-outputs",
        "REORDERABLE_PRINT": "reorderable-print",
        "RAISE_RECOMPILE_LIMIT": "raise-recompile-limit",
        "REGIONAL_COMPILE": "regional-compile",
        "STATIC_CACHE": "static-cache",
        "FAIL_AFTER_READY": "fail-after-ready",
        "EAGER_AFTER_READY": "eager-after-ready",
        "MARK_DYNAMIC": "mark-dynamic",
    }
    assert fix_names() == [
        "capture-scalar-outputs",
        "dynamic-shapes",
        "eager-after-ready",
        "fail-after-ready",
        "mark-dynamic=SOURCE:DIM,...",
        "raise-recompile-limit",
        "regional-compile=CLASS",
        "reorderable-print",
        "static-cache",
    ]


def test_every_fix_is_made_by_exactly_one_maker_and_says_what_it_does() -> None:
    makers = [set(tc.CONFIG_FIXES), set(PROGRAM_FIXES), set(ENVIRONMENT_FIXES), set(tc.STANCE_FIXES)]
    assert set().union(*makers) == set(Fix)
    assert sum(len(made) for made in makers) == len(Fix)  # none made twice
    for fix, made in tc.CONFIG_FIXES.items():
        assert made.fix is fix and made.name == fix.value and made.setting == fix.in_code
    listed = " ".join(fixes_help(width=100).split())  # run --help's list, its wrapping undone
    for fix in Fix:
        assert fix.does and fix.in_code and f" {fix.usage} {fix.does}" in f" {listed}"
    assert parse_fix(Fix.REGIONAL_COMPILE.spelled("pkg.Block")) == (Fix.REGIONAL_COMPILE, "pkg.Block")
    assert tc.CONFIG_FIXES["dynamic-shapes"] is tc.CONFIG_FIXES[Fix.DYNAMIC_SHAPES]  # a name finds its member


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).relu() + x


class Tower(nn.Module):
    """Four blocks in a loop, and a head that is not one."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList(Block() for _ in range(4))
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _compiled(fix: str | None, compile_it: object) -> tuple[list[compiletrace.GraphRecord], torch.Tensor]:
    """Compile a fresh Tower through ``compile_it(model, backend)`` with ``fix`` installed,
    call it once; the graphs compiled and the output."""
    torch._dynamo.reset()
    reg = compiletrace.Registry()
    be = compiletrace.backend(backend="eager", registry=reg)
    model = Tower().eval()
    with installed_for_test([fix] if fix else []) as done:
        assert done == ([fix] if fix else [])
        compiled = compile_it(model, be)  # type: ignore[operator]
        with torch.no_grad():
            out = compiled(torch.ones(2, 8))
    return reg.records(), out


def test_regional_compile_compiles_the_block_once_and_leaves_the_model_around_it_eager() -> None:
    whole, expected = _compiled(None, lambda m, be: torch.compile(m, backend=be))
    regional, out = _compiled("regional-compile=Block", lambda m, be: torch.compile(m, backend=be))
    torch.testing.assert_close(out, expected)
    # Whole: one graph of the four blocks and the head. Regional: the block's code, traced
    # once, its one graph serving all four blocks; the head runs eagerly.
    assert len(whole) == 1 and len(regional) == 1
    (block_graph,) = regional
    assert block_graph.code_name == "forward" and block_graph.graph_node_count < whole[0].graph_node_count
    assert block_graph.module_class == "Block"


def test_regional_compile_leaves_room_in_the_shared_frame_for_every_block() -> None:
    """The blocks share one frame, so torch's recompile limit: a block that specialises on
    its own cache layer needs an entry of its own. The fix raises the limit by the number of
    blocks it compiled (four here), and a test's undo puts it back."""
    from compiletrace._core import torch_compat as tc

    # The limit every thread reads (the config entry's default; a test may have patched its
    # own thread's value), read as the fix reads it.
    before = tc.raise_recompile_limit(0)
    seen: list[int] = []

    def compile_and_read(model: object, backend: object) -> object:
        compiled = torch.compile(model, backend=backend)  # type: ignore[call-overload]
        seen.append(tc.raise_recompile_limit(0))
        return compiled

    _compiled("regional-compile=Block", compile_and_read)
    assert seen == [before + 4]
    assert tc.raise_recompile_limit(0) == before


@pytest.mark.parametrize(
    "how",
    [
        pytest.param(lambda m, be: (m.compile(backend=be), m)[1], id="model.compile()"),
        pytest.param(lambda m, be: torch.compile(m.forward, backend=be), id="torch.compile(model.forward)"),
        pytest.param(lambda m, be: torch.compile(backend=be)(m), id="torch.compile(backend=...)(model)"),
        pytest.param(lambda m, be: torch.compile(model=m, backend=be), id="torch.compile(model=model)"),
    ],
)
def test_regional_compile_reaches_every_way_a_program_compiles_a_module(how: object) -> None:
    _, expected = _compiled(None, lambda m, be: m)
    records, out = _compiled("regional-compile=Block", how)
    torch.testing.assert_close(out, expected)
    assert [r.module_class for r in records] == ["Block"]


def test_a_model_without_the_block_or_a_block_itself_compiles_as_it_would() -> None:
    with pytest.warns(RuntimeWarning, match="Tower holds no Missing; compiled as it is"):
        records, _ = _compiled("regional-compile=Missing", lambda m, be: torch.compile(m, backend=be))
    assert [r.module_class for r in records] == ["Tower"]
    records, _ = _compiled("regional-compile=Tower", lambda m, be: torch.compile(m, backend=be))
    assert [r.module_class for r in records] == ["Tower"]
    # A plain function is never a module's: torch.compile as it is.
    torch._dynamo.reset()
    with installed_for_test(["regional-compile=Block"]):
        reg = compiletrace.Registry()
        double = torch.compile(lambda x: x * 2, backend=compiletrace.backend(backend="eager", registry=reg))
        assert double(torch.ones(2)).tolist() == [2.0, 2.0] and len(reg.records()) == 1


def test_blocks_inside_a_block_are_the_outer_blocks_own() -> None:
    inner = nn.Sequential(nn.Linear(2, 2))
    model = nn.Sequential(nn.Sequential(inner), nn.Linear(2, 2), nn.Sequential())
    assert regional_targets(model, "Sequential") == [model[0], model[2]]
    assert regional_targets(model, "torch.nn.modules.linear.Linear") == [inner[0], model[1]]

    class Scaled(Block):  # inherits Block.forward: the doctor names Block
        pass

    tower = nn.ModuleList([Scaled(), Block()])
    assert regional_targets(tower, "Block") == [tower[0], tower[1]]


def test_undone_after_the_test_and_never_installed_twice() -> None:
    real = torch.compile
    with installed_for_test(["regional-compile=Block"]) as done:
        assert done == ["regional-compile=Block"] and torch.compile is not real
        with installed_for_test(["regional-compile=Block"]) as again:
            assert again == []  # installed already in this process
    assert torch.compile is real


@pytest.mark.real_model
def test_static_cache_sets_generates_cache_unless_the_call_sets_its_own() -> None:
    transformers = pytest.importorskip("transformers")
    from tests.capture.test_real_models import llama

    model = llama()
    ids = torch.randint(3, 128, (1, 5))

    def cache_of(**options: object) -> str:
        with torch.no_grad():
            out = model.generate(
                ids, max_new_tokens=2, do_sample=False, return_dict_in_generate=True, **options
            )
        return type(out.past_key_values).__name__

    assert cache_of() == "DynamicCache"
    with installed_for_test(["static-cache"]):
        assert cache_of() == "StaticCache"
        assert cache_of(cache_implementation="dynamic") == "DynamicCache"  # the call's own choice
        assert cache_of(use_cache=False) == "NoneType"
        # A cache of the call's own, by transformers' new name, is the call's; so is a
        # generation config passed by position.
        assert cache_of(cache=transformers.DynamicCache(config=model.config)) == "DynamicCache"
        config = transformers.GenerationConfig(
            cache_implementation="dynamic", max_new_tokens=2, do_sample=False
        )
        with torch.no_grad():
            out = model.generate(ids, config, return_dict_in_generate=True)
        assert type(out.past_key_values).__name__ == "DynamicCache"
    assert cache_of() == "DynamicCache"  # undone


def test_a_malformed_or_unknown_fix_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases: list[tuple[str | list[str], str]] = [
        ("regional-compile", "regional-compile needs the block's class name"),
        ("regional-compile=not a class", "regional-compile needs the block's class name"),
        ("static-cache=yes", "the fix 'static-cache' takes no '=' argument"),
        (["regional-compile=A", "regional-compile=B"], "one regional-compile at a time: regional-compile=A"),
        ("faster", "unknown fix 'faster'; the fixes that apply with no edit: capture-scalar-outputs"),
        ("dynamic-shapes=1", "the fix 'dynamic-shapes' takes no '=' argument"),
    ]
    for bad, message in cases:
        names = bad if isinstance(bad, list) else [bad]
        with pytest.raises(UsageError, match=message):
            check_fix_names(names)
        marker = tmp_path / "ran"
        applied = [arg for name in names for arg in ("--apply", name)]
        command = ["run", *applied, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
        assert cli.main(command) == 2
        assert message in capsys.readouterr().err and not marker.exists()
    assert "regional-compile=CLASS" in fix_names() and "static-cache" in fix_names()


@pytest.mark.slow
def test_a_job_with_a_program_fix_that_never_imports_torch_runs_as_it_is(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = cli.main(
            [
                "run",
                "--apply",
                "regional-compile=Block",
                "--",
                sys.executable,
                "-c",
                f"import sys; open({str(out)!r}, 'w').write(str('torch' in sys.modules))",
            ]
        )
    assert code == 0 and out.read_text() == "False"


MARKED = """
import torch

def churn(x):
    return x.sin() + 1

f = torch.compile(churn, backend="eager", dynamic=False)
for n in (2, 3, 4, 5):
    f(torch.ones(n))
"""


@pytest.mark.slow
def test_mark_dynamic_from_outside_compiles_the_named_dimension_dynamic_from_the_first_call(
    tmp_path: Path,
) -> None:
    """run --apply mark-dynamic: torch's own setting, through the command's environment, in
    every process: four sizes, one frame (static shapes: four without it)."""
    program = tmp_path / "churn.py"
    program.write_text(MARKED)
    fix = "mark-dynamic=L['x']:0"
    plain = run_command([sys.executable, str(program)])
    marked = run_command([sys.executable, str(program)], fixes=[fix])
    assert (plain.exit_status, marked.exit_status) == (0, 0)
    assert len(plain.job.records()) == 4 and len(marked.job.records()) == 1
    (process,) = marked.job.processes
    assert process.run.meta["applied_fixes"] == [fix]


def test_regional_compile_keeps_the_component_the_model_had_compiled_whole() -> None:
    """Recorded with no compiletrace backend (as ``compiletrace run`` records), each block
    compiled on its own is the component of the model around it, as the whole compile was:
    a verify's before and after read per component alike."""

    def components(fix: str | None) -> list[compiletrace.GraphRecord]:
        torch._dynamo.reset()
        model = Tower().eval()
        with (
            installed_for_test([fix] if fix else []),
            compiletrace.observe(registry=compiletrace.Registry()) as seen,
        ):
            compiled = torch.compile(model, backend="eager")
            with torch.no_grad():
                compiled(torch.ones(2, 8))
        return seen.registry.records()

    whole, regional = components(None), components("regional-compile=Block")
    assert {r.component for r in whole} == {r.component for r in regional} == {"Tower"}
    # The record still says which block it is.
    assert [(r.module_class, r.module_path) for r in regional] == [("Block", "blocks.0")]
