"""Building blocks for contracts' ``build`` functions: seeded models of several shapes, seeded batches, and a
refill that writes a new batch into the same tensors."""
from __future__ import annotations

from typing import Callable, Dict, Sequence

import torch
from torch import nn

from helpers.course.exercises.engine.step_watch import fill_in_place
from helpers.course.seeds import fresh


def seeded(seed: int, make: Callable[[], nn.Module]) -> nn.Module:
    """``make()`` with torch's global RNG seeded from ``seed`` (and put back afterwards)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(fresh(seed))
        return make()


def mlp(widths: Sequence[int], bias_last: bool = True) -> nn.Sequential:
    """``Linear -> ReLU -> ... -> Linear`` through ``widths``; the last layer with or without bias."""
    layers = []
    for index, (width_in, width_out) in enumerate(zip(widths[:-1], widths[1:])):
        last = index == len(widths) - 2
        layers.append(nn.Linear(width_in, width_out, bias=bias_last or not last))
        if not last:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def randn(seed: int, *shape: int) -> torch.Tensor:
    """A seeded standard-normal tensor (global RNG untouched)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(fresh(seed)))


def refill_with(tensors: Dict[str, torch.Tensor], make: Callable[[int], Dict[str, torch.Tensor]]) -> Callable[
        [int], None]:
    """A ``World.refill``: call ``k`` copies ``make(k)``'s tensors into the same tensor objects, as a loop that
    copies each batch into one preallocated tensor does: an answer that keys a cache on the input tensors then sees
    new data under an old key."""
    def refill(call: int) -> None:
        values = make(call)
        fill_in_place([tensors[name] for name in values], list(values.values()))

    return refill
