"""Exercise of notebook 04: one training step in which L1 trains only M1 and L2 trains only M2.

Fixed contract: ``step(m1, m2, opt1, opt2, x1, x2, losses)``; ``losses(o1, o2)`` returns ``(l1, l2)``.
The checker steps the learner's function with optimizers that record the gradient they are stepped with,
so it compares gradients themselves, not only their effect.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from helpers.course.exercises.compare import added, close, flattened, same_gradients, scale_factor
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_step
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.models import make_inputs, make_two_models, two_losses
from helpers.course.recording import LEARNING_RATE, RecordingSGD
from helpers.tools.gradients import gradients_of

EXERCISE_ID = "two_model_step"
STEPS = 3

HINTS = (
    "A right step gives M1 exactly the gradient of L1 for M1's parameters and M2 exactly the gradient of L2 for "
    "M2's, both computed before either model changes - and the same again on the next step.",
    "loss.backward() adds into .grad of every parameter the loss reaches, and L1 reaches M2 through the shared "
    "term. Stepping a model before another backward passes through it changes weights that backward still needs.",
    "Zero both optimizers, one forward pass through both models, then two backward passes before any step: "
    "each one restricted to its own model with inputs=, the first one keeping the graph (retain_graph=True). Then step "
    "both. Other shapes of the same fix: torch.autograd.grad per model, or each loss reading the other model's output "
    "detached.",
)


Losses = Callable[[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor]]


def checker_losses(o1: torch.Tensor, o2: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Two losses sharing both outputs, deliberately asymmetric: swapping o1 and o2 changes them."""
    l1 = (o1 - o2).pow(2).mean() + (o1 - 1).pow(2).mean()
    l2 = (o2 - 0.5 * o1).pow(2).mean() + (o2 + 1).pow(2).mean()
    return l1, l2




def _candidates(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor,
                losses: Losses) -> Dict[str, List[torch.Tensor]]:
    """Every gradient a model could plausibly be stepped with, computed on copies at the current parameters."""
    c1, c2 = copy.deepcopy(m1), copy.deepcopy(m2)
    l1, l2 = losses(c1(x1), c2(x2))
    return {"L1->M1": gradients_of(l1, c1), "L2->M1": gradients_of(l2, c1), "sum->M1": gradients_of(l1 + l2, c1),
            "L1->M2": gradients_of(l1, c2), "L2->M2": gradients_of(l2, c2), "sum->M2": gradients_of(l1 + l2, c2)}


def _diagnose(model: str, recorded: List[Optional[torch.Tensor]], cand: Dict[str, List[torch.Tensor]],
              previous: Optional[List[Optional[torch.Tensor]]], previous_own: Optional[List[torch.Tensor]],
              gradient_computed: bool, step: int) -> str:
    own, other = ("L1", "L2") if model == "M1" else ("L2", "L1")
    if all(g is None or not bool(g.abs().sum()) for g in recorded):
        if gradient_computed:
            return (f"On step {step}, a gradient for {model} was computed, but .grad was empty when its optimizer "
                    "stepped: call zero_grad() before backward(), and step() after it.")
        return (f"On step {step}, {model} was stepped with no gradient at all. Did a detach cut {model}'s own "
                f"output out of {own}? Detach only the other model's output.")
    if previous_own is not None and same_gradients(recorded, previous_own):
        return (f"On step {step}, {model} was stepped with the previous step's gradient: compute this step's "
                "gradients before stepping.")
    if same_gradients(recorded, cand[f"sum->{model}"]):
        return (f"On step {step}, {model} was stepped with the gradient of L1 + L2, not of {own}: backward() on "
                f"both losses adds both into every model they reach - the copied fix and the summed loss do this. "
                f"Restrict each loss to its own model (inputs=, autograd.grad, or detach the other output).")
    if same_gradients(recorded, cand[f"{other}->{model}"]):
        return (f"On step {step}, {model} was stepped with the gradient of {other} instead of {own}: the "
                "assignment is swapped (or the detach is on the wrong output).")
    if previous is not None and (same_gradients(recorded, added(cand[f"{own}->{model}"], previous))
                                 or same_gradients(recorded, added(cand[f"sum->{model}"], previous))):
        return (f"On step {step}, {model}'s gradient still contained the previous step's: gradients pile up. "
                "Call zero_grad() on both optimizers at the start of each step.")
    expected = cand[f"{own}->{model}"]
    factor = scale_factor(flattened(recorded, expected), flattened(expected, expected))
    if factor is not None:
        return (f"On step {step}, {model} was stepped with {factor:.3g} times the gradient of {own}. "
                "Did you scale the loss, clip the gradient, or average it?")
    return (f"On step {step}, {model}'s gradient differs from the gradient of {own} at the current parameters. "
            "Compute both gradients before either model changes, and use the losses you are given.")


