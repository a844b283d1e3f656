"""Exercise of notebook 02: each loss's gradient for its own model, with torch.autograd.grad."""
from __future__ import annotations

from typing import Any, Callable, List, Sequence

import torch

from helpers.course.exercises.compare import close
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import LearnerError, run_learner
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.models import make_inputs, make_two_models, two_losses
from helpers.tools.errors import KINDS

EXERCISE_ID = "two_grads"

HINTS = (
    "A right answer returns two tuples: the gradients of L1 for M1's parameters, and of L2 for M2's, "
    "without error 1 on the second call.",
    "Both losses share the graph of the shared term (and of both models). The first autograd.grad call frees "
    "the saved tensors of everything it passes through, so the second call finds them gone.",
    "Two calls to torch.autograd.grad, one per loss, each asking only for its own model's parameters. The "
    "first one must keep the graph (retain_graph=True): the second walks the shared part again.",
)


def _grads(loss: torch.Tensor, params: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    return list(torch.autograd.grad(loss, list(params), retain_graph=True))


def _same(actual: Sequence[Any], expected: Sequence[torch.Tensor]) -> bool:
    return len(actual) == len(expected) and all(
        isinstance(a, torch.Tensor) and a.shape == e.shape and close(a, e) for a, e in zip(actual, expected)
    )


def _diagnose_model(grads: Sequence[Any], model: str, refs: dict) -> str:
    """What one model's returned gradients are, when they are not its own loss's."""
    own, other = ("L1", "L2") if model == "M1" else ("L2", "L1")
    key = model[-1]
    if any(g is None for g in grads):
        return (f"Some of {model}'s gradients are None: .grad stays None until a backward reaches it. "
                "torch.autograd.grad returns the gradients directly.")
    if _same(grads, refs[f"{other.lower()}_m{key}"]):
        return f"{model} got the gradient of {other}; it should get the gradient of {own}."
    if _same(grads, refs[f"sum_m{key}"]):
        return (f"{model} received the gradient of L1 + L2: backward() adds every loss into the same .grad. "
                f"Differentiate {own} alone for {model}'s parameters.")
    return f"{model}'s gradients differ from the reference computed with torch.autograd.grad({own.lower()}, ...)."


def check_two_grads(two_grads: Callable[..., Any]) -> CheckResult:
    """Call the learner's ``two_grads(l1, l2, params1, params2)`` on a fresh graph and compare."""
    m1, m2 = make_two_models(seed=21)
    x1, x2 = make_inputs(seed=21)
    l1, l2 = two_losses(m1(x1), m2(x2))
    p1, p2 = list(m1.parameters()), list(m2.parameters())
    refs = {"l1_m1": _grads(l1, p1), "l2_m2": _grads(l2, p2), "l2_m1": _grads(l2, p1), "l1_m2": _grads(l1, p2),
            "sum_m1": _grads(l1 + l2, p1), "sum_m2": _grads(l1 + l2, p2)}
    # a fresh graph for the learner, so nothing we did can hide or cause their error 1
    l1, l2 = two_losses(m1(x1), m2(x2))
    try:
        result = run_learner("Your function", two_grads, l1, l2, p1, p2)
    except LearnerError as error:
        if error.__cause__ is not None and KINDS["backward-twice"].matches(error.__cause__):
            raise LearnerError(error.diagnosis + " - the first call freed the graph both losses share: pass "
                                                 "retain_graph=True to it.") from error.__cause__
        raise
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        return failed(EXERCISE_ID, "Return a pair: (gradients of L1 for params1, gradients of L2 for params2).")
    grads1, grads2 = (list(g) if isinstance(g, (tuple, list)) else [g] for g in result)
    if len(grads1) != len(p1) or len(grads2) != len(p2):
        return failed(EXERCISE_ID, f"Return one gradient per parameter: {len(p1)} for M1 and {len(p2)} for M2; "
                                   f"you returned {len(grads1)} and {len(grads2)}.")
    if not _same(grads1, refs["l1_m1"]):
        return failed(EXERCISE_ID, _diagnose_model(grads1, "M1", refs))
    if not _same(grads2, refs["l2_m2"]):
        return failed(EXERCISE_ID, _diagnose_model(grads2, "M2", refs))
    return passed(EXERCISE_ID, "Each model got exactly its own loss's gradient, and no error 1.")


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="two_grads",
    checker=check_two_grads,
    hints=HINTS,
)
