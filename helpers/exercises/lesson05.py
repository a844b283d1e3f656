"""Exercise of notebook 05: one mixed-precision step of the chained tenc -> unet case.

Fixed contract: ``step(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask)``. It runs the forward pass under
``torch.autocast(x.device.type)`` itself; ``loss_tenc = loss.mean()`` trains only tenc, ``loss_unet =
(loss * mask).mean()`` only unet, where ``loss`` is the per-element MSE of ``unet(tenc(x))`` against ``target``;
and it calls ``scaler.update()`` exactly once.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional

import torch
from torch import nn

from helpers.chain import chain_losses, fused_adamw_supported, make_batch, make_tenc, make_unet
from helpers.errors import KINDS
from helpers.exercises.compare import added, near_gradients
from helpers.exercises.exercise import Exercise
from helpers.exercises.guard import LearnerError, run_learner
from helpers.exercises.result import CheckResult, failed, passed

EXERCISE_ID = "chained_amp_step"
STEPS = 3
TOLERANCE = 2e-2  # relative, by norm: autocast's low precision rounds differently in differently ordered backwards

HINTS = (
    "A right step gives tenc exactly the gradient of loss_tenc and unet exactly the gradient of loss_unet, with "
    "no error 1, and calls scaler.update() once.",
    "The path from loss_tenc back to tenc runs through unet. So a first backward restricted to tenc's parameters "
    "still passes through unet and frees unet's saved tensors, unless you keep them.",
    "Zero both optimizers; under torch.autocast(x.device.type) compute pred = unet(tenc(x)), the per-element MSE, "
    "and both losses; scaler.scale(loss_tenc).backward(retain_graph=True, inputs=list(tenc.parameters())); "
    "scaler.scale(loss_unet).backward(inputs=list(unet.parameters())); scaler.step each optimizer; "
    "scaler.update() once.",
)


class RecordingAdamW(torch.optim.AdamW):
    """AdamW that remembers, for every step, the (unscaled) gradients it was stepped with."""

    def __init__(self, params: Any, **kwargs: Any) -> None:
        super().__init__(params, **kwargs)
        self.records: List[List[Optional[torch.Tensor]]] = []

    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        scale = getattr(self, "grad_scale", None)  # set by GradScaler.step for fused optimizers
        divisor = float(scale) if scale is not None else 1.0
        self.records.append([None if p.grad is None else p.grad.detach().float() / divisor
                             for group in self.param_groups for p in group["params"]])
        return super().step(closure)


class CountingGradScaler(torch.amp.GradScaler):
    """A GradScaler at scale 1 (so gradients left over from a step stay visible) that counts update() calls."""

    def __init__(self, device: str) -> None:
        super().__init__(device, init_scale=1.0, growth_interval=10**6)
        self.updates = 0

    def update(self, new_scale: Any = None) -> None:
        self.updates += 1
        super().update(new_scale)


def _candidates(tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor,
                mask: torch.Tensor) -> Dict[str, List[torch.Tensor]]:
    t, u = copy.deepcopy(tenc), copy.deepcopy(unet)
    with torch.autocast(x.device.type):
        loss_tenc, loss_unet = chain_losses(u(t(x)), target, mask)

    def grads(loss: torch.Tensor, module: nn.Module) -> List[torch.Tensor]:
        found = torch.autograd.grad(loss, list(module.parameters()), retain_graph=True, allow_unused=True)
        return [torch.zeros_like(p) if g is None else g.float() for p, g in zip(module.parameters(), found)]

    return {"own tenc": grads(loss_tenc, t), "own unet": grads(loss_unet, u),
            "other tenc": grads(loss_unet, t), "other unet": grads(loss_tenc, u),
            "sum tenc": grads(loss_tenc + loss_unet, t), "sum unet": grads(loss_tenc + loss_unet, u)}


def _diagnose(module: str, recorded: List[Optional[torch.Tensor]], cand: Dict[str, List[torch.Tensor]],
              previous: Optional[List[Optional[torch.Tensor]]], step: int) -> str:
    own, other = ("loss_tenc", "loss_unet") if module == "tenc" else ("loss_unet", "loss_tenc")
    if all(g is None or not bool(g.abs().sum()) for g in recorded):
        return f"On step {step}, {module} was stepped with no gradient at all."
    if near_gradients(recorded, cand[f"sum {module}"], TOLERANCE):
        return (f"On step {step}, {module} was stepped with the gradient of loss_tenc + loss_unet, not of {own}: "
                f"restrict each backward to its module with inputs= (or use torch.autograd.grad).")
    if near_gradients(recorded, cand[f"other {module}"], TOLERANCE):
        return f"On step {step}, {module} was stepped with the gradient of {other}: the ownership is swapped."
    if previous is not None and near_gradients(recorded, added(cand[f"own {module}"], previous), TOLERANCE):
        return (f"On step {step}, {module}'s gradient still held the previous step's: call zero_grad() on both "
                "optimizers at the start of each step.")
    return (f"On step {step}, {module}'s gradient differs from the gradient of {own}. Run the forward pass under "
            "torch.autocast(x.device.type) and compute every gradient before any module changes.")


def _run_step(step_function: Callable[..., Any], step: int, *args: Any) -> None:
    try:
        run_learner(f"Your step (step {step})", step_function, *args)
    except LearnerError as error:
        cause = error.__cause__
        if cause is not None and KINDS["backward-twice"].matches(cause):
            raise LearnerError(error.diagnosis + " The path from loss_tenc to tenc runs through unet, so the first "
                                                 "backward freed unet's part of the graph: pass retain_graph=True "
                                                 "to it.") from cause
        if cause is not None and "No inf checks were recorded prior to update" in str(cause):
            raise LearnerError(error.diagnosis + " scaler.update() ran twice in one step (or before any "
                                                 "scaler.step): call it exactly once, after both steps.") from cause
        if cause is not None and KINDS["inplace-version"].matches(cause):
            raise LearnerError(error.diagnosis + " unet was stepped before tenc's backward, which passes through "
                                                 "unet's weights: step unet after it.") from cause
        raise


def check_chained_amp_step(step_function: Callable[..., Any], device: Optional[torch.device] = None) -> CheckResult:
    """Run the learner's step several times on fresh modules and compare the gradients each optimizer used."""
    device = device or torch.device("cpu")
    tenc, unet = make_tenc(41, device), make_unet(42, device)
    fused = fused_adamw_supported(device)
    opt_tenc = RecordingAdamW(tenc.parameters(), lr=1e-3, weight_decay=1e-3, fused=fused)
    opt_unet = RecordingAdamW(unet.parameters(), lr=1e-2, weight_decay=1e-2, fused=fused)
    scaler = CountingGradScaler(device.type)
    previous: Dict[str, Optional[List[Optional[torch.Tensor]]]] = {"tenc": None, "unet": None}
    for step in range(1, STEPS + 1):
        x, target, mask = make_batch(seed=40 + step, device=device)
        cand = _candidates(tenc, unet, x, target, mask)
        counts = (len(opt_tenc.records), len(opt_unet.records), scaler.updates)
        _run_step(step_function, step, tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask)
        updates = scaler.updates - counts[2]
        if updates != 1:
            return failed(EXERCISE_ID, f"On step {step}, scaler.update() was called {updates} times; call it exactly "
                                       "once per step, after both optimizers stepped.")
        for module, optimizer, count in (("tenc", opt_tenc, counts[0]), ("unet", opt_unet, counts[1])):
            calls = len(optimizer.records) - count
            if calls != 1:
                what = "never stepped" if calls == 0 else f"stepped {calls} times"
                return failed(EXERCISE_ID, f"On step {step}, {module}'s optimizer was {what}; step each optimizer "
                                           "once per step, through scaler.step(optimizer).")
            recorded = optimizer.records[-1]
            if not near_gradients(recorded, cand[f"own {module}"], TOLERANCE):
                return failed(EXERCISE_ID, _diagnose(module, recorded, cand, previous[module], step))
            previous[module] = recorded
    kind = "fused AdamW" if fused else "AdamW"
    return passed(EXERCISE_ID, f"For {STEPS} steps ({kind}, GradScaler, autocast), tenc was stepped with exactly the "
                               "gradient of loss_tenc and unet with exactly the gradient of loss_unet.")


EXERCISE = Exercise(
    id=EXERCISE_ID,
    notebook="05_chained_amp",
    answer_name="chained_amp_step",
    checker=check_chained_amp_step,
    hints=HINTS,
)
