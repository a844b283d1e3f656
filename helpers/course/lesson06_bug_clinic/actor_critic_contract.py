"""The contract of notebook 06's actor-critic exercise: ``actor_critic_step(model, opt_trunk, opt_actor, opt_critic,
states, actions, returns, value_coef, entropy_coef)`` steps each optimizer once with the gradient of
``actor_loss + value_coef * critic_loss - entropy_coef * entropy`` from one forward pass; it may change the model's
weights and ``.grad`` and the optimizers' states, nothing else, and returns None."""
from __future__ import annotations

from typing import Dict

import torch

from helpers.course.exercises.engine.build import refill_with, seeded
from helpers.course.exercises.engine.contract import Contract, returns_nothing, training_step
from helpers.course.exercises.engine.observe import World
from helpers.course.exercises.engine.situations import FROZEN, GRADS, MODE, Axis, Situation, batch, calls, shapes
from helpers.course.lesson06_bug_clinic.actor_critic import BATCH, N_ACTIONS, STATE_FEATURES, ActorCritic
from helpers.course.lesson06_bug_clinic.step_contract import (
    COMPARED_AFTER,
    OPTIMIZERS_TRIED,
    make_optimizer,
    optimizer_words,
)
from helpers.course.seeds import fresh
from helpers.language import marked, tr

EXERCISE_ID = "actor_critic_step"
OPTIMIZER_NAMES = ("opt_trunk", "opt_actor", "opt_critic")

MODELS = {  # name -> ActorCritic's sizes
    marked("the notebook's network"): {},
    marked("a wider trunk and 5 actions"): {"hidden": 32, "n_actions": 5},
}

OPTIMIZERS = (  # fused where this torch has it (make_optimizer)
    ("SGD", "SGD", "SGD"), ("fused Adam", "SGD with momentum", "AdamW"), ("AdamW", "Adam", "SGD with weight decay"))

COEFFICIENTS = ((0.5, 0.05), (2.0, 0.1), (0.25, 0.2))  # (value_coef, entropy_coef)

AXES: tuple = (
    batch(BATCH, 1, 3, 32),
    GRADS,
    MODE,
    FROZEN,
    calls(1, 3),
    Axis("coefficients", COEFFICIENTS, lambda c: tr("value_coef={value_coef} and entropy_coef={entropy_coef}",
                                                    value_coef=f"{c[0]:g}", entropy_coef=f"{c[1]:g}"),
         "other value_coef and entropy_coef"),
    Axis("optimizer", OPTIMIZERS, lambda k: tr("the trunk stepped by {trunk}, the actor head by {actor}, the critic "
                                               "head by {critic}", trunk=optimizer_words(k[0]),
                                               actor=optimizer_words(k[1]), critic=optimizer_words(k[2])),
         OPTIMIZERS_TRIED),
    shapes(*MODELS, tried="a wider trunk and 5 actions"),
)


def build(situation: Situation) -> World:
    """The network, its three optimizers and one batch for ``situation``; a new batch for each further call, into
    the same tensors."""
    sizes = MODELS[situation["shape"]]
    model = seeded(situation.seed, lambda: ActorCritic(**sizes))
    parts = (model.trunk, model.actor, model.critic)
    optimizers = {name: make_optimizer(kind_of_part, part.parameters())
                  for name, kind_of_part, part in zip(OPTIMIZER_NAMES, situation["optimizer"], parts)}
    rows, actions = situation["batch"], sizes.get("n_actions", N_ACTIONS)

    def batch_for(call: int) -> Dict[str, torch.Tensor]:
        generator = torch.Generator().manual_seed(fresh(situation.seed * 10 + call))
        return {"states": torch.randn(rows, STATE_FEATURES, generator=generator),
                "actions": torch.randint(0, actions, (rows,), generator=generator),
                "returns": torch.randn(rows, generator=generator)}

    data = batch_for(1)
    value_coef, entropy_coef = situation["coefficients"]
    return World(args=(model, *optimizers.values(), data["states"], data["actions"], data["returns"], value_coef,
                       entropy_coef),
                 modules={"model": model}, optimizers=optimizers, inputs=data, refill=refill_with(data, batch_for))



CONTRACT = Contract(
    exercise_id=EXERCISE_ID,
    answer_name="actor_critic_step",
    build=build,
    axes=AXES,
    may_change=training_step(("model",), OPTIMIZER_NAMES),
    returns=returns_nothing,
    tried_extra=(COMPARED_AFTER,),
)
