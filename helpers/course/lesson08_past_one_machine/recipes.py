"""The two-loss recipes under DistributedDataParallel: each rank's gradients, and the single-process reference.

Notebook 08 runs them on 2 processes: ``recipe_gradients`` runs on every rank of a process group
(start it with ``helpers.tools.spawn.run_distributed``), wraps the course's two models in DDP, gives each rank its
shard of one global batch, applies each recipe once and returns every rank's ``.grad``. ``reference_gradients``
computes, in this process, what each model should receive: its own loss's gradient on the whole global batch
(DDP averages the ranks' gradients, and every shard is the same size, so that is the same number).
"""
from __future__ import annotations

from typing import Callable, Dict, List

import torch
from torch import nn

from helpers.course.lesson08_past_one_machine import reduction, watched
from helpers.course.lesson08_past_one_machine.chained import chained_gradients
from helpers.course.lesson08_past_one_machine.replicas import (
    Gradients,
    flat_weights,
    global_batch,
    named_grads,
    peak_memory_mib,
    rank_device,
    wrap,
)
from helpers.course.models import make_two_models, own_term, shared_term, two_losses


def _seed_fix(m1: nn.Module, m2: nn.Module, o1: torch.Tensor, o2: torch.Tensor) -> None:
    """The widely copied fix from the first Q&A the course grew from (notebook 04): both backward passes through
    everything."""
    l1, l2 = two_losses(o1, o2)
    l1.backward(retain_graph=True)
    l2.backward()


def _inputs_retain(m1: nn.Module, m2: nn.Module, o1: torch.Tensor, o2: torch.Tensor) -> None:
    """Each loss restricted to its own model's parameters, the graph kept for the second backward."""
    l1, l2 = two_losses(o1, o2)
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    l2.backward(inputs=list(m2.parameters()))


def _autograd_grad(m1: nn.Module, m2: nn.Module, o1: torch.Tensor, o2: torch.Tensor) -> None:
    """``torch.autograd.grad`` for each model, written into ``.grad``."""
    l1, l2 = two_losses(o1, o2)
    p1, p2 = list(m1.parameters()), list(m2.parameters())
    for parameter, gradient in zip(p1, torch.autograd.grad(l1, p1, retain_graph=True)):
        parameter.grad = gradient
    for parameter, gradient in zip(p2, torch.autograd.grad(l2, p2)):
        parameter.grad = gradient


def _detach_other(m1: nn.Module, m2: nn.Module, o1: torch.Tensor, o2: torch.Tensor) -> None:
    """Each shared term sees the other model's output detached; one backward of the sum."""
    l1 = shared_term(o1, o2.detach()) + own_term(o1)
    l2 = shared_term(o1.detach(), o2) + own_term(o2)
    (l1 + l2).backward()


RECIPES: Dict[str, Callable[[nn.Module, nn.Module, torch.Tensor, torch.Tensor], None]] = {
    "seed's copied fix: l1.backward(retain_graph=True); l2.backward()": _seed_fix,
    "backward(retain_graph=True, inputs=M1), then backward(inputs=M2)": _inputs_retain,
    "torch.autograd.grad for each model, written into .grad": _autograd_grad,
    "detach the other model's output, one backward of the sum": _detach_other,
}


SHORT_NAMES = dict(zip(RECIPES, ("copied fix", "inputs= + retain_graph", "autograd.grad", "detach the other")))


def recipe_gradients(rank: int, world_size: int, seed: int = 0) -> Dict[str, Gradients]:
    """On one rank of a started process group: each recipe's gradients on this rank (recipe name -> gradients)."""
    device = rank_device(rank)
    x1, x2 = (x.chunk(world_size)[rank].to(device) for x in global_batch(seed, world_size))
    found = {}
    for name, recipe in RECIPES.items():
        m1, m2 = make_two_models(seed)
        d1, d2 = wrap(m1, rank), wrap(m2, rank)
        recipe(d1, d2, d1(x1), d2(x2))
        found[name] = named_grads(M1=m1, M2=m2)
    return found


