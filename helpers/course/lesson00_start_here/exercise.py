"""Exercise of notebook 00: the gradient of one loss with respect to the head's weight."""
from __future__ import annotations

from typing import Any, Callable

import torch

from helpers.course.exercises.compare import (
    close,
    describe_value,
    max_difference,
    scale_factor,
)
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_learner
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.models import BATCH, make_model, make_regression_batch

EXERCISE_ID = "head_weight_grad"

HINTS = (
    "What a right answer looks like: a tensor shaped like the head's weight, [1, 64], equal to what "
    "torch.autograd.grad gives - and the same answer when your function is called twice.",
    "The usual wrong answers come from two things: .backward() adds into .grad, so a second call on the same model "
    "doubles the result unless you clear it; and the loss is a mean, not a sum.",
    "Compute the loss as the mean of the squared differences, then ask torch.autograd.grad for its gradient "
    "with respect to the head's weight (the last layer's weight): it returns a tuple with one tensor. With "
    ".backward() instead, clear the old gradient first and return a copy of .grad.",
)


def _reference(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    loss = ((model(x) - target) ** 2).mean()
    (grad,) = torch.autograd.grad(loss, model[-1].weight)
    return grad


def _diagnose(result: Any, expected: torch.Tensor, call: str) -> str:
    """Why ``result`` is not the expected gradient, as specifically as we can tell."""
    if result is None:
        return f"On the {call} call your function returned None. Did you forget `return`?"
    if isinstance(result, tuple) and len(result) == 1 and isinstance(result[0], torch.Tensor):
        return "Your function returned a tuple: torch.autograd.grad returns one. Take its first element."
    if not isinstance(result, torch.Tensor):
        return f"Your function returned {describe_value(result)}; it should return a tensor shaped [1, 64]."
    if result.shape != expected.shape:
        if result.shape == expected.t().shape:
            return f"Your tensor is shaped {list(result.shape)}, the transpose of the weight's [1, 64]."
        return (f"Your tensor is shaped {list(result.shape)}; the head's weight, model[-1].weight, is [1, 64]. "
                "Did you take the gradient of another parameter?")
    factor = scale_factor(result, expected)
    if factor is not None and abs(factor - 2) < 1e-3 and call == "second":
        return ("On the second call your gradient is twice the right one: the first call's gradient was still "
                "in .grad. Clear it first (model.zero_grad()) or use torch.autograd.grad, which leaves .grad alone.")
    if factor is not None and abs(factor - BATCH) < 1e-3:
        return f"Your gradient is {BATCH} times too large: the loss must be the mean over the batch, not the sum."
    if factor is not None and abs(factor + 1) < 1e-3:
        return "Your gradient has the wrong sign: return the gradient itself, not the step direction -grad."
    return (f"On the {call} call your gradient differs from the reference by up to "
            f"{max_difference(result, expected):.3g}. Is the loss exactly ((model(x) - target) ** 2).mean()?")


def check_head_weight_grad(head_weight_grad: Callable[..., Any]) -> CheckResult:
    """Call the learner's ``head_weight_grad(model, x, target)`` twice on a fresh model and compare."""
    model = make_model(seed=7)
    x, target = make_regression_batch(seed=7)
    expected = _reference(model, x, target)
    weights_before = [p.detach().clone() for p in model.parameters()]
    inputs_before = (x.clone(), target.clone())
    for call in ("first", "second"):
        result = run_learner(f"Your function ({call} call)", head_weight_grad, model, x, target)
        if any(not torch.equal(p, before) for p, before in zip(model.parameters(), weights_before)):
            return failed(EXERCISE_ID, "Your function changed the model's parameters. "
                                       "It should only compute a gradient, not take an optimizer step.")
        if not (torch.equal(x, inputs_before[0]) and torch.equal(target, inputs_before[1])):
            return failed(EXERCISE_ID, "Your function changed x or target in place. Leave the inputs as they are.")
        if not (isinstance(result, torch.Tensor) and result.shape == expected.shape and close(result, expected)):
            return failed(EXERCISE_ID, _diagnose(result, expected, call))
    return passed(EXERCISE_ID, "Your gradient matches torch.autograd.grad, and calling twice gives the same answer.")


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="head_weight_grad",
    checker=check_head_weight_grad,
    hints=HINTS,
)
