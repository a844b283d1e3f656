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

from helpers.course.device import pick_device
from helpers.course.exercises.compare import added, flattened, near_gradients, scale_factor
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_step
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson05_chained_amp.chain import (
    chain_losses,
    fused_adamw_supported,
    make_batch,
    make_tenc,
    make_unet,
)

EXERCISE_ID = "chained_amp_step"
STEPS = 3
TOLERANCE = 1e-3  # relative, by norm, for a pass
DIAGNOSIS_TOLERANCE = 2e-2  # for naming a wrong answer: low precision rounds differently in other orders
SCALE = 2.0  # the GradScaler's scale: leftover gradients stay visible, unscaled ones show as half

HINTS = (
    "A right step gives tenc exactly the gradient of loss_tenc and unet exactly the gradient of loss_unet, with "
    "no error 1, and calls scaler.update() once.",
    "The path from loss_tenc back to tenc runs through unet. So a first backward restricted to tenc's parameters "
    "still passes through unet and frees unet's saved tensors, unless you keep them.",
    "Zero both optimizers; one forward pass under torch.autocast(x.device.type); two backward passes of "
    "scaled losses (scaler.scale), each restricted with inputs= to its own module, the first keeping the graph; then "
    "scaler.step for each optimizer, and scaler.update() once, last.",
)


class RecordingAdamW(torch.optim.AdamW):
    """AdamW that remembers, for every step, the (unscaled) gradients it was stepped with, and logs the step."""

    def __init__(self, params: Any, name: str, events: List[str], **kwargs: Any) -> None:
        super().__init__(params, **kwargs)
        self.name, self.events = name, events
        self.records: List[List[Optional[torch.Tensor]]] = []

    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        scale = getattr(self, "grad_scale", None)  # set by GradScaler.step for fused optimizers
        divisor = float(scale) if scale is not None else 1.0
        self.records.append([None if p.grad is None else p.grad.detach().float() / divisor
                             for group in self.param_groups for p in group["params"]])
        self.events.append(f"step {self.name}")
        return super().step(closure)


class CountingGradScaler(torch.amp.GradScaler):
    """A GradScaler at a small fixed scale (leftover gradients stay visible) that logs its update() calls."""

    def __init__(self, device: str, events: List[str]) -> None:
        super().__init__(device, init_scale=SCALE, growth_interval=10**6)
        self.events = events

    def update(self, new_scale: Any = None) -> None:
        self.events.append("update")
        super().update(new_scale)


def _autocast_on(device_type: str) -> bool:
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4 has no device argument
        return torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled()


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


def _near(recorded: List[Optional[torch.Tensor]], expected: List[torch.Tensor]) -> bool:
    return near_gradients(recorded, expected, DIAGNOSIS_TOLERANCE)


def _diagnose(module: str, recorded: List[Optional[torch.Tensor]], cand: Dict[str, List[torch.Tensor]],
              previous: Optional[List[Optional[torch.Tensor]]], step: int) -> str:
    own, other = ("loss_tenc", "loss_unet") if module == "tenc" else ("loss_unet", "loss_tenc")
    expected = cand[f"own {module}"]
    if all(g is None or not bool(g.abs().sum()) for g in recorded):
        return f"On step {step}, {module} was stepped with no gradient at all."
    if _near(recorded, cand[f"sum {module}"]):
        return (f"On step {step}, {module} was stepped with the gradient of loss_tenc + loss_unet, not of {own}: "
                f"restrict each backward to its module with inputs= (or use torch.autograd.grad).")
    if _near(recorded, cand[f"other {module}"]):
        return f"On step {step}, {module} was stepped with the gradient of {other}: the ownership is swapped."
    if previous is not None and any(_near(recorded, added(expected, [p / divisor for p in previous]))
                                    for divisor in (1.0, SCALE)):
        return (f"On step {step}, {module}'s gradient still held the previous step's: call zero_grad() on both "
                "optimizers at the start of each step.")
    factor = scale_factor(flattened(recorded, expected), flattened(expected, expected))
    if factor is not None and abs(factor - SCALE) < 1e-3:
        return (f"On step {step}, {module} was stepped with gradients still multiplied by the scaler's scale: "
                "step through scaler.step(optimizer), which unscales them, not optimizer.step().")
    if factor is not None:
        return (f"On step {step}, {module} was stepped with {factor:.3g} times the gradient of {own}: did you scale "
                "the loss, or clip the gradient too hard?")
    return (f"On step {step}, {module}'s gradient differs from the gradient of {own}. Run the forward pass under "
            "torch.autocast(x.device.type) and compute every gradient before any module changes.")


