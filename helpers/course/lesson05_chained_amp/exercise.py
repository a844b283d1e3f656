"""Exercise of notebook 05: one mixed-precision, clipped step of the chained tenc -> unet case, where the
end-to-end loss trains both modules and the masked loss only unet.

Fixed contract: ``step(tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm)``. It runs the forward
pass under ``torch.autocast(x.device.type)`` itself; ``loss`` is the per-element MSE of ``unet(tenc(x))`` against
``target``; ``loss_tenc = loss.mean()`` trains tenc **and** unet, ``loss_unet = (loss * mask).mean()`` only unet;
each module's (unscaled) gradient is clipped to total norm ``max_norm`` with ``clip_grad_norm_``; both optimizers
step through the scaler, and ``scaler.update()`` runs exactly once.

The checker varies the optimizers (fused AdamW where there is one, AdamW, SGD with momentum), refills the same
input tensors each step, and makes one step overflow: an inf in tenc's gradient, where the right answer skips
tenc's step only and the scale shrinks. It reads each gradient a module was stepped with as a mixture of the two
losses' gradients (and of the previous step's and previous batch's) times one factor, and names what the mixture
and the factor say: the ownership, clipping (not done, done before unscale_, done over both modules together), the
scale, a leftover.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from helpers.course.device import pick_device
from helpers.course.exercises.compare import as_combination, describe_combination, near_gradients
from helpers.course.exercises.engine.step_watch import changed, fill_in_place, snapshot
from helpers.course.exercises.engine.untouched import settings, settings_change
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
from helpers.course.lesson05_chained_amp.contract import CONTRACT, autocast_on
from helpers.language import marked, tr, translated

EXERCISE_ID = "chained_amp_step"
STEPS = 3
INF_STEP = 2  # the step whose tenc gradient holds an inf
TOLERANCE = 1e-2  # relative, by norm, for a pass (two correct orders differ by ~0.3% in bfloat16)
SCALE = 4.0  # the GradScaler's scale: a clip before unscale_ and a leftover gradient both stay visible
CLIP_SHARE = 0.5  # max_norm as a share of the smaller module's gradient norm: clipping changes both steps

HINTS = (
    marked("A right step gives tenc the gradient of loss_tenc and unet the gradient of loss_tenc + loss_unet, each "
           "clipped to total norm max_norm after unscaling, with no error 1; calls scaler.update() once; and on a step "
           "where tenc's gradient holds an inf, leaves tenc as it was, steps unet, and the scale shrinks."),
    marked("The path from loss_tenc back to tenc runs through unet, so the first backward passes through unet and "
           "frees its saved tensors unless you keep them. loss_unet reaches tenc too, unless you restrict it. And "
           "clip_grad_norm_ reads whatever .grad holds: before unscale_, that is the gradient times the scale."),
    marked("Zero both optimizers; one forward pass under torch.autocast(x.device.type); the backward of the scaled "
           "loss_tenc reaching both modules and keeping the graph, then the backward of the scaled loss_unet "
           "restricted with inputs= to unet; then, for each optimizer, scaler.unscale_ followed by clip_grad_norm_ on "
           "that module's parameters; then scaler.step for each optimizer (it skips one whose gradients hold inf or "
           "NaN), and scaler.update() once, last."),
)

# the parts a wrong gradient is read as a mixture of, besides the losses' (describe_combination shows them translated)
PREVIOUS_STEP = marked("the previous step's gradient")
PREVIOUS_BATCH = marked("the previous batch's gradient")


class _Recorder:
    """Hooks on a real optimizer (of any kind): each step's gradients, unscaled (fused optimizers get the scale
    from the scaler as ``grad_scale``), and the order of steps in ``events``."""

    def __init__(self, optimizer: torch.optim.Optimizer, name: str, events: List[str]) -> None:
        self.records: List[List[Optional[torch.Tensor]]] = []
        self.name, self.events = name, events
        optimizer.register_step_pre_hook(self._pre)

    def _pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        scale = getattr(optimizer, "grad_scale", None)
        divisor = float(scale) if scale is not None else 1.0
        self.records.append([None if p.grad is None else p.grad.detach().float() / divisor
                             for group in optimizer.param_groups for p in group["params"]])
        self.events.append(f"step {self.name}")


class CountingGradScaler(torch.amp.GradScaler):
    """A GradScaler at a small fixed scale that never grows, and logs its update() calls."""

    def __init__(self, device: str, events: List[str]) -> None:
        super().__init__(device, init_scale=SCALE, growth_interval=10**6)
        self.events = events

    def update(self, new_scale: Any = None) -> None:
        self.events.append("update")
        super().update(new_scale)


Grads = List[torch.Tensor]


def _loss_grads(tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor,
                mask: torch.Tensor) -> Dict[str, Dict[str, Grads]]:
    """module -> {"loss_tenc": its gradient, "loss_unet": its gradient}, on copies, under autocast, unclipped."""
    t, u = copy.deepcopy(tenc), copy.deepcopy(unet)
    with torch.autocast(x.device.type):
        loss_tenc, loss_unet = chain_losses(u(t(x)), target, mask)

    def grads(loss: torch.Tensor, module: nn.Module) -> Grads:
        found = torch.autograd.grad(loss, list(module.parameters()), retain_graph=True, allow_unused=True)
        return [torch.zeros_like(p).float() if g is None else g.float() for p, g in zip(module.parameters(), found)]

    return {"tenc": {"loss_tenc": grads(loss_tenc, t), "loss_unet": grads(loss_unet, t)},
            "unet": {"loss_tenc": grads(loss_tenc, u), "loss_unet": grads(loss_unet, u)}}


def _own(parts: Dict[str, Grads], module: str) -> Grads:
    """The unclipped gradient ``module`` should get: loss_tenc for tenc, loss_tenc + loss_unet for unet."""
    if module == "tenc":
        return parts["loss_tenc"]
    return [a + b for a, b in zip(parts["loss_tenc"], parts["loss_unet"])]


def _norm(grads: List[Optional[torch.Tensor]]) -> float:
    return float(torch.cat([g.flatten() for g in grads if g is not None]).norm()) if any(
        g is not None for g in grads) else 0.0


def _clipped(grads: Grads, max_norm: float) -> Grads:
    factor = min(1.0, max_norm / (_norm(grads) + 1e-6))
    return [g * factor for g in grads]


def _diagnose(module: str, recorded: List[Optional[torch.Tensor]], parts: Dict[str, Grads],
              history: Dict[str, Grads], max_norm: float, joint_norm: float) -> str:
    """What ``module`` was stepped with, read as a mixture of the two losses' gradients times one factor."""
    should = "loss_tenc" if module == "tenc" else "loss_tenc + loss_unet"
    if all(g is None or not bool(g.abs().sum()) for g in recorded):
        return tr("{module} was stepped with no gradient at all (should get {should}).", module=module, should=should)
    weights = as_combination(recorded, {**parts, **history}, tolerance=2e-2)
    if weights is None:
        return tr("{module}'s gradient is not made of this step's losses: run the forward pass under "
                  "torch.autocast(x.device.type) on this batch, and compute every gradient before any module "
                  "changes.", module=module)
    got = describe_combination(weights)
    if abs(weights.get(PREVIOUS_STEP, 0)) > 1e-3:
        return tr("{module}'s gradient still held the previous step's ({got}): call zero_grad() on both optimizers "
                  "at the start of each step.", module=module, got=got)
    if abs(weights.get(PREVIOUS_BATCH, 0)) > 1e-3:
        return tr("{module} was stepped with the gradient of the previous batch ({got}): your function remembers an "
                  "earlier call (a cache, a global, a closure). Use the x, target and mask it is given, every time.",
                  module=module, got=got)
    a, b = weights["loss_tenc"], weights["loss_unet"]
    if module == "tenc" and abs(b) > 1e-3 * max(abs(a), 1e-12):
        return tr("tenc was stepped with {got} (up to clipping), but only loss_tenc trains tenc: loss_unet leaked "
                  "into it. Restrict loss_unet's backward to unet's parameters.", got=got)
    if module == "unet" and abs(a - b) > 2e-2 * max(abs(a), abs(b)):
        if abs(a) < 1e-3 * abs(b):
            return tr("unet was stepped with {got} (up to clipping), but should get loss_tenc + loss_unet: loss_tenc "
                      "never reached unet: loss_tenc trains unet too (end to end): do not restrict its backward to "
                      "tenc.", got=got)
        if abs(b) < 1e-3 * abs(a):
            return tr("unet was stepped with {got} (up to clipping), but should get loss_tenc + loss_unet: loss_unet "
                      "never reached unet: give unet loss_unet's gradient.", got=got)
        return tr("unet was stepped with {got} (up to clipping), but should get loss_tenc + loss_unet: mixed "
                  "unevenly.", got=got)
    own = _own(parts, module)
    norm, got_norm = _norm(own), abs(a) * _norm(own)
    expected_norm = min(norm, max_norm)
    if abs(got_norm - norm) < 1e-2 * norm and norm > max_norm:
        return tr("{module}'s gradient was not clipped: its norm is {norm}, above max_norm = {max_norm}. Clip each "
                  "module's gradient with clip_grad_norm_, after scaler.unscale_ for its optimizer.", module=module,
                  norm=f"{norm:.3g}", max_norm=f"{max_norm:.3g}")
    if abs(got_norm - expected_norm / SCALE) < 1e-2 * expected_norm / SCALE:
        return tr("{module}'s gradient was clipped before it was unscaled: clip_grad_norm_ saw the gradient times the "
                  "scale ({scale}), so after unscaling its norm is {norm}, not {expected}. Call "
                  "scaler.unscale_(optimizer) first, then clip.", module=module, scale=f"{SCALE:g}",
                  norm=f"{got_norm:.3g}", expected=f"{expected_norm:.3g}")
    joint = norm * min(1.0, max_norm / joint_norm)
    if abs(got_norm - joint) < 1e-2 * joint:
        return tr("{module}'s gradient was clipped together with the other module's (one total norm over both): "
                  "clip each module's parameters on their own, to max_norm each.", module=module)
    if abs(got_norm - SCALE * expected_norm) < 1e-2 * SCALE * expected_norm:
        return tr("{module} was stepped with gradients still multiplied by the scaler's scale: step through "
                  "scaler.step(optimizer), after scaler.unscale_(optimizer).", module=module)
    return tr("{module} was stepped with {factor} times the right gradient ({should}, clipped to max_norm): did you "
              "scale a loss, or clip to another norm?", module=module,
              factor=f"{got_norm / max(expected_norm, 1e-12):.3g}", should=should)


