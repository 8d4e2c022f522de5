"""``%load_ext compiletrace`` and the cell magic ``%%compiletrace``, in a real IPython shell
(and once in a real Jupyter kernel): a cell's compiles, recorded passively, shown as the
report and kept as ``_compiletrace``; the recording off afterwards, whatever the cell did."""

from __future__ import annotations

import atexit
import builtins
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import compiletrace
from compiletrace._app.notebook import NOTHING_COMPILED, RESULT_NAME, USAGE
from compiletrace._core.passive import ACTIVE

pytest.importorskip("IPython")
from IPython.core.error import UsageError as IPythonUsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output
from traitlets.config import Config

# Defined in a plain cell first: the magic's cell uses what earlier cells defined.
SETUP = """\
import torch

class Tower(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x).relu()

class MultiModal(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.vision_tower = Tower()
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.vision_tower(x))

def loss(x):
    return (x * x).mean()
"""

# Two compiles: the vision tower (named "encoder" by its attribute path) and a function.
TWO_COMPILES = """\
%%compiletrace
model = MultiModal()
model.vision_tower = torch.compile(model.vision_tower, backend="eager")
loss_fn = torch.compile(loss, backend="eager")
out = loss_fn(model(torch.randn(3, 4)))
out.dim()
"""


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The process's IPython shell, with the extension loaded; what creating it changed in
    the process (``__main__``, two builtins, IPython's directory) is put back afterwards."""
    saved_main = sys.modules["__main__"]
    saved_dir = os.environ.get("IPYTHONDIR")
    os.environ["IPYTHONDIR"] = str(tmp_path_factory.mktemp("ipython"))  # not the user's own
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    config.InteractiveShell.colors = "nocolor"  # tracebacks as plain text
    ip = InteractiveShell.instance(config=config)
    try:
        assert ip.run_cell("%load_ext compiletrace").success
        assert ip.run_cell(SETUP).success
        yield ip
    finally:
        atexit.unregister(ip.atexit_operations)  # done now, once
        ip.atexit_operations()
        InteractiveShell.clear_instance()
        sys.modules["__main__"] = saved_main
        for name in ("display", "__IPYTHON__"):
            builtins.__dict__.pop(name, None)
        if saved_dir is None:
            os.environ.pop("IPYTHONDIR", None)
        else:
            os.environ["IPYTHONDIR"] = saved_dir


def run(shell: Any, cell: str, *, store_history: bool = False) -> tuple[Any, CapturedIO]:
    """Run ``cell`` as the user would, capturing its printed text and displays."""
    with capture_output() as captured:
        result = shell.run_cell(cell, store_history=store_history)
    return result, captured


def html_outputs(captured: CapturedIO) -> list[str]:
    return [o.data["text/html"] for o in captured.outputs if "text/html" in o.data]


def test_a_cell_shows_the_report_of_its_compiles_and_keeps_the_run(shell: Any) -> None:
    assert ACTIVE.value is None
    result, captured = run(shell, TWO_COMPILES, store_history=True)  # numbered, as in a notebook
    assert result.success, captured.stdout
    assert ACTIVE.value is None  # the recording ended with the cell

    run_ = shell.user_ns[RESULT_NAME]
    assert isinstance(run_, compiletrace.ProfileRun)
    assert sorted(r.component for r in run_.records()) == ["encoder", "loss"]
    assert {r.backend for r in run_.records()} == {"eager"}
    assert run_.meta.source == "%%compiletrace" and run_.meta.backend == "eager"
    assert run_.meta.model == f"cell In[{result.execution_count}]"  # the cell it recorded

    # One display: the report a ProfileRun shows in a notebook, the doctor's findings first.
    (html,) = html_outputs(captured)
    assert html == run_._repr_html_()
    assert html.startswith('<div class="compiletrace-report">')
    assert "<dt>graphs</dt><dd>2</dd>" in html and "<h2>Findings</h2>" in html
    assert ">encoder<" in html and ">loss<" in html
    # ... and the text tables where only text shows (a terminal).
    (text,) = [o.data["text/plain"] for o in captured.outputs]
    assert "encoder" in text and text.splitlines()[-1].startswith("compilation took")

    # The cell ran in the user's namespace, as a plain cell: its names stay, its last
    # expression is its output.
    assert isinstance(shell.user_ns["model"], torch.nn.Module) and shell.user_ns["out"].dim() == 0
    assert result.result == 0


def test_the_doctors_findings_on_the_cell_are_shown(shell: Any) -> None:
    cell = (
        "%%compiletrace\n"
        "double = torch.compile(lambda x: x * 2, backend='eager')\n"
        "for dtype in (torch.float32, torch.float64, torch.int64):\n"
        "    double(torch.ones(3, dtype=dtype))\n"
    )
    result, captured = run(shell, cell)
    assert result.success and result.result is None  # no last expression: no output
    run_ = shell.user_ns[RESULT_NAME]
    assert sum(r.is_recompile for r in run_.records()) == 2
    assert "recompiles" in [f.kind for f in run_.diagnose()]
    (html,) = html_outputs(captured)
    assert "<dt>recompiles</dt><dd>2</dd>" in html and "No findings" not in html


def test_an_error_in_the_cell_is_the_cells_own_and_the_recording_stops(shell: Any) -> None:
    cell = (
        "%%compiletrace\n"
        "before = torch.compile(lambda x: x * 3, backend='eager')(torch.ones(2))\n"
        "raise KeyError('boom')\n"
        "after = 1\n"
    )
    result, captured = run(shell, cell)
    assert isinstance(result.error_in_exec, KeyError) and result.error_in_exec.args == ("boom",)
    assert ACTIVE.value is None
    assert "before" in shell.user_ns and "after" not in shell.user_ns
    # What was recorded is kept and shown, then the shell shows the error, from the cell's line.
    assert len(shell.user_ns[RESULT_NAME].records()) == 1
    (html,) = html_outputs(captured)
    assert "<dt>graphs</dt><dd>1</dd>" in html
    assert "KeyError" in captured.stdout and "raise KeyError('boom')" in captured.stdout
    assert "notebook.py" not in captured.stdout  # compiletrace's own frames are hidden


def test_an_interrupted_cell_stops_the_recording_too(shell: Any) -> None:
    result, _ = run(shell, "%%compiletrace\nraise KeyboardInterrupt\n")
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert ACTIVE.value is None


def test_a_cell_that_compiles_nothing_says_so_in_one_line(shell: Any) -> None:
    result, captured = run(shell, "%%compiletrace\nanswer = 6 * 7\n")
    assert result.success
    assert captured.stdout == NOTHING_COMPILED + "\n" and captured.outputs == []
    assert shell.user_ns["answer"] == 42 and shell.user_ns[RESULT_NAME].records() == ()


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ("--component bad", "a component rule looks like PATTERN=NAME"),
        ("--component 'vision=encoder", "cannot read the options"),
        ("--nope", "unrecognized arguments: --nope"),
        ("stray", "unrecognized arguments: stray"),
        ("--json", "argument --json: expected one argument"),
        ("--json {tmp}/no/such/run.json", "directory"),
        ("--json {tmp}/same --html {tmp}/same", "same file"),
    ],
)
def test_bad_options_are_one_line_and_run_nothing(
    shell: Any, tmp_path: Path, options: str, says: str
) -> None:
    shell.user_ns.pop("ran", None)
    result, captured = run(shell, f"%%compiletrace {options.format(tmp=tmp_path)}\nran = True\n")
    assert isinstance(result.error_in_exec, IPythonUsageError)
    (line,) = captured.stderr.splitlines()
    assert line.startswith("UsageError: ") and says in line
    assert "Traceback" not in captured.stdout + captured.stderr
    assert "ran" not in shell.user_ns and ACTIVE.value is None


