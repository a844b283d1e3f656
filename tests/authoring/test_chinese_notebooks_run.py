"""The Chinese solved notebooks run strict, every check printing its line in Chinese.

A Chinese notebook's code cells are the English ones but for each check's title and printed line
(tests/authoring/test_chinese_edition.py). So this run proves those lines; the student copies' cells are the English
student copies' (run in JupyterLab by tests/browser/test_jupyterlab.py) with the same lines, and are not run again."""

import nbformat
import pytest
from nbclient import NotebookClient

from authoring import generate
from authoring.translation.edition import CHECK_TITLE_ZH, CHECKED_ZH, FOLDER
from helpers.course.exercises.api import STRICT_VARIABLE
from tests.paths import ROOT

STEMS = generate.translated_stems(ROOT)


def _run_strict(path, monkeypatch):
    monkeypatch.setenv(STRICT_VARIABLE, "1")  # the kernel inherits it
    notebook = nbformat.read(str(path), as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return notebook


def _printed(cell):
    return "".join(output.get("text", "") for output in cell.outputs if output.get("name") == "stdout")


@pytest.mark.parametrize("stem", STEMS)
def test_the_chinese_solution_runs_strict_and_each_check_speaks_chinese(stem, monkeypatch):
    notebook = _run_strict(ROOT / "solutions" / FOLDER / f"{stem}.ipynb", monkeypatch)
    checks = [cell for cell in notebook.cells if cell.source.startswith(CHECK_TITLE_ZH)]
    assert checks
    for cell in checks:
        title = cell.source.split("\n", 1)[0][len(CHECK_TITLE_ZH):]
        assert _printed(cell).strip().split("\n")[-1] == CHECKED_ZH + title
