"""Learners re-run cells: every code cell runs cleanly twice in a row, and Run All works twice in one kernel.

Each solved notebook (strict) runs in one fresh kernel: every code cell twice in a row, top to bottom, then every
cell once more. Nothing may raise. A cell that demonstrates an error or a backward pass builds what it needs itself,
so running it again finds it again. The student copies hold the same cells but for the exercises' bodies (stubs that
raise NotImplementedError, found not attempted); nbval and the browser tests run them, once each, so they are not
run three times more here.
"""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from authoring.generate import is_solution_notebook
from helpers.course.exercises.api import STRICT_VARIABLE
from tests.paths import ROOT

NOTEBOOKS = sorted((ROOT / "solutions").glob("*.ipynb"))


def run_twice(path: Path) -> None:
    """Every code cell twice in a row, then Run All again; raises CellExecutionError naming the failing cell."""
    notebook = nbformat.read(str(path), as_version=4)
    os.environ[STRICT_VARIABLE] = "1" if is_solution_notebook(path, ROOT) else "0"
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    code_cells = [(index, cell) for index, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
    with client.setup_kernel():
        for index, cell in code_cells:
            client.execute_cell(cell, index)
            client.execute_cell(cell, index)
        for index, cell in code_cells:
            client.execute_cell(cell, index)


class RunTwice:
    """One notebook, run as a learner who re-runs cells would; a subclass per notebook spreads them over workers."""

    path: Path

    def test_every_cell_runs_twice_in_a_row_and_run_all_runs_again(self) -> None:
        run_twice(self.path)


for _path in NOTEBOOKS:
    _name = f"Test_{_path.parent.name}_{_path.stem}"
    globals()[_name] = type(_name, (RunTwice,), {"path": _path})


def test_every_notebook_has_its_class() -> None:
    assert len([name for name in globals() if name.startswith("Test_")]) == len(NOTEBOOKS) > 0


@pytest.fixture(autouse=True)
def _restore_strict_variable():
    previous = os.environ.get(STRICT_VARIABLE)
    yield
    if previous is None:
        os.environ.pop(STRICT_VARIABLE, None)
    else:
        os.environ[STRICT_VARIABLE] = previous
