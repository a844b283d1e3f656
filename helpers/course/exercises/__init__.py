"""Checked exercises: ``exercises.check(exercise_id, answer)``, ``exercises.hint(exercise_id)``,
``exercises.summary(notebook)``, ``exercises.ids()``."""
from helpers.course.exercises.api import check, evaluate, hint, ids, summary
from helpers.course.exercises.result import CheckResult, Status

__all__ = ["check", "evaluate", "hint", "ids", "summary", "CheckResult", "Status"]
