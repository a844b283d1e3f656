"""The student-copy generator: stubs, clean notebooks, hard errors on bad markers, never losing a learner's work."""
import json
import shutil
import subprocess
import sys

import nbformat
import pytest

from authoring import generate
from authoring.solution_markers import MarkerError, split_cell
from tests.paths import FIXTURES, ROOT

FIXTURE = FIXTURES / "generator"


def _index_of_cell_containing(notebook: nbformat.NotebookNode, text: str) -> int:
    return next(index for index, cell in enumerate(notebook.cells) if text in cell.source)


@pytest.fixture
def course(tmp_path):
    """A tiny course folder holding the demo solution notebook."""
    shutil.copytree(FIXTURE / "solutions", tmp_path / "solutions")
    return tmp_path


def test_generator_output_matches_the_committed_expected_files(course):
    assert generate.main(["--root", str(course)]) == 0
    expected = FIXTURE / "expected"
    assert (course / "notebooks" / "99_demo.ipynb").read_text() == (expected / "99_demo.ipynb").read_text()
    assert (course / generate.SOLUTIONS_JSON).read_text() == (expected / "solutions.json").read_text()


def test_student_copy_has_no_outputs_no_counts_and_only_tags_and_folding(course):
    generate.main(["--root", str(course)])
    notebook = nbformat.read(str(course / "notebooks" / "99_demo.ipynb"), as_version=4)
    folded = [cell for cell in notebook.cells if "setup" in cell.metadata.get("tags", [])]
    assert folded and folded[0].metadata == {"tags": ["setup"], "cellView": "form", "jupyter": {"source_hidden": True}}
    for cell in notebook.cells:
        assert set(cell.metadata) <= {"tags", "cellView", "jupyter"}
        assert set(cell.metadata.get("jupyter", {})) <= {"source_hidden"}
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    assert "BEGIN SOLUTION" not in json.dumps(notebook) and "x * 2" not in json.dumps(notebook)


