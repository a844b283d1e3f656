"""The contract of notebook 07's ``multitask_step(trunk, head_a, head_b, opt_trunk, opt_a, opt_b, x, y_a, y_b,
weight_a, weight_b)``: one step that changes the three parts' weights and ``.grad`` and the three optimizers' state
exactly as the solution's step does; nothing else (modes and requires_grad flags included)."""
from __future__ import annotations

from dataclasses import replace
from typing import Dict

import torch
from torch import nn

from helpers.course.exercises.engine.build import randn, refill_with
from helpers.course.exercises.engine.contract import Contract, returns_nothing, training_step
from helpers.course.exercises.engine.observe import World
from helpers.course.exercises.engine.situations import (
    FROZEN,
    GRADS,
    MODE,
    Axis,
    Situation,
    batch,
    calls,
    optimizers,
    shapes,
)
from helpers.course.exercises.engine.step_watch import kind
from helpers.course.lesson07_bug_clinic_continued.multitask import BATCH, IN_FEATURES, make_batch, make_multitask_model
from helpers.language import marked, tr, translated

NOTEBOOK_MODELS = marked("the notebook's models")
MODELS = {  # name -> (trunk widths, head A's outputs, head B's classes); None: the notebook's
    NOTEBOOK_MODELS: None,
    marked("a one-layer trunk of width 24, head A with 2 outputs and head B with 5 classes"): ((IN_FEATURES, 24), 2, 5),
}


def _task_weights(weights: tuple) -> str:
    """The weights axis's value, for a diagnosis."""
    return tr("weight_a = {weight_a} and weight_b = {weight_b}", weight_a=f"{weights[0]:g}", weight_b=f"{weights[1]:g}")


WEIGHTS = Axis("weights", ((0.3, 2.0), (1.5, 0.25)), _task_weights, "other task weights")

AXES: tuple = (
    batch(BATCH, 1, 5, 32),
    GRADS,
    MODE,
    FROZEN,
    calls(1, 3),
    replace(optimizers("SGD", "Adam", "SGD with momentum", "AdamW", "fused AdamW"),
            tried="optimizers SGD, SGD with momentum, Adam, AdamW (weight decay) and fused AdamW"),
    WEIGHTS,
    replace(shapes(*MODELS, tried="a one-layer trunk and other head sizes"), describe=translated),  # names shown
)


def _models(situation: Situation):
    """(trunk, head_a, head_b, outputs of head A, classes of head B)."""
    shape = MODELS[situation["shape"]]
    if shape is None:
        return (*make_multitask_model(seed=situation.seed), None, None)
    widths, outputs, classes = shape

    def make() -> tuple:
        layers = []
        for width_in, width_out in zip(widths[:-1], widths[1:]):
            layers += [nn.Linear(width_in, width_out), nn.ReLU()]
        return nn.Sequential(*layers), nn.Linear(widths[-1], outputs), nn.Linear(widths[-1], classes)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(situation.seed)
        return (*make(), outputs, classes)


def build(situation: Situation) -> World:
    """The trunk and two heads, one optimizer of the situation's kind for each part, and a batch."""
    trunk, head_a, head_b, outputs, classes = _models(situation)
    rows = situation["batch"]

    def batch_for(call: int) -> Dict[str, torch.Tensor]:
        seed = situation.seed + 10 * call
        if outputs is None:
            x, y_a, y_b = make_batch(seed=seed, batch=rows)
        else:
            x, y_a = randn(seed, rows, IN_FEATURES), randn(seed + 1, rows, outputs)
            y_b = torch.randint(classes, (rows,), generator=torch.Generator().manual_seed(seed + 2))
        return {"x": x, "y_a": y_a, "y_b": y_b}

    data = batch_for(1)
    make = kind(situation["optimizer"])
    opts = {"opt_trunk": make(trunk.parameters()), "opt_a": make(head_a.parameters()),
            "opt_b": make(head_b.parameters())}
    weight_a, weight_b = situation["weights"]
    return World(args=(trunk, head_a, head_b, *opts.values(), data["x"], data["y_a"], data["y_b"], weight_a,
                       weight_b),
                 modules={"trunk": trunk, "head_a": head_a, "head_b": head_b}, optimizers=opts, inputs=data,
                 refill=refill_with(data, batch_for), freezable=[trunk[0].weight])


CONTRACT = Contract(
    exercise_id="multitask_step",
    answer_name="multitask_step",
    build=build,
    axes=AXES,
    may_change=training_step(("trunk", "head_a", "head_b"), ("opt_trunk", "opt_a", "opt_b")),
    returns=returns_nothing,
)
