"""Exercise of notebook 04: one training step in which L1 trains only M1, L2 only M2, and a third, joint loss
trains both.

Fixed contract: ``step(m1, m2, opt1, opt2, x1, x2, losses)``; ``losses(o1, o2)`` returns ``(l1, l2, l_both)``.
The checker steps the learner's function with real optimizers of several kinds (SGD, Adam, AdamW, fused where
there is one) whose steps are recorded, on one pair of models and one pair of input tensors refilled each step, as a
training loop reuses them. It reads every wrong gradient as a mixture of the three losses' gradients, the previous
step's gradient and the previous batch's, and names what it holds.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from helpers.course.exercises.compare import as_combination, describe_combination, same_gradients
from helpers.course.exercises.engine.step_watch import (
    calls_in,
    changed,
    fill_in_place,
    kind,
    moved_outside_step,
    snapshot,
    watch,
)
from helpers.course.exercises.engine.untouched import settings, settings_change
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_step
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson04_whose_gradient.contract import CONTRACT, Losses, asymmetric_losses, course_losses
from helpers.course.models import make_inputs, make_two_models
from helpers.language import marked, tr, translated
from helpers.tools.gradients import gradients_of

EXERCISE_ID = "two_model_step"
STEPS = 3

HINTS = (
    marked("A right step gives M1 exactly the gradient of L1 + L_both for M1's parameters, and M2 exactly the "
           "gradient of L2 + L_both for M2's, all computed before either model changes - and again on the next step, "
           "with the next batch."),
    marked("loss.backward() adds into .grad of every parameter the loss reaches, and L1 reaches M2 through the shared "
           "term, L2 reaches M1. L_both is meant to reach both. Stepping a model before another backward passes "
           "through it changes weights that backward still needs."),
    marked("Zero both optimizers, one forward pass through both models, then every backward before any step: "
           "restrict the backward of each own loss to its own model's trainable weights with inputs= (a frozen "
           "weight cannot be named there), or use torch.autograd.grad, or detach the other model's output in it; let "
           "the joint loss reach both models, and keep the graph (retain_graph=True) for every backward but the "
           "last. Then step both optimizers you were given."),
)

# description (shown in a diagnosis) -> (losses, optimizer kind for M1, for M2): the kinds vary, so an answer cannot
# rely on plain SGD
RUNS: Dict[str, Tuple[Losses, str, str]] = {
    marked("the course's losses and a joint one, SGD"): (course_losses, "SGD", "SGD"),
    marked("asymmetric losses, AdamW for M1 and Adam for M2"): (asymmetric_losses, "AdamW", "Adam"),
    marked("the course's losses, fused AdamW for M1 and SGD with momentum for M2"): (course_losses, "fused AdamW",
                                                                                       "SGD with momentum"),
}

_ERROR_EXPLANATIONS = {  # what error 1 or 2 means in this exercise (run_step shows it translated)
    "inplace-version": marked(
        "A model was stepped while a later backward still needed its old weights: run every backward "
        "before any step."
    ),
    "backward-twice": marked(
        "A backward freed the shared graph that a later one walks again: keep it with retain_graph=True on every "
        "backward but the last, or detach so each loss has its own."
    ),
}

# the parts a wrong gradient is read as a mixture of, besides the losses' (describe_combination shows them translated)
PREVIOUS_STEP = marked("the previous step's gradient")
PREVIOUS_BATCH = marked("the previous batch's gradient")

Grads = List[Optional[torch.Tensor]]


def _parts(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses,
           model: str) -> Dict[str, List[torch.Tensor]]:
    """The gradient of each loss for ``model``'s parameters, on copies, at the current parameters."""
    c1, c2 = copy.deepcopy(m1), copy.deepcopy(m2)
    l1, l2, both = losses(c1(x1), c2(x2))
    network = c1 if model == "M1" else c2
    return {"L1": gradients_of(l1, network), "L2": gradients_of(l2, network), "L_both": gradients_of(both, network)}


def _expected(parts: Dict[str, List[torch.Tensor]], model: str) -> List[torch.Tensor]:
    own = "L1" if model == "M1" else "L2"
    return [a + b for a, b in zip(parts[own], parts["L_both"])]


