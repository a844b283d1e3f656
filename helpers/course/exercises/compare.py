"""Comparing a learner's tensor with the reference, and saying how it differs."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import torch

from helpers.language import tr, translated
from helpers.tools.gradients import close, same_gradients  # noqa: F401 - part of this module's interface


def describe_value(value: Any) -> str:
    """A short description of any value, for diagnoses."""
    if isinstance(value, torch.Tensor):
        return tr("a tensor of shape {shape}", shape=list(value.shape))
    return f"{type(value).__name__} {value!r}"[:120]




def scale_factor(actual: torch.Tensor, expected: torch.Tensor) -> Optional[float]:
    """When ``actual`` is a constant multiple of ``expected``, that multiple; else None."""
    actual = actual.detach().float().cpu().flatten()
    expected = expected.detach().float().cpu().flatten()
    norm = expected.dot(expected)
    if actual.shape != expected.shape or norm == 0:
        return None
    factor = float(actual.dot(expected) / norm)
    return factor if close(actual, factor * expected) else None


def max_difference(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """The largest absolute element-wise difference."""
    return float((actual.detach().float().cpu() - expected.detach().float().cpu()).abs().max())




def added(first: Sequence[torch.Tensor], second: Sequence[Optional[torch.Tensor]]) -> List[torch.Tensor]:
    """Element-wise sum of two gradient lists (a missing gradient counts as zero)."""
    return [a + (torch.zeros_like(a) if b is None else b) for a, b in zip(first, second)]


def flattened(grads: Sequence[Optional[torch.Tensor]], like: Sequence[torch.Tensor]) -> torch.Tensor:
    """All gradients as one vector (a missing gradient counts as zero)."""
    return torch.cat([(torch.zeros_like(e) if g is None else g).flatten() for g, e in zip(grads, like)])


def near_gradients(actual: Sequence[Optional[torch.Tensor]], expected: Sequence[torch.Tensor],
                   tolerance: float) -> bool:
    """Every gradient present, with ``|actual - expected| / |expected| < tolerance`` (norms, per tensor).

    For low-precision (autocast) runs, where element-wise round-off varies with the order of operations.
    """
    def ok(a: torch.Tensor, e: torch.Tensor) -> bool:
        a, e = a.detach().float().cpu(), e.detach().float().cpu()
        return float((a - e).norm()) <= tolerance * max(float(e.norm()), 1e-12)

    return len(actual) == len(expected) and all(
        a is not None and a.shape == e.shape and ok(a, e) for a, e in zip(actual, expected)
    )


def as_combination(actual: Sequence[Optional[torch.Tensor]], parts: Mapping[str, Sequence[torch.Tensor]],
                   tolerance: float = 1e-3) -> Optional[Dict[str, float]]:
    """When ``actual`` is (within ``tolerance``, relative) a weighted sum of the gradient lists in ``parts``, the
    weights by name, rounded to 3 decimals; else None.

    A checker reads a wrong gradient as a mixture - "1 x L1 + 1 x L2", "1 x this batch + 1 x the last one" - and
    names what it contains, whatever code produced it: one diagnosis for a whole class of answers.
    """
    names = list(parts)
    like = parts[names[0]]
    target = flattened(actual, like).double().cpu()
    columns = torch.stack([flattened(parts[name], like).double().cpu() for name in names], dim=1)
    if not bool(torch.isfinite(target).all()):
        return None
    weights = torch.linalg.lstsq(columns, target.unsqueeze(1)).solution.squeeze(1)
    residual = float((columns @ weights - target).norm())
    if residual > tolerance * max(float(target.norm()), 1e-12):
        return None
    return {name: round(float(w), 3) for name, w in zip(names, weights)}


def describe_combination(weights: Mapping[str, float]) -> str:
    """``{"L1": 1.0, "L2": 1.0, "L3": 0.0}`` -> ``"1 x L1 + 1 x L2"`` (terms near zero left out). Each name is
    shown translated: a caller marks its part names with ``helpers.language.marked``."""
    terms = [f"{w:.3g} x {translated(name)}" for name, w in weights.items() if abs(w) > 1e-3]
    return " + ".join(terms).replace("+ -", "- ") or tr("nothing (zero)")
