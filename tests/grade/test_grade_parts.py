"""The grader's parts, each on its own: recognising files, leaving checks out, the guard, and the report."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import nbformat
import pytest
import torch

from helpers.course import seeds
from helpers.grade import grading
from helpers.grade.cells import without_checks
from helpers.grade.grading import Row
from helpers.grade.guard import Guard, Snapshot, Tampered, guarded
from helpers.grade.report import diagnoses, diagnosis_of, summary_line
from helpers.grade.submissions import read_folder
from tests.paths import ROOT


def test_check_statements_are_left_out_line_for_line() -> None:
    source = ('from helpers import exercises\n\nexercises.check("a",\n    answer)\n'
              'feedback = exercises.evaluate("a", f)\nhelpers.exercises.hint("a")\nprint(1)')
    kept, removed = without_checks(source)
    assert removed == 2 and len(kept.splitlines()) == len(source.splitlines())
    assert "exercises.check" not in kept and "helpers.exercises.hint" not in kept
    assert "feedback = exercises.evaluate" in kept and "print(1)" in kept  # an assignment's name may be used later
    assert without_checks("%%time\nexercises.check('a', b)") == ("%%time\nexercises.check('a', b)", 0)


def test_files_are_recognised_whatever_their_name_or_format(tmp_path: Path) -> None:
    solved = nbformat.read(str(ROOT / "solutions" / "04_whose_gradient.ipynb"), as_version=4)
    student = nbformat.read(str(ROOT / "notebooks" / "04_whose_gradient.ipynb"), as_version=4)
    for name, node in (("a/04_whose_gradient.ipynb", solved), ("b/homework.ipynb", solved),
                       ("c/04_whose_gradient.ipynb", student), ("d/04_whose_gradient.ipynb", student)):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(node, str(tmp_path / name))
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "00_start_here.ipynb").write_text(json.dumps(nbformat.convert(solved, 3)))
    (tmp_path / "f.ipynb").write_text("not json")
    nbformat.write(nbformat.v4.new_notebook(), str(tmp_path / "alice_06_bug_clinic.ipynb"))
    found = {submission.name: submission for submission in read_folder(tmp_path)}
    assert found["a/04_whose_gradient.ipynb"].notebook == "04_whose_gradient"
    assert found["a/04_whose_gradient.ipynb"].learner == "a"
    assert any("the same code as b/homework.ipynb" in note for note in found["a/04_whose_gradient.ipynb"].notes)
    assert any("renamed" in note for note in found["b/homework.ipynb"].notes)
    assert found["c/04_whose_gradient.ipynb"].notes == []  # untouched copies are alike by nature: not duplicates
    assert any("nbformat 3" in note for note in found["e/00_start_here.ipynb"].notes)
    assert found["e/00_start_here.ipynb"].notebook == "04_whose_gradient"  # its cells say so, not its name
    assert found["f.ipynb"].problem.startswith("unreadable")
    by_name = found["alice_06_bug_clinic.ipynb"]  # no exercise cell left: known by its name, all not attempted
    assert by_name.notebook == "06_bug_clinic" and by_name.found_ids == [] and by_name.learner == "alice"


def test_the_snapshot_sees_a_patch_even_when_put_back_later() -> None:
    snapshot = Snapshot()
    original = torch.allclose
    torch.allclose = lambda *args, **kwargs: True
    try:
        with pytest.raises(Tampered, match="allclose"):
            snapshot.verify("After a call")
    finally:
        torch.allclose = original
    snapshot.verify("After a call")


def test_a_guarded_answer_runs_on_its_own_thread_and_may_not_reach_out() -> None:
    guard = Guard()
    snapshot = Snapshot()
    main_thread = threading.get_ident()
    assert guarded(lambda x: threading.get_ident() != main_thread and x * 2, snapshot, guard)(3) == 6

    def writes(path: str) -> None:
        with open(path, "w") as file:
            file.write("x")

    with pytest.raises(Tampered, match="open"):
        guarded(writes, snapshot, guard)("/tmp/grader-test-never-written")
    guard.used.clear()

    def changes_seeds() -> None:
        seeds.set_salt(5)

    try:
        with pytest.raises(Tampered, match="seeds"):
            guarded(changes_seeds, snapshot, guard)()
    finally:
        seeds.set_salt(0)


def test_diagnoses_are_counted_most_common_first() -> None:
    rows = [Row("a.ipynb", "x", "failed", "M1 received the gradient of L1 + L2. More."),
            Row("b.ipynb", "x", "failed", "M1 received the gradient of L1 + L2. Other words."),
            Row("c.ipynb", "x", "failed", "Differs by up to 0.5. Check."),
            Row("d.ipynb", "x", "failed", "Differs by up to 0.25. Check. (Note: renamed.)"),
            Row("e.ipynb", "x", "failed", "Your step raised a NameError."),
            Row("f.ipynb", "x", "passed", "Right."), Row("g.ipynb", "x", "not attempted", "Still the stub.")]
    found = diagnoses(rows)["x"]
    assert [count for count, _, _ in found] == [2, 2, 1] and all(graded == 6 for _, graded, _ in found)
    assert found[0][2] == "Differs by up to 0.5." and found[1][2] == "M1 received the gradient of L1 + L2."
    assert diagnosis_of("Fresh inputs exposed it: x, show that it is wrong. The real one. More.") == "The real one."
    assert summary_line(rows, 7, 12.3) == "Graded 7 notebooks in 12 s: 1 passed, 5 failed, 1 not attempted, 0 error."


def test_a_checking_process_that_cannot_start_gives_a_reason_not_a_crash(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grading.sys, "executable", "/bin/false")
    checker = grading.Checker(tmp_path)
    result = checker.check(tmp_path / "answers.json", {"head_weight_grad": "head_weight_grad"}, 1, grading.Limits())
    assert result == {"problem": "the grader's checking process could not start (it ended without a word)"}
