"""Case 2 of notebook 07, the bug clinic continued: one shared trunk, two task heads, and one optimizer per task.

Task A is a regression (``mse_loss`` on head A's one output), task B a 3-class classification (``cross_entropy``
on head B's logits). The trunk has two layers on purpose: its second Linear saves its own weight for backward,
so stepping the trunk before task B's backward makes a saved tensor stale (error 2). A one-layer trunk saves
only its input ``x``, and the same bug would run silently (``weights_after`` runs it for a few steps).

The correct step (``reference_step``): one forward, every optimizer zeroed, one backward of ``loss_a + loss_b``,
then the trunk stepped once with the summed gradient and each head with its own task's gradient.
"""
from __future__ import annotations

import copy
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from helpers.course.seeds import fresh
from helpers.language import tr
from helpers.tools.gradients import gradients_of, relative_error, same_gradients  # noqa: F401 (notebook)

IN_FEATURES = 8
HIDDEN = 16
CLASSES = 3
BATCH = 12
LEARNING_RATE = 1e-2

Heads = Tuple[nn.Module, nn.Module, nn.Module]


def make_multitask_model(seed: int = 0, device: Optional[torch.device] = None) -> Heads:
    """``(trunk, head_a, head_b)``: a Linear-ReLU-Linear-ReLU trunk, a regression head and a 3-class head.

    Initialised from ``seed`` without touching the global random state; the same on every device.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(fresh(seed))
        trunk = nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU())
        head_a = nn.Linear(HIDDEN, 1)
        head_b = nn.Linear(HIDDEN, CLASSES)
    return trunk.to(device or "cpu"), head_a.to(device or "cpu"), head_b.to(device or "cpu")


def make_batch(seed: int = 0, batch: int = BATCH,
               device: Optional[torch.device] = None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x, y_a, y_b)``: inputs, regression targets ``[batch, 1]`` and class labels ``[batch]``."""
    generator = torch.Generator().manual_seed(fresh(seed + 5000))
    x = torch.randn(batch, IN_FEATURES, generator=generator)
    y_a = torch.randn(batch, 1, generator=generator)
    y_b = torch.randint(0, CLASSES, (batch,), generator=generator)
    return x.to(device or "cpu"), y_a.to(device or "cpu"), y_b.to(device or "cpu")


