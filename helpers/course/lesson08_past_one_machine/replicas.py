"""What every rank of a DDP run gives back, and how the ranks compare: with each other, and with a reference.

Used on each rank (``rank_device``, ``wrap``, ``reduction_finished``, ``peak_memory_mib``, ``named_grads``,
``flat_weights``) and back in the notebook's process
(``same``, ``recipe_table``, ``drift``).
"""
from __future__ import annotations

import sys
from typing import Dict, Iterable, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from helpers.course.models import BATCH, make_inputs

Gradients = Dict[str, Optional[torch.Tensor]]  # "M1.0.weight" -> its gradient (None: none arrived)


def global_batch(seed: int, world_size: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Inputs for M1 and M2: one batch of BATCH rows per rank."""
    return make_inputs(seed, batch=BATCH * world_size)


def rank_device(rank: int) -> torch.device:
    """This rank's GPU under NCCL, else the CPU (gloo)."""
    return torch.device("cuda", rank) if dist.get_backend() == "nccl" else torch.device("cpu")


def wrap(model: nn.Module, rank: int, **options: object) -> DistributedDataParallel:
    """``model`` in DDP, on this rank's device (``options`` go to DDP: ``find_unused_parameters``, ...)."""
    device = rank_device(rank)
    return DistributedDataParallel(model.to(device), device_ids=[rank] if device.type == "cuda" else None, **options)


def reduction_finished(model: DistributedDataParallel) -> bool:
    """DDP's own check (``_check_reducer_finalized``, which raises when not) that the wrapper's reducer finished
    this iteration's reduction: every bucket all-reduced and the averages written into ``.grad``."""
    try:
        model._check_reducer_finalized()
    except RuntimeError:
        return False
    return True


def peak_memory_mib() -> float:
    """This process's peak resident memory so far, in MiB (``resource.getrusage``; 0 where it is missing)."""
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes on macOS, KiB on Linux


def named_grads(**models: nn.Module) -> Gradients:
    """Every parameter's ``.grad`` as a CPU copy, named ``<model>.<parameter>``."""
    return {f"{label}.{name}": None if p.grad is None else p.grad.detach().cpu().clone()
            for label, model in models.items() for name, p in model.named_parameters()}


def flat_weights(models: Iterable[nn.Module]) -> torch.Tensor:
    """Every weight of ``models``, flattened into one CPU vector."""
    return torch.cat([p.detach().reshape(-1).cpu() for model in models for p in model.parameters()])


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
    for name in per_rank[0]:
        grads = [rank_result[name] for rank_result in per_rank]
        rows.append((name, all(same(g, grads[0]) for g in grads[1:]), all(same(g, reference) for g in grads)))
    return rows


def drift(per_rank: List[List[torch.Tensor]]) -> List[float]:
    """After each step, the largest difference between any rank's weights and rank 0's."""
    return [max(float((rank[step] - per_rank[0][step]).abs().max()) for rank in per_rank)
            for step in range(len(per_rank[0]))]