_ERROR_EXPLANATIONS = {  # what error 1 or 2 (or a GradScaler error) means in this exercise
    "inplace-version": (
        "A model was stepped while a later backward still needed its old weights: run every backward "
        "before any step."
    ),
    "backward-twice": (
        "The first backward freed the shared graph: keep it with retain_graph=True, or detach so each "
        "loss has its own."
    ),
}


def _check_with(step_function: Callable[..., Any], losses: Losses) -> Optional[str]:
    """Run the learner's step for several consecutive steps with ``losses``; the diagnosis, or None if right."""
    m1, m2 = make_two_models(seed=31)
    opt1, opt2 = RecordingSGD(m1.parameters()), RecordingSGD(m2.parameters())
    previous: Dict[str, Optional[List[Optional[torch.Tensor]]]] = {"M1": None, "M2": None}
    previous_cand: Optional[Dict[str, List[torch.Tensor]]] = None
    for step in range(1, STEPS + 1):
        x1, x2 = make_inputs(seed=31 + step)
        cand = _candidates(m1, m2, x1, x2, losses)
        counts = (len(opt1.records), len(opt2.records))
        before = [p.detach().clone() for p in (*m1.parameters(), *m2.parameters())]
        computed: set = set()  # models for which some backward computed a gradient this step
        hooks = [p.register_hook(lambda grad, model=model: computed.add(model))
                 for model, network in (("M1", m1), ("M2", m2)) for p in network.parameters()]
        try:
            run_step(step_function, step, m1, m2, opt1, opt2, x1, x2, losses, explanations=_ERROR_EXPLANATIONS)
        finally:
            for hook in hooks:
                hook.remove()
        for model, optimizer, count in (("M1", opt1, counts[0]), ("M2", opt2, counts[1])):
            calls = len(optimizer.records) - count
            if calls != 1:
                what = "never stepped" if calls == 0 else f"stepped {calls} times"
                return f"On step {step}, {model}'s optimizer was {what}; each step should step each optimizer exactly once."
        expected_after = [b - LEARNING_RATE * (torch.zeros_like(b) if g is None else g)
                          for b, g in zip(before, opt1.records[-1] + opt2.records[-1])]
        actual_after = [p.detach() for p in (*m1.parameters(), *m2.parameters())]
        if not all(close(a, e) for a, e in zip(actual_after, expected_after)):
            return (f"On step {step}, the parameters changed other than through the optimizers' step(). "
                    "Change weights only with opt.step().")
        for model, optimizer in (("M1", opt1), ("M2", opt2)):
            own = "L1" if model == "M1" else "L2"
            recorded = optimizer.records[-1]
            if not same_gradients(recorded, cand[f"{own}->{model}"]):
                previous_own = previous_cand[f"{own}->{model}"] if previous_cand is not None else None
                return _diagnose(model, recorded, cand, previous[model], previous_own, model in computed, step)
            previous[model] = recorded
        previous_cand = cand
    return None


LOSS_PAIRS: Dict[str, Losses] = {
    "losses that share one term (the course's two_losses)": two_losses,
    "asymmetric losses (swapping o1 and o2 changes them)": checker_losses,
}


def check_two_model_step(step_function: Callable[..., Any]) -> CheckResult:
    """Run the learner's step on two pairs of losses, each for several consecutive steps, and compare gradients."""
    for description, losses in LOSS_PAIRS.items():
        diagnosis = _check_with(step_function, losses)
        if diagnosis is not None:
            return failed(EXERCISE_ID, f"With {description}: {diagnosis}")
    return passed(EXERCISE_ID, f"For {STEPS} consecutive steps, with two different pairs of losses, M1 was stepped "
                               "with exactly the gradient of L1 and M2 with exactly the gradient of L2, both taken "
                               "before either model changed.")


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="two_model_step",
    checker=check_two_model_step,
    hints=HINTS,
)
