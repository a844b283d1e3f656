"""The tensors an autograd graph saved for backward, and the state of each: alive, freed or stale.

Reading ``grad_fn._saved_<name>`` checks the tensor: it raises error 1 when a backward pass freed it and
error 2 when it was changed in place after saving. ``grad_fn._raw_saved_<name>.data`` reads it without
checks (None once freed), which tells us which parameter a stale tensor belongs to.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from helpers.errors import KINDS, parse_version_error

Outputs = Union[torch.Tensor, Sequence[torch.Tensor]]
SAVED_PREFIX = "_saved_"


class State(str, Enum):
    """What became of a saved tensor."""

    ALIVE = "alive"
    FREED = "freed"
    STALE = "stale"


@dataclass(frozen=True)
class SavedTensor:
    """One tensor a graph node saved for its backward.

    Attributes:
        node_name: the node's class name, e.g. ``AddmmBackward0``.
        attribute: the saved name, e.g. ``mat2``.
        state: alive, freed by a backward pass, or stale (changed in place since it was saved).
        shape: its shape, or None once freed.
        version_saved: its version when the forward pass saved it (None once freed).
        version_now: its version now (None once freed).
        parameter: the named parameter it is, or is a view of (e.g. ``M2.2.weight``), else None.
        node: the grad_fn node itself.
    """

    node_name: str
    attribute: str
    state: State
    shape: Optional[Tuple[int, ...]]
    version_saved: Optional[int]
    version_now: Optional[int]
    parameter: Optional[str]
    node: Any = field(compare=False, repr=False)

    @property
    def where(self) -> str:
        """``AddmmBackward0.mat2``."""
        return f"{self.node_name}.{self.attribute}"

    @property
    def state_label(self) -> str:
        """``alive v1``, ``freed`` or ``stale v1->v2``: readable without color."""
        if self.state is State.FREED:
            return "freed"
        if self.state is State.STALE:
            return f"stale v{self.version_saved}->v{self.version_now}"
        return f"alive v{self.version_now}"

    def describe(self) -> str:
        """One line for text forms and diagnoses."""
        shape = f" {list(self.shape)}" if self.shape is not None else ""
        owner = f" ({self.parameter})" if self.parameter else ""
        return f"{self.where}{shape}{owner}: {self.state_label}"


def graph_nodes(outputs: Outputs) -> List[Any]:
    """Every grad_fn node behind ``outputs``, each once, in breadth-first order from the outputs."""
    roots = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs)
    order: List[Any] = []
    seen = set()
    queue = [t.grad_fn for t in roots if t.grad_fn is not None]
    while queue:
        node = queue.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        queue.extend(child for child, _ in node.next_functions if child is not None)
    return order


def _owner(tensor: Optional[torch.Tensor], params: Mapping[str, torch.Tensor]) -> Optional[str]:
    if tensor is None:
        return None
    for name, param in params.items():
        if tensor is param or tensor._base is param:
            return name
    return None


def _raw_entries(node: Any, attribute: str) -> List[Any]:
    raw = getattr(node, f"_raw{SAVED_PREFIX}{attribute}", None)
    if raw is None:
        return []
    return list(raw) if isinstance(raw, (list, tuple)) else [raw]


def _check(node: Any, attribute: str) -> Optional[RuntimeError]:
    """The error reading ``node._saved_<attribute>`` raises (error 1 or error 2), or None when it is fine."""
    try:
        getattr(node, f"{SAVED_PREFIX}{attribute}")
    except RuntimeError as error:
        return error
    return None


def _inspect(
    node: Any, attribute: str, label: str, raw: Any, params: Mapping[str, torch.Tensor]
) -> Optional[SavedTensor]:
    """The saved tensor's state; None when the node saved nothing there (a gradient nobody needs)."""
    data = raw.data
    name = type(node).__name__
    error = _check(node, attribute)
    if error is not None and KINDS["backward-twice"].matches(error):
        return SavedTensor(name, label, State.FREED, None, None, None, None, node)
    if data is None:
        return None
    shape, owner = tuple(data.shape), _owner(data, params)
    details = parse_version_error(str(error)) if error is not None else None
    if details is not None:
        return SavedTensor(name, label, State.STALE, shape, details.version_expected, details.version_now, owner, node)
    if error is not None:
        raise error
    return SavedTensor(name, label, State.ALIVE, shape, data._version, data._version, owner, node)


def saved_tensors_of(node: Any, params: Optional[Mapping[str, torch.Tensor]] = None) -> List[SavedTensor]:
    """The tensors ``node`` saved, with their state; ``params`` names parameters (``{"M1.0.weight": ...}``)."""
    found = []
    for attribute in sorted(a[len(SAVED_PREFIX):] for a in dir(node) if a.startswith(SAVED_PREFIX)):
        entries = _raw_entries(node, attribute)
        for index, raw in enumerate(entries):
            label = attribute if len(entries) == 1 else f"{attribute}[{index}]"
            saved = _inspect(node, attribute, label, raw, params or {})
            if saved is not None:
                found.append(saved)
    return found


def saved_tensors(outputs: Outputs, params: Optional[Mapping[str, torch.Tensor]] = None) -> List[SavedTensor]:
    """Every saved tensor behind ``outputs``, node by node from the outputs down."""
    return [saved for node in graph_nodes(outputs) for saved in saved_tensors_of(node, params)]


def count_states(saved: Sequence[SavedTensor]) -> Mapping[State, int]:
    """How many saved tensors are alive, freed and stale."""
    return {state: sum(1 for s in saved if s.state is state) for state in State}


def iter_problems(saved: Sequence[SavedTensor]) -> Iterator[SavedTensor]:
    """The saved tensors a backward pass would fail on: freed or stale."""
    return (s for s in saved if s.state is not State.ALIVE)
