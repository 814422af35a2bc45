"""Both notebooks run top to bottom on the bundled sample (a real kernel), and their plots render."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow  # real servers or pipelines; `make check` skips them

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


@pytest.mark.parametrize("name, min_plots", [("explore_memory.ipynb", 4), ("evaluate.ipynb", 4)])
def test_notebook_runs_and_plots(name, min_plots, tmp_path):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code"), "commit notebooks without outputs"
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) >= min_plots
