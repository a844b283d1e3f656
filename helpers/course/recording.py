"""An optimizer for checkers and demos: plain SGD that records the gradients it is stepped with."""
from __future__ import annotations

from typing import Any, List, Optional

import torch

LEARNING_RATE = 0.1


class RecordingSGD(torch.optim.Optimizer):
    """Plain SGD that remembers, for every ``step()``, the gradients it was stepped with.

    With ``name`` and ``log``, each step also appends ``"<name>: step"`` to the shared list ``log``, so a checker
    can read the order of steps (and, with hooks, of backward passes) across several optimizers.
    """

    def __init__(self, params: Any, lr: float = LEARNING_RATE, name: Optional[str] = None,
                 log: Optional[List[str]] = None) -> None:
        super().__init__(params, {"lr": lr})
        self.records: List[List[Optional[torch.Tensor]]] = []
        self.name = name
        self.log = log

    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        grads: List[Optional[torch.Tensor]] = []
        with torch.no_grad():
            for group in self.param_groups:
                for param in group["params"]:
                    grads.append(None if param.grad is None else param.grad.detach().clone())
                    if param.grad is not None:
                        param.add_(param.grad, alpha=-group["lr"])
        self.records.append(grads)
        if self.log is not None:
            self.log.append(f"{self.name}: step")
        return loss
