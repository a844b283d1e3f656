"""The tensors an autograd graph saved for backward, and the state of each: alive, freed or stale.

Reading ``grad_fn._saved_<name>`` checks the tensor: it raises error 1 when a backward pass freed it and
error 2 when it was changed in place after saving. ``grad_fn._raw_saved_<name>.data`` reads it without
checks (None once freed) on newer torch, which tells us which parameter a stale tensor belongs to; on older
torch (2.4-2.6) we match the parameter by its version and shape instead.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, Union

import torch

from helpers.tools.errors import KINDS, parse_version_error

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
    queue = deque(t.grad_fn for t in roots if t.grad_fn is not None)
    while queue:
        node = queue.popleft()
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        queue.extend(child for child, _ in node.next_functions if child is not None)
    return order


def nodes_on_the_way(outputs: Outputs, inputs: Sequence[torch.Tensor]) -> List[Any]:
    """The nodes a ``backward(inputs=...)`` from ``outputs`` runs: those with a path down to one of ``inputs``."""
    wanted = {id(t) for t in inputs}
    nodes = graph_nodes(outputs)
    needed: Dict[int, bool] = {}
    for node in reversed(nodes):  # breadth-first order reversed: children first in this acyclic graph
        variable = getattr(node, "variable", None)
        needed[id(node)] = (variable is not None and id(variable) in wanted) or any(
            needed.get(id(child), False) for child, _ in node.next_functions if child is not None
        )
    return [node for node in nodes if needed[id(node)]]


def _subgraph(root: Optional[torch.Tensor]) -> Set[int]:
    return {id(node) for node in graph_nodes(root)} if root is not None and root.grad_fn is not None else set()


def model_of_nodes(nodes: Sequence[Any], model_outputs: Mapping[str, torch.Tensor]) -> Dict[int, str]:
    """Each node's model: the innermost model output whose subgraph contains it (a chain tenc -> unet works).

    Node ids are compared, so the caller must hold ``nodes`` (older torch recreates unheld node objects).
    """
    subgraphs = {name: _subgraph(output) for name, output in model_outputs.items()}
    owner: Dict[int, str] = {}
    for node in nodes:
        containing = [name for name, members in subgraphs.items() if id(node) in members]
        if containing:
            owner[id(node)] = min(containing, key=lambda name: len(subgraphs[name]))
    return owner


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


def _read(node: Any, attribute: str) -> Tuple[List[Any], Optional[RuntimeError]]:
    """Read ``node._saved_<attribute>``: its values, or the error it raises (error 1 or error 2)."""
    try:
        value = getattr(node, f"{SAVED_PREFIX}{attribute}")
    except RuntimeError as error:
        return [], error
    return (list(value) if isinstance(value, (list, tuple)) else [value]), None


def _owner_by_version(version: int, shape: Tuple[int, ...], params: Mapping[str, torch.Tensor]) -> Optional[str]:
    """The one parameter at ``version`` shaped like ``shape`` or its transpose (for torch without SavedTensor.data)."""
    matches = [name for name, p in params.items()
               if p._version == version and shape in (tuple(p.shape), tuple(reversed(p.shape)))]
    return matches[0] if len(matches) == 1 else None


def _stale(node: Any, label: str, raw: Any, error: RuntimeError, params: Mapping[str, torch.Tensor]) -> SavedTensor:
    details = parse_version_error(str(error))
    if details is None:
        raise error
    data = getattr(raw, "data", None)  # SavedTensor.data reads without checks (newer torch only)
    owner = _owner(data, params) if data is not None else _owner_by_version(details.version_now, details.shape, params)
    return SavedTensor(type(node).__name__, label, State.STALE, details.shape, details.version_expected,
                       details.version_now, owner, node)


def saved_tensors_of(node: Any, params: Optional[Mapping[str, torch.Tensor]] = None) -> List[SavedTensor]:
    """The tensors ``node`` saved, with their state; ``params`` names parameters (``{"M1.0.weight": ...}``).

    A tensor the node did not need to save (a gradient nobody asked for) is left out.
    """
    params = params or {}
    name = type(node).__name__
    found = []
    for attribute in sorted(a[len(SAVED_PREFIX):] for a in dir(node) if a.startswith(SAVED_PREFIX)):
        entries = _raw_entries(node, attribute)  # only tensor-valued saved attributes have a raw form
        if not entries:
            continue
        values, error = _read(node, attribute)
        for index, raw in enumerate(entries):
            label = attribute if len(entries) == 1 else f"{attribute}[{index}]"
            if error is not None and KINDS["backward-twice"].matches(error):
                found.append(SavedTensor(name, label, State.FREED, None, None, None, None, node))
            elif error is not None:
                found.append(_stale(node, label, raw, error, params))
            elif values[index] is not None:
                value = values[index]
                found.append(SavedTensor(name, label, State.ALIVE, tuple(value.shape), value._version,
                                         value._version, _owner(value, params), node))
    return found


def saved_tensors(
    outputs: Outputs,
    params: Optional[Mapping[str, torch.Tensor]] = None,
    inputs: Optional[Sequence[torch.Tensor]] = None,
) -> List[SavedTensor]:
    """Every saved tensor behind ``outputs``, node by node from the outputs down.

    With ``inputs``, only those a ``backward(inputs=inputs)`` would use.
    """
    nodes = graph_nodes(outputs) if inputs is None else nodes_on_the_way(outputs, inputs)
    return [saved for node in nodes for saved in saved_tensors_of(node, params)]


def count_states(saved: Sequence[SavedTensor]) -> Mapping[State, int]:
    """How many saved tensors are alive, freed and stale."""
    return {state: sum(1 for s in saved if s.state is state) for state in State}


def iter_problems(saved: Sequence[SavedTensor]) -> Iterator[SavedTensor]:
    """The saved tensors a backward pass would fail on: freed or stale."""
    return (s for s in saved if s.state is not State.ALIVE)
