"""Exercise checkers: reject stubs and wrong answers with a specific diagnosis, accept every correct answer."""
import re

import pytest
import torch

from helpers import exercises
from helpers.course.exercises.hints import hint_levels, hint_widget
from helpers.course.exercises.registry import get_exercise
from helpers.course.exercises.result import Status
from helpers.course.exercises.solutions import solution_source
from tests.course import exercise_answers as course_answers
from tests.course.clinic_answers import merged
from tests.notebook_cells import exercise_cells, load_answer

SOLUTION_CELLS = exercise_cells("solutions")
STUDENT_CELLS = exercise_cells("notebooks")


def test_every_exercise_has_one_solution_cell_and_one_student_cell():
    assert sorted(SOLUTION_CELLS) == sorted(exercises.ids())
    assert sorted(STUDENT_CELLS) == sorted(exercises.ids())


@pytest.mark.parametrize("exercise_id", exercises.ids())
def test_checker_accepts_the_solution_notebooks_answer(exercise_id):
    answer = load_answer(SOLUTION_CELLS[exercise_id], get_exercise(exercise_id).answer_name)
    result = exercises.evaluate(exercise_id, answer)
    assert result.passed, result.message


@pytest.mark.parametrize("exercise_id", exercises.ids())
def test_checker_reports_the_student_stub_as_not_attempted(exercise_id):
    stub = load_answer(STUDENT_CELLS[exercise_id], get_exercise(exercise_id).answer_name)
    result = exercises.evaluate(exercise_id, stub)
    assert result.status is Status.NOT_ATTEMPTED and not result.passed


@pytest.mark.parametrize("placeholder", [None, ...])
def test_placeholders_are_not_attempted(placeholder):
    assert exercises.evaluate("head_weight_grad", placeholder).status is Status.NOT_ATTEMPTED


def test_solution_hint_is_the_solution_cell():
    assert solution_source("head_weight_grad") == SOLUTION_CELLS["head_weight_grad"]


OTHER_CORRECT = {
    **course_answers.OTHER_CORRECT,  # notebooks 00-05: tests/course/exercise_answers.py
    **merged("OTHER_CORRECT"),  # notebook 06's cases: tests/course/clinic_answers/
}


@pytest.mark.parametrize(
    "exercise_id, answer",
    [(exercise_id, answer) for exercise_id, answers in OTHER_CORRECT.items() for answer in answers],
)
def test_checkers_accept_other_correct_answers(exercise_id, answer):
    result = exercises.evaluate(exercise_id, answer)
    assert result.passed, result.message


WRONG_ANSWERS = {
    **course_answers.WRONG_ANSWERS,  # notebooks 00-05: tests/course/exercise_answers.py
    **merged("WRONG_ANSWERS"),  # notebook 06's cases: tests/course/clinic_answers/
}


def test_every_checker_is_tested_with_three_wrong_and_one_other_correct_answer():
    for exercise_id in exercises.ids():
        assert len(WRONG_ANSWERS.get(exercise_id, [])) >= 3, exercise_id
        assert len(OTHER_CORRECT.get(exercise_id, [])) >= 1, exercise_id


REQUIRED_CLASSES = {exercise_id: ["carries state", "changes unmentioned state"]
                    for exercise_id in course_answers.CLASSES}
REQUIRED_CLASSES["chained_amp_step"] += ["clips before unscale_", "mishandles the inf step"]


@pytest.mark.parametrize("exercise_id", sorted(REQUIRED_CLASSES))
def test_each_checker_is_tried_with_every_class_of_answer_that_could_fool_it(exercise_id):
    """A state-carrying answer, one changing state the contract does not mention and, for the scaler, a clip before
    unscale_ and a mishandled inf step: each among the wrong answers, so each gets its specific diagnosis."""
    wrong = [answer for answer, _ in WRONG_ANSWERS[exercise_id]]
    for name in REQUIRED_CLASSES[exercise_id]:
        answers = course_answers.CLASSES[exercise_id].get(name, [])
        assert answers and all(any(answer is known for known in wrong) for answer in answers), (exercise_id, name)


def test_the_scaler_step_checker_makes_the_clipping_order_change_the_step():
    """The scale and max_norm are such that a clip before unscale_ leaves a visibly different gradient."""
    from helpers.course.lesson05_chained_amp import exercise as amp

    assert amp.SCALE * amp.CLIP_SHARE > 1 and amp.SCALE > 1 + 10 * amp.TOLERANCE


@pytest.mark.parametrize(
    "exercise_id, answer, diagnosis",
    [(exercise_id, *case) for exercise_id, cases in WRONG_ANSWERS.items() for case in cases],
)
def test_checkers_reject_wrong_answers_with_a_specific_diagnosis(exercise_id, answer, diagnosis):
    result = exercises.evaluate(exercise_id, answer)
    assert result.status is Status.FAILED
    assert diagnosis in result.message


def test_strict_mode_raises_on_failure_and_not_on_success(monkeypatch):
    monkeypatch.setenv("COURSE_STRICT", "1")
    with pytest.raises(AssertionError, match="adds into .grad"):
        exercises.check("head_weight_grad", course_answers.forgets_zero_grad)
    with pytest.raises(AssertionError, match="Not attempted yet"):
        exercises.check("head_weight_grad", None)
    assert exercises.check("head_weight_grad", course_answers.head_grad_by_hand).passed


