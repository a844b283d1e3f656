"""Tell when a ``DistributedDataParallel`` model gets a gradient that DDP will not average across the processes.

DDP averages a parameter's gradient during the first backward after a forward through the DDP wrapper, from a hook
that fires when the gradient is accumulated into ``.grad``. Three ways around that hook leave each process with its
own gradient, so the replicas drift apart with nothing raised:

- a second backward into the same parameters after that first one (``l1.backward(retain_graph=True); l2.backward()``);
- ``torch.autograd.grad`` on the parameters (it never accumulates into ``.grad``, so the hook never fires);
- a forward through ``ddp_model.module``, which skips the wrapper that arms the hook.

``ReductionWatch`` sees each of them on the process it runs in, as it happens::

    watch = ReductionWatch(generator=ddp_g, discriminator=ddp_d)
    ...                                   # your forward and backward passes
    print(watch.report())                 # before (or after) optimizer.step(): what DDP did not average

``replicas_differ`` checks the result instead: called on every process (it is a collective), it names the
parameters whose ``.grad`` is not the same on all of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


@dataclass
class _ParameterState:
    armed: bool = False           # a forward through the DDP wrapper prepared a reduction not yet used
    local_only: bool = False      # that forward ran under no_sync(): its backward is meant to stay local
    reduced: bool = False         # this iteration's gradient was already averaged
    computed: int = 0             # gradients computed for it (backward and autograd.grad)
    accumulated: int = 0          # gradients accumulated into .grad (backward only)


@dataclass(frozen=True)
class Unreduced:
    """One gradient DDP did not average: which parameter, and how it arrived."""

    parameter: str
    how: str


class ReductionWatch:
    """Hooks on DDP models that record every gradient DDP will not average (see the module's docstring).

    Args:
        **models: name -> a ``DistributedDataParallel`` model (names keep clashing parameter names apart).
    """

    def __init__(self, **models: DistributedDataParallel) -> None:
        for name, model in models.items():
            if not isinstance(model, DistributedDataParallel):
                raise TypeError(f"{name} is a {type(model).__name__}, not a DistributedDataParallel model")
        self.models = dict(models)
        self.problems: List[Unreduced] = []
        self._states: Dict[str, _ParameterState] = {}
        self._handles: List[Any] = []
        for label, model in self.models.items():
            names = [f"{label}.{name}" for name, p in model.module.named_parameters() if p.requires_grad]
            self._handles.append(model.register_forward_pre_hook(self._forward_hook(names, model)))
            for name, parameter in zip(names, (p for p in model.module.parameters() if p.requires_grad)):
                self._states[name] = _ParameterState()
                self._handles.append(parameter.register_hook(self._computed_hook(name)))
                self._handles.append(parameter.register_post_accumulate_grad_hook(self._accumulated_hook(name)))

    def _forward_hook(self, names: List[str], model: DistributedDataParallel) -> Any:
        def hook(module: nn.Module, args: Any) -> None:
            self._check_autograd_grad()
            if torch.is_grad_enabled():
                for name in names:
                    state = self._states[name]
                    state.armed, state.reduced = True, False
                    state.local_only = not model.require_backward_grad_sync
        return hook

    def _computed_hook(self, name: str) -> Any:
        def hook(gradient: torch.Tensor) -> None:
            self._states[name].computed += 1
        return hook

    def _accumulated_hook(self, name: str) -> Any:
        def hook(parameter: torch.Tensor) -> None:
            state = self._states[name]
            state.accumulated += 1
            if state.armed:
                state.armed, state.reduced = False, not state.local_only
            elif state.reduced:
                self.problems.append(Unreduced(name, "a second backward after DDP had averaged this iteration's "
                                                     "gradient"))
            elif not state.local_only:
                self.problems.append(Unreduced(name, "a backward from a forward that skipped the DDP wrapper "
                                                     "(through .module)"))
        return hook

    def _check_autograd_grad(self) -> None:
        """Gradients computed but never accumulated: torch.autograd.grad."""
        for name, state in self._states.items():
            if state.computed > state.accumulated:
                self.problems.append(Unreduced(name, "torch.autograd.grad: computed, never accumulated into .grad, "
                                                     "so DDP's hook never saw it"))
            state.computed = state.accumulated = 0

    def unreduced(self) -> List[Unreduced]:
        """Every gradient DDP did not average since the watch began (or since ``clear()``)."""
        self._check_autograd_grad()
        return list(self.problems)

    def report(self) -> str:
        """One line per way a gradient escaped DDP's averaging, with the parameters it reached."""
        found = self.unreduced()
        if not found:
            return "DDP averaged every gradient these models received."
        by_how: Dict[str, List[str]] = {}
        for problem in found:
            by_how.setdefault(problem.how, [])
            if problem.parameter not in by_how[problem.how]:
                by_how[problem.how].append(problem.parameter)
        lines = [f"Not averaged across processes ({len(found)} gradients): the replicas will drift apart."]
        for how, names in by_how.items():
            shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
            lines.append(f"- {how}: {shown}")
        return "\n".join(lines)

    def clear(self) -> None:
        """Forget what was found so far (the hooks stay)."""
        self.problems.clear()
        for state in self._states.values():
            state.computed = state.accumulated = 0

    def remove(self) -> None:
        """Take every hook off the models."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


def replicas_differ(model: nn.Module, tolerance: float = 1e-6, group: Optional[Any] = None) -> List[str]:
    """The parameters of ``model`` whose ``.grad`` differs between the processes (a collective: call it on all).

    A missing ``.grad`` counts as zeros. Each process compares its gradients with those of process 0.
    """
    module = model.module if isinstance(model, DistributedDataParallel) else model
    differ = []
    for name, parameter in module.named_parameters():
        grad = parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)
        first = grad.detach().clone()
        dist.broadcast(first, src=0, group=group)
        mismatch = torch.tensor(float((grad - first).abs().max() > tolerance * max(float(first.abs().max()), 1.0)),
                                device=grad.device)
        dist.all_reduce(mismatch, op=dist.ReduceOp.MAX, group=group)
        if mismatch.item() > 0:
            differ.append(name)
    return differ
