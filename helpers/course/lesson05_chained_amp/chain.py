"""Notebook 05's chained case: a tiny text encoder feeding a tiny denoiser, and their two losses.

The denoiser has a normalisation layer, as every UNet does: under autocast its weight stays float32 and is saved as
it is, while the linear layers save low-precision copies of theirs.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from helpers.course.seeds import fresh

TEXT_FEATURES = 16
HIDDEN_STATE = 32
BATCH = 8


def _seeded(seed: int, build: Any) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(fresh(seed))
        return build()


def make_tenc(seed: int = 0, device: Optional[torch.device] = None) -> nn.Sequential:
    """A tiny "text encoder": features -> hidden state."""
    build = lambda: nn.Sequential(nn.Linear(TEXT_FEATURES, 32), nn.GELU(), nn.Linear(32, HIDDEN_STATE))  # noqa: E731
    return _seeded(seed, build).to(device or "cpu")


def make_unet(seed: int = 1, device: Optional[torch.device] = None) -> nn.Sequential:
    """A tiny "denoiser" standing in for a UNet: hidden state -> Linear -> GroupNorm -> ReLU -> Linear."""
    build = lambda: nn.Sequential(nn.Linear(HIDDEN_STATE, 64), nn.GroupNorm(8, 64), nn.ReLU(),  # noqa: E731
                                  nn.Linear(64, TEXT_FEATURES))
    return _seeded(seed, build).to(device or "cpu")


def make_batch(seed: int = 0, batch: int = BATCH, device: Optional[torch.device] = None) -> Tuple[torch.Tensor, ...]:
    """Input ``x``, ``target`` and a 0/1 ``mask`` of the target's shape."""
    generator = torch.Generator().manual_seed(fresh(seed + 3000))
    x = torch.randn(batch, TEXT_FEATURES, generator=generator)
    target = torch.randn(batch, TEXT_FEATURES, generator=generator)
    mask = (torch.rand(batch, TEXT_FEATURES, generator=generator) > 0.5).float()
    return tuple(t.to(device or "cpu") for t in (x, target, mask))


def chain_losses(prediction: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``loss_tenc = loss.mean()`` (meant for tenc) and ``loss_unet = (loss * mask).mean()`` (meant for unet)."""
    loss = F.mse_loss(prediction.float(), target, reduction="none")
    return loss.mean(), (loss * mask).mean()


def fused_adamw_supported(device: torch.device) -> bool:
    """Whether ``AdamW(fused=True)`` works for parameters on ``device`` in this torch."""
    try:
        torch.optim.AdamW([torch.zeros(1, device=device, requires_grad=True)], fused=True)
    except (RuntimeError, ValueError):
        return False
    return True


def make_optimizers(tenc: nn.Module, unet: nn.Module, warmup_steps: int = 5) -> Dict[str, Any]:
    """AdamW for each module (fused where supported; different lr and weight decay) and warm-up schedulers."""
    device = next(tenc.parameters()).device
    fused = fused_adamw_supported(device)
    opt_tenc = torch.optim.AdamW(tenc.parameters(), lr=1e-3, weight_decay=1e-3, betas=(0.9, 0.99), fused=fused)
    opt_unet = torch.optim.AdamW(unet.parameters(), lr=1e-2, weight_decay=1e-2, betas=(0.9, 0.99), fused=fused)
    warmup = dict(start_factor=0.1, end_factor=1.0, total_iters=warmup_steps)
    return {
        "opt_tenc": opt_tenc,
        "opt_unet": opt_unet,
        "sched_tenc": torch.optim.lr_scheduler.LinearLR(opt_tenc, **warmup),
        "sched_unet": torch.optim.lr_scheduler.LinearLR(opt_unet, **warmup),
    }
