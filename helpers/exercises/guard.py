"""Running a learner's code so that nothing it does can crash the checker."""
from __future__ import annotations

from typing import Any, Callable

from helpers.errors import short_description


class NotAttempted(Exception):
    """The learner has not written an answer yet (``...``, ``None`` or ``NotImplementedError``)."""


class LearnerError(Exception):
    """The learner's code raised; ``diagnosis`` says what, for the feedback card."""

    def __init__(self, diagnosis: str) -> None:
        super().__init__(diagnosis)
        self.diagnosis = diagnosis


def is_unanswered(answer: Any) -> bool:
    """True for the placeholders a student copy starts with."""
    return answer is None or answer is Ellipsis


def run_learner(what: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the learner's ``function``; turn any exception it raises into NotAttempted or LearnerError.

    Args:
        what: how to name this call in a diagnosis, e.g. "your second step".
    """
    if is_unanswered(function):
        raise NotAttempted()
    if not callable(function):
        raise LearnerError(f"The answer should be a function, but it is {type(function).__name__}: {function!r}.")
    try:
        return function(*args, **kwargs)
    except NotImplementedError as error:
        raise NotAttempted() from error
    except Exception as error:  # AssertionError included: the learner's own asserts are their code too
        raise LearnerError(f"{what} raised {short_description(error)}") from error
