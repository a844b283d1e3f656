"""The contract of notebook 07's ``online_distill_step(student, teacher, opt_student, opt_teacher, x, y,
temperature, alpha)``: one step that changes the two models' weights, ``.grad`` and the teacher's BatchNorm
statistics, and the two optimizers' state, exactly as the solution's step does; nothing else.

The mode axis: the contract hands the teacher over in train mode ("the teacher in train mode, as it is handed to
you") and says modes stay as they were. So the teacher always arrives in train mode, and the axis varies the one mode
the contract leaves free, the student's: "eval" hands the student over in eval mode, and it must come back so.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict

import torch
from torch import nn

from helpers.course.exercises.engine.build import randn, refill_with, seeded
from helpers.course.exercises.engine.contract import Contract, returns_nothing, training_step
from helpers.course.exercises.engine.judge import prepare
from helpers.course.exercises.engine.observe import World
from helpers.course.exercises.engine.situations import FROZEN, GRADS, Axis, Situation, batch, calls, optimizers, shapes
from helpers.course.exercises.engine.step_watch import kind
from helpers.course.lesson07_bug_clinic_continued.distillation import (
    ALPHA,
    BATCH,
    IN_FEATURES,
    TEACHER_HIDDEN,
    TEMPERATURE,
    make_batch,
    make_student,
    make_teacher,
)
from helpers.language import marked, tr, translated

NOTEBOOK_MODELS = marked("the notebook's models")
# the notebook's teacher is pre-trained once per process, from the checker's seed; students and batches are seeded
# per situation
TEACHER_SEED = 7
MODELS = {  # name -> (classes, the student's hidden widths); None: the notebook's pre-trained teacher and student
    NOTEBOOK_MODELS: None,
    marked("3 classes and a deeper student (8 -> 16 -> 16 -> 3)"): (3, (16, 16)),
}


def _student_mode(mode: str) -> str:
    """The mode axis's value, for a diagnosis."""
    if mode == "train":
        return tr("the student handed over in train mode (the teacher in train mode, as the contract says)")
    return tr("the student handed over in eval mode (the teacher in train mode, as the contract says)")


def _loss_settings(loss: tuple) -> str:
    """The loss axis's value, for a diagnosis."""
    return tr("T = {temperature} and alpha = {alpha}", temperature=f"{loss[0]:g}", alpha=f"{loss[1]:g}")


MODE = Axis("mode", ("train", "eval"), _student_mode, "the student in train and in eval mode")
LOSS = Axis("loss", ((TEMPERATURE, ALPHA), (2.0, 0.4)), _loss_settings, "another T and alpha")
# batch 1 is outside the contract: the teacher runs in train mode, and BatchNorm cannot train on one row
AXES: tuple = (
    batch(BATCH, 2, 5, 24),
    GRADS,
    MODE,
    FROZEN,
    calls(1, 3),
    replace(optimizers("SGD", "Adam", "SGD with momentum", "AdamW", "fused AdamW"),
            tried="optimizers SGD, SGD with momentum, Adam, AdamW (weight decay) and fused AdamW"),
    LOSS,
    replace(shapes(*MODELS, tried="3 classes and a deeper student"), describe=translated),  # the names, shown
)


def _models(situation: Situation):
    """(student, teacher, classes): the notebook's, or a random BatchNorm teacher and a deeper student."""
    shape = MODELS[situation["shape"]]
    if shape is None:
        return make_student(seed=situation.seed + 1), make_teacher(seed=TEACHER_SEED), None
    classes, hidden = shape
    widths = (IN_FEATURES, *hidden, classes)

    def student() -> nn.Sequential:
        layers = []
        for width_in, width_out in zip(widths[:-1], widths[1:]):
            layers += [nn.Linear(width_in, width_out), nn.ReLU()]
        return nn.Sequential(*layers[:-1])

    teacher = seeded(situation.seed, lambda: nn.Sequential(
        nn.Linear(IN_FEATURES, TEACHER_HIDDEN), nn.BatchNorm1d(TEACHER_HIDDEN), nn.ReLU(),
        nn.Linear(TEACHER_HIDDEN, classes)))
    return seeded(situation.seed + 1, student), teacher.train(), classes


def build(situation: Situation) -> World:
    """The two models (the teacher in train mode), one optimizer of the situation's kind for each, and a batch."""
    student, teacher, classes = _models(situation)
    rows = situation["batch"]

    def batch_for(call: int) -> Dict[str, torch.Tensor]:
        seed = situation.seed + 10 * call
        if classes is None:
            x, y = make_batch(seed=seed, batch=rows)
        else:
            x = randn(seed, rows, IN_FEATURES)
            y = torch.randint(classes, (rows,), generator=torch.Generator().manual_seed(seed + 1))
        return {"x": x, "y": y}

    data = batch_for(1)
    make = kind(situation["optimizer"])
    opt_student, opt_teacher = make(student.parameters()), make(teacher.parameters())
    modules = {"student": student, "teacher": teacher}
    prepare(World((), modules=modules), situation.with_value("mode", "train"))  # .grad and frozen for both models
    student.train(situation["mode"] == "train")                                  # the mode for the student only
    temperature, alpha = situation["loss"]
    return World(args=(student, teacher, opt_student, opt_teacher, data["x"], data["y"], temperature, alpha),
                 modules=modules, optimizers={"opt_student": opt_student, "opt_teacher": opt_teacher},
                 inputs=data, refill=refill_with(data, batch_for))


CONTRACT = Contract(
    exercise_id="online_distill_step",
    answer_name="online_distill_step",
    build=build,
    axes=AXES,
    may_change=training_step(("student", "teacher"), ("opt_student", "opt_teacher")),
    returns=returns_nothing,
    generic_axes=False,  # applied in build: the mode axis is the student's alone
)
