"""State a learner's function must leave as it found it, beyond what ``step_watch.snapshot`` covers: the ``.grad``
of parameters it was not asked to fill, and global settings (default dtype, anomaly mode, grad mode).

A checker takes ``grads_before = held_grads(params)`` before the call, then asks ``grad_change(...)`` and
``settings_change(...)`` after it, and fails with what they say.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import torch

from helpers.course.seeds import fresh

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
            return f"filled {name}.grad, which was empty"
        if new is None:
            return f"emptied {name}.grad (it held a gradient the caller had accumulated)"
        if new.shape != old.shape or not torch.equal(new.detach(), old):
            return f"changed {name}.grad (it held a gradient the caller had accumulated)"
    return None


def settings() -> Tuple[torch.dtype, bool, bool]:
    """The global settings a function must not leave changed: default dtype, anomaly mode, grad mode."""
    return torch.get_default_dtype(), torch.is_anomaly_enabled(), torch.is_grad_enabled()


def settings_change(before: Tuple[torch.dtype, bool, bool]) -> Optional[str]:
    """What global setting the call left changed (and puts it back, so the check goes on unharmed)."""
    dtype, anomaly, grad_mode = before
    problems: Dict[str, str] = {}
    if torch.get_default_dtype() != dtype:
        problems["dtype"] = f"left the default dtype at {torch.get_default_dtype()} (it was {dtype})"
        torch.set_default_dtype(dtype)
    if torch.is_anomaly_enabled() != anomaly:
        problems["anomaly"] = "left anomaly detection switched " + ("on" if torch.is_anomaly_enabled() else "off")
        torch.autograd.set_detect_anomaly(anomaly)
    if torch.is_grad_enabled() != grad_mode:
        problems["grad"] = "left gradient tracking switched " + ("on" if torch.is_grad_enabled() else "off")
        torch.set_grad_enabled(grad_mode)
    return "; ".join(problems.values()) or None
