"""Every notebook follows the course's conventions."""
import ast
import json
import re
from typing import Dict, List, Optional

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
CONVERTED = ("00", "01", "02", "03", "04", "05", "06", "07", "08")  # notebooks whose checks sit behind folded cells


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


CLINIC = ("06", "07")
CASE_TEMPLATE = ("### The code as people write it", "### What happens", "### Diagnosis", "### The tempting fix",
                 "### The fix", "### Exercise: `", "### What to remember")


def _cases(cells: List[nbformat.NotebookNode]) -> Dict[str, List[nbformat.NotebookNode]]:
    """The clinic's cases: every cell from a numbered ``## N. title`` heading up to the next ``## `` heading."""
    cases: Dict[str, List[nbformat.NotebookNode]] = {}
    current: Optional[str] = None
    for cell in cells:
        first = cell.source.lstrip().splitlines()[0] if cell.source.strip() else ""
        if cell.cell_type == "markdown" and first.startswith("## "):
            current = first if re.match(r"## \d+\. ", first) and "decision guide" not in first else None
            if current:
                cases[current] = []
        if current:
            cases[current].append(cell)
    return cases


@pytest.mark.parametrize("path", [p for p in ALL_NOTEBOOKS if p.stem[:2] in CLINIC],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_clinic_case_follows_the_seven_part_template(path):
    cases = _cases(nbformat.read(str(path), as_version=4).cells)
    assert len(cases) == 3, f"{path.name} should hold three cases, found {list(cases)}"
    for title, cells in cases.items():
        headings = [line for cell in cells if cell.cell_type == "markdown"
                    for line in cell.source.splitlines() if line.startswith("### ")]
        found = [next((i for i, h in enumerate(headings) if h.startswith(part)), None) for part in CASE_TEMPLATE]
        assert None not in found and found == sorted(found) and len(headings) == len(CASE_TEMPLATE), (
            f"{title}: the parts are {headings}, expected one each of {CASE_TEMPLATE}, in that order")
        exercise_id = re.search(r"### Exercise: `(\w+)`", "\n".join(headings)).group(1)
        sources = [cell.source for cell in cells]
        check_at = next(i for i, s in enumerate(sources) if s.startswith(f'exercises.check("{exercise_id}"'))
        assert f'exercises.hint("{exercise_id}")' in sources[check_at + 1], f"{title}: no hint cell after the check"
        remember = [cell.source for cell in cells if cell.source.startswith("### What to remember")][0]
        lines = [line for line in remember.splitlines()[1:] if line.strip()]
        assert len(lines) == 3 and all(line.startswith("- ") for line in lines), f"{title}: remember in 3 lines"


def test_the_clinic_states_an_honest_time_per_case():
    """Each clinic notebook's stated time is the sum of its cases' minutes in the workshop guide."""
    workshop = (ROOT / "docs" / "workshop.md").read_text(encoding="utf-8")
    for path in sorted((ROOT / "solutions").glob("0[67]_*.ipynb")):
        cells = nbformat.read(str(path), as_version=4).cells
        stated = int(re.search(r"\*\*Time:\*\* about (\d+) minutes", cells[0].source).group(1))
        rows = re.findall(rf'^\| (\d+) \| `{path.stem}` \| "## \d\. ', workshop, flags=re.MULTILINE)
        per_case = [int(minutes) for minutes in rows]
        assert len(per_case) == 3 and sum(per_case) == stated, (path.stem, per_case, stated)


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_embedded_figures_are_the_shipped_ones_with_alt_text(path):
    """A markdown cell's ``attachment:NAME.png`` is the package's current figure NAME, with its alt text."""
    from helpers.course.figures import FIGURES, attachment

    for index, cell in enumerate(nbformat.read(str(path), as_version=4).cells, 1):
        for alt, name in re.findall(r"!\[([^\]]*)\]\(attachment:(\w+)\.png\)", cell.source):
            assert name in FIGURES, f"cell {index}: no figure named {name}"
            assert cell.get("attachments", {}).get(f"{name}.png") == attachment(name), (
                f"cell {index}: the embedded {name}.png is not the shipped one: re-embed it")
            assert alt == FIGURES[name], f"cell {index}: {name}'s alt text differs from FIGURES"


def test_the_three_conceptual_figures_appear_where_their_idea_is_introduced():
    """Each figure sits in a markdown cell of the notebook that introduces its idea."""
    homes = {"step_timeline": "03_inplace_version", "backward_visits": "01_graph_and_saved_tensors",
             "who_trains_whom": "04_whose_gradient"}
    for name, stem in homes.items():
        cells = nbformat.read(str(ROOT / "solutions" / f"{stem}.ipynb"), as_version=4).cells
        assert any(f"(attachment:{name}.png)" in cell.source for cell in cells if cell.cell_type == "markdown"), (
            f"{name} is not shown in {stem}")
