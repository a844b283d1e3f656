"""Case 3 of notebook 07, the bug clinic continued: an in-place activation on a tensor that another model saved.

A multi-task net: a shared ``encoder`` computes features ``h``; two heads read them. The classification head is a
``Linear``, which saves ``h`` to compute its weight gradient. The regression head starts with
``nn.ReLU(inplace=True)``, which rewrites ``h`` in place, so backward finds the classifier's saved ``h`` changed
(error 2) without any optimizer step. The reference computes the same outputs with an out-of-place ReLU.

The exercise's variant (``make_residual_multitask``): the regression head is a small residual block,
``ResidualHead``, whose forward writes ``h += self.fc(h)`` and ``h.relu_()``. There a copy handed to the head does
not help: the head's own ``fc`` saves its input, which the ``+=`` then rewrites.
"""
from __future__ import annotations

import copy
from typing import Callable, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from helpers.course.seeds import fresh

IN_FEATURES = 10
WIDTH = 12  # h is [BATCH, WIDTH]: the [16, 12] tensor of this case's error 2
CLASSES = 3
BATCH = 16

Models = Tuple[nn.Sequential, nn.Linear, nn.Sequential]


def make_multitask(seed: int = 0, device: Optional[torch.device] = None) -> Models:
    """``(encoder, cls_head, reg_head)`` as people write them; ``reg_head`` starts with ``nn.ReLU(inplace=True)``.

    Initialised from ``seed`` without touching the global random state; the same on every device.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(fresh(seed))
        encoder = nn.Sequential(nn.Linear(IN_FEATURES, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH))
        cls_head = nn.Linear(WIDTH, CLASSES)
        reg_head = nn.Sequential(nn.ReLU(inplace=True), nn.Linear(WIDTH, 1))  # "saves memory"
    target = device or "cpu"
    return encoder.to(target), cls_head.to(target), reg_head.to(target)


class ResidualHead(nn.Module):
    """A regression head written as a residual block, in place "to save memory": ``out(relu(h + fc(h)))``."""

    def __init__(self, width: int = WIDTH) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.out = nn.Linear(width, 1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h += self.fc(h)             # the skip connection, in place: rewrites the input the caller passed
        return self.out(h.relu_())  # and the ReLU, in place too


def make_residual_multitask(seed: int = 0, device: Optional[torch.device] = None
                            ) -> Tuple[nn.Sequential, nn.Linear, ResidualHead]:
    """``(encoder, cls_head, reg_head)`` with ``reg_head`` a ``ResidualHead``; seeded, global RNG untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(fresh(seed))
        encoder = nn.Sequential(nn.Linear(IN_FEATURES, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH))
        cls_head = nn.Linear(WIDTH, CLASSES)
        reg_head = ResidualHead()
    target = device or "cpu"
    return encoder.to(target), cls_head.to(target), reg_head.to(target)


def residual_reference_forward(encoder: nn.Module, cls_head: nn.Module, reg_head: ResidualHead,
                               x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """The residual model's forward, out of place: the values the in-place one computes, and a graph that works."""
    h = encoder(x)
    return cls_head(h), reg_head.out(torch.relu(h + reg_head.fc(h)))


def make_batch(seed: int = 0, device: Optional[torch.device] = None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x, labels, targets)``: inputs, class labels for the classifier, regression targets ``[BATCH]``."""
    generator = torch.Generator().manual_seed(fresh(seed + 6000))
    x = torch.randn(BATCH, IN_FEATURES, generator=generator)
    labels = torch.randint(0, CLASSES, (BATCH,), generator=generator)
    targets = torch.randn(BATCH, generator=generator)
    target = device or "cpu"
    return x.to(target), labels.to(target), targets.to(target)


def task_losses(logits: torch.Tensor, value: torch.Tensor, labels: torch.Tensor,
                targets: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(l_cls, l_reg)``: cross-entropy of the classifier, mean squared error of the regression head."""
    return F.cross_entropy(logits, labels), F.mse_loss(value.squeeze(1), targets)


def multitask_parameters(encoder: nn.Module, cls_head: nn.Module, reg_head: nn.Module) -> Dict[str, torch.Tensor]:
    """Every parameter by name: ``encoder.0.weight`` ... ``reg_head.1.bias``."""
    models = {"encoder": encoder, "cls_head": cls_head, "reg_head": reg_head}
    return {f"{model}.{name}": p for model, module in models.items() for name, p in module.named_parameters()}


def reference_forward(encoder: nn.Module, cls_head: nn.Module, reg_head: nn.Sequential,
                      x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """The right forward pass: the same computation, with the regression head's ReLU out of place."""
    h = encoder(x)
    return cls_head(h), reg_head[1](torch.relu(h))


def reference_gradients(models: Tuple[nn.Module, nn.Module, nn.Module], x: torch.Tensor, labels: torch.Tensor,
                        targets: torch.Tensor, losses: str = "both",
                        forward: Callable[..., Tuple[torch.Tensor, torch.Tensor]] = reference_forward,
                        ) -> Dict[str, torch.Tensor]:
    """Plain-torch gradients of ``l_cls + l_reg`` (or of ``"cls"`` / ``"reg"`` alone), on copies of ``models``.

    Keys: every name of ``multitask_parameters`` and ``"x"`` (the input). A parameter the loss does not reach
    gets zeros. The models passed in are left untouched. ``forward``: ``residual_reference_forward`` for the
    residual model.
    """
    encoder, cls_head, reg_head = (copy.deepcopy(model) for model in models)
    named = multitask_parameters(encoder, cls_head, reg_head)
    x = x.detach().clone().requires_grad_(True)
    l_cls, l_reg = task_losses(*forward(encoder, cls_head, reg_head, x), labels, targets)
    loss = {"both": l_cls + l_reg, "cls": l_cls, "reg": l_reg}[losses]
    wanted = [*named.values(), x]
    grads = torch.autograd.grad(loss, wanted, allow_unused=True)
    return {name: torch.zeros_like(t) if g is None else g
            for name, t, g in zip([*named, "x"], wanted, grads)}
