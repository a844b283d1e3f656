"""All exercises of the course, by id, in course order.

Each module ``helpers/course/lessonNN_topic/exercise.py`` or ``.../<case>_exercise.py`` defines one ``EXERCISE``.
The course order is notebook by notebook, and within a notebook the order of its exercise cells, which the
generator records in solutions.json. The modules are imported on first use, not when ``helpers`` is imported.
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path
from typing import Dict, List, Tuple

from helpers.course.exercises.exercise import LESSON_PACKAGE, Exercise, notebook_of_package
from helpers.course.exercises.solutions import recorded_solutions

COURSE_PACKAGE = "helpers.course"
_COURSE_FOLDER = Path(__file__).resolve().parents[1]


def exercise_module_names() -> List[str]:
    """``helpers.course.lessonNN_topic.exercise`` and ``..._exercise`` module names, sorted."""
    names = []
    for lesson in pkgutil.iter_modules([str(_COURSE_FOLDER)]):
        if lesson.ispkg and LESSON_PACKAGE.match(lesson.name):
            names += [f"{COURSE_PACKAGE}.{lesson.name}.{module.name}"
                      for module in pkgutil.iter_modules([str(_COURSE_FOLDER / lesson.name)])
                      if module.name == "exercise" or module.name.endswith("_exercise")]
    return sorted(names)


def notebook_names() -> List[str]:
    """Every notebook of the course, ``NN_topic``, in order: one per lesson package."""
    return sorted(notebook_of_package(lesson.name) for lesson in pkgutil.iter_modules([str(_COURSE_FOLDER)])
                  if lesson.ispkg and LESSON_PACKAGE.match(lesson.name))


def _course_order(exercise: Exercise) -> Tuple[str, float, str]:
    position = recorded_solutions().get(exercise.id, {}).get("position")
    return exercise.notebook, float(position) if isinstance(position, int) else float("inf"), exercise.id


@functools.lru_cache(maxsize=None)
def exercises() -> Dict[str, Exercise]:
    """Every exercise by id, in course order (imports the exercise modules on first call)."""
    found = [importlib.import_module(name).EXERCISE for name in exercise_module_names()]
    return {exercise.id: exercise for exercise in sorted(found, key=_course_order)}


def get_exercise(exercise_id: str) -> Exercise:
    """The exercise called ``exercise_id``; the KeyError lists the known ids."""
    try:
        return exercises()[exercise_id]
    except KeyError:
        raise KeyError(f"unknown exercise {exercise_id!r}; known: {', '.join(exercises())}") from None