_ERROR_EXPLANATIONS = {  # what error 1 or 2 (or a GradScaler error) means in this exercise
    "backward-twice": (
        "The path from loss_tenc to tenc runs through unet, so the first backward freed unet's part "
        "of the graph: pass retain_graph=True to it."
    ),
    "No inf checks were recorded prior to update": (
        "scaler.update() found no scaler.step() since the last update: a second update() in one step, "
        "or optimizer.step() instead of scaler.step(optimizer). Step both through the scaler, then "
        "update() once."
    ),
    "No inf checks were recorded for this optimizer": (
        "scaler.step() found no gradients: did zero_grad() run between backward and scaler.step?"
    ),
    "inplace-version": (
        "unet was stepped before tenc's backward, which passes through unet's weights: step unet "
        "after it."
    ),
}


def _order_problem(events: List[str], step: int) -> Optional[str]:
    """What is wrong with the order of this step's events, if anything."""
    if events.count("update") != 1:
        return (f"On step {step}, scaler.update() was called {events.count('update')} times; call it exactly once "
                "per step, after both optimizers stepped.")
    for module in ("tenc", "unet"):
        calls = events.count(f"step {module}")
        if calls != 1:
            what = "never stepped" if calls == 0 else f"stepped {calls} times"
            return (f"On step {step}, {module}'s optimizer was {what}; step each optimizer once per step, through "
                    "scaler.step(optimizer).")
    if events.index("update") < max(events.index("step tenc"), events.index("step unet")):
        return f"On step {step}, scaler.update() ran before both optimizers had stepped: call it last."
    if "tenc gradient" in events and events.index("step unet") < len(events) - 1 - events[::-1].index("tenc gradient"):
        return (f"On step {step}, unet was stepped before tenc's backward, which passes through unet and needs "
                "its weights as they were (GroupNorm's weight is saved as it is, under autocast too). That is error "
                "2 or, with an optimizer that bumps no version, a wrong gradient. Step unet after every backward.")
    return None


def check_chained_amp_step(step_function: Callable[..., Any], device: Optional[torch.device] = None) -> CheckResult:
    """Run the learner's step several times on fresh modules and compare the gradients each optimizer used."""
    device = device or pick_device()
    tenc, unet = make_tenc(41, device), make_unet(42, device)
    fused = fused_adamw_supported(device)
    events: List[str] = []
    opt_tenc = RecordingAdamW(tenc.parameters(), "tenc", events, lr=1e-3, weight_decay=1e-3, fused=fused)
    opt_unet = RecordingAdamW(unet.parameters(), "unet", events, lr=1e-2, weight_decay=1e-2, fused=fused)
    scaler = CountingGradScaler(device.type, events)
    forward_modes: List[bool] = []
    hooks = [unet.register_forward_pre_hook(lambda _m, _i: forward_modes.append(_autocast_on(device.type)))]
    hooks += [p.register_hook(lambda grad: events.append("tenc gradient")) for p in tenc.parameters()]
    previous: Dict[str, Optional[List[Optional[torch.Tensor]]]] = {"tenc": None, "unet": None}
    try:
        for step in range(1, STEPS + 1):
            x, target, mask = make_batch(seed=40 + step, device=device)
            cand = _candidates(tenc, unet, x, target, mask)
            events.clear()
            forward_modes.clear()
            run_step(step_function, step, tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask,
                     explanations=_ERROR_EXPLANATIONS)
            if not forward_modes or not all(forward_modes):
                return failed(EXERCISE_ID, f"On step {step}, the forward pass ran without autocast: run it inside "
                                           "`with torch.autocast(x.device.type):`.")
            problem = _order_problem(events, step)
            if problem is not None:
                return failed(EXERCISE_ID, problem)
            for module, optimizer in (("tenc", opt_tenc), ("unet", opt_unet)):
                recorded = optimizer.records[-1]
                if not near_gradients(recorded, cand[f"own {module}"], TOLERANCE):
                    return failed(EXERCISE_ID, _diagnose(module, recorded, cand, previous[module], step))
                previous[module] = recorded
    finally:
        for hook in hooks:
            hook.remove()
    kind = "fused AdamW" if fused else "AdamW"
    return passed(EXERCISE_ID, f"For {STEPS} steps on {device.type} ({kind}, GradScaler, autocast), tenc was stepped "
                               "with the gradient of loss_tenc and unet with the gradient of loss_unet (within 0.1%), "
                               "in a safe order.")


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="chained_amp_step",
    checker=check_chained_amp_step,
    hints=HINTS,
)
