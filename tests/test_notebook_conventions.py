"""Every notebook follows the course's conventions."""
import json

import nbformat
import pytest

from tests.paths import ROOT

SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
ALL_NOTEBOOKS = SOLUTIONS + sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_is_a_student_copy_of_every_solution():
    assert SOLUTIONS, "no solution notebooks found"
    assert [p.name for p in SOLUTIONS] == [p.name for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_opens_with_goals_and_time_and_closes_with_a_recap(path):
    cells = nbformat.read(str(path), as_version=4).cells
    opening = cells[0].source
    assert cells[0].cell_type == "markdown" and "Learning goals" in opening and "**Time:**" in opening
    assert cells[-1].cell_type == "markdown" and cells[-1].source.startswith("## Recap")


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_path_hacks_no_raises_exception_tags_no_outputs(path):
    notebook = nbformat.read(str(path), as_version=4)
    for cell in notebook.cells:
        assert "sys.path" not in cell.source, "import helpers as an installed package"
        assert "raises-exception" not in cell.metadata.get("tags", []), "show deliberate errors with expect_error"
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, "commit notebooks without outputs"
    assert "ipykernel_" not in json.dumps(notebook)


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_the_last_code_cell_says_where_the_learner_is(path):
    cells = nbformat.read(str(path), as_version=4).cells
    last_code = [cell for cell in cells if cell.cell_type == "code"][-1]
    assert last_code.source == f'exercises.summary("{path.stem}")'