def test_options_name_components_trace_cost_and_write_the_run(shell: Any, tmp_path: Path) -> None:
    json_path, html_path = tmp_path / "cell.json", tmp_path / "cell.html"
    cell = (
        f"%%compiletrace --component 'loss*=objective' --trace-cost --json {json_path} --html {html_path}\n"
        "objective = torch.compile(loss, backend='eager')\n"
        "value = objective(torch.ones(4))\n"
    )
    result, captured = run(shell, cell)
    assert result.success, captured.stdout
    run_ = shell.user_ns[RESULT_NAME]
    (record,) = run_.records()
    assert record.component == "objective" and record.trace_cost
    assert compiletrace.load(json_path).records() == run_.records()
    page = html_path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and ">objective<" in page
    assert f"wrote run to {json_path}" in captured.stdout
    assert f"wrote HTML report to {html_path}" in captured.stdout


def test_compiletrace_compile_counts_once_and_an_outer_observer_is_left_on(shell: Any) -> None:
    outer = compiletrace.observe(registry=compiletrace.Registry())
    try:
        cell = (
            "%%compiletrace\n"
            "import compiletrace\n"
            "tower = compiletrace.compile(Tower(), is_encoder=True, backend='eager')\n"
            "plain = torch.compile(loss, backend='eager')\n"
            "plain(tower(torch.ones(2, 4)))\n"
        )
        result, _ = run(shell, cell)
        assert result.success
        assert ACTIVE.value is outer  # the cell's recording ended; the user's is on
        assert sorted(r.component for r in shell.user_ns[RESULT_NAME].records()) == ["encoder", "loss"]
        assert [r.component for r in outer.registry.records()] == ["loss"]  # its copy
    finally:
        outer.stop()
    assert ACTIVE.value is None