_ERROR_EXPLANATIONS = {  # what error 1 or 2 (or a GradScaler error) means here (run_step shows it translated)
    "backward-twice": marked(
        "The path from loss_tenc to tenc runs through unet, so the first backward freed unet's part "
        "of the graph: pass retain_graph=True to it."
    ),
    "No inf checks were recorded prior to update": marked(
        "scaler.update() found no scaler.step() since the last update: a second update() in one step, "
        "or optimizer.step() instead of scaler.step(optimizer). Step both through the scaler, then "
        "update() once."
    ),
    "No inf checks were recorded for this optimizer": marked(
        "scaler.step() found no gradients: did zero_grad() run between backward and scaler.step?"
    ),
    "inplace-version": marked(
        "unet was stepped before tenc's backward, which passes through unet's weights: step unet "
        "after it."
    ),
}


def _order_problem(events: List[str], step: int) -> Optional[str]:
    """What is wrong with the order of this step's events, if anything."""
    if events.count("update") != 1:
        return tr("On step {step}, scaler.update() was called {count} times; call it exactly once per step, after "
                  "both optimizers stepped.", step=step, count=events.count("update"))
    for module in ("tenc", "unet"):
        calls = events.count(f"step {module}")
        if calls == 0:
            return tr("On step {step}, {module}'s optimizer was never stepped; step each optimizer once per step, "
                      "through scaler.step(optimizer).", step=step, module=module)
        if calls != 1:
            return tr("On step {step}, {module}'s optimizer was stepped {count} times; step each optimizer once per "
                      "step, through scaler.step(optimizer).", step=step, module=module, count=calls)
    if events.index("update") < max(events.index("step tenc"), events.index("step unet")):
        return tr("On step {step}, scaler.update() ran before both optimizers had stepped: call it last.", step=step)
    if "tenc gradient" in events and events.index("step unet") < len(events) - 1 - events[::-1].index("tenc gradient"):
        return tr("On step {step}, unet was stepped before tenc's backward, which passes through unet and needs its "
                  "weights as they were (GroupNorm's weight is saved as it is, under autocast too). That is error 2 "
                  "or, with an optimizer that bumps no version, a wrong gradient. Step unet after every backward.",
                  step=step)
    return None


