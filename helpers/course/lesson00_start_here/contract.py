"""The contract of notebook 00's exercise: ``head_weight_grad(model, x, target)`` returns the gradient of
``((model(x) - target) ** 2).mean()`` for ``model[-1].weight`` and changes nothing at all."""
from __future__ import annotations

from typing import Dict

import torch

from helpers.course.exercises.engine.build import mlp, randn, refill_with, seeded
from helpers.course.exercises.engine.contract import Contract
from helpers.course.exercises.engine.observe import World
from helpers.course.exercises.engine.situations import FROZEN, GRADS, MODE, Axis, Situation, batch, calls, shapes
from helpers.course.models import BATCH, HIDDEN, IN_FEATURES
from helpers.language import marked

MODELS = {  # name (shown in a diagnosis) -> (widths, head with bias)
    marked("the notebook's model"): ((IN_FEATURES, HIDDEN, 1), True),
    marked("a deeper model (its head is model[4])"): ((IN_FEATURES, HIDDEN, 32, 1), True),
    marked("a head without bias"): ((IN_FEATURES, HIDDEN, 1), False),
    marked("a head with 3 outputs"): ((IN_FEATURES, HIDDEN, 3), True),
}

AXES: tuple = (
    batch(BATCH, 1, 3, 24),
    Axis("grads", ("filled", "none", "zero"), GRADS.describe, GRADS.tried),
    MODE,
    FROZEN,
    calls(1, 3),
    shapes(*MODELS, tried="deeper models, a head without bias, a head with 3 outputs"),
)


def build(situation: Situation) -> World:
    """One model and one batch for ``situation``; a new batch for each further call, into the same tensors."""
    widths, bias = MODELS[situation["shape"]]
    model = seeded(situation.seed, lambda: mlp(widths, bias_last=bias))
    rows, outputs = situation["batch"], widths[-1]

    def batch_for(call: int) -> Dict[str, torch.Tensor]:
        return {"x": randn(situation.seed + 10 * call, rows, IN_FEATURES),
                "target": randn(situation.seed + 10 * call + 1, rows, outputs)}

    data = batch_for(1)
    return World(args=(model, data["x"], data["target"]), modules={"model": model}, inputs=data,
                 refill=refill_with(data, batch_for))


CONTRACT = Contract(
    exercise_id="head_weight_grad",
    answer_name="head_weight_grad",
    build=build,
    axes=AXES,
    tried_extra=("it must return a tensor (not a tuple)",),
)
