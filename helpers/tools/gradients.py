"""Reference gradients, and whether two gradients are the same: used by checkers, case modules and notebooks.

Everything is compared on the CPU in float32, so tensors from any device (and autocast's low precision) compare.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import torch
from torch import nn


def gradients_of(loss: torch.Tensor, module: nn.Module) -> List[torch.Tensor]:
    """The gradient of ``loss`` for each parameter of ``module`` (zeros where unused); ``.grad`` is untouched."""
    params = list(module.parameters())
    grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]


def close(actual: torch.Tensor, expected: torch.Tensor, rtol: float = 1e-4, atol: float = 1e-6) -> bool:
    """Equal up to round-off (float32's by default), after moving both to the CPU in float32."""
    return torch.allclose(actual.detach().float().cpu(), expected.detach().float().cpu(), rtol=rtol, atol=atol)


def same_gradients(
    actual: Sequence[Optional[torch.Tensor]], expected: Sequence[torch.Tensor], rtol: float = 1e-4, atol: float = 1e-6
) -> bool:
    """Every gradient present (a tensor) and close to its reference."""
    return len(actual) == len(expected) and all(
        isinstance(a, torch.Tensor) and a.shape == e.shape and close(a, e, rtol, atol) for a, e in zip(actual, expected)
    )


def relative_error(actual: Sequence[Optional[torch.Tensor]], expected: Sequence[torch.Tensor]) -> float:
    """``|actual - expected| / |expected|`` over all tensors together (a missing one counts as zeros)."""
    flat_actual = torch.cat([(torch.zeros_like(e) if a is None else a).detach().float().cpu().flatten()
                             for a, e in zip(actual, expected)])
    flat_expected = torch.cat([e.detach().float().cpu().flatten() for e in expected])
    return float((flat_actual - flat_expected).norm() / flat_expected.norm().clamp_min(1e-12))