def _make_optimizers(tenc: nn.Module, unet: nn.Module, run: int, device: torch.device) -> Tuple[Any, Any]:
    fused = fused_adamw_supported(device)
    if run == 0:
        return (torch.optim.AdamW(tenc.parameters(), lr=1e-3, weight_decay=1e-3, fused=fused),
                torch.optim.AdamW(unet.parameters(), lr=1e-2, weight_decay=1e-2, fused=fused))
    return (torch.optim.AdamW(tenc.parameters(), lr=1e-3, weight_decay=1e-3),
            torch.optim.SGD(unet.parameters(), lr=0.05, momentum=0.9))


RUNS = (marked("fused AdamW for both (where this device has it)"),  # shown in a diagnosis
        marked("AdamW for tenc, SGD with momentum for unet"))


def _inf_problem(step: int, tenc: nn.Module, before: List[torch.Tensor], scale_before: float,
                 scaler: torch.amp.GradScaler, events: List[str], unet_record: _Recorder,
                 unet_count: int) -> Optional[str]:
    """On the overflow step: tenc left alone, unet stepped, the scale shrunk."""
    tenc_after = [p.detach() for p in tenc.parameters()]
    if not all(torch.isfinite(p).all() for p in tenc_after):
        return tr("On step {step}, tenc's gradient held an inf (an overflow), but tenc's weights changed to inf/NaN: "
                  "that step must be skipped. Step through scaler.step(optimizer), which skips an optimizer whose "
                  "gradients hold inf or NaN - not optimizer.step().", step=step)
    if any(not torch.equal(a, b) for a, b in zip(tenc_after, before[:len(tenc_after)])):
        return tr("On step {step}, tenc's gradient held an inf (an overflow), but tenc's weights changed: that step "
                  "must be skipped. Step through scaler.step(optimizer), which skips an optimizer whose gradients "
                  "hold inf or NaN - not optimizer.step().", step=step)
    if len(unet_record.records) == unet_count:
        return tr("On step {step}, tenc's gradient held an inf, and unet's step was skipped too: the scaler skips "
                  "only the optimizer whose own gradients hold inf or NaN. Step both through scaler.step.", step=step)
    if events.count("update") != 1 or scaler.get_scale() >= scale_before:
        return tr("On step {step}, tenc's gradient held an inf, but the scale did not shrink ({before} -> {after}): "
                  "call scaler.update() once on every step, this one too - it lowers the scale after an overflow.",
                  step=step, before=f"{scale_before:g}", after=f"{scaler.get_scale():g}")
    return None


