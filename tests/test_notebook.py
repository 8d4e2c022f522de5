"""docs/quickstart.ipynb runs from top to bottom in a real Jupyter kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "quickstart.ipynb"


@pytest.mark.slow
def test_quickstart_notebook_executes(tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), (
        "commit the notebook unexecuted"
    )
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError if any cell fails
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any('<table class="compiletrace">' in h for h in html)  # the registry as a table
    assert any('class="compiletrace-chart"' in h for h in html)  # the chart
    assert any('class="compiletrace-report"' in h and "Timeline of graphs" in h for h in html)  # the run
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "compilation took" in printed and "encoder:" in printed
