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

from helpers.language import tr


class ToolsName(str):
    """A name the tools gave an output passed without one (``output``, ``output 2``): a drawing may translate it. A
    name the learner gave (a dict's key) is a plain ``str``, and stays as written."""


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
        found.add(ToolsName("output"), outputs)
    elif isinstance(outputs, Mapping):
        for key, value in outputs.items():
            _add_output(found, key if isinstance(key, str) else str(key), value)  # a ToolsName stays one
    elif isinstance(outputs, (list, tuple)):
        for index, value in enumerate(outputs, 1):
            _add_output(found, ToolsName(f"output {index}"), value)
    else:
        found.notes.append(tr("{value} is not a tensor: there is nothing to call backward() on",
                              value=describe_value(outputs)))
    return found


def _add_output(found: NamedTensors, name: str, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        found.add(name, value)
    else:
        found.notes.append(tr("{name} is {value}, not a tensor: there is nothing to call backward() on", name=name,
                              value=describe_value(value)))


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
        found.notes.append(tr("could not read parameters from {value}: pass a module, a dict, "
                              "or model.named_parameters()", value=describe_value(params)))
    else:
        _read_iterable_into(found, params, prefix)


def _read_iterable_into(found: NamedTensors, items: Iterable[Any], prefix: str) -> None:
    class_counts: Dict[str, int] = {}
    try:
        materialized = list(items)
    except Exception as error:  # a generator that fails halfway: keep what the tools can still say
        found.notes.append(tr("could not read the parameters ({error_type}: {error})",
                              error_type=type(error).__name__, error=error))
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
            found.notes.append(tr("left out {value}: not a parameter", value=describe_value(item)))


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
        return None, [tr("could not read inputs ({error_type}: {error}); diagnosed without inputs=",
                         error_type=type(error).__name__, error=error)]


def output_items(outputs: Any) -> List[Any]:
    """The outputs as PyTorch's backward and autograd.grad pair them with gradients: in order, repeats kept."""
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    if isinstance(outputs, Mapping):
        return list(outputs.values())
    if isinstance(outputs, (list, tuple)):
        return list(outputs)
    return [outputs]


@dataclass(frozen=True)
class CallArguments:
    """The keyword arguments of the call diagnosed, as PyTorch reads them.

    Attributes:
        autograd_grad: True for ``torch.autograd.grad``, False for ``backward``.
        outputs: the outputs in the order PyTorch pairs them with gradients, repeats kept.
        gradients: one entry per output as PyTorch pairs them (``None`` entries: made implicitly); None when
            the argument was not given, or could not be read (``gradients_unreadable`` says why).
        gradient_name: the name it was given under (``gradient``, ``grad_tensors`` or ``grad_outputs``).
        gradients_unreadable: the type of a value PyTorch cannot iterate (``float`` for ``grad_outputs=1.0``).
        retain_graph: whether the saved tensors stay alive after the call (``None`` means ``create_graph``).
        create_graph: whether the gradients are themselves recorded.
        allow_unused: whether an unreached input of autograd.grad is allowed (``materialize_grads`` implies it).
        allow_unused_conflict: ``materialize_grads=True`` with ``allow_unused=False``, which PyTorch refuses.
        is_grads_batched: whether the gradients' first dimension is a batch (autograd.grad only).
        unexpected: keywords given that the call does not take, in the order of its signature.
        notes: what else is worth saying about the arguments.
    """

    autograd_grad: bool = False
    outputs: Tuple[Any, ...] = ()
    gradients: Optional[Tuple[Any, ...]] = None
    gradient_name: str = "gradient"
    gradients_unreadable: Optional[str] = None
    retain_graph: bool = False
    create_graph: bool = False
    allow_unused: bool = False
    allow_unused_conflict: bool = False
    is_grads_batched: bool = False
    unexpected: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()


def read_call(autograd_grad: bool, given: Mapping[str, Any]) -> CallArguments:
    """Read the keywords of ``backward`` or ``torch.autograd.grad`` from ``given`` (name -> value).

    Mirrors PyTorch: ``gradient`` is Tensor.backward's name, ``grad_tensors`` torch.autograd.backward's, and
    ``grad_outputs`` autograd.grad's; ``retain_graph=None`` means ``create_graph``; ``materialize_grads=True``
    means ``allow_unused=True`` and refuses ``allow_unused=False``; ``only_inputs`` is deprecated and ignored.
    A keyword of the other call counts as given only when its value is not the default (a default passed on
    purpose cannot be told from one left out).
    """
    backward_names = ("gradient", "grad_tensors")
    grad_only = {"grad_outputs": None, "only_inputs": True, "allow_unused": None, "is_grads_batched": False,
                 "materialize_grads": False}
    notes: List[str] = []
    if autograd_grad:
        unexpected = tuple(name for name in backward_names if given.get(name) is not None)
        names = ("grad_outputs",)
    else:
        unexpected = tuple(name for name, default in grad_only.items() if given.get(name, default) is not default)
        names = backward_names
    present = [name for name in names if given.get(name) is not None]
    if len(present) > 1:
        notes.append(tr("{first} and {second} are one argument under two names (Tensor.backward's and "
                        "torch.autograd.backward's); no call takes both: diagnosed with {first}=.",
                        first=present[0], second=present[1]))
    name = present[0] if present else names[0]
    gradients, unreadable = _read_gradients(given.get(name))
    create_graph = bool(given.get("create_graph"))
    retain = given.get("retain_graph")
    materialize = autograd_grad and bool(given.get("materialize_grads"))
    allow_unused = given.get("allow_unused")
    notes += _graph_notes(retain, create_graph, autograd_grad)
    if autograd_grad and given.get("only_inputs", True) is False:
        notes.append(tr("only_inputs=False is deprecated and ignored (PyTorch warns): autograd.grad fills no .grad; "
                        "use backward(inputs=...) for that."))
    return CallArguments(
        autograd_grad=autograd_grad,
        outputs=tuple(output_items(given.get("outputs"))),
        gradients=gradients,
        gradient_name=name,
        gradients_unreadable=unreadable,
        retain_graph=create_graph if retain is None else bool(retain),
        create_graph=create_graph,
        allow_unused=autograd_grad and (bool(allow_unused) or (allow_unused is None and materialize)),
        allow_unused_conflict=materialize and allow_unused is False,
        is_grads_batched=autograd_grad and bool(given.get("is_grads_batched")),
        unexpected=unexpected,
        notes=tuple(notes),
    )


def _read_gradients(value: Any) -> Tuple[Optional[Tuple[Any, ...]], Optional[str]]:
    """As PyTorch's ``_tensor_or_tensors_to_tuple``: None -> None, a tensor -> (it,), else ``tuple(value)``."""
    if value is None:
        return None, None
    if isinstance(value, torch.Tensor):
        return (value,), None
    try:
        return tuple(value), None
    except TypeError:
        return None, type(value).__name__


def _graph_notes(retain: Optional[bool], create_graph: bool, autograd_grad: bool) -> List[str]:
    """What retain_graph= and create_graph= mean for the next call (said only when given)."""
    notes: List[str] = []
    if create_graph:
        notes.append(tr("create_graph=True: the gradients are recorded too (a penalty on them can be backpropagated). "
                        "The saved tensors stay alive for a next backward (retain_graph defaults to it).")
                     if retain is None else
                     tr("create_graph=True: the gradients are recorded too (a penalty on them can be backpropagated)."))
        if not autograd_grad:
            notes.append(tr("backward(create_graph=True) makes each .grad refer back to its parameter (a reference "
                            "cycle PyTorch warns about); torch.autograd.grad(..., create_graph=True) avoids it."))
    if retain:
        notes.append(tr("retain_graph=True: the saved tensors stay alive after this call, so a second backward "
                        "through them can run (their memory is kept until the graph is dropped)."))
    elif retain is False and create_graph:
        notes.append(tr("retain_graph=False: this call frees the saved tensors of every node it runs, so a second "
                        "backward through them raises error 1 even though create_graph=True."))
    return notes
