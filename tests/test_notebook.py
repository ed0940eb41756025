"""The walkthrough notebook (notebooks/walkthrough.ipynb): executed top to bottom in a fresh kernel as a reader
would run it, every cell without an error; its plain-script twin (walkthrough.py, paired by jupytext) holds the same
code; and the outputs committed with it are those of a real run (every picture among them)."""

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from running import ROOT

NOTEBOOK = ROOT / "notebooks" / "walkthrough.ipynb"


def test_the_notebook_runs_top_to_bottom():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    try:
        client.execute()
    except CellExecutionError as error:
        pytest.fail(f"a cell of the walkthrough failed:\n{str(error)[-3000:]}")
    pictures = sum(
        "image/png" in output.get("data", {}) for cell in notebook.cells for output in cell.get("outputs", [])
    )
    assert pictures >= 9  # positional encoding (2), one head set, decoder, cross, vocabulary (2), loss, real sentence


def test_the_notebook_and_its_script_hold_the_same_code():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    script = jupytext.read(NOTEBOOK.with_suffix(".py"))
    assert [(cell.cell_type, cell.source) for cell in notebook.cells] == [
        (cell.cell_type, cell.source) for cell in script.cells
    ]


def test_the_committed_notebook_shows_a_real_runs_outputs():
    """So that it reads on the Hub and on GitHub without running it: every code cell ran, in order, and the
    pictures are there."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))
    assert not any(output.get("output_type") == "error" for cell in code for output in cell.outputs)
    pictures = sum("image/png" in output.get("data", {}) for cell in code for output in cell.outputs)
    assert pictures >= 9
