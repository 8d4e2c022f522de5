"""docs/quickstart.ipynb is committed with its outputs (a reader on GitHub sees them) and
still runs from top to bottom in a real Jupyter kernel.

After changing the notebook, save it executed again (outputs in place, no timings):

    .venv/bin/python tests/apps/test_notebook.py --save
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "quickstart.ipynb"


def execute(nb: Any, cwd: Path) -> None:
    """Run every cell of ``nb`` in a fresh kernel, in ``cwd``; outputs land in ``nb``.
    Raises ``CellExecutionError`` if a cell fails."""
    client = nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()


def shown(nb: Any) -> list[str]:
    """What a reader sees of each output: its HTML if it has some, else its text."""
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = o.get("data", {})
            out.append(data.get("text/html") or data.get("text/plain") or o.get("text", ""))
    return out


def check_outputs(nb: Any) -> None:
    """The outputs a reader should see: the registry as a table, the chart, the full report
    of a run that starts cold, figures rounded, and nothing private or huge."""
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.output_type == "stream" and o.name == "stderr"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any('<table class="compiletrace" data-table="graphs">' in h for h in html)  # a registry
    assert any('class="compiletrace-chart"' in h for h in html)  # the chart
    report = [h for h in html if 'class="compiletrace-report"' in h and "Timeline of graphs" in h]
    assert len(report) == 1  # the run
    # A run of its own: no recompile carried over from the cells above.
    assert "<dt>recompiles</dt><dd>0</dd>" in report[0] and "BACKEND_MATCH" not in report[0]
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "compilation took" in printed and "encoder:" in printed
    seen = "".join(shown(nb))
    assert not re.search(r"\d\.\d{5,}", seen), "print rounded figures, not reprs"
    assert "/work/" not in seen and "/home/" not in seen and "/tmp/" not in seen  # no local paths


def test_the_committed_notebook_shows_its_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs for c in code), "commit the notebook executed: tests/apps/test_notebook.py --save"
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), "run top to bottom"
    check_outputs(nb)
    assert NOTEBOOK.stat().st_size < 100_000  # outputs, not megabytes
    assert max(len(o) for o in shown(nb)) < 40_000


@pytest.mark.slow
def test_quickstart_notebook_executes(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    execute(nb, tmp_path)
    check_outputs(nb)


if __name__ == "__main__" and sys.argv[1:] == ["--save"]:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    with tempfile.TemporaryDirectory() as scratch:
        execute(notebook, Path(scratch))
    check_outputs(notebook)
    nbformat.write(notebook, NOTEBOOK)
    print(f"saved {NOTEBOOK} with its outputs ({NOTEBOOK.stat().st_size} bytes)")
