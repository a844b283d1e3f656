"""DDP's own errors with two models and two losses, and the silent cases next to them, on every rank of a group.

Each scenario raises on every rank as PyTorch does, or returns (some with the gradients they left, which the
notebook compares across the ranks and with the reference). ``tour`` runs them all in one pair of processes, each
scenario in a process group of its own (a DDP model that raised is never used again), with what ``find_unused``
sees and measures, and returns what each raised and left; ``reraise`` raises again in the notebook what a rank
raised, so ``expect_error`` can check it.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.checkpoint import checkpoint

from helpers.course.lesson08_past_one_machine import find_unused
from helpers.course.lesson08_past_one_machine.replicas import (
    Gradients,
    global_batch,
    named_grads,
    peak_memory_mib,
    rank_device,
    wrap,
)
from helpers.course.models import make_two_models, own_term, two_losses


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
    """M1 with its head under an activation checkpoint, reentrant by default (recomputed in the backward, to save
    memory)."""

    def __init__(self, model: nn.Sequential, reentrant: bool = True) -> None:
        super().__init__()
        self.model, self.reentrant = model, reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.model[1](self.model[0](x))
        return checkpoint(self.model[2], hidden, use_reentrant=self.reentrant)


def _shard(rank: int, world_size: int, seed: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
    device = rank_device(rank)
    return tuple(x.chunk(world_size)[rank].to(device) for x in global_batch(seed, world_size))


def one_wrapper(rank: int, world_size: int, second_backward_restricted: bool, **ddp: Any) -> Gradients:
    """Both models in one DDP; ``l1.backward(retain_graph=True, inputs=M1)``, then ``l2.backward()`` over
    everything (raises: M1's parameters get a second gradient before the wrapper has finished its reduction) or
    ``l2.backward(inputs=M2)`` (works)."""
    m1, m2 = make_two_models(0)
    both = wrap(BothModels(m1, m2), rank, **ddp)
    l1, l2 = two_losses(*both(*_shard(rank, world_size)))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    if second_backward_restricted:
        l2.backward(inputs=list(m2.parameters()))
    else:
        l2.backward()
    return named_grads(M1=m1, M2=m2)


def one_wrapper_copied_fix(rank: int, world_size: int, **ddp: Any) -> Gradients:
    """Both models in one DDP, the copied fix: ``l1.backward(retain_graph=True)`` reaches every parameter, so the
    wrapper finishes in it; ``l2.backward()`` then adds this rank's own L2 gradient, and nothing raises."""
    m1, m2 = make_two_models(0)
    both = wrap(BothModels(m1, m2), rank, **ddp)
    l1, l2 = two_losses(*both(*_shard(rank, world_size)))
    l1.backward(retain_graph=True)
    l2.backward()
    return named_grads(M1=m1, M2=m2)


def one_ddp_per_model(rank: int, world_size: int, second_backward_restricted: bool, **ddp: Any) -> Gradients:
    """One DDP per model; ``l1.backward(retain_graph=True, inputs=M1)`` (M1's wrapper finishes in it), then
    ``l2.backward()`` over everything (M1's second gradient arrives after that: not averaged, nothing raised) or
    ``l2.backward(inputs=M2)``."""
    m1, m2 = make_two_models(0)
    d1, d2 = wrap(m1, rank, **ddp), wrap(m2, rank, **ddp)
    x1, x2 = _shard(rank, world_size)
    l1, l2 = two_losses(d1(x1), d2(x2))
    l1.backward(retain_graph=True, inputs=list(m1.parameters()))
    if second_backward_restricted:
        l2.backward(inputs=list(m2.parameters()))
    else:
        l2.backward()
    return named_grads(M1=m1, M2=m2)


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


def checkpointed(rank: int, world_size: int, reentrant: bool = True, **ddp: Any) -> Gradients:
    """M1's head under an activation checkpoint, in DDP; two steps of L1 (``.grad`` cleared before each), and M1's
    gradients after the second. With ``find_unused_parameters=True`` a reentrant checkpoint's recomputation marks
    the head's parameters ready a second time, and raises; without the flag, with ``static_graph=True`` or with a
    non-reentrant checkpoint it works."""
    m1, m2 = make_two_models(0)
    d1 = wrap(CheckpointedHead(m1, reentrant), rank, **ddp)
    x1, x2 = _shard(rank, world_size)
    for _ in range(2):
        m1.zero_grad(set_to_none=True)
        l1, _l2 = two_losses(d1(x1), m2.to(x2.device)(x2))
        l1.backward()
    return named_grads(M1=m1)


def checkpoint_walk(rank: int, world_size: int, **ddp: Any) -> List[bool]:
    """A reentrant checkpoint in DDP with ``find_unused_parameters=True``: for each of M1's parameters, whether the
    forward's output leads to its gradient accumulator (what DDP's search after the forward can find)."""
    m1, _ = make_two_models(0)
    d1 = wrap(CheckpointedHead(m1, True), rank, find_unused_parameters=True, **ddp)
    output = d1(_shard(rank, world_size)[0])
    return find_unused.reaches(output, list(m1.parameters()))


SCENARIOS: Dict[str, Tuple[Callable[..., Any], Dict[str, Any]]] = {
    "one DDP around both models; inputs=M1, then l2.backward()": (one_wrapper, {"second_backward_restricted": False}),
    "one DDP around both models; inputs=M1, then inputs=M2": (one_wrapper, {"second_backward_restricted": True}),
    "one DDP around both models; the copied fix": (one_wrapper_copied_fix, {}),
    "one DDP per model; inputs=M1, then l2.backward()": (one_ddp_per_model, {"second_backward_restricted": False}),
    "one DDP per model; inputs=M1, then inputs=M2": (one_ddp_per_model, {"second_backward_restricted": True}),
    "two heads, one loss: find_unused_parameters=False": (one_head_per_step, {"find_unused_parameters": False}),
    "two heads, one loss: find_unused_parameters=True": (one_head_per_step, {"find_unused_parameters": True}),
    "inputs=M1's head only, find_unused_parameters=True": (restricted_to_the_head, {"find_unused_parameters": True}),
    "static_graph=True, one model trained per step": (alternating_losses, {"static_graph": True}),
    "reentrant checkpoint, find_unused_parameters=True": (checkpointed, {"find_unused_parameters": True}),
    "reentrant checkpoint, no find_unused_parameters": (checkpointed, {}),
    "reentrant checkpoint, static_graph=True": (checkpointed, {"static_graph": True}),
    "non-reentrant checkpoint, find_unused_parameters=True": (checkpointed, {"reentrant": False,
                                                                              "find_unused_parameters": True}),
}


def _new_group(world_size: int) -> Any:
    return dist.new_group(list(range(world_size)))


def tour(rank: int, world_size: int) -> Dict[str, Any]:
    """Every scenario, each with DDP on a new process group: what each raised on this rank (None: nothing), and
    under ``"gradients"`` what each that raised nothing left in ``.grad``. Also ``"sink"`` (``find_unused.sink_view``,
    run first: DDP prints its warning once per process), ``"uneven use"`` (``find_unused.uneven_use``),
    ``"checkpoint walk"`` (``checkpoint_walk``), ``"cost"`` (``find_unused.cost``) and ``"peak MiB"``."""
    x1, x2 = _shard(rank, world_size)
    found: Dict[str, Any] = {
        "sink": find_unused.sink_view(rank, world_size, x1, lambda: TwoHeads(0), process_group=_new_group(world_size)),
        "gradients": {}}
    for name, (scenario, options) in SCENARIOS.items():
        group = _new_group(world_size)
        try:
            left = scenario(rank, world_size, process_group=group, **options)
            found[name] = None
            if left is not None:
                found["gradients"][name] = left
        except RuntimeError as error:
            found[name] = RuntimeError(str(error))
        dist.barrier()
    found["uneven use"] = find_unused.uneven_use(rank, world_size, x1, lambda: TwoHeads(0),
                                                 process_group=_new_group(world_size))
    found["checkpoint walk"] = checkpoint_walk(rank, world_size, process_group=_new_group(world_size))
    found["cost"] = find_unused.cost(rank, world_size, x1, x2)
    found["peak MiB"] = peak_memory_mib()
    return found


def reraise(per_rank: List[Dict[str, Any]], scenario: str) -> None:
    """Raise again, here, what rank 0 raised in ``scenario``; nothing when no rank raised."""
    raised: Optional[BaseException] = next((rank[scenario] for rank in per_rank if rank[scenario] is not None), None)
    if raised is not None:
        raise raised
