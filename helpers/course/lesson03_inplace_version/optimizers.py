"""An optimizer written by hand, for notebook 03's exercise: its checks measure it beside torch's own."""
from __future__ import annotations

from typing import Any

import torch


class DecoupledSGD(torch.optim.Optimizer):
    """Plain SGD with decoupled weight decay, written by hand as people write their own optimizers: it shrinks a
    parameter in place only when there is a weight decay, then steps it. Two bumps with decay, one without, on
    every torch release (torch's own optimizers changed their counts between releases)."""

    def __init__(self, params: Any, lr: float = 0.1, weight_decay: float = 0.0) -> None:
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                if group["weight_decay"]:
                    param.mul_(1 - group["lr"] * group["weight_decay"])
                param.add_(param.grad, alpha=-group["lr"])
