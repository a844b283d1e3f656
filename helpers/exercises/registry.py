"""All exercises of the course, by id, in course order."""
from __future__ import annotations

from typing import Dict

from helpers.exercises import lesson00, lesson01, lesson02, lesson03, lesson04, lesson05
from helpers.exercises.exercise import Exercise

EXERCISES: Dict[str, Exercise] = {
    module.EXERCISE.id: module.EXERCISE for module in (lesson00, lesson01, lesson02, lesson03, lesson04, lesson05)
}


def get_exercise(exercise_id: str) -> Exercise:
    """The exercise called ``exercise_id``; the KeyError lists the known ids."""
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise KeyError(f"unknown exercise {exercise_id!r}; known: {', '.join(EXERCISES)}") from None
