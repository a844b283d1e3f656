"""All exercises of the course, by id."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Tuple

from helpers.exercises import lesson00
from helpers.exercises.result import CheckResult


@dataclass(frozen=True)
class Exercise:
    """One checked exercise.

    Attributes:
        id: the name used in ``exercises.check(id, answer)``.
        notebook: the notebook it belongs to.
        answer_name: the name the solution cell defines (its function or variable).
        checker: ``checker(answer) -> CheckResult``; may raise guard.NotAttempted or guard.LearnerError.
        hints: the symptom, the cause, and the API to use; the full solution is the last hint.
    """

    id: str
    notebook: str
    answer_name: str
    checker: Callable[[Any], CheckResult]
    hints: Tuple[str, str, str]


_EXERCISES: Tuple[Exercise, ...] = (
    Exercise(
        id=lesson00.EXERCISE_ID,
        notebook="00_start_here",
        answer_name="head_weight_grad",
        checker=lesson00.check_head_weight_grad,
        hints=lesson00.HINTS,
    ),
)

EXERCISES: Dict[str, Exercise] = {exercise.id: exercise for exercise in _EXERCISES}


def get_exercise(exercise_id: str) -> Exercise:
    """The exercise called ``exercise_id``; the KeyError lists the known ids."""
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise KeyError(f"unknown exercise {exercise_id!r}; known: {', '.join(EXERCISES)}") from None
