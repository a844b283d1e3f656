"""The contract of notebook 06's GAN exercise: ``gan_step(generator, discriminator, opt_g, opt_d, real, noise)``
steps G first (g_loss through D as it is), then D on the same fake batch held constant, each optimizer once; it
may change the two models' weights and ``.grad`` and the optimizers' states, nothing else, and returns None."""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import torch
from torch import nn

from helpers.course.exercises.engine.build import refill_with, seeded
from helpers.course.exercises.engine.contract import Contract, returns_nothing, training_step
from helpers.course.exercises.engine.observe import World
from helpers.course.exercises.engine.situations import FROZEN, GRADS, MODE, Axis, Situation, batch, calls, shapes
from helpers.course.lesson06_bug_clinic.gan import (
    BATCH,
    DATA_DIM,
    NOISE_DIM,
    make_batch,
    make_discriminator,
    make_generator,
)
from helpers.course.lesson06_bug_clinic.step_contract import (
    COMPARED_AFTER,
    OPTIMIZERS_TRIED,
    make_optimizer,
    optimizer_words,
)
from helpers.language import marked, tr

EXERCISE_ID = "gan_step"


def _deeper_pair(seed: int) -> Tuple[nn.Module, nn.Module]:
    wide = 32
    generator = seeded(seed, lambda: nn.Sequential(
        nn.Linear(NOISE_DIM, wide), nn.ReLU(), nn.Linear(wide, wide), nn.ReLU(), nn.Linear(wide, DATA_DIM)))
    discriminator = seeded(seed + 1, lambda: nn.Sequential(
        nn.Linear(DATA_DIM, wide), nn.LeakyReLU(0.2), nn.Linear(wide, wide), nn.LeakyReLU(0.2), nn.Linear(wide, 1)))
    return generator, discriminator


MODELS: Dict[str, Callable[[int], Tuple[nn.Module, nn.Module]]] = {
    marked("the notebook's G and D"): lambda seed: (make_generator(seed), make_discriminator(seed + 1)),
    marked("a deeper, wider G and D"): _deeper_pair,
}

OPTIMIZERS = (  # fused where this torch has it (make_optimizer)
    ("SGD", "SGD"), ("fused Adam", "AdamW"), ("Adam", "SGD with momentum"), ("SGD with weight decay", "Adam"))

AXES: tuple = (
    batch(BATCH, 1, 3, 24),
    GRADS,
    MODE,
    FROZEN,
    calls(1, 3),
    Axis("optimizer", OPTIMIZERS, lambda kinds: tr("G stepped by {g} and D by {d}", g=optimizer_words(kinds[0]),
                                                   d=optimizer_words(kinds[1])), OPTIMIZERS_TRIED),
    shapes(*MODELS, tried="a deeper, wider G and D"),
)


def build(situation: Situation) -> World:
    """G, D, their optimizers and one batch for ``situation``; a new batch for each further call, into the same
    tensors."""
    generator, discriminator = MODELS[situation["shape"]](situation.seed)
    kind_g, kind_d = situation["optimizer"]
    opt_g, opt_d = make_optimizer(kind_g, generator.parameters()), make_optimizer(kind_d, discriminator.parameters())
    rows = situation["batch"]

    def batch_for(call: int) -> Dict[str, torch.Tensor]:
        real, noise = make_batch(situation.seed * 10 + call, rows)
        return {"real": real, "noise": noise}

    data = batch_for(1)
    return World(args=(generator, discriminator, opt_g, opt_d, data["real"], data["noise"]),
                 modules={"generator": generator, "discriminator": discriminator},
                 optimizers={"opt_g": opt_g, "opt_d": opt_d}, inputs=data, refill=refill_with(data, batch_for))



CONTRACT = Contract(
    exercise_id=EXERCISE_ID,
    answer_name="gan_step",
    build=build,
    axes=AXES,
    may_change=training_step(("generator", "discriminator"), ("opt_g", "opt_d")),
    returns=returns_nothing,
    tried_extra=(COMPARED_AFTER,),
)