def test_without_strict_mode_check_returns_the_failure(monkeypatch):
    monkeypatch.delenv("COURSE_STRICT", raising=False)
    result = exercises.check("head_weight_grad", course_answers.forgets_zero_grad)
    assert not result.passed and "Not yet" in str(result) and "adds into .grad" in result._repr_html_()


def test_unknown_exercise_lists_the_known_ids():
    with pytest.raises(KeyError, match="head_weight_grad"):
        exercises.check("no_such_exercise", None)


def test_hints_in_text_come_one_level_at_a_time():
    first = str(exercises.hint("head_weight_grad"))
    assert "1. Symptom" in first and "2. Cause" not in first and 'level=2' in first
    everything = str(exercises.hint("head_weight_grad", level=4))
    assert "3. The API, and the shape of the fix" in everything and "torch.autograd.grad(" in everything


def _solution_lines(exercise_id):
    """The lines of an exercise's solution that are code worth hiding (not comments, not short)."""
    lines = [line.strip() for line in SOLUTION_CELLS[exercise_id].splitlines()]
    return [line for line in lines if len(line) >= 16 and not line.startswith(("#", '"""', "def "))]


@pytest.mark.parametrize("exercise_id", exercises.ids())
def test_the_third_hint_gives_the_api_and_the_shape_of_the_fix_without_the_code(exercise_id):
    third = get_exercise(exercise_id).hints[2]
    flat = " ".join(third.split())
    shown_code = [line for line in _solution_lines(exercise_id) if line in flat]
    assert shown_code == [], f"hint 3 gives away solution lines: {shown_code}"
    assert not re.search(r"\b\w+(\[[^\]]*\])?\s=\s\S", flat), f"hint 3 has an assignment: {third}"
    assert not re.search(r";\s*\w+\(", flat), f"hint 3 strings statements together: {third}"
    assert not re.search(r"\w\([^()]*,[^()]*\)", flat), f"hint 3 writes out a call with its arguments: {third}"


@pytest.mark.parametrize("level", [0, 5, -1, "2", 2.0, True])
def test_asking_for_a_level_that_does_not_exist_says_how_many_there_are(level):
    answer = str(exercises.hint("two_grads", level=level))
    assert "there are 4 levels, 1 to 4" in answer and "two_grads" in answer


def test_hint_widget_reveals_the_next_level_on_each_click():
    widget = hint_widget("head_weight_grad", hint_levels("head_weight_grad", get_exercise("head_weight_grad").hints))
    row, shown = widget.children
    (button,) = row.children
    assert shown.value == ""
    button.click()
    assert "1. Symptom" in shown.value and "2. Cause" not in shown.value
    for _ in range(3):
        button.click()
    assert "4. Full solution" in shown.value and button.disabled


def test_on_the_website_hints_are_every_level_folded(monkeypatch):
    """bash book/build sets COURSE_STATIC_SITE=1: no button (nothing can click it on a page), every level folded."""
    from helpers.course import static_site

    monkeypatch.setenv(static_site.STATIC_SITE_VARIABLE, "1")
    folded = exercises.hint("head_weight_grad")
    card = folded._repr_html_()
    assert card.count("<details") == 4 and "4. Full solution" in card and "torch.autograd.grad(" in card
    assert "4. Full solution" in str(folded)


def test_a_learners_set_grad_enabled_false_does_not_outlive_the_check():
    exercises.evaluate("two_model_step", course_answers.step_disabling_grad)
    assert torch.is_grad_enabled()


def test_the_summary_shows_each_exercise_of_the_notebook_as_its_last_check_left_it(monkeypatch):
    from helpers.course.exercises import progress as summary_module

    monkeypatch.delenv("COURSE_STRICT", raising=False)
    monkeypatch.setattr(summary_module, "LAST_RESULTS", {})
    fresh = str(exercises.summary("02_backward_twice"))
    assert "two_grads: not attempted yet - its check cell has not run" in fresh
    assert "Next: open notebooks/03_inplace_version.ipynb." in fresh
    exercises.check("two_grads", load_answer(STUDENT_CELLS["two_grads"], get_exercise("two_grads").answer_name))
    assert "two_grads: not attempted yet" in str(exercises.summary("02_backward_twice"))
    exercises.check("two_grads", lambda *args: (None, None))
    failed_line = [line for line in str(exercises.summary("02_backward_twice")).splitlines() if "two_grads" in line][0]
    assert failed_line.startswith("✗ two_grads: failed - ") and len(failed_line) < 200
    exercises.check("two_grads", load_answer(SOLUTION_CELLS["two_grads"], get_exercise("two_grads").answer_name))
    assert "✓ two_grads: passed" in str(exercises.summary("02_backward_twice"))
    assert "last notebook" in str(exercises.summary(exercises.ids() and "08_past_one_machine"))
    assert "no exercises" in str(exercises.summary("99_no_such_notebook"))


def test_in_strict_mode_the_summary_fails_when_an_exercise_has_not_passed(monkeypatch):
    from helpers.course.exercises import progress as summary_module

    monkeypatch.setattr(summary_module, "LAST_RESULTS", {})
    monkeypatch.setenv("COURSE_STRICT", "1")
    with pytest.raises(AssertionError, match="not every exercise passed"):
        exercises.summary("02_backward_twice")