def test_the_magics_help_is_its_usage(shell: Any) -> None:
    magic = shell.find_cell_magic("compiletrace")
    assert magic is not None and magic.__doc__ == USAGE
    for option in ("--component PATTERN=NAME", "--trace-cost", "--json PATH", "--html PATH", RESULT_NAME):
        assert option in USAGE


@pytest.mark.slow
def test_the_magic_in_a_jupyter_kernel(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from tests.apps.test_notebook import execute

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext compiletrace"),
        nbformat.v4.new_code_cell(
            "%%compiletrace\n"
            "import torch\n"
            "f = torch.compile(lambda x: x.sin() + 1, backend='eager')\n"
            "y = f(torch.ones(3))\n"
        ),
        nbformat.v4.new_code_cell(
            "print(_compiletrace.meta['model'], len(_compiletrace.records()), tuple(y.shape))"
        ),
    ]
    execute(nb, tmp_path)
    outputs = [o for cell in nb.cells for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    (report,) = [o for o in nb.cells[1].outputs if o.output_type == "display_data"]
    assert 'class="compiletrace-report"' in report.data["text/html"]
    assert "<dt>graphs</dt><dd>1</dd>" in report.data["text/html"]
    # The run is named by the cell it recorded, and the cell's names stay in the kernel.
    assert [o.text for o in nb.cells[2].outputs] == ["cell In[2] 1 (3,)\n"]


BREAKING_CELL = """\
%%compiletrace
def halves(x):
    y = x.sin()
    print("halfway")
    return y.cos()
torch.compile(halves, backend="eager")(torch.ones(2))
"""


def test_a_cells_code_is_named_as_the_notebook_numbers_it(shell: Any) -> None:
    result, captured = run(shell, BREAKING_CELL, store_history=True)
    assert result.success, captured.stdout
    run_ = shell.user_ns[RESULT_NAME]
    cell = f"In [{result.execution_count}]"
    first = run_.records()[0]
    # The function is the cell's first line after the magic's; the print, its third.
    assert first.code_location == f"{cell}, line 1"
    (brk,) = first.graph_breaks
    assert brk.location == f"{cell}, line 3"
    finding = next(f for f in run_.diagnose() if f.kind == "graph_break")
    assert finding.location == f"{cell}, line 3"
    assert "ipykernel" not in run_.summary() and "<ipython-input" not in run_.summary()
