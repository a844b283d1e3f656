"""DDP's own errors with two models and two losses, each on every rank of a process group.

Each scenario raises on every rank as PyTorch does, or returns when the fix works. ``tour`` runs them all in one
pair of processes, each scenario in a process group of its own (a DDP model that raised is never used again), and
returns what each raised; ``reraise`` raises it again in the notebook, so ``expect_error`` can check it.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.checkpoint import checkpoint

from helpers.course.lesson08_past_one_machine.recipes import global_batch
from helpers.course.lesson08_past_one_machine.replicas import rank_device, wrap
from helpers.course.models import make_two_models, own_term, shared_term, two_losses


class BothModels(nn.Module):
    """M1 and M2 in one module, as a script that wraps "the whole model" in one DDP holds them."""

    def __init__(self, m1: nn.Module, m2: nn.Module) -> None:
        super().__init__()
        self.m1, self.m2 = m1, m2

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.m1(x1), self.m2(x2)


class TwoHeads(nn.Module):
    """One trunk, two heads: head ``a`` feeds one loss, head ``b`` another (actor-critic, multi-task)."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        m1, m2 = make_two_models(seed)
        self.trunk = nn.Sequential(m1[0], m1[1])
        self.a, self.b = m1[2], m2[2]

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(x)
        return self.a(h), self.b(h)


class CheckpointedHead(nn.Module):
    """M1 with its head under a reentrant activation checkpoint (recomputed in the backward, to save memory)."""

    def __init__(self, model: nn.Sequential, reentrant: bool = True) -> None:
        super().__init__()
        self.model, self.reentrant = model, reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.model[1](self.model[0](x))
        return checkpoint(self.model[2], hidden, use_reentrant=self.reentrant)


