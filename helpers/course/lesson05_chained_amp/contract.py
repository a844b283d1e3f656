"""The contract of notebook 05's exercise: ``chained_amp_step(tenc, unet, opt_tenc, opt_unet, scaler, x, target,
mask, max_norm)`` steps tenc with the gradient of ``loss_tenc`` and unet with that of ``loss_tenc + loss_unet``, each
module's unscaled gradient clipped to ``max_norm`` on its own, both through the scaler, then ``scaler.update()``
once. It may change the two modules' weights and ``.grad``, the two optimizers' state and the scaler's scale and
growth tracker; nothing else.

An overflow is made by a hook on tenc's last weight that writes an inf into its (scaled) gradient on a chosen call,
as a float16 overflow would: the right step then leaves tenc and its optimizer as they were, steps unet, and the scale
shrinks. ``clip_grad_norm_`` turns that inf into NaN (inf x 0), in the reference as in every right answer; the
engine counts NaN where the reference has NaN as equal.

bfloat16 keeps 8 bits of mantissa, so two right answers that add the two losses' gradients in another order differ in
the last of them. The settings keep that round-off from growing over consecutive calls: small learning rates, Adam's
eps at 1e-3 (with 1e-8, a near-zero gradient's round-off can turn a step of +lr into -lr), and a GELU in unet where
the notebook's has a ReLU (round-off that moves a unit across 0 changes the next gradient by a jump).
"""
from __future__ import annotations

import copy
import math
from typing import Callable, Dict, Tuple

import torch
from torch import nn

from helpers.course.device import pick_device
from helpers.course.exercises.engine.build import randn, refill_with, seeded
from helpers.course.exercises.engine.contract import (
    TRAINING_STEP_TRIED,
    Change,
    Contract,
    returns_nothing,
    training_step,
)
from helpers.course.exercises.engine.observe import World
from helpers.course.exercises.engine.situations import FROZEN, GRADS, MODE, Axis, Situation, batch, calls, shapes
from helpers.course.lesson05_chained_amp.chain import (
    BATCH,
    HIDDEN_STATE,
    TEXT_FEATURES,
    chain_losses,
    fused_adamw_supported,
)
from helpers.language import marked, tr, translated

MODULES = {  # name (shown in a diagnosis) -> (tenc's widths, unet's hidden width and GroupNorm groups)
    marked("the notebook's modules (a GELU for unet's ReLU)"): ((TEXT_FEATURES, 32, HIDDEN_STATE), (64, 8)),
    marked("a deeper tenc and a narrower unet"): ((TEXT_FEATURES, 24, 24, HIDDEN_STATE), (32, 4)),
}


def _tenc(widths: Tuple[int, ...]) -> nn.Sequential:
    """``Linear -> GELU -> ... -> Linear`` through ``widths``, as ``chain.make_tenc``."""
    layers: list = []
    for index, (width_in, width_out) in enumerate(zip(widths[:-1], widths[1:])):
        layers += [nn.Linear(width_in, width_out)] + ([nn.GELU()] if index < len(widths) - 2 else [])
    return nn.Sequential(*layers)


def _unet(hidden: int, groups: int) -> nn.Sequential:
    """The notebook's unet (``chain.make_unet``), with a GELU for its ReLU (see the module's docstring)."""
    return nn.Sequential(nn.Linear(HIDDEN_STATE, hidden), nn.GroupNorm(groups, hidden), nn.GELU(),
                         nn.Linear(hidden, TEXT_FEATURES))


Make = Callable[[nn.Module, torch.device], torch.optim.Optimizer]


def _adamw(lr: float, weight_decay: float) -> Make:
    """The notebook's AdamW (``chain.make_optimizers``), fused where this device has it."""
    return lambda module, device: torch.optim.AdamW(module.parameters(), lr=lr, weight_decay=weight_decay,
                                                    betas=(0.9, 0.99), eps=EPS,
                                                    fused=True if fused_adamw_supported(device) else None)


