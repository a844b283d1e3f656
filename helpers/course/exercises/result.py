"""The result of checking an exercise: a feedback card in Jupyter, plain text elsewhere."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from enum import Enum

from helpers.language import marked, tr, translated
from helpers.tools.display import card_html


def _inline_code(escaped_line: str) -> str:
    """Markdown-style `code` spans of an already escaped line as <code> elements."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped_line)


class Status(str, Enum):
    """How a check ended."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_ATTEMPTED = "not attempted yet"


_LOOK = {
    Status.PASSED: (marked("Correct"), "#27ae60"),
    Status.FAILED: (marked("Not yet"), "#c0392b"),
    Status.NOT_ATTEMPTED: (marked("Not attempted yet"), "#7f8c8d"),
}


@dataclass(frozen=True)
class CheckResult:
    """What a checker found.

    Attributes:
        exercise_id: the exercise checked.
        status: passed, failed, or not attempted yet.
        message: the diagnosis, written for the learner.
    """

    exercise_id: str
    status: Status
    message: str

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    def _title(self) -> str:
        return tr("{status} - exercise {exercise}", status=translated(_LOOK[self.status][0]),
                  exercise=self.exercise_id)

    def __str__(self) -> str:
        return f"{self._title()}\n{self.message}"

    def __repr__(self) -> str:
        return f"CheckResult({self.exercise_id!r}, {self.status.value!r}, {self.message!r})"

    def _repr_html_(self) -> str:
        """A card: the status as title, the message with `code` in monospace."""
        body = "<br>".join(_inline_code(html.escape(line)) for line in self.message.splitlines())
        return card_html(self._title(), f"<div>{body}</div>", accent=_LOOK[self.status][1])


def passed(exercise_id: str, message: str) -> CheckResult:
    """A pass, with what was verified."""
    return CheckResult(exercise_id, Status.PASSED, message)


def failed(exercise_id: str, message: str) -> CheckResult:
    """A failure, with the diagnosis."""
    return CheckResult(exercise_id, Status.FAILED, message)


def not_attempted(exercise_id: str) -> CheckResult:
    """No answer yet: say how to start, and where the hints are."""
    return CheckResult(
        exercise_id,
        Status.NOT_ATTEMPTED,
        tr("Replace the `...` or `raise NotImplementedError` with your code, run the cell, then run this check again. "
           'Stuck? exercises.hint("{exercise}") reveals one hint at a time.', exercise=exercise_id),
    )
