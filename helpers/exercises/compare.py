"""Comparing a learner's tensor with the reference, and saying how it differs."""
from __future__ import annotations

from typing import Any, Optional

import torch


def describe_value(value: Any) -> str:
    """A short description of any value, for diagnoses."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    return f"{type(value).__name__} {value!r}"[:120]


def close(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    """Equal up to float32 round-off, after moving both to the CPU in float32."""
    return torch.allclose(actual.detach().float().cpu(), expected.detach().float().cpu(), rtol=1e-4, atol=1e-6)


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
