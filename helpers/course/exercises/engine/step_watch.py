"""For training-step checkers: real optimizers of any kind that record what each ``step()`` was given, the
optimizer kinds a checker varies, and a snapshot of the state a step must leave alone.

A checker that only ever uses plain SGD, fresh input tensors and one set of models can be fooled by accident: an
answer that keeps an optimizer, a batch or a gradient from one call to the next, or that leaves a model frozen,
in eval mode or holding gradients, may still pass. These pieces let a checker vary what an answer could memorise,
and name exactly what it changed. ``twins`` replays the recorded steps to prove each was the optimizer's own update;
``untouched`` covers ``.grad`` a call was not asked to fill and global settings.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import nn

from helpers.course.exercises.engine.untouched import held_grads
from helpers.language import tr, translated
from helpers.tools.gradients import same_gradients

Gradients = List[Optional[torch.Tensor]]
MakeOptimizer = Callable[[Sequence[torch.nn.Parameter]], torch.optim.Optimizer]


@dataclass
class StepCall:
    """One ``step()`` of a watched optimizer: the gradients it was given, its parameters just before and after."""

    grads: Gradients
    before: List[torch.Tensor]
    after: List[torch.Tensor]


@dataclass
class Watched:
    """An optimizer's record: every ``step()`` call, in order, and its name in the shared ``log``."""

    name: str
    calls: List[StepCall] = field(default_factory=list)


