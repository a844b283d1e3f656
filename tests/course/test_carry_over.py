"""helpers.course.exercises.carry_over: a learner's saved answers, matched with this version of the course."""
import nbformat

from helpers.course.exercises import carry_over
from helpers.course.exercises.solutions import recorded_solutions


def _saved_notebook(tmp_path, name, sources):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
    path = tmp_path / name
    nbformat.write(notebook, str(path))
    return path


def test_each_saved_exercise_cell_is_matched_with_where_it_lives_now(tmp_path, capsys):
    two_grads = str(recorded_solutions()["two_grads"]["source"])
    changed = "# EXERCISE: two_grads\ndef two_grads(l1, l2):\n    return None\n"
    stub = ("# EXERCISE: head_weight_grad\ndef head_weight_grad(model, x, target):\n"
            "    raise NotImplementedError(\"your code here\")\n")
    gone = "# EXERCISE: no_longer_here\ndef no_longer_here(x):\n    return x\n"
    _saved_notebook(tmp_path, "02_old.ipynb", [two_grads, "print('not an exercise')"])
    _saved_notebook(tmp_path, "06_old.ipynb", [changed, stub, gone])

    assert carry_over.main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("02_old.ipynb: two_grads -> notebooks/02_backward_twice.ipynb: paste your answer")
    assert "The exercise changed: it was two_grads(l1, l2), it is now two_grads(" in lines[1]
    assert lines[2] == "06_old.ipynb: head_weight_grad: not answered (still the stub), nothing to carry."
    assert "no longer in the course" in lines[3]


def test_a_renamed_exercise_points_to_its_new_id(tmp_path, monkeypatch):
    monkeypatch.setitem(carry_over.RENAMED, "old_two_grads", "two_grads")
    source = str(recorded_solutions()["two_grads"]["source"]).replace("EXERCISE: two_grads", "EXERCISE: old_two_grads")
    path = _saved_notebook(tmp_path, "old.ipynb", [source])
    (cell,) = carry_over.carry([path])
    assert "(now called two_grads) -> notebooks/02_backward_twice.ipynb" in cell.describe()


def test_nothing_found_says_what_to_name(tmp_path, capsys):
    assert carry_over.main([str(tmp_path)]) == 1
    assert "No exercise cells found" in capsys.readouterr().err
