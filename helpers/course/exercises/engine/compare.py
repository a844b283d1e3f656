"""Comparing observations: the learner's twin after the call with the reference's twin, and with itself before."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping

import torch

from helpers.course.exercises.engine.contract import Contract
from helpers.course.exercises.engine.observe import MISSING, Key

# the order a diagnosis reports differences in: what the learner can fix most directly first
PRIORITY = ("return", "raised", "training", "requires_grad", "input", "global", "settings", "grad", "value", "state",
            "buffer", "extra", "version")


class ContractBroken(Exception):
    """The reference itself changed what its contract says no call may change: a mistake in the course."""


@dataclass
class Difference:
    """One key on which the learner's twin is not as it should be."""

    key: Key
    before: Any
    learner: Any
    reference: Any
    allowed: bool  # the call may change it (compared with the reference), or must leave it (compared with before)
    text: str = ""  # for return values and errors: what differs, already in words


def exactly_equal(first: Any, second: Any) -> bool:
    """Equal values, tensors element by element (same shape and dtype), containers item by item."""
    if isinstance(first, torch.Tensor) or isinstance(second, torch.Tensor):
        return (isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor) and first.shape == second.shape
                and first.dtype == second.dtype and bool(torch.equal(first, second)))
    if isinstance(first, (list, tuple)) and isinstance(second, (list, tuple)):
        return type(first) is type(second) and len(first) == len(second) and all(
            exactly_equal(a, b) for a, b in zip(first, second))
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(exactly_equal(first[k], second[k]) for k in first)
    if first is MISSING or second is MISSING:
        return first is second
    try:
        return bool(first == second)
    except Exception:  # an object whose == is not a truth value
        return first is second


def nearly_equal(first: Any, second: Any, rtol: float, atol: float) -> bool:
    """``exactly_equal``, but floating tensors only up to round-off (NaN where the other has NaN counts as equal)."""
    if isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor) and second.is_floating_point():
        return (first.shape == second.shape and first.dtype == second.dtype and
                torch.allclose(first.float().cpu(), second.float().cpu(), rtol=rtol, atol=atol, equal_nan=True))
    return exactly_equal(first, second)


def differences(contract: Contract, before: Mapping[Key, Any], learner: Mapping[Key, Any],
                reference: Mapping[Key, Any], reference_before: Mapping[Key, Any]) -> List[Difference]:
    """Every difference: first what the call had to leave as it was, then what differs from the reference; most
    direct first within each.

    Raises:
        ContractBroken: when the reference changed a key its contract does not let a call change.
    """
    found: List[Difference] = []
    rtol, atol = contract.tolerance
    keys: Dict[Key, None] = dict.fromkeys([*before, *learner, *reference])
    for key in keys:
        was, now, right = before.get(key, MISSING), learner.get(key, MISSING), reference.get(key, MISSING)
        if key.kind == "return":
            problem = contract.compare_return(now, right)
            if problem is not None:
                found.append(Difference(key, was, now, right, True, problem))
            continue
        if contract.allows(key):
            cleared = now is None or (isinstance(now, torch.Tensor) and not bool(now.any()))
            if cleared and isinstance(right, torch.Tensor) and contract.may_be_cleared(key):
                continue  # tidied up after the step; but zeros where the reference leaves None are a gradient
            if key.kind != "version" and not nearly_equal(now, right, rtol, atol):
                found.append(Difference(key, was, now, right, True))
            continue
        if not exactly_equal(right, reference_before.get(key, MISSING)):
            raise ContractBroken(f"{contract.exercise_id}: the reference changed {key}, which its contract fixes")
        if not exactly_equal(now, was):
            found.append(Difference(key, was, now, right, False))
    moved = {d.key.path for d in found if d.key.kind == "value"} | {
        key.path for key in keys if key.kind == "value" and contract.allows(key)}
    found = [d for d in found if not (d.key.kind == "version" and d.key.path in moved)]  # the value says more
    return sorted(found, key=lambda d: (d.allowed, PRIORITY.index(d.key.kind)))
