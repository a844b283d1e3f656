"""Exercise of notebook 06, case 5: one multi-task step, a shared trunk and two heads, three optimizers.

Fixed contract: ``multitask_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b)`` returns nothing;
``opt_trunk`` holds only the trunk, ``opt_a`` only head A, ``opt_b`` only head B. With ``feats = trunk(x)``,
``loss_a = mse_loss(head_a(feats), y_a)`` and ``loss_b = cross_entropy(head_b(feats), y_b)``: the trunk is stepped
once with the gradient of ``loss_a + loss_b``, each head with its own loss's gradient, all at the weights the step
started from. The checker steps the learner's function with optimizers that record the gradients they are stepped
with, and compares those with plain-torch gradients on copies of the models.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from helpers.course.exercises.compare import added, close, flattened, same_gradients, scale_factor
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_step
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson06_bug_clinic.multitask import (
    make_batch,
    make_multitask_model,
    reference_gradients,
    relative_error,
)
from helpers.course.recording import RecordingSGD

EXERCISE_ID = "multitask_step"
STEPS = 3
LEARNING_RATE = 0.1
SEED = 51
PARTS = ("trunk", "head_a", "head_b")
NAMES = {"trunk": "the trunk", "head_a": "head A", "head_b": "head B"}

HINTS = (
    "A right step moves the trunk once, with the gradient of loss_a + loss_b, and each head with its own loss's "
    "gradient, all taken at the weights the step started from. Two backward passes through one forward raise "
    "error 1; retain_graph=True with a step in between raises error 2; a second forward after a step runs, but "
    "gives gradients at weights that have already moved.",
    "Both losses pass through the trunk, so the trunk's gradient is the sum of both tasks' gradients, and it must "
    "be complete before the trunk's optimizer steps. Stepping the trunk between the two backward passes changes "
    "the weights that the second backward still needs (or, after a second forward, that it is computed at).",
    "Zero all three optimizers; run the trunk once and both heads on its features; one backward of the sum of "
    "the two losses (both should train the trunk); then step each optimizer once. Each parameter belongs to exactly "
    "one optimizer.",
)

Step = Callable[..., Any]
Grads = List[torch.Tensor]
Records = List[Optional[torch.Tensor]]


def _weights(module: nn.Module) -> List[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def _at(module: nn.Module, weights: Sequence[torch.Tensor]) -> nn.Module:
    """A copy of ``module`` holding ``weights``."""
    twin = copy.deepcopy(module)
    with torch.no_grad():
        for param, weight in zip(twin.parameters(), weights):
            param.copy_(weight)
    return twin


def _gradients(weights: Dict[str, Sequence[torch.Tensor]], modules: Dict[str, nn.Module],
               batch: Tuple[torch.Tensor, ...]) -> Dict[str, Grads]:
    """``reference_gradients`` on copies of the models holding ``weights``."""
    copies = [_at(modules[part], weights[part]) for part in PARTS]
    return reference_gradients(*copies, *batch)


def _empty(records: Records) -> bool:
    return all(g is None or not bool(g.abs().sum()) for g in records)


def _task_mix(records: Records, task_a: Grads, task_b: Grads) -> Optional[Tuple[float, float]]:
    """``(alpha, beta)`` when ``records`` is ``alpha * task_a + beta * task_b``; else None."""
    got, a, b = flattened(records, task_a), flattened(task_a, task_a), flattened(task_b, task_b)
    gram = torch.tensor([[a.dot(a), a.dot(b)], [a.dot(b), b.dot(b)]], dtype=torch.float64)
    rhs = torch.tensor([a.dot(got), b.dot(got)], dtype=torch.float64)
    if abs(float(torch.linalg.det(gram))) < 1e-12:
        return None
    alpha, beta = (float(v) for v in torch.linalg.solve(gram, rhs))
    return (alpha, beta) if close(got, alpha * a + beta * b) else None


def _mix_words(alpha: float, beta: float) -> str:
    return f"{alpha:.3g} x task A's gradient + {beta:.3g} x task B's"


def _diagnose_trunk(recorded: Records, now: Dict[str, Grads], previous_record: Optional[Records],
                    previous_wanted: Optional[Grads], step: int) -> str:
    if _empty(recorded):
        return (f"On step {step}, the trunk was stepped with an empty gradient. Call zero_grad() before the "
                "backward pass, not between backward() and step(), and don't detach feats from both heads.")
    if previous_wanted is not None and same_gradients(recorded, previous_wanted):
        return (f"On step {step}, the trunk was stepped with the previous step's gradient: compute this step's "
                "gradients before stepping.")
    if previous_record is not None and same_gradients(recorded, added(now["trunk"], previous_record)):
        return (f"On step {step}, the trunk's gradient still contained the previous step's: gradients pile up in "
                ".grad. Call zero_grad() on every optimizer (opt_trunk too) at the start of each step.")
    mix = _task_mix(recorded, now["trunk<-a"], now["trunk<-b"])
    if mix is not None and close(torch.tensor(mix), torch.tensor([1.0, 0.0]), atol=1e-3):
        return (f"On step {step}, the trunk was stepped with task A's gradient only: loss_b never reached the trunk. "
                "A feats.detach() for head B, or backward(inputs=...) that leaves out the trunk, silences the "
                "error this way, and then task B no longer trains the shared features. The trunk needs the "
                "gradient of loss_a + loss_b.")
    if mix is not None and close(torch.tensor(mix), torch.tensor([0.0, 1.0]), atol=1e-3):
        return (f"On step {step}, the trunk was stepped with task B's gradient only: loss_a never reached the trunk "
                "(a detach, or backward(inputs=...) that leaves out the trunk?). The trunk needs the gradient of "
                "loss_a + loss_b.")
    if mix is not None:
        return (f"On step {step}, the trunk was stepped with {_mix_words(*mix)}. The contract is the plain sum "
                "loss_a + loss_b (1 x each): no task weights, no average.")
    return (f"On step {step}, the trunk's gradient differs from the gradient of loss_a + loss_b at the weights the "
            f"step started from (relative error {relative_error(recorded, now['trunk']):.1%}). Compute both "
            "losses from one forward pass, and run every backward before any step.")


def _diagnose_head(part: str, recorded: Records, now: Dict[str, Grads], moved: Dict[str, Grads],
                   previous_record: Optional[Records], previous_wanted: Optional[Grads], step: int) -> str:
    head, loss = NAMES[part], ("loss_a" if part == "head_a" else "loss_b")
    wanted = now[part]
    if _empty(recorded):
        return (f"On step {step}, {head} was stepped with an empty gradient. Call zero_grad() before the backward "
                f"pass, not between backward() and step(), and make sure {loss} reaches {head}.")
    if previous_wanted is not None and same_gradients(recorded, previous_wanted):
        return (f"On step {step}, {head} was stepped with the previous step's gradient: compute this step's "
                "gradients before stepping.")
    if previous_record is not None and same_gradients(recorded, added(wanted, previous_record)):
        return (f"On step {step}, {head}'s gradient still contained the previous step's: gradients pile up in "
                f".grad. Call zero_grad() on every optimizer at the start of each step.")
    if same_gradients(recorded, moved[part]):
        return (f"On step {step}, {head}'s gradient of {loss} was taken at the trunk after opt_trunk.step() had "
                "moved it (a second forward pass after stepping?). Take every gradient before any step.")
    factor = scale_factor(flattened(recorded, wanted), flattened(wanted, wanted))
    if factor is not None:
        return (f"On step {step}, {head} was stepped with {factor:.3g} times the gradient of {loss}. "
                "The contract is the plain sum loss_a + loss_b: no task weights, no average.")
    return (f"On step {step}, {head}'s gradient differs from the gradient of {loss} at the weights the step started "
            f"from (relative error {relative_error(recorded, wanted):.1%}).")


def _diagnose_trunk_steps(records: List[Records], start: Dict[str, Grads], modules: Dict[str, nn.Module],
                          batch: Tuple[torch.Tensor, ...], now: Dict[str, Grads], step: int) -> str:
    """The trunk's optimizer stepped more than once: say whether it was once per task, the second at moved weights."""
    calls = len(records)
    if calls == 2:
        moved_trunk = [w - LEARNING_RATE * (torch.zeros_like(w) if g is None else g)
                       for w, g in zip(start["trunk"], records[0])]
        then = _gradients({**start, "trunk": moved_trunk}, modules, batch)
        for first, second in (("a", "b"), ("b", "a")):
            if same_gradients(records[0], now[f"trunk<-{first}"]) and \
                    same_gradients(records[1], then[f"trunk<-{second}"]):
                first_task, second_task = f"task {first.upper()}", f"task {second.upper()}"
                return (f"On step {step}, the trunk's optimizer was stepped 2 times: first with {first_task}'s "
                        f"gradient, then with {second_task}'s gradient taken at the trunk the first step had already "
                        "moved (a second forward pass after stepping). That is not one step with the gradient of "
                        "loss_a + loss_b: with Adam or momentum each step has its own size, and the second gradient "
                        "is taken at the wrong weights. Run both backward passes first, then step the trunk once.")
    return (f"On step {step}, the trunk's optimizer was stepped {calls} times; each optimizer should step exactly "
            "once per training step, the trunk with the gradient of loss_a + loss_b.")