def _diagnose(model: str, recorded: Grads, parts: Dict[str, List[torch.Tensor]],
              history: Dict[str, List[torch.Tensor]], computed: bool) -> str:
    """What ``model`` was stepped with, read as a mixture of the gradients it could contain."""
    own, other = ("L1", "L2") if model == "M1" else ("L2", "L1")
    should = f"{own} + L_both"
    if all(g is None or not bool(g.abs().sum()) for g in recorded):
        if computed:
            return tr("{model} was stepped with an empty .grad, although a gradient was computed for it: call "
                      "zero_grad() before the backward passes, and step() after them.", model=model)
        return tr("{model} was stepped with no gradient at all. Did a detach cut {model}'s own output out of "
                  "{should}?", model=model, should=should)
    weights = as_combination(recorded, {**parts, **history})
    if weights is None:
        return tr("{model}'s gradient is not made of this step's losses: compute every gradient at the current "
                  "parameters, from this batch, with the losses you are given ({model} should get {should}).",
                  model=model, should=should)
    got = describe_combination(weights)
    if abs(weights.get(PREVIOUS_STEP, 0)) > 1e-3:
        return tr("{model}'s gradient still contained the previous step's ({got}): gradients pile up. Call "
                  "zero_grad() on both optimizers at the start of each step.", model=model, got=got)
    if abs(weights.get(PREVIOUS_BATCH, 0)) > 1e-3:
        return tr("{model} was stepped with the gradient of the previous batch ({got}): your function remembers an "
                  "earlier call (a cache, a global, a default argument, a closure). Compute from the x1 and x2 it is "
                  "given, every time - a training loop may copy each batch into the same tensors.", model=model,
                  got=got)
    problems = []
    if abs(weights[other]) > 1e-3:
        problems.append(tr("{other} leaked into {model} (through the shared term): restrict {other}'s backward to "
                           "{other_model} (inputs=, autograd.grad, or detach {model}'s output in it)", other=other,
                           model=model, other_model="M2" if model == "M1" else "M1"))
    if abs(weights["L_both"] - 1) > 1e-3 and abs(weights[own] - 1) < 1e-3:
        problems.append(tr("L_both should reach {model} exactly once: the joint loss trains both models", model=model)
                        if abs(weights["L_both"]) > 1e-3 else
                        tr("L_both never reached {model}: the joint loss trains both models, do not restrict or "
                           "detach it", model=model))
    if abs(weights[own] - 1) > 1e-3 and abs(weights[own] - weights["L_both"]) < 1e-3:
        problems.append(tr("everything is {factor} times the reference's (a loss scaled, or averaged instead of "
                           "summed)",
                           factor=f"{weights[own]:.3g}"))
    elif abs(weights[own] - 1) > 1e-3:
        problems.append(tr("{own} should reach {model} exactly once", own=own, model=model))
    return tr("{model} was stepped with {got}, but should get 1 x {own} + 1 x L_both. {problems}.", model=model,
              got=got, own=own, problems=tr("; ").join(problems))


