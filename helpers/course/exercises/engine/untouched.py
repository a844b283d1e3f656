"""State a learner's function must leave as it found it, beyond what ``step_watch.snapshot`` covers: the ``.grad``
of parameters it was not asked to fill, and global settings (default dtype, anomaly mode, grad mode).

A checker takes ``grads_before = held_grads(params)`` before the call, then asks ``grad_change(...)`` and
``settings_change(...)`` after it, and fails with what they say.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import torch

from helpers.course.seeds import fresh
from helpers.language import tr

Held = List[Optional[torch.Tensor]]


def held_grads(params: Sequence[torch.Tensor]) -> Held:
    """A copy of each parameter's ``.grad`` (None where it has none)."""
    return [None if p.grad is None else p.grad.detach().clone() for p in params]


def put_grads(params: Sequence[torch.Tensor], seed: int) -> Held:
    """Fill each ``.grad`` with seeded values, as a training loop in the middle of accumulating would; returns them."""
    generator = torch.Generator().manual_seed(fresh(seed))
    for p in params:
        p.grad = torch.randn(p.shape, generator=generator).to(p.device, p.dtype)
    return held_grads(params)


def grad_change(names: Sequence[str], params: Sequence[torch.Tensor], before: Held) -> Optional[str]:
    """Which ``.grad`` differs from ``before``, in learner words; None when all are as they were."""
    for name, param, old in zip(names, params, before):
        new = param.grad
        if old is None and new is None:
            continue
        if old is None:
            return tr("filled {name}.grad, which was empty", name=name)
        if new is None:
            return tr("emptied {name}.grad (it held a gradient the caller had accumulated)", name=name)
        if new.shape != old.shape or not torch.equal(new.detach(), old):
            return tr("changed {name}.grad (it held a gradient the caller had accumulated)", name=name)
    return None


def settings() -> Tuple[torch.dtype, bool, bool]:
    """The global settings a function must not leave changed: default dtype, anomaly mode, grad mode."""
    return torch.get_default_dtype(), torch.is_anomaly_enabled(), torch.is_grad_enabled()


def settings_change(before: Tuple[torch.dtype, bool, bool]) -> Optional[str]:
    """What global setting the call left changed (and puts it back, so the check goes on unharmed)."""
    dtype, anomaly, grad_mode = before
    problems: Dict[str, str] = {}
    if torch.get_default_dtype() != dtype:
        problems["dtype"] = tr("left the default dtype at {now} (it was {was})", now=torch.get_default_dtype(),
                               was=dtype)
        torch.set_default_dtype(dtype)
    if torch.is_anomaly_enabled() != anomaly:
        problems["anomaly"] = (tr("left anomaly detection switched on") if torch.is_anomaly_enabled()
                               else tr("left anomaly detection switched off"))
        torch.autograd.set_detect_anomaly(anomaly)
    if torch.is_grad_enabled() != grad_mode:
        problems["grad"] = (tr("left gradient tracking switched on") if torch.is_grad_enabled()
                            else tr("left gradient tracking switched off"))
        torch.set_grad_enabled(grad_mode)
    found = list(problems.values())
    listed = found[0] if found else None
    for problem in found[1:]:
        listed = tr("{first}; {second}", first=listed, second=problem)
    return listed