def _params(optimizer: torch.optim.Optimizer) -> List[torch.Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def watch(optimizer: torch.optim.Optimizer, name: str, log: Optional[List[str]] = None) -> Watched:
    """Record every ``optimizer.step()`` (with step hooks: the optimizer stays the real one, of its own class).

    Each step appends ``"<name>: step"`` to ``log`` when given, so a checker reads the order of steps and, with
    backward hooks, of backward passes.
    """
    record = Watched(name)
    pending: Dict[str, List] = {}

    def pre_hook(opt: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        params = _params(opt)
        pending["grads"] = held_grads(params)
        pending["before"] = [p.detach().clone() for p in params]

    def post_hook(opt: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        after = [p.detach().clone() for p in _params(opt)]
        record.calls.append(StepCall(pending["grads"], pending["before"], after))
        if log is not None:
            log.append(f"{name}: step")

    optimizer.register_step_pre_hook(pre_hook)
    optimizer.register_step_post_hook(post_hook)
    return record


@functools.lru_cache(maxsize=None)
def optimizer_kinds() -> Dict[str, MakeOptimizer]:
    """The optimizer kinds a checker varies: SGD, SGD with momentum, Adam, AdamW, and fused Adam/AdamW where this
    torch has them (fused needs torch 2.4 on the CPU)."""
    kinds: Dict[str, MakeOptimizer] = {
        "SGD": lambda params: torch.optim.SGD(params, lr=0.1),
        "SGD with momentum": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
        "Adam": lambda params: torch.optim.Adam(params, lr=0.01, foreach=False),
        "AdamW": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.01),
    }
    for name, cls in (("fused Adam", torch.optim.Adam), ("fused AdamW", torch.optim.AdamW)):
        if _fused_works(cls):
            kinds[name] = lambda params, cls=cls: cls(params, lr=0.01, fused=True)
    return kinds


def _fused_works(cls: type) -> bool:
    try:
        param = torch.nn.Parameter(torch.zeros(2))
        param.grad = torch.ones(2)
        cls([param], lr=0.01, fused=True).step()
        return True
    except (RuntimeError, TypeError, ValueError):
        return False


def available(name: str) -> str:
    """The kind ``kind(name)`` makes: ``name``, or the unfused optimizer where this torch has no fused one."""
    return name if name in optimizer_kinds() else name.replace("fused ", "")


def kind(name: str) -> MakeOptimizer:
    """``optimizer_kinds()[name]``, falling back to the unfused optimizer when this torch has no fused one."""
    return optimizer_kinds()[available(name)]


# ------------------------------------------------------------------ checking one call


def calls_in(record: Watched, start: int) -> List[StepCall]:
    """The steps made since the record held ``start`` calls."""
    return record.calls[start:]


def where_moved(params: Sequence[torch.Tensor], start: List[torch.Tensor], calls: List[StepCall]) -> Optional[str]:
    """Where the parameters changed other than in these ``step()`` calls: ``"before"`` the first, ``"between"``
    two, ``"after"`` the last (``"before"`` when there was none); None when only the steps moved them."""
    current = start
    for call in calls:
        if not all(torch.equal(a, b) for a, b in zip(call.before, current)):
            return "before" if current is start else "between"
        current = call.after
    if all(torch.equal(p.detach(), c) for p, c in zip(params, current)):
        return None
    return "after" if calls else "before"


def moved_outside_step(params: Sequence[torch.Tensor], start: List[torch.Tensor], calls: List[StepCall]) -> bool:
    """True when the parameters changed other than in these ``step()`` calls (before, between or after them)."""
    return where_moved(params, start, calls) is not None


def leftover_grad(params: Sequence[torch.Tensor], stepped_with: Gradients) -> bool:
    """True when some ``.grad`` now holds something other than nothing or the gradient the step was given."""
    for param, given in zip(params, stepped_with):
        grad = param.grad
        if grad is None or not bool(grad.abs().sum()):
            continue
        if given is None or not same_gradients([grad], [given]):
            return True
    return False


@dataclass
class ModuleState:
    """A module's flags a step must leave alone: each layer's train/eval mode and each parameter's requires_grad
    (by name, ``""`` for the module itself), and which tensors are its parameters."""

    modes: Dict[str, bool]
    requires_grad: Dict[str, bool]
    ids: List[int]


def module_state(module: nn.Module) -> ModuleState:
    """``module``'s flags now."""
    return ModuleState({name: m.training for name, m in module.named_modules()},
                       {name: p.requires_grad for name, p in module.named_parameters()},
                       [id(p) for p in module.parameters()])


@dataclass
class Snapshot:
    """The state a step must leave alone: inputs, module flags, which tensors are parameters, optimizer settings."""

    tensors: Dict[str, Tuple[torch.Tensor, bool]]
    modules: Dict[str, ModuleState]
    settings: Dict[str, List[dict]]
    anomaly: bool


def _settings(optimizer: torch.optim.Optimizer) -> List[dict]:
    """Each parameter group's settings (lr, momentum, ...) and which parameters it holds."""
    return [{key: [id(p) for p in value] if key == "params" else value for key, value in group.items()}
            for group in optimizer.param_groups]


def snapshot(tensors: Mapping[str, torch.Tensor], modules: Mapping[str, nn.Module],
             optimizers: Mapping[str, torch.optim.Optimizer]) -> Snapshot:
    """What ``changed`` compares with after the learner's call."""
    return Snapshot(
        tensors={name: (t.detach().clone(), t.requires_grad) for name, t in tensors.items()},
        modules={name: module_state(module) for name, module in modules.items()},
        settings={name: _settings(opt) for name, opt in optimizers.items()},
        anomaly=torch.is_anomaly_enabled(),
    )


def _flag_change(name: str, before: ModuleState, now: ModuleState) -> Optional[str]:
    """What changed in a module's flags, in learner words. Parameter names are listed when ``name`` is the
    variable the learner knows the module by (``head_b``, not ``the model``, which is shown in the chosen language)."""
    shown_name = translated(name)
    if now.ids != before.ids:
        return tr("replaced parameters of {name}: its layers must stay the ones its optimizer holds. Change weights "
                  "only with the optimizer's step()", name=shown_name)
    switched = [key for key, flag in before.requires_grad.items() if now.requires_grad.get(key) != flag]
    if switched:
        shown = ", ".join(f"{name}.{key}" for key in switched[:3]) + (" ..." if len(switched) > 3 else "")
        if name.isascii() and name.isidentifier():  # a variable's name, not "the model" (nor a translation of it)
            return tr("left {name}'s parameters with requires_grad changed: it changed requires_grad ({shown}) and "
                      "did not undo it. The next step, and every other user of the model, gets no gradient for them. "
                      "If you freeze a model for one backward, unfreeze it before you return - or use "
                      "backward(inputs=...); to cut a path, detach a tensor", name=shown_name, shown=shown)
        return tr("left {name}'s parameters with requires_grad changed (requires_grad_() was not undone): the next "
                  "step, and every other user of the model, gets no gradient for them. If you freeze a model for one "
                  "backward, unfreeze it before you return - or use backward(inputs=...); to cut a path, detach a "
                  "tensor", name=shown_name)
    moved = [key for key, training in before.modes.items() if now.modes.get(key) != training]
    if moved:
        who = shown_name if "" in moved else tr("its layer {layer}", layer=moved[0])
        if any(before.modes[key] for key in moved):
            return tr("left {name} (or one of its layers) in eval mode - train()/eval() was not undone, so {who} is "
                      "now in eval mode: dropout and batch norm would behave differently from then on. Leave each "
                      "module in the mode it was handed to you", name=shown_name, who=who)
        return tr("left {name} (or one of its layers) in training mode - train()/eval() was not undone, so {who} is "
                  "now in training mode: dropout and batch norm would behave differently from then on. Leave each "
                  "module in the mode it was handed to you", name=shown_name, who=who)
    return None


def changed(before: Snapshot, tensors: Mapping[str, torch.Tensor], modules: Mapping[str, nn.Module],
            optimizers: Mapping[str, torch.optim.Optimizer]) -> Optional[str]:
    """What the call changed that the contract does not let it change, in learner words; None if nothing."""
    for name, tensor in tensors.items():
        value, requires_grad = before.tensors[name]
        if tensor.shape != value.shape or not torch.equal(tensor.detach(), value):
            return tr("changed the input `{name}` in place: the inputs are data, read them, never write them",
                      name=name)
        if tensor.requires_grad != requires_grad or tensor.grad is not None:
            if tensor.requires_grad:
                return tr("changed the input `{name}`: it now requires a gradient. Inputs are data: no "
                          "requires_grad_() on them", name=name)
            return tr("changed the input `{name}`: it now holds a gradient. Inputs are data: no requires_grad_() on "
                      "them", name=name)
    for name, module in modules.items():
        problem = _flag_change(name, before.modules[name], module_state(module))
        if problem is not None:
            return problem
    for name, optimizer in optimizers.items():
        if _settings(optimizer) != before.settings[name]:
            return tr("changed {name}'s settings (its learning rate, another hyperparameter or the parameters it "
                      "holds): leave the optimizers as they were handed to you", name=name)
    if torch.is_anomaly_enabled() != before.anomaly:
        return tr("left anomaly detection switched on for everything that runs afterwards: switch it off again")
    return None


def fill_in_place(targets: Sequence[torch.Tensor], values: Sequence[torch.Tensor]) -> Tuple[torch.Tensor, ...]:
    """Copy each new value into the same tensor object, as a loop that copies each batch into one preallocated
    tensor does: an answer that keys a cache on the input tensors' identity then sees new data under an old key."""
    with torch.no_grad():
        for target, value in zip(targets, values):
            target.copy_(value)
    return tuple(targets)
