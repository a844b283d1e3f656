"""The Chinese notebooks run as the English ones do: the solved copy strict, the student copy clean, every check
printing its line in Chinese. Their code is the English code (tests/authoring/test_chinese_edition.py), so one run
of each proves the catalogued strings did not break a cell."""

import nbformat
import pytest
from nbclient import NotebookClient

from authoring import generate
from authoring.translation.catalog import title_text
from authoring.translation.edition import CHECK_TITLE_ZH, CHECKED_ZH, FOLDER
from helpers.course.exercises.api import STRICT_VARIABLE
from tests.paths import ROOT

STEMS = generate.translated_stems(ROOT)


def _run(path, strict, monkeypatch):
    monkeypatch.setenv(STRICT_VARIABLE, "1" if strict else "0")  # the kernel inherits it
    notebook = nbformat.read(str(path), as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return notebook


def _printed(cell):
    return "".join(output.get("text", "") for output in cell.outputs if output.get("name") == "stdout")


@pytest.mark.parametrize("stem", STEMS)
def test_the_chinese_solution_runs_strict_and_each_check_speaks_chinese(stem, monkeypatch):
    notebook = _run(ROOT / "solutions" / FOLDER / f"{stem}.ipynb", True, monkeypatch)
    checks = [cell for cell in notebook.cells if cell.source.startswith(CHECK_TITLE_ZH)]
    assert checks
    for cell in checks:
        title = cell.source.split("\n", 1)[0][len(CHECK_TITLE_ZH):]
        assert _printed(cell).strip() == CHECKED_ZH + title


@pytest.mark.parametrize("stem", STEMS)
def test_the_chinese_student_copy_runs_clean(stem, monkeypatch):
    notebook = _run(ROOT / "notebooks" / FOLDER / f"{stem}.ipynb", False, monkeypatch)
    assert all(output.get("output_type") != "error" for cell in notebook.cells if cell.cell_type == "code"
               for output in cell.outputs)
    assert not any(title_text(cell) for cell in notebook.cells)  # no English check title is left