def _check_run(step_function: Callable[..., Any], run: int, device: torch.device) -> Optional[str]:
    tenc, unet = make_tenc(41, device), make_unet(42, device)
    events: List[str] = []
    opt_tenc, opt_unet = _make_optimizers(tenc, unet, run, device)
    records = {"tenc": _Recorder(opt_tenc, "tenc", events), "unet": _Recorder(opt_unet, "unet", events)}
    scaler = CountingGradScaler(device.type, events)
    forward_modes: List[bool] = []
    overflow = {"on": False}

    def tenc_gradient(grad: torch.Tensor) -> torch.Tensor:
        events.append("tenc gradient")
        if overflow["on"]:
            grad = grad.clone()
            grad.view(-1)[0] = float("inf")
        return grad

    first = next(tenc.parameters())
    hooks = [unet.register_forward_pre_hook(lambda _m, _i: forward_modes.append(autocast_on(device.type))),
             first.register_hook(tenc_gradient)]
    hooks += [p.register_hook(lambda grad: events.append("tenc gradient")) for p in list(tenc.parameters())[1:]]
    x, target, mask = (t.clone() for t in make_batch(seed=41, device=device))
    previous: Dict[str, Optional[Tuple[Grads, Tuple[torch.Tensor, ...]]]] = {"tenc": None, "unet": None}
    try:
        for step in range(1, STEPS + 1):
            if step > 1:
                fill_in_place((x, target, mask), make_batch(seed=40 + step, device=device))
            parts = _loss_grads(tenc, unet, x, target, mask)
            own = {module: _own(parts[module], module) for module in parts}
            max_norm = CLIP_SHARE * min(_norm(own["tenc"]), _norm(own["unet"]))
            joint_norm = (_norm(own["tenc"]) ** 2 + _norm(own["unet"]) ** 2) ** 0.5
            expected = {module: _clipped(own[module], max_norm) for module in own}
            start = [p.detach().clone() for p in (*tenc.parameters(), *unet.parameters())]
            counts = {module: len(record.records) for module, record in records.items()}
            scale_before = scaler.get_scale()
            state = snapshot({"x": x, "target": target, "mask": mask}, {"tenc": tenc, "unet": unet},
                             {"opt_tenc": opt_tenc, "opt_unet": opt_unet})
            global_settings = settings()
            events.clear()
            forward_modes.clear()
            overflow["on"] = step == INF_STEP
            run_step(step_function, step, tenc, unet, opt_tenc, opt_unet, scaler, x, target, mask, max_norm,
                     explanations=_ERROR_EXPLANATIONS)
            overflow["on"] = False
            problem = settings_change(global_settings)  # first: it also puts the settings back
            if problem is not None:
                return tr("On step {step}, your step {problem}.", step=step, problem=problem)
            if not forward_modes or not all(forward_modes):
                return tr("On step {step}, the forward pass ran without autocast: run it inside "
                          "`with torch.autocast(x.device.type):`.", step=step)
            if step == INF_STEP:
                problem = _inf_problem(step, tenc, start, scale_before, scaler, events, records["unet"],
                                       counts["unet"])
                if problem is not None:
                    return problem
            problem = _order_problem(events, step) if step != INF_STEP else None
            if problem is not None:
                return problem
            problem = changed(state, {"x": x, "target": target, "mask": mask}, {"tenc": tenc, "unet": unet},
                              {"opt_tenc": opt_tenc, "opt_unet": opt_unet})
            if problem is not None:
                return tr("On step {step}, your step {problem}.", step=step, problem=problem)
            for module, record in records.items():
                if step == INF_STEP and module == "tenc":
                    continue
                recorded = record.records[-1]
                if not near_gradients(recorded, expected[module], TOLERANCE):
                    history = {}
                    if previous[module] is not None:
                        old, old_batch = previous[module]
                        history[PREVIOUS_STEP] = old
                        history[PREVIOUS_BATCH] = _own(
                            _loss_grads(*_at(tenc, unet, start), *old_batch)[module], module)
                    return tr("On step {step}, {diagnosis}", step=step, diagnosis=_diagnose(
                        module, recorded, parts[module], history, max_norm, joint_norm))
                previous[module] = ([g.clone() for g in recorded], (x.clone(), target.clone(), mask.clone()))
    finally:
        for hook in hooks:
            hook.remove()
    return None