def _gradients_of(m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor) -> Dict[str, Gradients]:
    """Plain torch, no DDP: ``"L1"`` and ``"L2"`` -> that loss's gradient for every parameter of both models."""
    names = [f"M1.{n}" for n, _ in m1.named_parameters()] + [f"M2.{n}" for n, _ in m2.named_parameters()]
    params = [*m1.parameters(), *m2.parameters()]
    l1, l2 = two_losses(m1(x1), m2(x2))
    return {"L1": dict(zip(names, torch.autograd.grad(l1, params, retain_graph=True))),
            "L2": dict(zip(names, torch.autograd.grad(l2, params)))}


def shard_gradients(rank: int, world_size: int, seed: int = 0) -> Dict[str, Gradients]:
    """On one rank, no DDP: L1's and L2's gradients for both models on this rank's shard alone ("L1", "L2")."""
    x1, x2 = (x.chunk(world_size)[rank] for x in global_batch(seed, world_size))
    return _gradients_of(*make_two_models(seed), x1, x2)


def reference_gradients(seed: int, world_size: int) -> Gradients:
    """In this process, no DDP: M1's gradient of L1 and M2's gradient of L2, on the whole global batch."""
    both = _gradients_of(*make_two_models(seed), *global_batch(seed, world_size))
    return {name: both["L1" if name.startswith("M1.") else "L2"][name] for name in both["L1"]}


def recipe_drift(rank: int, world_size: int, recipe_name: str, steps: int = 5, seed: int = 0,
                 lr: float = 0.1) -> List[torch.Tensor]:
    """On one rank: ``steps`` SGD steps with ``recipe_name``; this rank's weights after each step.

    The replicas start equal (DDP broadcasts rank 0's weights when it wraps a model). Where a recipe leaves the ranks
    with different gradients, their weights move apart, step after step, with nothing raised.
    """
    device = rank_device(rank)
    recipe = RECIPES[recipe_name]
    m1, m2 = make_two_models(seed)
    d1, d2 = wrap(m1, rank), wrap(m2, rank)
    history = []
    for step in range(steps):
        x1, x2 = (x.chunk(world_size)[rank].to(device) for x in global_batch(seed + step, world_size))
        recipe(d1, d2, d1(x1), d2(x2))
        with torch.no_grad():  # plain SGD, written out (what torch.optim.SGD does; it would import more)
            for parameter in [*m1.parameters(), *m2.parameters()]:
                parameter -= lr * parameter.grad
                parameter.grad = None
        history.append(flat_weights([m1, m2]))
    return history


def every_recipe_drift(rank: int, world_size: int, steps: int = 4, seed: int = 0) -> Dict[str, List[torch.Tensor]]:
    """``recipe_drift`` for every recipe in one process group (recipe name -> this rank's weights per step)."""
    return {name: recipe_drift(rank, world_size, name, steps, seed) for name in RECIPES}


def measure_everything(rank: int, world_size: int, seed: int = 0, steps: int = 4) -> Dict[str, object]:
    """One process group for the notebook's measurements: ``"grads"`` (``recipe_gradients``), ``"shard"``
    (``shard_gradients``), ``"weights"`` (``every_recipe_drift``), ``"reduction"`` (``reduction.measure``: one DDP
    around both models), ``"watched"`` (``watched``), ``"chained"`` (``chained.chained_gradients``) and
    ``"peak MiB"`` (this process's peak memory)."""

    return {"grads": recipe_gradients(rank, world_size, seed), "shard": shard_gradients(rank, world_size, seed),
            "weights": every_recipe_drift(rank, world_size, steps, seed),
            "reduction": reduction.measure(rank, world_size, seed),
            "watched": watched.watched(rank, world_size, RECIPES, global_batch, seed),
            "chained": chained_gradients(rank, world_size, seed), "peak MiB": peak_memory_mib()}
