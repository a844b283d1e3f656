"""Every notebook follows the course's conventions."""
import ast
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


CHECK_TITLE = "#@title ✓ check: "
CONVERTED = ("00", "01", "02", "03", "04", "05")  # notebooks whose checks sit behind folded cells


def _has_assert(source: str) -> bool:
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Assert) for node in ast.walk(tree))


def is_check_cell(cell: nbformat.NotebookNode) -> bool:
    """A folded check: tagged, collapsed in JupyterLab, a form on Colab, titled with its claim, printing it."""
    metadata = cell.metadata
    return ("check" in metadata.get("tags", []) and metadata.get("cellView") == "form"
            and metadata.get("jupyter", {}).get("source_hidden") is True and cell.source.startswith(CHECK_TITLE)
            and 'print("✓ checked: ' in cell.source)


@pytest.mark.parametrize("path", [p for p in ALL_NOTEBOOKS if p.stem[:2] in CONVERTED],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_assert_sits_in_a_folded_check_cell_that_says_what_it_checked(path):
    for index, cell in enumerate(nbformat.read(str(path), as_version=4).cells, 1):
        if cell.cell_type != "code" or "# EXERCISE:" in cell.source:
            continue
        if _has_assert(cell.source):
            assert is_check_cell(cell), f"cell {index} asserts in the learner's way:\n{cell.source[:300]}"
        if "check" in cell.metadata.get("tags", []):
            assert is_check_cell(cell) and _has_assert(cell.source), f"cell {index} is a check that checks nothing"
            title = cell.source.splitlines()[0][len(CHECK_TITLE):]
            assert f'print("✓ checked: {title}")' in cell.source, f"cell {index} prints another claim than its title"