EPS = 1e-3
OPTIMIZERS: Dict[str, Tuple[Make, Make]] = {  # name (shown in a diagnosis) -> (opt_tenc's, opt_unet's)
    marked("fused AdamW for both (where this device has it)"): (_adamw(1e-3, 1e-3), _adamw(1e-3, 1e-2)),
    marked("AdamW for tenc, SGD with momentum for unet"): (
        lambda m, d: torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=1e-3, eps=EPS),
        lambda m, d: torch.optim.SGD(m.parameters(), lr=0.005, momentum=0.9)),
    marked("SGD for both, weight decay on unet's"): (
        lambda m, d: torch.optim.SGD(m.parameters(), lr=0.01),
        lambda m, d: torch.optim.SGD(m.parameters(), lr=0.005, weight_decay=0.01)),
}

SCALERS = {  # name (shown in a diagnosis) -> (init_scale, growth_interval)
    marked("a GradScaler at scale 4"): (4.0, 10**6),
    marked("a GradScaler at scale 1024 that doubles after every 2 good steps"): (1024.0, 2),
}

NO_CLIP = 1000.0
CLIPS = ("only unet clipped", "both modules clipped", "no clipping")


def _clip_words(clip: str) -> str:
    """What ``clip`` (one of ``CLIPS``) sets ``max_norm`` to, for a diagnosis."""
    if clip == "both modules clipped":
        return tr("max_norm below both modules' gradient norms")
    if clip == "only unet clipped":
        return tr("max_norm between tenc's gradient norm and unet's (only unet's is clipped)")
    return tr("max_norm = {max_norm}, so large that clipping does not act", max_norm=f"{NO_CLIP:g}")


def _overflow_words(when: str) -> str:
    """Where ``when`` (one of ``OVERFLOWS``) puts an inf, for a diagnosis."""
    if when == "first":
        return tr("an inf in tenc's gradient on the first call")
    return tr("an inf in tenc's gradient on the last call") if when == "last" else tr("no overflow")

OVERFLOWS = ("none", "first", "last")

AXES: tuple = (
    batch(BATCH, 1, 5),
    Axis("clip", CLIPS, _clip_words, "max_norm below, between and above the modules' gradient norms"),
    Axis("overflow", OVERFLOWS, _overflow_words, "an inf in tenc's gradient on the first or the last call"),
    # filled first: Adam's first step hardly depends on the gradient's size, so a gradient left in .grad shows under
    # the optimizer axis's SGD with momentum only when .grad was filled there too
    Axis("grads", ("filled", "none", "zero"), GRADS.describe, GRADS.tried),
    MODE,
    Axis("frozen", FROZEN.values, lambda frozen: tr("tenc's first layer frozen (requires_grad=False)") if frozen
         else tr("no frozen weights"), "tenc's first layer frozen"),
    calls(1, 3),
    Axis("optimizer", tuple(OPTIMIZERS), translated,
         "optimizers fused AdamW, AdamW, SGD, SGD with momentum, weight decay"),
    Axis("scaler", tuple(SCALERS), translated, "GradScalers at scale 4 and at 1024 growing every 2 steps"),
    shapes(*MODULES, tried="a deeper tenc and a narrower unet"),
)


