"""What an exercise is: its id, notebook, checker and hints."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Tuple

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
