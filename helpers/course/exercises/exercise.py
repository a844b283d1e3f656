"""What an exercise is: its id, checker and hints; its notebook is the lesson package its checker lives in."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Tuple

from helpers.course.exercises.result import CheckResult

if TYPE_CHECKING:
    from helpers.course.exercises.engine.contract import Contract

LESSON_PACKAGE = re.compile(r"^lesson(?P<number>\d\d)_(?P<topic>\w+)$")


def notebook_of_package(package: str) -> str:
    """``lesson06_bug_clinic`` (or a dotted path through it) -> ``06_bug_clinic``.

    Raises:
        ValueError: when no part of ``package`` is a lesson package.
    """
    for part in package.split("."):
        match = LESSON_PACKAGE.match(part)
        if match:
            return f"{match['number']}_{match['topic']}"
    raise ValueError(f"{package!r} is not inside a lesson package (helpers/course/lessonNN_topic/)")


@dataclass(frozen=True)
class Exercise:
    """One checked exercise.

    Attributes:
        id: the name used in ``exercises.check(id, answer)``.
        answer_name: the name the solution cell defines (its function or variable).
        checker: ``checker(answer) -> CheckResult``: the exercise's own scenarios, which read a wrong answer as a
            mixture of the gradients it could hold and name it; may raise guard.NotAttempted or guard.LearnerError.
        hints: the symptom, the cause, and the API to use; the full solution is the last hint.
        contract: what the checking engine judges the answer against, in every situation the contract allows,
            after the scenarios pass (``engine``).
    """

    id: str
    answer_name: str
    checker: Callable[[Any], CheckResult]
    hints: Tuple[str, str, str]
    contract: Optional["Contract"] = None

    @property
    def notebook(self) -> str:
        """The notebook it belongs to, ``NN_topic``, read from its checker's package ``lessonNN_topic``."""
        return notebook_of_package(self.checker.__module__)