def task_losses(head_a: nn.Module, head_b: nn.Module, feats: torch.Tensor, y_a: torch.Tensor,
                y_b: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(loss_a, loss_b)`` from the trunk's features: mean squared error and cross-entropy."""
    return F.mse_loss(head_a(feats), y_a), F.cross_entropy(head_b(feats), y_b)


def per_task_optimizers(trunk: nn.Module, head_a: nn.Module, head_b: nn.Module,
                        lr: float = LEARNING_RATE) -> Tuple[torch.optim.Optimizer, torch.optim.Optimizer]:
    """The design people write: ``opt_a`` over trunk + head A, ``opt_b`` over trunk + head B (both Adam)."""
    opt_a = torch.optim.Adam([*trunk.parameters(), *head_a.parameters()], lr=lr, fused=False)
    opt_b = torch.optim.Adam([*trunk.parameters(), *head_b.parameters()], lr=lr, fused=False)
    return opt_a, opt_b


def split_optimizers(trunk: nn.Module, head_a: nn.Module, head_b: nn.Module, lr: float = LEARNING_RATE
                     ) -> Tuple[torch.optim.Optimizer, torch.optim.Optimizer, torch.optim.Optimizer]:
    """The design that works: ``opt_trunk`` over the trunk only, ``opt_a`` and ``opt_b`` over one head each."""
    return (torch.optim.Adam(trunk.parameters(), lr=lr), torch.optim.Adam(head_a.parameters(), lr=lr),
            torch.optim.Adam(head_b.parameters(), lr=lr))


def reference_step(trunk: nn.Module, head_a: nn.Module, head_b: nn.Module, opt_trunk: torch.optim.Optimizer,
                   opt_a: torch.optim.Optimizer, opt_b: torch.optim.Optimizer, x: torch.Tensor, y_a: torch.Tensor,
                   y_b: torch.Tensor) -> None:
    """The correct step: one forward, one backward of ``loss_a + loss_b``, then every optimizer steps once."""
    optimizers = (opt_trunk, opt_a, opt_b)
    for optimizer in optimizers:
        optimizer.zero_grad()
    loss_a, loss_b = task_losses(head_a, head_b, trunk(x), y_a, y_b)
    (loss_a + loss_b).backward()
    for optimizer in optimizers:
        optimizer.step()


OptimizerFactory = Callable[[List[nn.Parameter]], torch.optim.Optimizer]


def weights_after(make_optimizer: OptimizerFactory, per_task: bool, x: torch.Tensor, y_a: torch.Tensor,
                  y_b: torch.Tensor, steps: int = 3, seed: int = 0) -> Dict[str, torch.Tensor]:
    """Every parameter, by name, after ``steps`` steps on fresh models with a one-layer trunk (it raises nothing).

    ``per_task``: case 2's loop, ``make_optimizer`` over trunk + head A and over trunk + head B, each task's
    zero_grad, backward and step in turn (``retain_graph=True`` on the first). Otherwise one ``make_optimizer``
    over everything, one backward of ``loss_a + loss_b``, one step.
    """
    trunk, head_a, head_b = make_multitask_model(seed=seed, device=x.device)
    trunk = trunk[:2]                                   # the first Linear and ReLU: it saves none of its weights
    if per_task:
        optimizers = [make_optimizer([*trunk.parameters(), *head_a.parameters()]),
                      make_optimizer([*trunk.parameters(), *head_b.parameters()])]
    else:
        optimizers = [make_optimizer([*trunk.parameters(), *head_a.parameters(), *head_b.parameters()])]
    for _ in range(steps):
        loss_a, loss_b = task_losses(head_a, head_b, trunk(x), y_a, y_b)
        if per_task:
            for optimizer, loss, retain in zip(optimizers, (loss_a, loss_b), (True, False)):
                optimizer.zero_grad()
                loss.backward(retain_graph=retain)
                optimizer.step()
        else:
            optimizers[0].zero_grad()
            (loss_a + loss_b).backward()
            optimizers[0].step()
    return {f"{part}.{name}": p.detach().clone() for part, module in
            (("trunk", trunk), ("head_a", head_a), ("head_b", head_b)) for name, p in module.named_parameters()}


def reference_gradients(trunk: nn.Module, head_a: nn.Module, head_b: nn.Module, x: torch.Tensor,
                        y_a: torch.Tensor, y_b: torch.Tensor) -> Dict[str, List[torch.Tensor]]:
    """Gradients at the current weights, from a fresh forward pass; no ``.grad`` is touched.

    Keys: ``"trunk"`` (of loss_a + loss_b, what the trunk should get), ``"trunk<-a"`` and ``"trunk<-b"`` (each
    task alone), ``"head_a"`` (of loss_a) and ``"head_b"`` (of loss_b).
    """
    with torch.enable_grad():
        loss_a, loss_b = task_losses(head_a, head_b, trunk(x), y_a, y_b)
        return {"trunk": gradients_of(loss_a + loss_b, trunk), "trunk<-a": gradients_of(loss_a, trunk),
                "trunk<-b": gradients_of(loss_b, trunk), "head_a": gradients_of(loss_a, head_a),
                "head_b": gradients_of(loss_b, head_b)}


def holding(module: nn.Module, weights: Sequence[torch.Tensor]) -> nn.Module:
    """A copy of ``module`` whose parameters hold ``weights`` (in ``parameters()`` order); ``module`` is untouched."""
    copied = copy.deepcopy(module)
    with torch.no_grad():
        for parameter, weight in zip(copied.parameters(), weights, strict=True):
            parameter.copy_(weight)
    return copied


class StepLog:
    """Which optimizer stepped which of ``params``, with which gradient, from which weights, in order.

    It hooks ``optimizer.step`` (``register_step_pre_hook``), so it sees exactly the ``.grad`` each step uses and
    the weights it starts from::

        log = StepLog({"opt_a": opt_a, "opt_b": opt_b}, dict(trunk.named_parameters()))
        step(...)
        log.optimizers()   # ["opt_a", "opt_b"]: the trunk was stepped twice
        log.starts[1]      # the trunk's weights as opt_b.step() began: where opt_a.step() left them
        log.close()
    """

    def __init__(self, optimizers: Mapping[str, torch.optim.Optimizer], params: Mapping[str, torch.Tensor]) -> None:
        self.params = dict(params)
        self.steps: List[Tuple[str, List[Optional[torch.Tensor]]]] = []
        self.starts: List[List[torch.Tensor]] = []   # per step: every parameter's value as that step began
        self._handles = [optimizer.register_step_pre_hook(self._hook_for(name, optimizer))
                         for name, optimizer in optimizers.items()]

    def _hook_for(self, name: str, optimizer: torch.optim.Optimizer):  # -> a step pre-hook
        def hook(_optimizer: torch.optim.Optimizer, _args: object, _kwargs: object) -> None:
            stepped = {id(p) for group in optimizer.param_groups for p in group["params"]}
            if not any(id(p) in stepped for p in self.params.values()):
                return
            self.steps.append((name, [None if p.grad is None or id(p) not in stepped else p.grad.detach().clone()
                                      for p in self.params.values()]))
            self.starts.append([p.detach().clone() for p in self.params.values()])
        return hook

    def optimizers(self) -> List[str]:
        """The optimizers that stepped these parameters, in order (once per step() call)."""
        return [name for name, _ in self.steps]

    def total(self) -> List[torch.Tensor]:
        """The gradients summed over every step: what one SGD step would have been given."""
        totals = [torch.zeros_like(p) for p in self.params.values()]
        for _, grads in self.steps:
            totals = [t if g is None else t + g for t, g in zip(totals, grads)]
        return totals

    def close(self) -> None:
        """Remove the hooks."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def __str__(self) -> str:
        if not self.steps:
            return tr("no optimizer stepped these parameters")
        return "\n".join(tr("{index}. {optimizer}.step() moved {parameters}", index=index, optimizer=name,
                            parameters=", ".join(self.params)) for index, (name, _) in enumerate(self.steps, 1))

    def __repr__(self) -> str:
        return str(self)
