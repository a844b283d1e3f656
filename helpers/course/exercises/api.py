"""``check``, ``hint``, ``summary`` and ``ids``: what notebooks call."""
from __future__ import annotations

import os
from typing import Any, List, Optional

from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import LearnerError, NotAttempted, is_unanswered
from helpers.course.exercises.hints import make_hint
from helpers.course.exercises.progress import NotebookSummary, make_summary, record
from helpers.course.exercises.registry import exercises, get_exercise
from helpers.course.exercises.result import CheckResult, failed, not_attempted, passed
from helpers.language import tr

STRICT_VARIABLE = "COURSE_STRICT"


def ids() -> List[str]:
    """The ids of all exercises, in course order."""
    return list(exercises())


def strict_mode() -> bool:
    """True when ``$COURSE_STRICT`` is 1: a failed check raises (the tests set it for solutions/)."""
    return os.environ.get(STRICT_VARIABLE, "") == "1"


def evaluate(exercise_id: str, answer: Any) -> CheckResult:
    """Run the checker of ``exercise_id`` on ``answer``; never raises for anything the answer does."""
    exercise = get_exercise(exercise_id)
    if is_unanswered(answer):
        return not_attempted(exercise_id)
    try:
        result = exercise.checker(answer)
        if result.passed and exercise.contract is not None and not exercise.contract.judged_in_checker:
            result = judged(exercise, answer, result)
        return result
    except NotAttempted:
        return not_attempted(exercise_id)
    except LearnerError as error:
        return failed(exercise_id, error.diagnosis)
    except Exception as error:  # an answer so unusual that comparing it failed: still feedback, never a crash
        return failed(exercise_id, tr("Your answer could not be compared with the reference ({error}). Check what "
                                      "your code returns.", error=f"{type(error).__name__}: {error}"))


def judged(exercise: Exercise, answer: Any, scenarios: CheckResult) -> CheckResult:
    """The engine's verdict after the exercise's own scenarios passed: the same answer in every situation its
    contract allows, against the reference."""
    from helpers.course.exercises.engine.judge import judge, situations_tried

    diagnosis = judge(exercise.contract, answer)
    if diagnosis is not None:
        return failed(exercise.id, diagnosis)
    return passed(exercise.id, tr("{message} It also matched the reference in all {count} situations the check "
                                  "generates.", message=scenarios.message, count=situations_tried(exercise.contract)))


def check(exercise_id: str, answer: Any) -> CheckResult:
    """Check ``answer`` and return the result (a feedback card in Jupyter).

    Raises:
        AssertionError: only in strict mode, when the result is not a pass.
    """
    result = evaluate(exercise_id, answer)
    record(result)
    if strict_mode() and not result.passed:
        raise AssertionError(f"{STRICT_VARIABLE}=1 and the check did not pass:\n{result}")
    return result


def hint(exercise_id: str, level: Optional[int] = None) -> Any:  # a widget or a HintText
    """Hints for ``exercise_id``: a reveal-one-at-a-time widget in Jupyter, or the text up to ``level``."""
    return make_hint(exercise_id, get_exercise(exercise_id).hints, level)


def summary(notebook: str) -> NotebookSummary:
    """Where you are in ``notebook`` (``"04_whose_gradient"``): each exercise passed, failed or not attempted, as the
    checks run in this kernel left it, and what to do next.

    Raises:
        AssertionError: only in strict mode, when one of the notebook's exercises has not passed.
    """
    result = make_summary(notebook)
    if strict_mode() and not result.all_passed:
        raise AssertionError(f"{STRICT_VARIABLE}=1 and not every exercise passed:\n{result}")
    return result
