"""The contract of notebook 04's exercise: ``two_model_step(m1, m2, opt1, opt2, x1, x2, losses)`` steps ``opt1`` with
the gradient of ``l1 + l_both`` for m1's trainable weights and ``opt2`` with that of ``l2 + l_both`` for m2's, all
taken at the parameters the call starts from; it may change the two models' weights and ``.grad`` and the two
optimizers' state, nothing else (modes, ``requires_grad``, the inputs, the optimizers' settings stay as handed over).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

import torch
from torch import nn

from helpers.course.exercises.engine.build import mlp, randn, refill_with, seeded
from helpers.course.exercises.engine.contract import TRAINING_STEP_TRIED, Contract, returns_nothing, training_step
from helpers.course.exercises.engine.observe import World
from helpers.course.exercises.engine.situations import FROZEN, GRADS, MODE, Axis, Situation, batch, calls, shapes
from helpers.course.exercises.engine.step_watch import optimizer_kinds
from helpers.course.models import BATCH, HIDDEN, IN_FEATURES, own_term, shared_term
from helpers.language import marked, tr, translated

Losses = Callable[[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def course_losses(o1: torch.Tensor, o2: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The course's L1 and L2, and a joint loss: both outputs pulled towards each other's mean and towards 0."""
    shared = shared_term(o1, o2)
    return shared + own_term(o1), shared + own_term(o2), 0.5 * (o1 + o2).pow(2).mean()


def asymmetric_losses(o1: torch.Tensor, o2: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three losses sharing both outputs, deliberately asymmetric: swapping o1 and o2 changes them."""
    l1 = (o1 - o2).pow(2).mean() + (o1 - 1).pow(2).mean()
    l2 = (o2 - 0.5 * o1).pow(2).mean() + (o2 + 1).pow(2).mean()
    return l1, l2, (o1 * o2).mean() + 0.1 * o2.pow(2).mean()


LOSSES: Dict[str, Losses] = {  # name (shown in a diagnosis) -> losses
    marked("the course's losses"): course_losses,
    marked("asymmetric losses"): asymmetric_losses,
}

MODELS = {  # name (shown in a diagnosis) -> (widths, head with bias), the same for m1 and m2
    marked("the notebook's models"): ((IN_FEATURES, HIDDEN, 1), True),
    marked("deeper models"): ((IN_FEATURES, HIDDEN, 24, 1), True),
    marked("narrow models whose heads have no bias"): ((IN_FEATURES, 8, 1), False),
    marked("heads with 3 outputs"): ((IN_FEATURES, HIDDEN, 3), True),
}

MakeOptimizer = Callable[[nn.Module], torch.optim.Optimizer]


def _adamw(params: Any, **settings: Any) -> torch.optim.AdamW:
    """AdamW, fused where this torch has it (``step_watch.optimizer_kinds``), else the unfused one."""
    return torch.optim.AdamW(params, fused=True if "fused AdamW" in optimizer_kinds() else None, **settings)


# name (shown in a diagnosis) -> (opt1's, opt2's): different kinds for the two models, weight decay on and off.
# Adam's eps is raised from 1e-8 so that a right answer's round-off in a near-zero gradient cannot flip its step from
# +lr to -lr.
OPTIMIZERS: Dict[str, Tuple[MakeOptimizer, MakeOptimizer]] = {
    "SGD": (lambda m: torch.optim.SGD(m.parameters(), lr=0.1), lambda m: torch.optim.SGD(m.parameters(), lr=0.1)),
    marked("AdamW (weight decay 0.01) for m1, Adam for m2"): (
        lambda m: torch.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.01, eps=1e-4),
        lambda m: torch.optim.Adam(m.parameters(), lr=0.01, eps=1e-4)),
    marked("fused AdamW for m1, SGD with momentum and weight decay for m2"): (
        lambda m: _adamw(m.parameters(), lr=0.01, weight_decay=0.01, eps=1e-4),
        lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=0.01)),
}

AXES: tuple = (
    batch(BATCH, 1, 5),
    GRADS,
    MODE,
    Axis("frozen", FROZEN.values, lambda frozen: tr("a frozen first layer in each model (requires_grad=False)")
         if frozen else tr("no frozen weights"), "a frozen first layer in each model"),
    calls(1, 3),
    Axis("optimizer", tuple(OPTIMIZERS), lambda name: tr("optimizers {name}", name=translated(name)),  # "SGD" as is
         "optimizers SGD, Adam, AdamW and fused AdamW, with and without momentum and weight decay"),
    Axis("losses", tuple(LOSSES), translated, "two sets of losses, one of them asymmetric"),
    shapes(*MODELS, tried="deeper and narrower models, heads without bias, heads with 3 outputs"),
)


def build(situation: Situation) -> World:
    """Two models, their optimizers and a pair of batches for ``situation``; a new pair for each further call, into
    the same tensors."""
    widths, bias = MODELS[situation["shape"]]
    m1 = seeded(situation.seed, lambda: mlp(widths, bias_last=bias))
    m2 = seeded(situation.seed + 1, lambda: mlp(widths, bias_last=bias))
    make1, make2 = OPTIMIZERS[situation["optimizer"]]
    opt1, opt2 = make1(m1), make2(m2)
    rows = situation["batch"]

    def batch_for(call: int) -> Dict[str, torch.Tensor]:
        return {"x1": randn(situation.seed + 10 * call, rows, IN_FEATURES),
                "x2": randn(situation.seed + 10 * call + 1, rows, IN_FEATURES)}

    data = batch_for(1)
    return World(args=(m1, m2, opt1, opt2, data["x1"], data["x2"], LOSSES[situation["losses"]]),
                 modules={"m1": m1, "m2": m2}, optimizers={"opt1": opt1, "opt2": opt2}, inputs=data,
                 refill=refill_with(data, batch_for), freezable=[*m1[0].parameters(), *m2[0].parameters()])


CONTRACT = Contract(
    exercise_id="two_model_step",
    answer_name="two_model_step",
    build=build,
    axes=AXES,
    may_change=training_step(("m1", "m2"), ("opt1", "opt2")),
    returns=returns_nothing,
    tried_extra=(TRAINING_STEP_TRIED,),
)