def _at(tenc: nn.Module, unet: nn.Module, start: List[torch.Tensor]) -> Tuple[nn.Module, nn.Module]:
    """Copies of the two modules with the weights they had at the start of the step."""
    t, u = copy.deepcopy(tenc), copy.deepcopy(unet)
    with torch.no_grad():
        for param, value in zip((*t.parameters(), *u.parameters()), start):
            param.copy_(value)
    return t, u


def check_chained_amp_step(step_function: Callable[..., Any], device: Optional[torch.device] = None) -> CheckResult:
    """Run the learner's step for several steps with two sets of optimizers, one step overflowing, and compare."""
    device = device or pick_device()
    for run, description in enumerate(RUNS):
        diagnosis = _check_run(step_function, run, device)
        if diagnosis is not None:
            return failed(EXERCISE_ID, tr("With {run}: {diagnosis}", run=translated(description),
                                          diagnosis=diagnosis))
    return passed(EXERCISE_ID, tr("For {steps} steps on {device} with two sets of optimizers, under GradScaler and "
                                  "autocast, tenc was stepped with the gradient of loss_tenc and unet with that of "
                                  "loss_tenc + loss_unet, each clipped to max_norm after unscaling (within 1%), in a "
                                  "safe order; on the step with an inf in tenc's gradient, tenc was left alone, unet "
                                  "stepped and the scale shrank.",
                                  steps=STEPS, device=device.type))


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="chained_amp_step",
    checker=check_chained_amp_step,
    hints=HINTS,
    contract=CONTRACT,
)