def _norms(tenc: nn.Module, unet: nn.Module, x: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> Tuple[
        float, float]:
    """The unclipped gradient norms the step should have: tenc's of loss_tenc, unet's of loss_tenc + loss_unet."""
    t, u = copy.deepcopy(tenc), copy.deepcopy(unet)
    with torch.enable_grad(), torch.autocast(x.device.type):
        loss_tenc, loss_unet = chain_losses(u(t(x)), target, mask)
    trainable = [p for p in t.parameters() if p.requires_grad]
    grads_t = torch.autograd.grad(loss_tenc, trainable, retain_graph=True)
    grads_u = torch.autograd.grad(loss_tenc + loss_unet, list(u.parameters()))
    norm = lambda grads: math.sqrt(sum(float(g.float().pow(2).sum()) for g in grads))  # noqa: E731
    return norm(grads_t), norm(grads_u)


def _max_norm(clip: str, norms: Callable[[], Tuple[float, float]]) -> float:
    """``max_norm`` for ``clip``, from the modules' gradient norms on the first batch (``norms()``)."""
    if clip == "no clipping":
        return NO_CLIP
    low, high = sorted(norms())
    return 0.5 * low if clip == "both modules clipped" else math.sqrt(low * high)


# what the world observes besides the modules and optimizers (named in a diagnosis when it differs)
SCALER_STATE = marked("the scaler's scale and growth tracker")
UNDER_AUTOCAST = marked("whether every forward pass of unet ran under torch.autocast(x.device.type)")


def build(situation: Situation) -> World:
    """tenc, unet, their optimizers, a scaler and a batch for ``situation``; a new batch for each further call, into
    the same tensors; the overflow hook on tenc's last weight."""
    device = pick_device()
    tenc_widths, (hidden, groups) = MODULES[situation["shape"]]
    tenc = seeded(situation.seed, lambda: _tenc(tenc_widths)).to(device)
    unet = seeded(situation.seed + 1, lambda: _unet(hidden, groups)).to(device)
    if situation["frozen"]:  # here rather than by the engine: max_norm is computed from the trainable weights
        tenc[0].requires_grad_(False)
    make_tenc_opt, make_unet_opt = OPTIMIZERS[situation["optimizer"]]
    opt_tenc, opt_unet = make_tenc_opt(tenc, device), make_unet_opt(unet, device)
    rows, calls_made = situation["batch"], int(situation["calls"])

    def batch_for(call: int) -> Dict[str, torch.Tensor]:
        seed = situation.seed + 10 * call
        return {"x": randn(seed, rows, TEXT_FEATURES).to(device),
                "target": randn(seed + 1, rows, TEXT_FEATURES).to(device),
                "mask": (randn(seed + 2, rows, TEXT_FEATURES) > 0).float().to(device)}

    data = batch_for(1)
    max_norm = _max_norm(situation["clip"], lambda: _norms(tenc, unet, data["x"], data["target"], data["mask"]))
    state = {"call": 1}
    inf_call = {"none": None, "first": 1, "last": calls_made}[situation["overflow"]]
    overflowing = lambda: state["call"] == inf_call  # noqa: E731

    def overflow(grad: torch.Tensor) -> torch.Tensor:
        if not overflowing():
            return grad
        grad = grad.clone()
        grad.view(-1)[0] = float("inf")
        return grad

    tenc[-1].weight.register_hook(overflow)
    forward_modes = []  # for each forward pass of unet from here on: whether it ran under autocast
    unet.register_forward_pre_hook(lambda _module, _inputs: forward_modes.append(autocast_on(device.type)))
    init_scale, growth_interval = SCALERS[situation["scaler"]]
    scaler = torch.amp.GradScaler(device.type, init_scale=init_scale, growth_interval=growth_interval)
    refill_data = refill_with(data, batch_for)

    def refill(call: int) -> None:
        state["call"] = call
        refill_data(call)

    return World(args=(tenc, unet, opt_tenc, opt_unet, scaler, data["x"], data["target"], data["mask"], max_norm),
                 modules={"tenc": tenc, "unet": unet}, optimizers={"opt_tenc": opt_tenc, "opt_unet": opt_unet},
                 inputs=data, refill=refill, freezable=[],
                 extra={SCALER_STATE: lambda: _scale_and_tracker(scaler),
                        UNDER_AUTOCAST: lambda: all(forward_modes)})


def autocast_on(device_type: str) -> bool:
    """Whether autocast is on for ``device_type`` here."""
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4 has no device argument
        return torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled()


def _scale_and_tracker(scaler: torch.amp.GradScaler) -> Tuple[float, int]:
    """What ``update()`` changes: the scale, and the count of good steps towards its next growth."""
    state = scaler.state_dict()  # empty where this device's scaler is disabled
    return float(state.get("scale", scaler.get_scale())), int(state.get("_growth_tracker", 0))


# (rtol, atol) for what a call may change: bfloat16 round-off on the CPU (the worst a right answer needed over about
# 860 calls was 0.0058); float16 under CUDA keeps more mantissa bits, so the same bound covers it
TOLERANCE = (2e-2, 2e-2)

CONTRACT = Contract(
    exercise_id="chained_amp_step",
    answer_name="chained_amp_step",
    build=build,
    axes=AXES,
    may_change=(*training_step(("tenc", "unet"), ("opt_tenc", "opt_unet")),
                Change(SCALER_STATE, ("extra",)), Change(UNDER_AUTOCAST, ("extra",))),
    tolerance=TOLERANCE,
    returns=returns_nothing,
    tried_extra=(TRAINING_STEP_TRIED,),
)
