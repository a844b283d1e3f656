"""Exercise of notebook 01: which parameters does a loss's graph reach?"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import torch

from helpers.course.exercises.engine.step_watch import Snapshot, changed, snapshot
from helpers.course.exercises.engine.untouched import grad_change, settings, settings_change
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import LearnerError, run_learner
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson01_graph_and_saved_tensors.contract import CONTRACT
from helpers.course.models import (
    make_inputs,
    make_two_models,
    own_term,
    shared_term,
    two_losses,
)
from helpers.language import marked, tr
from helpers.tools import State, count_states, saved_tensors
from helpers.tools.graph import named_parameters

EXERCISE_ID = "parameters_reached"

HINTS = (
    marked("A right answer for L1 names all eight parameters - M1's four and M2's four - because the shared term "
           "connects L1 to M2. For a loss built on o2.detach() it names M1's parameters only. And after your call the "
           "graph is as it was: every saved tensor alive, every .grad untouched."),
    marked("Every grad_fn lists its inputs in .next_functions; a parameter shows up as an AccumulateGrad node whose "
           ".variable is the parameter. Missing names usually mean you followed only one input of each node; a freed "
           "graph or filled .grad means your function ran a backward instead of reading the graph."),
    marked("A walk over the graph: start at the loss's grad_fn, follow each node's next_functions, skip None and "
           "the nodes already seen. A node with a .variable is a parameter's AccumulateGrad: look that tensor up among "
           "the named parameters by identity (is), not by value. Reading nodes runs nothing and frees nothing."),
)


def _cases(seed: int) -> Tuple[List[Tuple[str, torch.Tensor]], Dict[str, torch.Tensor]]:
    """(description, loss) for five losses built on one pair of models, and their named parameters: one dict for
    every call, as a notebook reuses its ``params``."""
    m1, m2 = make_two_models(seed)
    x1, x2 = make_inputs(seed)
    o1, o2 = m1(x1), m2(x2)
    cases = [
        ("L1 = shared(O1, O2) + own(O1)", two_losses(o1, o2)[0]),
        (tr("own(O1) alone"), own_term(o1)),
        ("shared(O1, O2.detach()) + own(O1)", shared_term(o1, o2.detach()) + own_term(o1)),
        (tr("M2's head on a detached hidden layer"), own_term(m2[2](m2[1](m2[0](x2)).detach()))),
        ("L2 = shared(O1, O2) + own(O2)", two_losses(o1, o2)[1]),
    ]
    return cases, named_parameters(M1=m1, M2=m2)


def _graph_states(loss: torch.Tensor, params: Dict[str, torch.Tensor]) -> Dict[State, int]:
    return count_states(saved_tensors(loss, params))


def _reference(loss: torch.Tensor, params: Dict[str, torch.Tensor]) -> Set[str]:
    grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True, retain_graph=True)
    return {name for name, grad in zip(params, grads) if grad is not None}


def _as_names(result: Any) -> Set[str]:
    if isinstance(result, (str, dict)) or not isinstance(result, (set, frozenset, list, tuple)):
        raise TypeError(tr("a set of names, not {kind}", kind=type(result).__name__))
    items = list(result)
    if any(isinstance(item, torch.Tensor) for item in items):
        raise TypeError(tr("names (strings like 'M1.0.weight'), not the parameter tensors themselves"))
    return {str(item) for item in items}


def _state_problem(loss: torch.Tensor, params: Dict[str, torch.Tensor], states: Dict[State, int],
                   before: Snapshot, global_settings: tuple) -> Optional[str]:
    """What the call changed that it should only have read, or None."""
    problem = settings_change(global_settings)  # first: it also puts the settings back
    if problem is not None:
        return tr("Your function {problem}: it should only read the graph.", problem=problem)
    problem = grad_change(list(params), list(params.values()), [None] * len(params))
    if problem is not None:
        return tr("Your function {problem}: it ran a backward, which adds into .grad. Only read the graph: follow "
                  "next_functions from loss.grad_fn.", problem=problem)
    if _graph_states(loss, params) != states:
        return tr("Your function freed the saved tensors of the loss's graph: a backward (or torch.autograd.grad) "
                  "without retain_graph=True ran through it, so the caller's own loss.backward() would now raise "
                  "error 1. Only read the graph: follow next_functions from loss.grad_fn.")
    problem = changed(before, {}, {marked("M1 and M2"): _Modules(params)}, {})
    if problem is not None:
        return tr("Your function {problem}: it should only read the graph.", problem=problem)
    return None


class _Modules(torch.nn.Module):
    """The named parameters as one module, so ``changed`` can see their flags."""

    def __init__(self, params: Dict[str, torch.Tensor]) -> None:
        super().__init__()
        self._list = torch.nn.ParameterList([p for p in params.values() if isinstance(p, torch.nn.Parameter)])


def _wrong_names(description: str, names: Set[str], expected: Set[str], answers: List[Tuple[str, Set[str]]]) -> str:
    """What is missing or extra, and whether the same answer came back for an earlier loss."""
    missing, extra = sorted(expected - names), sorted(names - expected)
    if missing and any(n.startswith("M2") for n in missing):
        text = tr("For {loss}, your answer misses {names}, which the graph does reach. The shared term connects L1 "
                  "to M2. Do you follow every entry of next_functions?", loss=description, names=", ".join(missing))
    elif missing:
        text = tr("For {loss}, your answer misses {names}, which the graph does reach. Do you follow every entry of "
                  "next_functions?", loss=description, names=", ".join(missing))
    else:
        text = tr("For {loss}, your answer includes {names}, which this loss never reaches (it does not use them, or "
                  "only through detach()). Walk the graph itself.", loss=description, names=", ".join(extra))
    for earlier, earlier_names in answers:
        if names == earlier_names:
            return tr("{diagnosis} Your function gave exactly the answer it gave for {earlier}: does it remember an "
                      "earlier call (a cache, a global, a default argument), or not look at the loss at all? Walk "
                      "this loss's own graph on every call.", diagnosis=text, earlier=earlier)
    return text


def check_parameters_reached(parameters_reached: Callable[..., Any]) -> CheckResult:
    """Run the learner's ``parameters_reached(loss, named_params)`` on five losses that share one pair of models and
    one dict of parameters; compare, and check the graph and every .grad are left as they were."""
    cases, params = _cases(seed=11)
    answers: List[Tuple[str, Set[str]]] = []
    for description, loss in cases:
        expected = _reference(loss, params)
        states = _graph_states(loss, params)
        before, global_settings = snapshot({}, {marked("M1 and M2"): _Modules(params)}, {}), settings()
        try:
            result = run_learner(tr("Your function (on {loss})", loss=description), parameters_reached, loss,
                                 params)
        except LearnerError as error:
            if "Boolean value of Tensor" in error.diagnosis:
                diagnosis = tr("{diagnosis} To find a tensor among others, compare identities: `variable is param`, "
                               "or look up id(variable).", diagnosis=error.diagnosis)
                raise LearnerError(diagnosis) from error
            raise
        problem = _state_problem(loss, params, states, before, global_settings)
        if problem is not None:
            return failed(EXERCISE_ID, tr("On {loss}: {problem}", loss=description, problem=problem))
        try:
            names = _as_names(result)
        except TypeError as problem:
            return failed(EXERCISE_ID, tr("Your function should return {problem}.", problem=str(problem)))
        if names != expected:
            return failed(EXERCISE_ID, _wrong_names(description, names, expected, answers))
        answers.append((description, names))
    return passed(EXERCISE_ID, tr("Right for all five losses - including L1, which reaches M2 through the shared "
                                  "term - and the graph and every .grad were left as they were."))


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="parameters_reached",
    checker=check_parameters_reached,
    hints=HINTS,
    contract=CONTRACT,
)
