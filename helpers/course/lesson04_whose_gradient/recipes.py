"""Ways to compute two models' gradients from two losses that share a term.

Each recipe is a function ``recipe(m1, m2, x1, x2, losses)`` that runs the forward pass itself, leaves the gradients
in ``.grad`` (zeroed first), and returns the losses it built, as a training loop's names would hold them.
``losses(o1, o2)`` returns ``(l1, l2)``. What each costs is measured in ``costs.py``.
"""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import torch
from torch import nn

Losses = Callable[[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor]]
Pair = Tuple[torch.Tensor, torch.Tensor]
Recipe = Callable[[nn.Module, nn.Module, torch.Tensor, torch.Tensor, Losses], Pair]


def _zero(*models: nn.Module) -> None:
    for model in models:
        model.zero_grad(set_to_none=True)


def copied_fix(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses) -> Pair:
    """The widely copied fix: both backward passes into both models. Each model gets the gradient of L1 + L2."""
    _zero(m1, m2)
    l1, l2 = losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True)
    l2.backward()
    return l1, l2


def recipe_a_inputs(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses) -> Pair:
    """(a) Each backward restricted to its own model's parameters with ``inputs=``."""
    _zero(m1, m2)
    l1, l2 = losses(m1(x1), m2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(inputs=list(m2.parameters()))
    return l1, l2


def recipe_b_autograd_grad(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses) -> Pair:
    """(b) ``torch.autograd.grad`` for each loss and its own model; the first call still needs retain_graph."""
    _zero(m1, m2)
    l1, l2 = losses(m1(x1), m2(x2))
    grads1 = torch.autograd.grad(l1, list(m1.parameters()), retain_graph=True)
    grads2 = torch.autograd.grad(l2, list(m2.parameters()))
    for param, grad in zip([*m1.parameters(), *m2.parameters()], [*grads1, *grads2]):
        param.grad = grad
    return l1, l2


def recipe_c_detach(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses) -> Pair:
    """(c) Each loss sees the other model's output detached: one backward pass, no retain_graph."""
    _zero(m1, m2)
    o1, o2 = m1(x1), m2(x2)
    l1, _ = losses(o1, o2.detach())
    _, l2 = losses(o1.detach(), o2)
    (l1 + l2).backward()
    return l1, l2


def recipe_d_sum(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor, losses: Losses) -> Pair:
    """(d) The summed loss: both models trained on L1 + L2 - right only when the objective is joint."""
    _zero(m1, m2)
    l1, l2 = losses(m1(x1), m2(x2))
    (l1 + l2).backward()
    return l1, l2


ONE_PASS_LIMIT = "(d) sum = one-pass limit"
RECIPES: Dict[str, Recipe] = {
    "copied fix": copied_fix,
    "(a) backward(inputs=)": recipe_a_inputs,
    "(b) autograd.grad": recipe_b_autograd_grad,
    "(c) detach the other": recipe_c_detach,
    ONE_PASS_LIMIT: recipe_d_sum,
}