def test_the_repository_student_notebooks_are_up_to_date():
    result = subprocess.run([sys.executable, "-m", "authoring.generate", "--check", "--root", str(ROOT)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_check_fails_on_a_stale_missing_or_orphan_copy(course):
    assert generate.check(course) != []  # nothing generated yet
    generate.main(["--root", str(course)])
    assert generate.check(course) == []
    solution = nbformat.read(str(course / "solutions" / "99_demo.ipynb"), as_version=4)
    solution.cells[0].source += "\nA new sentence."
    nbformat.write(solution, str(course / "solutions" / "99_demo.ipynb"))
    assert generate.check(course) == ["notebooks/99_demo.ipynb is stale"]
    generate.main(["--root", str(course)])
    shutil.copy(course / "notebooks" / "99_demo.ipynb", course / "notebooks" / "98_old.ipynb")
    assert generate.check(course) == ["notebooks/98_old.ipynb has no solution notebook"]
    assert generate.main(["--check", "--root", str(course)]) == 1


def test_an_edited_student_copy_is_not_overwritten_unless_forced(course, capsys):
    generate.main(["--root", str(course)])
    student = course / "notebooks" / "99_demo.ipynb"
    notebook = nbformat.read(str(student), as_version=4)
    stub = notebook.cells[_index_of_cell_containing(notebook, "NotImplementedError")]
    stub.source = stub.source.replace('raise NotImplementedError("your code here")', "return x + x")
    nbformat.write(notebook, str(student))
    edited = student.read_text()
    solution = course / "solutions" / "99_demo.ipynb"
    solution.write_text(solution.read_text().replace("A fixture", "The fixture"))

    assert generate.main(["--root", str(course)]) == 1
    assert student.read_text() == edited
    assert "edited since they were generated" in capsys.readouterr().err

    assert generate.main(["--root", str(course), "--force"]) == 0
    backups = list((course / "notebooks").glob("99_demo.ipynb.*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == edited
    assert "The fixture" in student.read_text()


def test_a_copy_that_was_only_run_is_regenerated(course):
    generate.main(["--root", str(course)])
    student = course / "notebooks" / "99_demo.ipynb"
    notebook = nbformat.read(str(student), as_version=4)
    notebook.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="tensor([1.])\n")]
    notebook.cells[1].execution_count = 1
    nbformat.write(notebook, str(student))
    assert generate.main(["--root", str(course)]) == 0
    assert nbformat.read(str(student), as_version=4).cells[1].outputs == []


def test_region_inside_a_function_becomes_raise_not_implemented():
    split = split_cell("# EXERCISE: e\ndef f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION", "nb, cell 1")
    assert split.student_source == ('# EXERCISE: e\ndef f():\n    # YOUR CODE HERE\n'
                                    '    raise NotImplementedError("your code here")')
    assert split.solution_source == "# EXERCISE: e\ndef f():\n    return 1"
    assert split.exercise_id == "e"


def test_solution_suffix_keeps_the_assignment_target():
    split = split_cell("# EXERCISE: e\nresult['a'] = compute()  # SOLUTION\nprint(1)  # SOLUTION", "nb, cell 1")
    assert split.student_source == "# EXERCISE: e\nresult['a'] = ...  # YOUR CODE HERE\n...  # YOUR CODE HERE"


def test_solution_suffix_inside_a_function_raises_and_tuple_targets_get_one_placeholder_each():
    split = split_cell("# EXERCISE: e\ndef f(x):\n    return x  # SOLUTION\na, b = 1, 2  # SOLUTION", "nb, cell 1")
    assert split.student_source == ('# EXERCISE: e\ndef f(x):\n    raise NotImplementedError("your code here")'
                                    "  # YOUR CODE HERE\na, b = ..., ...  # YOUR CODE HERE")


def test_cells_without_markers_are_unchanged():
    source = "x = 1  # not a solution\ny = x == 2"
    assert split_cell(source, "nb, cell 1").student_source == source


@pytest.mark.parametrize(
    "source, problem, line",
    [
        ("# EXERCISE: e\n# BEGIN SOLUTION\nx = 1", "never closed", 2),
        ("# EXERCISE: e\n# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION", "nested BEGIN SOLUTION", 3),
        ("# EXERCISE: e\nx = 1\n# END SOLUTION", "END SOLUTION without a BEGIN", 3),
        ("# EXERCISE: e\n# BEGIN SOLUTION here\n# END SOLUTION", "unexpected text after the marker", 2),
        ("# EXERCISE: e\n# begin solution\nx = 1", "malformed solution marker", 2),
        ("# EXERCISE: e\n# BEGIN SOLUTION\nx = 1  # SOLUTION\n# END SOLUTION", "inside a BEGIN/END", 3),
        ("x = 1  # SOLUTION", "EXERCISE: exercise_id", 1),
        ("# EXERCISE: my-ex\nx = 1  # SOLUTION", "letters, digits and _", 1),
        ("# EXERCISE: a\n# EXERCISE: b\nx = 1  # SOLUTION", "a second '# EXERCISE:' line", 2),
        ("# EXERCISE: e\nif ready:  # SOLUTION\n    x = 1", "student copy of this cell does not compile", 3),
    ],
)
def test_malformed_markers_are_errors_naming_file_cell_and_line(source, problem, line):
    with pytest.raises(MarkerError, match=problem) as raised:
        split_cell(source, "solutions/07_x.ipynb, cell 4")
    assert str(raised.value).startswith(f"solutions/07_x.ipynb, cell 4, line {line}:")


def test_markers_in_markdown_and_duplicate_exercises_are_errors(course):
    path = course / "solutions" / "99_demo.ipynb"
    notebook = nbformat.read(str(path), as_version=4)
    notebook.cells.append(nbformat.v4.new_markdown_cell("# BEGIN SOLUTION\nsecret\n# END SOLUTION"))
    nbformat.write(notebook, str(path))
    assert generate.main(["--root", str(course)]) == 2
    notebook.cells[-1] = nbformat.v4.new_code_cell(notebook.cells[_index_of_cell_containing(notebook, "# EXERCISE")].source)
    nbformat.write(notebook, str(path))
    with pytest.raises(MarkerError, match="already has a solution cell"):
        generate.build(course)
