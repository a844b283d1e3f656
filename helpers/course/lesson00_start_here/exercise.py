"""Exercise of notebook 00: the gradient of one loss with respect to the head's weight."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import torch

from helpers.course.exercises.compare import (
    close,
    describe_value,
    max_difference,
    scale_factor,
)
from helpers.course.exercises.engine.step_watch import Snapshot, changed, fill_in_place, snapshot
from helpers.course.exercises.engine.untouched import grad_change, held_grads, put_grads, settings, settings_change
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_learner
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson00_start_here.contract import CONTRACT
from helpers.course.models import BATCH, make_model, make_regression_batch
from helpers.language import marked, tr

EXERCISE_ID = "head_weight_grad"
THIRD_BATCH = 24  # the third call's batch has another size: an answer that divides by 32 is wrong there

HINTS = (
    marked("What a right answer looks like: a tensor shaped like the head's weight, [1, 64], equal to what "
           "torch.autograd.grad gives, on every call, for every batch and model - and model[-1].weight.grad (every "
           ".grad) exactly as it was before your call."),
    marked("The usual wrong answers come from three things: .backward() adds into .grad (and zero_grad() wipes it), "
           "so it changes what the caller had accumulated there; an answer remembered from an earlier call is wrong "
           "for new data; and the loss is a mean, not a sum."),
    marked("Compute the loss as the mean of the squared differences, then ask torch.autograd.grad for its gradient "
           "with respect to the head's weight (the last layer's weight): it returns a tuple with one tensor, and it "
           "leaves .grad alone. Compute it afresh on every call."),
)


def _reference(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    loss = ((model(x) - target) ** 2).mean()
    (grad,) = torch.autograd.grad(loss, model[-1].weight)
    return grad


def _diagnose(result: Any, expected: torch.Tensor, call: str, rows: int = BATCH) -> str:
    """Why ``result`` is not the expected gradient, as specifically as we can tell."""
    if result is None:
        return {"first": tr("On the first call your function returned None. Did you forget `return`?"),
                "second": tr("On the second call your function returned None. Did you forget `return`?"),
                "third": tr("On the third call your function returned None. Did you forget `return`?")}[call]
    if isinstance(result, tuple) and len(result) == 1 and isinstance(result[0], torch.Tensor):
        return tr("Your function returned a tuple: torch.autograd.grad returns one. Take its first element.")
    if not isinstance(result, torch.Tensor):
        return tr("Your function returned {value}; it should return a tensor shaped [1, 64].",
                  value=describe_value(result))
    if result.shape != expected.shape:
        if result.shape == expected.t().shape:
            return tr("Your tensor is shaped {shape}, the transpose of the weight's [1, 64].",
                      shape=str(list(result.shape)))
        return tr("Your tensor is shaped {shape}; the head's weight, model[-1].weight, is [1, 64]. "
                  "Did you take the gradient of another parameter?", shape=str(list(result.shape)))
    factor = scale_factor(result, expected)
    if factor is not None and abs(factor - 2) < 1e-3 and call == "second":
        return tr("On the second call your gradient is twice the right one: the first call's gradient was still "
                  "in .grad. Clear it first (model.zero_grad()) or use torch.autograd.grad, which leaves .grad alone.")
    if factor is not None and abs(factor - rows) < 1e-3:
        return tr("Your gradient is {rows} times too large: the loss must be the mean over the batch, not the sum.",
                  rows=rows)
    if factor is not None and call == "third" and abs(factor - rows / BATCH) < 1e-3:
        return tr("On the third call, a batch of {rows} rows, your gradient is {rows}/{batch} of the right one: it "
                  "divides by {batch}, the size of the first batches. Take the mean over whatever batch arrives.",
                  rows=rows, batch=BATCH)
    if factor is not None and abs(factor + 1) < 1e-3:
        return tr("Your gradient has the wrong sign: return the gradient itself, not the step direction -grad.")
    difference = f"{max_difference(result, expected):.3g}"
    return {"first": tr("On the first call your gradient differs from the reference by up to {difference}. "
                        "Is the loss exactly ((model(x) - target) ** 2).mean()?", difference=difference),
            "second": tr("On the second call your gradient differs from the reference by up to {difference}. "
                         "Is the loss exactly ((model(x) - target) ** 2).mean()?", difference=difference),
            "third": tr("On the third call your gradient differs from the reference by up to {difference}. "
                        "Is the loss exactly ((model(x) - target) ** 2).mean()?", difference=difference)}[call]


def _parameter_names(model: torch.nn.Module) -> List[str]:
    """``0.weight`` -> ``model[0].weight``: the names a learner writes."""
    return [f"model[{name.split('.')[0]}].{name.split('.', 1)[1]}" for name, _ in model.named_parameters()]


def _calls() -> List[Tuple[str, torch.nn.Module, torch.Tensor, torch.Tensor]]:
    """(which call, model, x, target): two batches on one model - the second written into the same tensors, as a
    loop that copies each batch into preallocated tensors does - then another model, with a batch of another size."""
    model, other = make_model(seed=7), make_model(seed=8)
    x, target = make_regression_batch(seed=7)
    other_x, other_target = make_regression_batch(seed=9, batch=THIRD_BATCH)
    return [("first", model, x, target), ("second", model, x, target), ("third", other, other_x, other_target)]


def _state_problem(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor, weights: List[torch.Tensor],
                   versions: List[int], grads: list, before: Snapshot, global_settings: tuple) -> Optional[str]:
    """What the call changed that it should have left alone, or None."""
    if any(not torch.equal(p.detach(), w) for p, w in zip(model.parameters(), weights)):
        return tr("Your function changed the model's parameters. It should only compute a gradient, not take an "
                  "optimizer step.")
    moved = [(name, version, p._version) for name, p, version in zip(_parameter_names(model), model.parameters(),
                                                                       versions) if p._version != version]
    if moved:
        name, old, new = moved[0]
        return tr("Your function wrote into {name} in place (its version counter went from {old} to {new}), even "
                  "though its values came out the same. A caller whose graph saved that weight would then hit error 2 "
                  "in its next backward: compute the gradient without writing into any parameter.",
                  name=name, old=old, new=new)
    problem = settings_change(global_settings) or changed(before, {"x": x, "target": target},
                                                          {marked("the model"): model}, {})
    if problem is not None:
        return tr("Your function {problem}.", problem=problem)
    problem = grad_change(_parameter_names(model), list(model.parameters()), grads)
    if problem is not None:
        return tr("Your function {problem}. The checker had put gradients there, as a training loop in the middle of "
                  "accumulating would, and your function must leave them as they were. .backward() adds into .grad "
                  "(and zero_grad() wipes it): torch.autograd.grad returns the gradient and leaves .grad alone.",
                  problem=problem)
    return None


def _remembered(call: str, earlier_call: str) -> str:
    """The diagnosis of an answer that returned an earlier call's gradient (the second call has new data, the third
    another model): one whole sentence per case."""
    which = {
        ("second", "first"): tr("On the second call (new data), your function returned the gradient of the first "
                                "call."),
        ("third", "first"): tr("On the third call (another model), your function returned the gradient of the first "
                               "call."),
        ("third", "second"): tr("On the third call (another model), your function returned the gradient of the "
                                "second call."),
    }[(call, earlier_call)]
    return tr("{which} It remembers an earlier call (a cache, a global, a default argument, a function attribute): "
              "compute from the arguments of each call.", which=which)


def check_head_weight_grad(head_weight_grad: Callable[..., Any]) -> CheckResult:
    """Call the learner's ``head_weight_grad(model, x, target)`` three times - two batches on one model, then
    another model - with gradients already in ``.grad``, and compare each answer with torch.autograd.grad."""
    earlier: List[Tuple[str, torch.Tensor]] = []
    for index, (call, model, x, target) in enumerate(_calls()):
        if index == 1:
            fill_in_place((x, target), make_regression_batch(seed=8))
        expected = _reference(model, x, target)
        grads = put_grads(list(model.parameters()), seed=70 + index) if index != 1 else held_grads(
            list(model.parameters()))
        weights = [p.detach().clone() for p in model.parameters()]
        versions = [p._version for p in model.parameters()]
        before, global_settings = snapshot({"x": x, "target": target}, {marked("the model"): model}, {}), settings()
        who = {"first": tr("Your function (first call)"), "second": tr("Your function (second call)"),
               "third": tr("Your function (third call)")}[call]
        result = run_learner(who, head_weight_grad, model, x, target)
        problem = _state_problem(model, x, target, weights, versions, grads, before, global_settings)
        if problem is not None:
            return failed(EXERCISE_ID, {"first": tr("On the first call: {problem}", problem=problem),
                                        "second": tr("On the second call: {problem}", problem=problem),
                                        "third": tr("On the third call: {problem}", problem=problem)}[call])
        if not (isinstance(result, torch.Tensor) and result.shape == expected.shape and close(result, expected)):
            for earlier_call, earlier_expected in earlier:
                same_shape = isinstance(result, torch.Tensor) and result.shape == expected.shape
                if same_shape and close(result, earlier_expected):
                    return failed(EXERCISE_ID, _remembered(call, earlier_call))
            return failed(EXERCISE_ID, _diagnose(result, expected, call, rows=x.shape[0]))
        earlier.append((call, expected))
    return passed(EXERCISE_ID, tr("Your gradient matches torch.autograd.grad on two batches and on a second model "
                                  "with a batch of another size, and your function left .grad, the model and the "
                                  "inputs as it found them."))


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="head_weight_grad",
    checker=check_head_weight_grad,
    hints=HINTS,
    contract=CONTRACT,
)
