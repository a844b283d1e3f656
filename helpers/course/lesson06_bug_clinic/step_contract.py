"""What the contracts of notebook 06's three training steps share: the optimizer kinds a model may come with, and
how a diagnosis names them.

What one step may change and its return value are the engine's (``engine.contract.training_step`` and
``returns_nothing``): after a step, each ``.grad`` holds the gradient its optimizer was stepped with, or it is
cleared (a step that tidies up with ``zero_grad()`` at the end is right).
"""
from __future__ import annotations

from typing import Iterable

import torch
from torch import nn

from helpers.course.exercises.engine import step_watch
from helpers.course.exercises.engine.contract import TRAINING_STEP_TRIED
from helpers.language import marked, translated

_MORE_KINDS = {"SGD with weight decay": lambda params: torch.optim.SGD(params, lr=0.1, weight_decay=0.01)}

COMPARED_AFTER = TRAINING_STEP_TRIED
OPTIMIZERS_TRIED = "SGD (with momentum, with weight decay), Adam, AdamW and fused Adam"
# A kind whose name is words, shown with optimizer_words (situations.KIND_NAMES marks step_watch's).
WORDED_KINDS = (marked("SGD with weight decay"),)


def make_optimizer(name: str, params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    """An optimizer of kind ``name``: one of ``step_watch.optimizer_kinds()``, or "SGD with weight decay"."""
    make = _MORE_KINDS.get(name) or step_watch.kind(name)
    return make(list(params))


def optimizer_words(name: str) -> str:
    """An optimizer kind's name, as a diagnosis shows it (in the chosen language)."""
    return translated(name)
