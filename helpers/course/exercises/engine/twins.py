"""Twins for checking a training step: an optimizer that replays the steps ``step_watch.watch`` recorded, to prove
each was that optimizer's own update, and model copies for computing a reference at given weights::

    make = step_watch.kind("Adam")
    optimizer = make(model.parameters())
    record, twin = step_watch.watch(optimizer, "opt"), TwinOptimizer(make, model.parameters())
    start, count = weights(model.parameters()), len(record.calls)
    learner_step(model, optimizer, ...)
    where = twin.replay(list(model.parameters()), start, step_watch.calls_in(record, count))  # None, or where
"""
from __future__ import annotations

import copy
from typing import Iterable, List, Optional, Sequence

import torch
from torch import nn

from helpers.course.exercises.engine.step_watch import MakeOptimizer, StepCall, where_moved
from helpers.tools.gradients import close


def weights(params: Iterable[torch.Tensor]) -> List[torch.Tensor]:
    """The parameters' current values (copies)."""
    return [p.detach().clone() for p in params]


class TwinOptimizer:
    """An optimizer made by ``make``, as the watched one was, on copies of its parameters.

    Make it before the watched optimizer's first step and replay every step in order: its state (momentum, Adam's
    moments) then follows the watched optimizer's.
    """

    def __init__(self, make: MakeOptimizer, params: Iterable[nn.Parameter]) -> None:
        self.params = [nn.Parameter(p.detach().clone()) for p in params]
        self.optimizer = make(self.params)

    def replay(self, params: Sequence[torch.Tensor], start: List[torch.Tensor],
               calls: List[StepCall]) -> Optional[str]:
        """Prove that from ``start`` the parameters moved only by ``calls``, each the optimizer's own update with
        the gradient it was given. None, or where they changed otherwise: ``"before"``, ``"between"`` or
        ``"after"`` the steps (``step_watch.where_moved``), or ``"in"`` a step (another update than this
        optimizer's, with the recorded gradient)."""
        where = where_moved(params, start, calls)
        if where is not None:
            return where
        for call in calls:
            with torch.no_grad():
                for twin, before, grad in zip(self.params, call.before, call.grads):
                    twin.copy_(before)
                    twin.grad = None if grad is None else grad.clone()
            self.optimizer.step()
            if not all(close(t, a) for t, a in zip(self.params, call.after)):
                return "in"
        return None


def copy_module(module: nn.Module, at: Optional[Sequence[torch.Tensor]] = None) -> nn.Module:
    """A deep copy (mode and buffers included) with no ``.grad``, holding the weights ``at`` when given: for
    computing a reference at those weights."""
    twin = copy.deepcopy(module)
    for param in twin.parameters():
        param.grad = None
    if at is not None:
        with torch.no_grad():
            for param, weight in zip(twin.parameters(), at):
                param.copy_(weight)
    return twin