_ERROR_EXPLANATIONS = {  # what error 1 or 2 means in this exercise
    "inplace-version": (
        "The trunk was stepped (in place) while a later backward still needed its old weights: "
        "retain_graph=True keeps the saved tensors, not the weights they were saved from. Run every "
        "backward, or one backward of loss_a + loss_b, before any step."
    ),
    "backward-twice": (
        "The first backward freed the trunk's part of the graph, which the second backward needs too: "
        "add the two losses and call backward() once."
    ),
}


def _check(step_function: Step) -> Optional[str]:
    """Run the learner's step for several consecutive steps; the diagnosis, or None if right."""
    trunk, head_a, head_b = make_multitask_model(seed=SEED)
    modules = {"trunk": trunk, "head_a": head_a, "head_b": head_b}
    optimizers = {part: RecordingSGD(modules[part].parameters(), lr=LEARNING_RATE) for part in PARTS}
    previous_record: Dict[str, Optional[Records]] = {part: None for part in PARTS}
    previous_now: Optional[Dict[str, Grads]] = None
    for step in range(1, STEPS + 1):
        batch = make_batch(seed=SEED + step)
        start = {part: _weights(modules[part]) for part in PARTS}
        now = _gradients(start, modules, batch)
        counts = {part: len(optimizers[part].records) for part in PARTS}
        run_step(step_function, step, trunk, head_a, head_b, *optimizers.values(), *batch,
                 explanations=_ERROR_EXPLANATIONS)
        new = {part: optimizers[part].records[counts[part]:] for part in PARTS}
        if len(new["trunk"]) > 1:
            return _diagnose_trunk_steps(new["trunk"], start, modules, batch, now, step)
        for part in PARTS:
            if len(new[part]) != 1:
                what = "never stepped" if not new[part] else f"stepped {len(new[part])} times"
                return (f"On step {step}, {NAMES[part]}'s optimizer was {what}; each optimizer should step exactly "
                        "once per training step.")
        for part in PARTS:
            expected_after = [w - LEARNING_RATE * (torch.zeros_like(w) if g is None else g)
                              for w, g in zip(start[part], new[part][0])]
            if not all(close(p.detach(), e) for p, e in zip(modules[part].parameters(), expected_after)):
                return (f"On step {step}, {NAMES[part]}'s parameters changed other than through its optimizer's "
                        "step(). Change weights only with opt.step().")
        moved = _gradients({**start, "trunk": _weights(trunk)}, modules, batch)
        for part in PARTS:
            recorded = new[part][0]
            if same_gradients(recorded, now[part]):
                continue
            previous_wanted = previous_now[part] if previous_now is not None else None
            if part == "trunk":
                return _diagnose_trunk(recorded, now, previous_record[part], previous_wanted, step)
            return _diagnose_head(part, recorded, now, moved, previous_record[part], previous_wanted, step)
        previous_record = {part: new[part][0] for part in PARTS}
        previous_now = now
    return None


def check_multitask_step(step_function: Step) -> CheckResult:
    """Run the learner's step for several consecutive steps and compare every optimizer's gradient."""
    diagnosis = _check(step_function)
    if diagnosis is not None:
        return failed(EXERCISE_ID, diagnosis)
    return passed(EXERCISE_ID, f"For {STEPS} consecutive steps, the trunk was stepped once with exactly the gradient "
                               "of loss_a + loss_b, head A with the gradient of loss_a and head B with the gradient "
                               "of loss_b, all taken at the weights the step started from.")


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="multitask_step",
    checker=check_multitask_step,
    hints=HINTS,
)
