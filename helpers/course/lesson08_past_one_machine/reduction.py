"""When a DDP wrapper writes its averages into ``.grad``: section 2 of notebook 08, on every rank.

One DDP around both models (``failures.BothModels``): ``between_the_backward_passes`` looks at M1's ``.grad``,
at the reducer and at the bucket all-reduces after ``l1.backward(inputs=M1)`` and again after
``l2.backward(inputs=M2)``. ``drift_of`` runs a few SGD steps of ``two_backward_step`` in each of the ``WAYS``: one
wrapper or one per model, M1's optimizer stepped between the two backward passes or after both.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import torch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from helpers.course.lesson08_past_one_machine.failures import BothModels
from helpers.course.lesson08_past_one_machine.replicas import (
    flat_weights,
    global_batch,
    named_grads,
    rank_device,
    reduction_finished,
    wrap,
)
from helpers.course.models import make_two_models, two_losses


def _count_bucket_all_reduces(model: nn.Module, counted: List[int]) -> None:
    """DDP's own all-reduce, through a communication hook that also appends each bucket's parameter count."""
    def hook(process_group, bucket):  # no annotations: DDP rejects any but its own classes
        counted.append(len(bucket.parameters()))
        return default_hooks.allreduce_hook(process_group, bucket)
    model.register_comm_hook(None, hook)


def between_the_backward_passes(rank: int, world_size: int, seed: int = 0) -> Dict[str, Dict[str, Any]]:
    """One DDP around both models, ``l1.backward(retain_graph=True, inputs=M1)`` then ``l2.backward(inputs=M2)``:
    after each, every ``.grad``, whether the reducer finished its reduction, and the buckets all-reduced so far
    (each one's number of parameters)."""
    device = rank_device(rank)
    x1, x2 = (x.chunk(world_size)[rank].to(device) for x in global_batch(seed, world_size))
    m1, m2 = make_two_models(seed)
    both = wrap(BothModels(m1, m2), rank)
    buckets: List[int] = []
    _count_bucket_all_reduces(both, buckets)
    l1, l2 = two_losses(*both(x1, x2))
    found = {}
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    found["after l1.backward"] = {"grads": named_grads(M1=m1, M2=m2), "finished": reduction_finished(both),
                                  "buckets all-reduced": list(buckets)}
    l2.backward(inputs=list(m2.parameters()))
    found["after l2.backward"] = {"grads": named_grads(M1=m1, M2=m2), "finished": reduction_finished(both),
                                  "buckets all-reduced": list(buckets)}
    return found


def two_backward_step(forward: Callable[[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor]],
                      m1: nn.Module, m2: nn.Module, opt1: torch.optim.Optimizer, opt2: torch.optim.Optimizer,
                      x1: torch.Tensor, x2: torch.Tensor, step_between: bool) -> None:
    """One training step, each backward restricted to its model; ``forward(x1, x2)`` gives both outputs (through
    one DDP around both models, or one DDP per model)."""
    opt1.zero_grad()
    opt2.zero_grad()
    l1, l2 = two_losses(*forward(x1, x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    if step_between:
        opt1.step()                  # M1's .grad now: is it averaged yet?
    l2.backward(inputs=list(m2.parameters()))
    if not step_between:
        opt1.step()
    opt2.step()


def drift_of(rank: int, world_size: int, one_wrapper: bool, step_between: bool, steps: int = 3, seed: int = 0,
             lr: float = 0.1) -> List[torch.Tensor]:
    """``steps`` steps of ``two_backward_step`` with plain SGD, both models in one DDP or one DDP each; this rank's
    weights after each step."""
    device = rank_device(rank)
    m1, m2 = make_two_models(seed)
    if one_wrapper:
        forward = wrap(BothModels(m1, m2), rank)
    else:
        d1, d2 = wrap(m1, rank), wrap(m2, rank)

        def forward(x1: torch.Tensor, x2: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
            return d1(x1), d2(x2)
    opt1, opt2 = torch.optim.SGD(m1.parameters(), lr=lr), torch.optim.SGD(m2.parameters(), lr=lr)
    history = []
    for step in range(steps):
        x1, x2 = (x.chunk(world_size)[rank].to(device) for x in global_batch(seed + step, world_size))
        two_backward_step(forward, m1, m2, opt1, opt2, x1, x2, step_between)
        history.append(flat_weights([m1, m2]))
    return history


WAYS = {  # way of stepping -> (one DDP around both models, opt1.step() between the backward passes)
    "one DDP around both models, opt1.step() between the two backward passes": (True, True),
    "one DDP around both models, both steps after the two backward passes": (True, False),
    "one DDP per model, opt1.step() between the two backward passes": (False, True),
}


def measure(rank: int, world_size: int, seed: int = 0) -> Dict[str, Any]:
    """Everything section 2 reads: ``"timeline"`` (``between_the_backward_passes``) and ``"weights"`` (per way of
    stepping in ``WAYS``, ``drift_of``)."""
    return {"timeline": between_the_backward_passes(rank, world_size, seed),
            "weights": {way: drift_of(rank, world_size, *flags, seed=seed) for way, flags in WAYS.items()}}
