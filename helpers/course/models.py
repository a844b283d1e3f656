"""The lessons' seeded models, inputs and losses: two models whose losses share one term."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import nn

from helpers.course.seeds import fresh

IN_FEATURES = 16
HIDDEN = 64  # the head is Linear(64, 1): its saved transposed weight is the [64, 1] tensor of error 2
BATCH = 32


def make_model(seed: int, in_features: int = IN_FEATURES, hidden: int = HIDDEN) -> nn.Sequential:
    """``Linear(in_features, 64) -> ReLU -> Linear(64, 1)``, initialised from ``seed`` (global RNG untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(fresh(seed))
        return nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, 1))


def make_two_models(
    seed: int = 0, device: Optional[torch.device] = None
) -> Tuple[nn.Sequential, nn.Sequential]:
    """Models M1 and M2, different from each other, the same for the same seed on every device."""
    m1 = make_model(seed).to(device or "cpu")
    m2 = make_model(seed + 1).to(device or "cpu")
    return m1, m2


def make_inputs(
    seed: int = 0, batch: int = BATCH, device: Optional[torch.device] = None
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Inputs I1 and I2, one batch each."""
    generator = torch.Generator().manual_seed(fresh(seed + 1000))
    x1 = torch.randn(batch, IN_FEATURES, generator=generator)
    x2 = torch.randn(batch, IN_FEATURES, generator=generator)
    return x1.to(device or "cpu"), x2.to(device or "cpu")


def make_regression_batch(
    seed: int = 0, batch: int = BATCH, device: Optional[torch.device] = None
) -> Tuple[torch.Tensor, torch.Tensor]:
    """One input batch and a target for a single model, as in notebook 00."""
    generator = torch.Generator().manual_seed(fresh(seed + 2000))
    x = torch.randn(batch, IN_FEATURES, generator=generator)
    target = torch.randn(batch, 1, generator=generator)
    return x.to(device or "cpu"), target.to(device or "cpu")


def shared_term(o1: torch.Tensor, o2: torch.Tensor) -> torch.Tensor:
    """The term both losses contain: how far the two models' outputs are apart."""
    return (o1 - o2).pow(2).mean()


def own_term(output: torch.Tensor) -> torch.Tensor:
    """A term that depends on one model only: pull its output towards 1."""
    return (output - 1).pow(2).mean()


def two_losses(o1: torch.Tensor, o2: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``L1 = shared(O1, O2) + own(O1)`` (meant to train M1) and ``L2 = shared(O1, O2) + own(O2)`` (for M2)."""
    shared = shared_term(o1, o2)
    return shared + own_term(o1), shared + own_term(o2)