def _check_run(step_function: Callable[..., Any], losses: Losses, kind1: str, kind2: str) -> Optional[str]:
    """Run the learner's step for several consecutive steps; the diagnosis, or None if right."""
    m1, m2 = make_two_models(seed=31)
    opt1, opt2 = kind(kind1)(m1.parameters()), kind(kind2)(m2.parameters())
    records = {"M1": watch(opt1, "M1"), "M2": watch(opt2, "M2")}
    nets = {"M1": m1, "M2": m2}
    x1, x2 = (t.clone() for t in make_inputs(seed=32))
    previous: Dict[str, Optional[Tuple[Grads, Tuple[torch.Tensor, torch.Tensor]]]] = {"M1": None, "M2": None}
    for step in range(1, STEPS + 1):
        if step > 1:
            fill_in_place((x1, x2), make_inputs(seed=31 + step))
        parts = {model: _parts(m1, m2, x1, x2, losses, model) for model in nets}
        counts = {model: len(record.calls) for model, record in records.items()}
        start = [p.detach().clone() for p in (*m1.parameters(), *m2.parameters())]
        before, global_settings = snapshot({"x1": x1, "x2": x2}, nets, {"opt1": opt1, "opt2": opt2}), settings()
        computed: set = set()
        hooks = [p.register_hook(lambda grad, model=model: computed.add(model))
                 for model, network in nets.items() for p in network.parameters()]
        try:
            run_step(step_function, step, m1, m2, opt1, opt2, x1, x2, losses, explanations=_ERROR_EXPLANATIONS)
        finally:
            for hook in hooks:
                hook.remove()
        problem = settings_change(global_settings)  # first: it also puts the settings back
        if problem is not None:
            return tr("On step {step}, your step {problem}.", step=step, problem=problem)
        calls = {model: calls_in(record, counts[model]) for model, record in records.items()}
        for model in nets:
            if len(calls[model]) != 1:
                return _step_count_problem(step, model, len(calls[model]), any(
                    not torch.equal(p.detach(), s) for p, s in zip((*m1.parameters(), *m2.parameters()), start)))
        if _moved_outside(m1, m2, start, calls):
            return tr("On step {step}, the parameters changed other than through the optimizers' step(): an "
                      "optimizer of your own (kept from an earlier call?) or a manual update. Change weights only "
                      "with the step() of the optimizers you are given.", step=step)
        problem = changed(before, {"x1": x1, "x2": x2}, nets, {"opt1": opt1, "opt2": opt2})
        if problem is not None:
            return tr("On step {step}, your step {problem}.", step=step, problem=problem)
        for model in nets:
            recorded = calls[model][0].grads
            expected = _expected(parts[model], model)
            if not same_gradients(recorded, expected):
                history = {}
                if previous[model] is not None:
                    old_grads, old_batch = previous[model]
                    history[PREVIOUS_STEP] = [torch.zeros_like(e) if g is None else g
                                                               for g, e in zip(old_grads, expected)]
                    history[PREVIOUS_BATCH] = _expected(
                        _parts(*_models_at(start, m1, m2), *old_batch, losses, model), model)
                return tr("On step {step}, {diagnosis}", step=step,
                          diagnosis=_diagnose(model, recorded, parts[model], history, model in computed))
            previous[model] = (recorded, (x1.clone(), x2.clone()))
    return None


def _step_count_problem(step: int, model: str, count: int, moved: bool) -> str:
    """``model``'s optimizer stepped ``count`` times (not once) on step ``step``; ``moved``: the weights moved."""
    if count:
        return tr("On step {step}, {model}'s optimizer was stepped {count} times; each step should step each "
                  "optimizer exactly once.", step=step, model=model, count=count)
    if moved:
        return tr("On step {step}, {model}'s optimizer was never stepped; each step should step each optimizer exactly "
                  "once. Yet the weights moved: an optimizer of your own (kept from an earlier call?) or a manual "
                  "update. Step the optimizers you are given.", step=step, model=model)
    return tr("On step {step}, {model}'s optimizer was never stepped; each step should step each optimizer exactly "
              "once.", step=step, model=model)


def _models_at(start: List[torch.Tensor], m1: nn.Module, m2: nn.Module) -> Tuple[nn.Module, nn.Module]:
    """Copies of the two models with the parameters they had at the start of the step."""
    c1, c2 = copy.deepcopy(m1), copy.deepcopy(m2)
    with torch.no_grad():
        for param, value in zip((*c1.parameters(), *c2.parameters()), start):
            param.copy_(value)
    return c1, c2


def _moved_outside(m1: nn.Module, m2: nn.Module, start: List[torch.Tensor], calls: Dict[str, list]) -> bool:
    """True when a model's parameters differ from where its one step left them, or moved before it."""
    offset = len(list(m1.parameters()))
    for model, params, begin in (("M1", list(m1.parameters()), start[:offset]),
                                 ("M2", list(m2.parameters()), start[offset:])):
        if moved_outside_step(params, begin, calls[model]):
            return True
    return False


def check_two_model_step(step_function: Callable[..., Any]) -> CheckResult:
    """Run the learner's step for several steps in each run of RUNS, and compare what each optimizer stepped with."""
    for description, (losses, kind1, kind2) in RUNS.items():
        diagnosis = _check_run(step_function, losses, kind1, kind2)
        if diagnosis is not None:
            return failed(EXERCISE_ID, tr("With {run}: {diagnosis}", run=translated(description),
                                          diagnosis=diagnosis))
    return passed(EXERCISE_ID, tr("For {steps} consecutive steps in each of {runs} runs (two sets of losses; SGD, "
                                  "Adam, AdamW, fused AdamW), M1 was stepped with exactly the gradient of L1 + L_both "
                                  "and M2 with exactly that of L2 + L_both, all taken before either model changed.",
                                  steps=STEPS, runs=len(RUNS)))


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="two_model_step",
    checker=check_two_model_step,
    hints=HINTS,
    contract=CONTRACT,
)