def _shard(rank: int, world_size: int, seed: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
    device = rank_device(rank)
    return tuple(x.chunk(world_size)[rank].to(device) for x in global_batch(seed, world_size))


def one_wrapper(rank: int, world_size: int, second_backward_restricted: bool, **ddp: Any) -> None:
    """Both models in one DDP; ``l1.backward(retain_graph=True, inputs=M1)``, then ``l2.backward()`` over
    everything (raises: M1's parameters get a second gradient) or ``l2.backward(inputs=M2)`` (works)."""
    m1, m2 = make_two_models(0)
    both = wrap(BothModels(m1, m2), rank, **ddp)
    l1, l2 = two_losses(*both(*_shard(rank, world_size)))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    if second_backward_restricted:
        l2.backward(inputs=list(m2.parameters()))
    else:
        l2.backward()


def restricted_to_the_head(rank: int, world_size: int, find_unused_parameters: bool, **ddp: Any) -> None:
    """``l1.backward(inputs=M1's head)``: M1's first layer gets no gradient; the next forward raises (with or
    without ``find_unused_parameters``: the layer was used in the forward, so DDP waits for it)."""
    m1, m2 = make_two_models(0)
    d1 = wrap(m1, rank, find_unused_parameters=find_unused_parameters, **ddp)
    x1, x2 = _shard(rank, world_size)
    l1, _ = two_losses(d1(x1), m2.to(x2.device)(x2))
    l1.backward(inputs=list(m1[2].parameters()))
    d1(x1)


def one_head_per_step(rank: int, world_size: int, find_unused_parameters: bool, steps: int = 2, **ddp: Any) -> None:
    """A trunk with two heads in DDP; this step's loss uses head ``a`` only. Without ``find_unused_parameters``
    DDP waits for head ``b``'s gradient, and the next forward raises."""
    model = wrap(TwoHeads(0), rank, find_unused_parameters=find_unused_parameters, **ddp)
    x1, _ = _shard(rank, world_size)
    for _ in range(steps):
        a, _unused = model(x1)
        own_term(a).backward()


def alternating_losses(rank: int, world_size: int, static_graph: bool, steps: int = 2, **ddp: Any) -> None:
    """Both models in one DDP; even steps train M1 with L1 (``inputs=M1``), odd steps M2 with L2. With
    ``static_graph=True`` DDP assumes the set of parameters with a gradient never changes, and raises."""
    m1, m2 = make_two_models(0)
    both = wrap(BothModels(m1, m2), rank, static_graph=static_graph, **ddp)
    x1, x2 = _shard(rank, world_size)
    for step in range(steps):
        l1, l2 = two_losses(*both(x1, x2))
        if step % 2 == 0:
            l1.backward(inputs=list(m1.parameters()))
        else:
            l2.backward(inputs=list(m2.parameters()))


def checkpointed(rank: int, world_size: int, reentrant: bool = True, **ddp: Any) -> None:
    """M1's head under an activation checkpoint, in DDP; two steps of L1. With ``find_unused_parameters=True`` a
    reentrant checkpoint's backward marks the head's parameters ready a second time, and raises; ``static_graph=True``
    works, and so does a non-reentrant checkpoint."""
    m1, m2 = make_two_models(0)
    d1 = wrap(CheckpointedHead(m1, reentrant), rank, **ddp)
    x1, x2 = _shard(rank, world_size)
    for _ in range(2):
        l1, _l2 = two_losses(d1(x1), m2.to(x2.device)(x2))
        l1.backward()


def find_unused_cost(rank: int, world_size: int, steps: int = 20, repeats: int = 2) -> Dict[str, List[float]]:
    """Seconds per ``steps`` steps of the detach recipe with ``find_unused_parameters`` off and on, alternating, in
    one process group (each flag's runs interleaved with the other's, so both see the same machine)."""
    x1, x2 = _shard(rank, world_size)
    times: Dict[str, List[float]] = {"find_unused_parameters=False": [], "find_unused_parameters=True": []}
    for repeat in range(repeats):
        for flag in ((False, True) if repeat % 2 == 0 else (True, False)):
            m1, m2 = make_two_models(0)
            d1, d2 = wrap(m1, rank, find_unused_parameters=flag), wrap(m2, rank, find_unused_parameters=flag)
            dist.barrier()
            start = time.perf_counter()
            for _ in range(steps):
                o1, o2 = d1(x1), d2(x2)
                (shared_term(o1, o2.detach()) + own_term(o1) + shared_term(o1.detach(), o2) + own_term(o2)).backward()
            dist.barrier()
            times[f"find_unused_parameters={flag}"].append(time.perf_counter() - start)
    return times


SCENARIOS: Dict[str, Tuple[Callable[..., Any], Dict[str, Any]]] = {
    "one DDP around both models; inputs=M1, then l2.backward()": (one_wrapper, {"second_backward_restricted": False}),
    "one DDP around both models; inputs=M1, then inputs=M2": (one_wrapper, {"second_backward_restricted": True}),
    "two heads, one loss: find_unused_parameters=False": (one_head_per_step, {"find_unused_parameters": False}),
    "two heads, one loss: find_unused_parameters=True": (one_head_per_step, {"find_unused_parameters": True}),
    "inputs=M1's head only, find_unused_parameters=True": (restricted_to_the_head, {"find_unused_parameters": True}),
    "static_graph=True, one model trained per step": (alternating_losses, {"static_graph": True}),
    "reentrant checkpoint, find_unused_parameters=True": (checkpointed, {"find_unused_parameters": True}),
    "reentrant checkpoint, static_graph=True": (checkpointed, {"static_graph": True}),
    "non-reentrant checkpoint, find_unused_parameters=True": (checkpointed, {"reentrant": False,
                                                                              "find_unused_parameters": True}),
}


def tour(rank: int, world_size: int) -> Dict[str, Any]:
    """Every scenario, each with DDP on a new process group; what each raised on this rank (None: nothing), and
    under ``"cost"`` the timing of ``find_unused_cost``."""
    found: Dict[str, Any] = {}
    for name, (scenario, options) in SCENARIOS.items():
        group = dist.new_group(list(range(world_size)))
        try:
            scenario(rank, world_size, process_group=group, **options)
            found[name] = None
        except RuntimeError as error:
            found[name] = RuntimeError(str(error))
        dist.barrier()
    found["cost"] = find_unused_cost(rank, world_size)
    return found


def reraise(per_rank: List[Dict[str, Any]], scenario: str) -> None:
    """Raise again, here, what rank 0 raised in ``scenario``; nothing when no rank raised."""
    raised: Optional[BaseException] = next((rank[scenario] for rank in per_rank if rank[scenario] is not None), None)
    if raised is not None:
        raise raised
