"""Reading the arguments the tools take, in whatever form real code has them at hand.

Outputs: a loss tensor, a list or tuple of them, or a dict ``{"d_loss": d_loss, "g_loss": g_loss}``.
Parameters: a module, several modules by name (``{"G": generator, "D": discriminator}``), a list of modules,
``model.named_parameters()``, a dict of tensors, or nothing. Parameters whose names collide (``main.0.weight`` in
two models passed as one list) stay apart: the second is called ``main.0.weight#2``.

Reading never raises: what cannot be read is left out, with a note that says what and why.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import torch
from torch import nn


@dataclass
class NamedTensors:
    """Tensors by unique name, with notes about whatever could not be read."""

    tensors: Dict[str, torch.Tensor] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)

    def add(self, name: str, tensor: torch.Tensor) -> None:
        """Add ``tensor`` as ``name`` (made unique); a tensor already present keeps its first name."""
        if any(existing is tensor for existing in self.tensors.values()):
            return
        unique, number = name, 2
        while unique in self.tensors:
            unique, number = f"{name}#{number}", number + 1
        self.tensors[unique] = tensor

    def names_by_id(self) -> Dict[int, str]:
        """``id(tensor)`` -> its name."""
        return {id(tensor): name for name, tensor in self.tensors.items()}

    def values(self) -> List[torch.Tensor]:
        return list(self.tensors.values())


def describe_value(value: Any) -> str:
    """A short description of any value, for notes."""
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def read_outputs(outputs: Any) -> NamedTensors:
    """The tensors to call backward on, named: ``{"L1": l1}`` keeps its names, a list gets ``output 1``, ..."""
    found = NamedTensors()
    if isinstance(outputs, torch.Tensor):
        found.add("output", outputs)
    elif isinstance(outputs, Mapping):
        for key, value in outputs.items():
            _add_output(found, str(key), value)
    elif isinstance(outputs, (list, tuple)):
        for index, value in enumerate(outputs, 1):
            _add_output(found, f"output {index}", value)
    else:
        found.notes.append(f"{describe_value(outputs)} is not a tensor: there is nothing to call backward() on")
    return found


def _add_output(found: NamedTensors, name: str, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        found.add(name, value)
    else:
        found.notes.append(f"{name} is {describe_value(value)}, not a tensor: there is nothing to call backward() on")


def read_parameters(params: Any) -> NamedTensors:
    """Parameters by unique name, from any of the forms in this module's docstring (None: none)."""
    found = NamedTensors()
    if params is not None:
        _read_parameters_into(found, params, prefix="")
    return found


def _read_parameters_into(found: NamedTensors, params: Any, prefix: str) -> None:
    if isinstance(params, torch.Tensor):
        found.add(prefix.rstrip(".") or "tensor", params)
    elif isinstance(params, nn.Module):
        for name, parameter in params.named_parameters():
            found.add(prefix + name, parameter)
    elif isinstance(params, Mapping):
        for key, value in params.items():
            _read_parameters_into(found, value, prefix=f"{prefix}{key}.")
    elif isinstance(params, (str, bytes)) or not isinstance(params, Iterable):
        found.notes.append(f"could not read parameters from {describe_value(params)}: pass a module, a dict, "
                           "or model.named_parameters()")
    else:
        _read_iterable_into(found, params, prefix)


def _read_iterable_into(found: NamedTensors, items: Iterable[Any], prefix: str) -> None:
    class_counts: Dict[str, int] = {}
    try:
        materialized = list(items)
    except Exception as error:  # a generator that fails halfway: keep what the tools can still say
        found.notes.append(f"could not read the parameters ({type(error).__name__}: {error})")
        return
    for index, item in enumerate(materialized):
        pair = _as_named_pair(item)
        if pair is not None:
            found.add(prefix + pair[0], pair[1])
        elif isinstance(item, nn.Module):
            name = type(item).__name__
            class_counts[name] = class_counts.get(name, 0) + 1
            label = name if class_counts[name] == 1 else f"{name}#{class_counts[name]}"
            _read_parameters_into(found, item, prefix=f"{prefix}{label}.")
        elif isinstance(item, torch.Tensor):
            found.add(f"{prefix}param {index}", item)
        else:
            found.notes.append(f"left out {describe_value(item)}: not a parameter")


def _as_named_pair(item: Any) -> Optional[Tuple[str, torch.Tensor]]:
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], torch.Tensor):
        return item[0], item[1]
    return None


def read_inputs(inputs: Any) -> Tuple[Optional[List[Any]], List[str]]:
    """What ``backward(inputs=...)`` gets, as a list (None when not given), and notes.

    Items are kept as they are, tensors or not: whether PyTorch accepts them is for the diagnosis to say.
    """
    if inputs is None:
        return None, []
    if isinstance(inputs, torch.Tensor):
        return [inputs], []
    if isinstance(inputs, nn.Module):
        return list(inputs.parameters()), []
    if isinstance(inputs, Mapping):
        return [value for value in read_parameters(inputs).values()], []
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Iterable):
        return [inputs], []
    try:
        return [pair[1] if (pair := _as_named_pair(item)) else item for item in inputs], []
    except Exception as error:  # an iterator that fails halfway
        return None, [f"could not read inputs ({type(error).__name__}: {error}); diagnosed without inputs="]
