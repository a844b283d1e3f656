"""All exercises of the course, by id, in course order.

Every module ``helpers/exercises/lessonNN*.py`` defines one ``EXERCISE``; module names sort in course order
(notebook 06's cases are ``lesson06a_gan``, ``lesson06b_...`` and so on).
"""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Dict, List

from helpers.exercises.exercise import Exercise


def lesson_module_names() -> List[str]:
    """``helpers.exercises.lesson*`` module names, sorted: the course order."""
    folder = Path(__file__).resolve().parent
    return sorted(f"helpers.exercises.{info.name}" for info in pkgutil.iter_modules([str(folder)])
                  if info.name.startswith("lesson"))


def _load() -> Dict[str, Exercise]:
    exercises = [importlib.import_module(name).EXERCISE for name in lesson_module_names()]
    return {exercise.id: exercise for exercise in exercises}


EXERCISES: Dict[str, Exercise] = _load()


def get_exercise(exercise_id: str) -> Exercise:
    """The exercise called ``exercise_id``; the KeyError lists the known ids."""
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise KeyError(f"unknown exercise {exercise_id!r}; known: {', '.join(EXERCISES)}") from None
