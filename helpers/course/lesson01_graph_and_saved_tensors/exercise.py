"""Exercise of notebook 01: which parameters does a loss's graph reach?"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Set, Tuple

import torch

from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import LearnerError, run_learner
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.models import (
    make_inputs,
    make_two_models,
    own_term,
    shared_term,
    two_losses,
)
from helpers.tools.graph import named_parameters

EXERCISE_ID = "parameters_reached"

HINTS = (
    "A right answer for L1 names all eight parameters - M1's four and M2's four - because the shared term "
    "connects L1 to M2. For a loss built on o2.detach() it names M1's parameters only.",
    "Every grad_fn lists its inputs in .next_functions; a parameter shows up as an AccumulateGrad node whose "
    ".variable is the parameter. Missing names usually mean you followed only one input of each node.",
    "A walk over the graph: start at the loss's grad_fn, follow each node's next_functions, skip None and "
    "the nodes already seen. A node with a .variable is a parameter's AccumulateGrad: look that tensor up among the "
    "named parameters by identity (is), not by value.",
)


def _cases(seed: int) -> List[Tuple[str, torch.Tensor, Dict[str, torch.Tensor]]]:
    """(description, loss, named parameters) with fresh models for each case."""
    cases = []
    for description in ("L1 = shared(O1, O2) + own(O1)", "own(O1) alone", "shared(O1, O2.detach()) + own(O1)",
                        "M2's head on a detached hidden layer"):
        m1, m2 = make_two_models(seed)
        x1, x2 = make_inputs(seed)
        o1, o2 = m1(x1), m2(x2)
        if description.startswith("L1"):
            loss = two_losses(o1, o2)[0]
        elif description.startswith("own"):
            loss = own_term(o1)
        elif description.startswith("shared"):
            loss = shared_term(o1, o2.detach()) + own_term(o1)
        else:
            loss = own_term(m2[2](m2[1](m2[0](x2)).detach()))
        cases.append((description, loss, named_parameters(M1=m1, M2=m2)))
    return cases


def _reference(loss: torch.Tensor, params: Dict[str, torch.Tensor]) -> Set[str]:
    grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True, retain_graph=True)
    return {name for name, grad in zip(params, grads) if grad is not None}


def _as_names(result: Any) -> Set[str]:
    if isinstance(result, (str, dict)) or not isinstance(result, (set, frozenset, list, tuple)):
        raise TypeError(f"a set of names, not {type(result).__name__}")
    items = list(result)
    if any(isinstance(item, torch.Tensor) for item in items):
        raise TypeError("names (strings like 'M1.0.weight'), not the parameter tensors themselves")
    return {str(item) for item in items}


def check_parameters_reached(parameters_reached: Callable[..., Any]) -> CheckResult:
    """Run the learner's ``parameters_reached(loss, named_params)`` on four losses and compare."""
    for description, loss, params in _cases(seed=11):
        expected = _reference(loss, params)
        try:
            result = run_learner(f"Your function (on {description})", parameters_reached, loss, params)
        except LearnerError as error:
            if "Boolean value of Tensor" in error.diagnosis:
                raise LearnerError(error.diagnosis + " To find a tensor among others, compare identities: "
                                                     "`variable is param`, or look up id(variable).") from error
            raise
        try:
            names = _as_names(result)
        except TypeError as problem:
            return failed(EXERCISE_ID, f"Your function should return {problem}.")
        missing, extra = sorted(expected - names), sorted(names - expected)
        if missing:
            hint = " The shared term connects L1 to M2." if any(n.startswith("M2") for n in missing) else ""
            return failed(EXERCISE_ID, f"For {description}, your answer misses {', '.join(missing)}, which the "
                                       f"graph does reach.{hint} Do you follow every entry of next_functions?")
        if extra:
            return failed(EXERCISE_ID, f"For {description}, your answer includes {', '.join(extra)}, which this "
                                       "loss never reaches (it does not use them, or only through detach()). "
                                       "Walk the graph itself.")
    return passed(EXERCISE_ID, "Right for all four losses - including L1, which reaches M2 through the shared term.")


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="parameters_reached",
    checker=check_parameters_reached,
    hints=HINTS,
)
