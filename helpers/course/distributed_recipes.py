"""The two-loss recipes under DistributedDataParallel: each rank's gradients, and the single-process reference.

Groundwork for the course's notebook on DDP (issue 15): ``recipe_gradients`` runs on every rank of a process group
(start it with ``helpers.tools.spawn.run_distributed``), wraps the course's two models in DDP, gives each rank its
shard of one global batch, applies each recipe once and returns every rank's ``.grad``. ``reference_gradients``
computes, in this process, what each model should receive: its own loss's gradient on the whole global batch
(DDP averages the ranks' gradients, and every shard is the same size, so that is the same number).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Tuple

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from helpers.course.models import BATCH, make_inputs, make_two_models, own_term, shared_term, two_losses

Gradients = Dict[str, torch.Tensor]  # "M1.0.weight" -> its gradient


def _seed_fix(m1: nn.Module, m2: nn.Module, o1: torch.Tensor, o2: torch.Tensor) -> None:
    """The widely copied fix: both backward passes through everything."""
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


def global_batch(seed: int, world_size: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Inputs for M1 and M2: one batch of BATCH rows per rank."""
    return make_inputs(seed, batch=BATCH * world_size)


def _named_grads(m1: nn.Module, m2: nn.Module) -> Gradients:
    grads = {}
    for label, model in (("M1", m1), ("M2", m2)):
        for name, parameter in model.named_parameters():
            grads[f"{label}.{name}"] = parameter.grad.detach().cpu().clone() if parameter.grad is not None else None
    return grads


def recipe_gradients(rank: int, world_size: int, seed: int = 0) -> Dict[str, Gradients]:
    """On one rank of a started process group: each recipe's gradients on this rank (recipe name -> gradients)."""
    device = torch.device("cuda", rank) if torch.distributed.get_backend() == "nccl" else torch.device("cpu")
    x1, x2 = (x.chunk(world_size)[rank].to(device) for x in global_batch(seed, world_size))
    found = {}
    for name, recipe in RECIPES.items():
        m1, m2 = make_two_models(seed, device)
        ids = [rank] if device.type == "cuda" else None
        d1, d2 = DistributedDataParallel(m1, device_ids=ids), DistributedDataParallel(m2, device_ids=ids)
        recipe(d1, d2, d1(x1), d2(x2))
        found[name] = _named_grads(m1, m2)
    return found


def reference_gradients(seed: int, world_size: int) -> Gradients:
    """In this process, no DDP: M1's gradient of L1 and M2's gradient of L2, on the whole global batch."""
    m1, m2 = make_two_models(seed)
    x1, x2 = global_batch(seed, world_size)
    l1, l2 = two_losses(m1(x1), m2(x2))
    p1, p2 = list(m1.parameters()), list(m2.parameters())
    g1, g2 = torch.autograd.grad(l1, p1, retain_graph=True), torch.autograd.grad(l2, p2)
    names = [f"M1.{n}" for n, _ in m1.named_parameters()] + [f"M2.{n}" for n, _ in m2.named_parameters()]
    return dict(zip(names, [*g1, *g2]))


def same(a: Gradients, b: Gradients, tolerance: float = 1e-5) -> bool:
    """Every gradient in ``a`` equals the one in ``b`` (relative to its size), and none is missing."""
    if a.keys() != b.keys():
        return False
    for name in a:
        if a[name] is None or b[name] is None:
            if a[name] is not b[name]:
                return False
            continue
        scale = max(float(b[name].abs().max()), 1e-12)
        if float((a[name] - b[name]).abs().max()) > tolerance * scale:
            return False
    return True


def recipe_table(per_rank: List[Dict[str, Gradients]], reference: Gradients) -> List[Tuple[str, bool, bool]]:
    """One row per recipe: (name, equal on every rank, equal to the reference on every rank)."""
    rows = []
    for name in RECIPES:
        grads = [rank_result[name] for rank_result in per_rank]
        rows.append((name, all(same(g, grads[0]) for g in grads[1:]), all(same(g, reference) for g in grads)))
    return rows


def _weights(m1: nn.Module, m2: nn.Module) -> torch.Tensor:
    """Every weight of both models, flattened into one CPU vector."""
    return torch.cat([p.detach().reshape(-1).cpu() for p in [*m1.parameters(), *m2.parameters()]])


def recipe_drift(rank: int, world_size: int, recipe_name: str, steps: int = 5, seed: int = 0,
                 lr: float = 0.1) -> List[torch.Tensor]:
    """On one rank: ``steps`` SGD steps with ``recipe_name``; this rank's weights after each step.

    The replicas start equal (DDP broadcasts rank 0's weights when it wraps a model). Where a recipe leaves the ranks
    with different gradients, their weights move apart, step after step, with nothing raised.
    """
    device = torch.device("cuda", rank) if torch.distributed.get_backend() == "nccl" else torch.device("cpu")
    recipe = RECIPES[recipe_name]
    m1, m2 = make_two_models(seed, device)
    ids = [rank] if device.type == "cuda" else None
    d1, d2 = DistributedDataParallel(m1, device_ids=ids), DistributedDataParallel(m2, device_ids=ids)
    optimizers = [torch.optim.SGD(m1.parameters(), lr=lr), torch.optim.SGD(m2.parameters(), lr=lr)]
    history = []
    for step in range(steps):
        x1, x2 = (x.chunk(world_size)[rank].to(device) for x in global_batch(seed + step, world_size))
        recipe(d1, d2, d1(x1), d2(x2))
        for optimizer in optimizers:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        history.append(_weights(m1, m2))
    return history


def drift(per_rank: List[List[torch.Tensor]]) -> List[float]:
    """After each step, the largest difference between any rank's weights and rank 0's."""
    return [max(float((rank[step] - per_rank[0][step]).abs().max()) for rank in per_rank)
            for step in range(len(per_rank[0]))]


def every_recipe_drift(rank: int, world_size: int, steps: int = 4, seed: int = 0) -> Dict[str, List[torch.Tensor]]:
    """``recipe_drift`` for every recipe in one process group (recipe name -> this rank's weights per step)."""
    return {name: recipe_drift(rank, world_size, name, steps, seed) for name in RECIPES}


def unfinished_reduction(rank: int, world_size: int, seed: int = 0) -> str:
    """On one rank: a backward restricted to M1's head leaves M1's first layer without a gradient; DDP's reducer then
    refuses the next forward. Returns what the second forward raised ("" when nothing did)."""
    m1, m2 = make_two_models(seed)
    d1 = DistributedDataParallel(m1)
    x1, x2 = (x.chunk(world_size)[rank] for x in global_batch(seed, world_size))
    l1, _ = two_losses(d1(x1), m2(x2))
    l1.backward(inputs=[m1[2].weight, m1[2].bias])
    try:
        d1(x1)
    except RuntimeError as error:
        return str(error)
    return ""
