"""The whole observable state of the objects one call receives, as a flat mapping ``Key -> value``.

Observing copies; it never changes what it looks at. Keys name what a learner would name: ``M1.0.weight`` and its
``grad``, ``requires_grad`` and ``version``, ``M1.1`` with ``training``, a buffer ``M1.bn.running_mean``,
``opt1`` with ``settings`` and ``state`` entries per parameter, an input ``x``, the return value, and
torch's global settings.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional

import torch
from torch import nn

MISSING = object()  # an observed value that does not exist on this side (a state entry the other side has)


class Key(NamedTuple):
    """What is observed: a ``path`` (``M1.0.weight``, ``opt1``, ``x``) and what of it (``kind``)."""

    path: str
    kind: str  # value, grad, version, requires_grad, training, buffer, settings, state, input, return, global, extra


@dataclass
class World:
    """The objects one call receives, named for observation.

    Attributes:
        args: the call's positional arguments.
        modules: the models by the names a learner knows them by (``M1``), observed parameter by parameter.
        optimizers: by name (``opt1``): settings and state, parameters named through ``modules``.
        inputs: data tensors, which a call must leave as they are.
        refill: ``refill(call)`` writes call number ``call``'s data into the same input tensors (a loop that copies
            each batch into preallocated tensors).
        extra: other observed state, by name: ``observe() -> value`` (e.g. a GradScaler's scale).
        freezable: the parameters the ``frozen`` axis freezes (default: each module's first layer, weight and bias).
    """

    args: tuple
    modules: Dict[str, nn.Module] = field(default_factory=dict)
    optimizers: Dict[str, torch.optim.Optimizer] = field(default_factory=dict)
    inputs: Dict[str, torch.Tensor] = field(default_factory=dict)
    refill: Optional[Callable[[int], None]] = None
    extra: Dict[str, Callable[[], Any]] = field(default_factory=dict)
    freezable: Optional[list] = None


def _copy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):  # through the class: a learner's ``t.detach = ...`` is not asked
        return torch.Tensor.clone(torch.Tensor.detach(value))
    return value


def parameter_names(world: World) -> Dict[int, str]:
    """``id(parameter) -> "M1.0.weight"`` over every module of the world."""
    names: Dict[int, str] = {}
    for module_name, module in world.modules.items():
        for name, param in module.named_parameters():
            names.setdefault(id(param), f"{module_name}.{name}")
    return names


def _observe_modules(world: World, seen: Dict[Key, Any]) -> None:
    for module_name, module in world.modules.items():
        for name, sub in module.named_modules():
            seen[Key(f"{module_name}.{name}" if name else module_name, "training")] = sub.training
        for name, param in module.named_parameters():
            path = f"{module_name}.{name}"
            seen[Key(path, "value")] = _copy(param)
            seen[Key(path, "grad")] = None if param.grad is None else _copy(param.grad)
            seen[Key(path, "requires_grad")] = param.requires_grad
            seen[Key(path, "version")] = param._version
        for name, buffer in module.named_buffers():
            seen[Key(f"{module_name}.{name}", "buffer")] = _copy(buffer)


def _observe_optimizers(world: World, seen: Dict[Key, Any]) -> None:
    names = parameter_names(world)
    for opt_name, optimizer in world.optimizers.items():
        groups = []
        for group in optimizer.param_groups:
            groups.append({key: [names.get(id(p), "a tensor of no model") for p in value] if key == "params"
                           else value for key, value in group.items()})
        seen[Key(opt_name, "settings")] = groups
        for param, state in optimizer.state.items():
            for entry, value in state.items():
                seen[Key(f"{opt_name}.{names.get(id(param), 'a tensor of no model')}.{entry}", "state")] = _copy(value)


def observe(world: World, returned: Any = MISSING) -> Dict[Key, Any]:
    """Everything a call could have changed, copied."""
    seen: Dict[Key, Any] = {}
    _observe_modules(world, seen)
    _observe_optimizers(world, seen)
    for name, tensor in world.inputs.items():
        seen[Key(name, "input")] = (_copy(tensor), tensor.requires_grad, tensor.grad is not None, tensor._version)
    for name, read in world.extra.items():
        seen[Key(name, "extra")] = read()
    seen[Key("the default dtype", "global")] = torch.get_default_dtype()
    seen[Key("anomaly detection", "global")] = torch.is_anomaly_enabled()
    seen[Key("gradient tracking", "global")] = torch.is_grad_enabled()
    if returned is not MISSING:
        seen[Key("return", "return")] = returned
    return seen


def restore_globals(before: Mapping[Key, Any]) -> None:
    """Put torch's global settings back as ``before`` saw them (after a learner's call that changed them)."""
    torch.set_default_dtype(before[Key("the default dtype", "global")])
    torch.autograd.set_detect_anomaly(before[Key("anomaly detection", "global")])
    torch.set_grad_enabled(before[Key("gradient tracking", "global")])
