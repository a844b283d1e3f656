"""Running a learner's code so that nothing it does can crash the checker."""
from __future__ import annotations

import traceback
from typing import Any, Callable, Mapping, Optional

import torch

from helpers.course.exercises.solutions import STUB_MESSAGE
from helpers.language import tr, translated
from helpers.tools.errors import KINDS, short_description
from helpers.tools.frames import is_library_frame

STUB_MESSAGES = ("", STUB_MESSAGE)  # a bare `raise NotImplementedError`, or the generated stub's


class NotAttempted(Exception):
    """The learner has not written an answer yet (``...``, ``None`` or ``NotImplementedError``)."""


class LearnerError(Exception):
    """The learner's code raised; ``diagnosis`` says what, for the feedback card. ``predicate``, where given, is
    what happened without who did it (``raised ValueError: ...``), for a caller that names the function itself."""

    def __init__(self, diagnosis: str, predicate: Optional[str] = None) -> None:
        super().__init__(diagnosis)
        self.diagnosis = diagnosis
        self.predicate = predicate


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
        raise LearnerError(tr("The answer should be a function, but it is {type}: {value}.",
                              type=type(function).__name__, value=repr(function)))
    grad_mode = torch.is_grad_enabled()
    try:
        with torch.enable_grad():
            result = function(*args, **kwargs)
            left_off = not torch.is_grad_enabled()
    except NotImplementedError as error:
        if _raised_by_learner(error):
            raise NotAttempted() from error
        raise _raised(what, error) from error
    except (Exception, SystemExit) as error:  # AssertionError and exit() included: they are the learner's code too
        raise _raised(what, error) from error
    finally:
        torch.set_grad_enabled(grad_mode)  # a learner's set_grad_enabled(False) must not outlive the check
    if left_off:
        raise LearnerError(
            tr("{what} returned with gradient tracking switched off (torch.set_grad_enabled(False), or "
               "torch.no_grad().__enter__() without its exit): its caller's next forward pass would record no graph. "
               "Put the untracked part in a `with torch.no_grad():` block.", what=what),
            tr("returned with gradient tracking switched off (torch.set_grad_enabled(False), or "
               "torch.no_grad().__enter__() without its exit): its caller's next forward pass would record no graph. "
               "Put the untracked part in a `with torch.no_grad():` block."))
    return result


def _raised(what: str, error: BaseException) -> LearnerError:
    """The diagnosis of a learner's call that raised ``error``."""
    described = short_description(error)
    return LearnerError(tr("{what} raised {error}", what=what, error=described),
                        tr("raised {error}", error=described))


def _raised_by_learner(error: BaseException) -> bool:
    """True for a stub's own ``raise NotImplementedError``, not for one from inside torch."""
    frames = traceback.extract_tb(error.__traceback__)
    from_learner = bool(frames) and not is_library_frame(frames[-1].filename)
    return from_learner and str(error) in STUB_MESSAGES


def run_step(step_function: Callable[..., Any], step: int, *args: Any, explanations: Mapping[str, str]) -> Any:
    """``run_learner`` for a training-step exercise's step number ``step``.

    When the learner's step raises an error of a kind in ``explanations`` (a kind of ``helpers.tools.errors.KINDS``,
    or else a piece of the message), the diagnosis gets that exercise's explanation of what it means there.
    """
    try:
        return run_learner(tr("Your step (step {step})", step=step), step_function, *args)
    except LearnerError as error:
        cause = error.__cause__
        for key, explanation in explanations.items():
            if cause is not None and (KINDS[key].matches(cause) if key in KINDS else key in str(cause)):
                raise LearnerError(f"{error.diagnosis} {translated(explanation)}") from cause
        raise
