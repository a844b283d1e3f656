"""The tensors an autograd graph saved for backward, and the state of each: alive, freed or stale.

Reading ``grad_fn._saved_<name>`` checks the tensor: it raises error 1 when a backward pass freed it and
error 2 when it was changed in place after saving. ``grad_fn._raw_saved_<name>.data`` reads it without
checks (None once freed) on newer torch, which tells us which parameter a stale tensor belongs to. Older torch
(2.4-2.6) has no ``.data`` there: we look for the parameter at that version and shape among those the node reads
(directly, or through ``weight.t()``), then among all.

Read-only: a saved tensor packed by a hook (``torch.utils.checkpoint(use_reentrant=False)``'s, or any
``torch.autograd.graph.saved_tensors_hooks``) is never unpacked, since unpacking runs the hook (a checkpoint's
recomputes its block: BatchNorm statistics move, the RNG advances). Such a tensor is reported as ``State.UNSEEN``.
A custom ``autograd.Function``'s node (a reentrant checkpoint's, a ``torch.compile`` region's) is read through
``saved_tensors``, which checks versions the same way.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, Union

import torch

from helpers.language import marked, tr, translated
from helpers.tools import hook_probe, regions, traversal
from helpers.tools.arguments import read_outputs, read_parameters
from helpers.tools.errors import KINDS, parse_version_error

Outputs = Union[torch.Tensor, Sequence[torch.Tensor], Mapping[str, torch.Tensor]]
SAVED_PREFIX = hook_probe.SAVED_PREFIX


class State(str, Enum):
    """What became of a saved tensor."""

    ALIVE = "alive"
    FREED = "freed"
    STALE = "stale"
    UNSEEN = "unseen"  # packed by a hook (a checkpoint's): reading it would run the hook, so it is not read


# Why a tensor was not read: compared (``opaque.py``), so kept English; shown with ``translated``.
CHECKPOINT_UNSEEN = marked("inside a checkpoint: recomputed at backward time")
HOOK_UNSEEN = marked("packed by a saved-tensor hook: not unpacked")


@dataclass(frozen=True)
class SavedTensor:
    """One tensor a graph node saved for its backward.

    Attributes:
        node_name: the node's class name, e.g. ``AddmmBackward0``.
        attribute: the saved name, e.g. ``mat2``.
        state: alive, freed by a backward pass, stale (changed in place since it was saved), or unseen (packed by
            a hook, e.g. inside a non-reentrant checkpoint: not read, since reading would run the hook).
        shape: its shape, or None once freed.
        version_saved: its version when the forward pass saved it (None once freed).
        version_now: its version now (None once freed).
        parameter: the named parameter it is, or is a view of (e.g. ``M2.2.weight``), else None.
        node: the grad_fn node itself.
        reason: for an unseen tensor, why it was not read.
    """

    node_name: str
    attribute: str
    state: State
    shape: Optional[Tuple[int, ...]]
    version_saved: Optional[int]
    version_now: Optional[int]
    parameter: Optional[str]
    node: Any = field(compare=False, repr=False)
    reason: str = ""

    @property
    def where(self) -> str:
        """``AddmmBackward0.mat2``."""
        return f"{self.node_name}.{self.attribute}"

    @property
    def state_label(self) -> str:
        """``alive v1``, ``freed``, ``stale v1->v2`` or why it is unseen: readable without color."""
        if self.state is State.UNSEEN:
            return f"unseen ({self.reason})" if self.reason else "unseen"
        if self.state is State.FREED:
            return "freed"
        if self.state is State.STALE:
            return f"stale v{self.version_saved}->v{self.version_now}"
        return f"alive v{self.version_now}"

    @property
    def shown_state_label(self) -> str:
        """``state_label`` in the learner's language (``state_label`` itself stays English: code compares it, and
        pictures draw it where no font draws the learner's language)."""
        if self.state is State.UNSEEN:
            return tr("unseen ({reason})", reason=translated(self.reason)) if self.reason else tr("unseen")
        if self.state is State.FREED:
            return tr("freed")
        if self.state is State.STALE:
            return tr("stale v{saved}->v{now}", saved=self.version_saved, now=self.version_now)
        return tr("alive v{version}", version=self.version_now)

    def describe(self) -> str:
        """One line for text forms and diagnoses."""
        shape = f" {list(self.shape)}" if self.shape is not None else ""
        owner = f" ({self.parameter})" if self.parameter else ""
        return f"{self.where}{shape}{owner}: {self.shown_state_label}"


def output_tensors(outputs: Any) -> List[torch.Tensor]:
    """The tensors in ``outputs``: a tensor, a list or tuple, or a dict of them (anything else is left out)."""
    return read_outputs(outputs).values()


def graph_nodes(outputs: Outputs) -> List[Any]:
    """Every grad_fn node behind ``outputs``, each once, in breadth-first order from the outputs."""
    return traversal.graph_nodes(output_tensors(outputs))


def _subgraph(root: Any) -> Set[int]:
    return {id(node) for node in graph_nodes(root)} if isinstance(root, torch.Tensor) else set()


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


def _address(tensor: torch.Tensor) -> Optional[int]:
    """Where ``tensor``'s first element lies in memory; None without one (empty, meta, a subclass without data)."""
    try:
        address = tensor.data_ptr() if tensor.numel() > 0 and tensor.device.type != "meta" else 0
    except (RuntimeError, NotImplementedError, TypeError):
        return None
    return address or None


def _owner(tensor: Optional[torch.Tensor], names: Mapping[int, str],
           params: Optional[Mapping[str, torch.Tensor]] = None) -> Optional[str]:
    """The name of the parameter ``tensor`` is, or is a view of (``weight.t()``), else None. A saved tensor that is
    neither the parameter's object nor a view of it (a compiled region's comes back as another object on torch 2.4)
    is named by the one parameter laid out on the same memory (same start, sizes and strides, in any order:
    ``weight.t()``)."""
    if not isinstance(tensor, torch.Tensor):
        return None
    found = names.get(id(tensor)) or (names.get(id(tensor._base)) if tensor._base is not None else None)
    if found is not None or not params:
        return found
    address = _address(tensor)
    if address is None:
        return None
    layout = sorted(zip(tensor.shape, tensor.stride()))  # the same memory: a permutation of the same layout
    same = [name for name, p in params.items() if p.numel() == tensor.numel() and _address(p) == address
            and sorted(zip(p.shape, p.stride())) == layout]
    return same[0] if len(same) == 1 else None


def _raw_entries(node: Any, attribute: str) -> List[Any]:
    """The raw saved entries of ``attribute``; raises error 1 where a custom Function's node (a compiled region's)
    was freed by a backward pass (its ``_raw_saved_tensors`` raises)."""
    try:
        raw = getattr(node, f"_raw{SAVED_PREFIX}{attribute}", None)
    except RuntimeError as error:
        if KINDS["backward-twice"].matches(error):
            raise
        return []
    if raw is None:
        return []
    return list(raw) if isinstance(raw, (list, tuple)) else [raw]


def _attributes(node: Any) -> List[str]:
    """The names of ``node``'s tensor-valued saved attributes (``mat1``; ``tensors`` for a custom Function's)."""
    return sorted(a[len(f"_raw{SAVED_PREFIX}"):] for a in dir(node) if a.startswith(f"_raw{SAVED_PREFIX}"))


def unpack_hook_reason(entry: Any) -> Optional[str]:
    """Why a raw saved entry must not be unpacked (its unpack hook would run), or None when reading it is safe (or,
    on a torch that does not show the hook, when ``_read`` must find out)."""
    hook = getattr(entry, "unpack_hook", None)
    if hook is None:
        return None
    return _hook_reason(getattr(hook, "__module__", ""))


def _hook_reason(module: str) -> str:
    return CHECKPOINT_UNSEEN if module == regions.CHECKPOINT_MODULE else HOOK_UNSEEN


def _read(node: Any, attribute: str) -> Tuple[List[Any], Optional[RuntimeError], Optional[str]]:
    """Read ``node._saved_<attribute>`` (a custom Function's ``saved_tensors``): its values, or the error it raises
    (error 1 or error 2), or why it was left unread (on a torch that does not show unpack hooks, a hook that would
    have run). Only for entries no hook is known to have packed (``unpack_hook_reason``)."""
    name = hook_probe.read_name(node, attribute)
    if not hook_probe.hooks_shown():
        probe = hook_probe.read_saved(node, name)
        if probe.hook_module is not None:
            return [], None, _hook_reason(probe.hook_module)
        if probe.error is not None:
            return [], probe.error, None
        value = probe.value
    else:
        try:
            value = getattr(node, name)
        except RuntimeError as error:
            return [], error, None
    return (list(value) if isinstance(value, (list, tuple)) else [value]), None, None


def _owner_by_version(version: int, shape: Tuple[int, ...], params: Mapping[str, torch.Tensor]) -> Optional[str]:
    """The one parameter at ``version`` shaped like ``shape`` or its transpose (for torch without SavedTensor.data)."""
    matches = [name for name, p in params.items()
               if p._version == version and shape in (tuple(p.shape), tuple(reversed(p.shape)))]
    return matches[0] if len(matches) == 1 else None


def _owner_nearby(node: Any, attribute: str, version: int, shape: Tuple[int, ...],
                  names: Mapping[int, str]) -> Optional[str]:
    """The one parameter at ``version``, shaped like ``shape`` or its transpose, that ``node`` reads directly or
    through one more node (``weight.t()``): how a stale weight is named where torch has no SavedTensor.data.

    When several match (a norm layer's weight and bias), the one named like the saved attribute (``weight``) wins.
    """
    found: Dict[int, str] = {}
    frontier = [node]
    for _ in range(2):
        following = []
        for current in frontier:
            for child in traversal.children(current):
                variable = getattr(child, "variable", None)
                if variable is None:
                    following.append(child)
                elif id(variable) in names and variable._version == version and shape in (
                        tuple(variable.shape), tuple(reversed(variable.shape))):
                    found[id(variable)] = names[id(variable)]
        frontier = following
    if len(found) > 1:
        found = {key: name for key, name in found.items() if name.split("#")[0].rsplit(".", 1)[-1] == attribute}
    return next(iter(found.values())) if len(found) == 1 else None


def _stale(node: Any, label: str, raw: Any, error: RuntimeError, params: Mapping[str, torch.Tensor],
           names: Mapping[int, str]) -> SavedTensor:
    details = parse_version_error(str(error))
    if details is None:  # some other failure to unpack: report it as not usable, without versions
        return SavedTensor(type(node).__name__, label, State.STALE, None, None, None, None, node)
    data = getattr(raw, "data", None)  # SavedTensor.data reads without checks (newer torch only)
    if data is not None:
        owner = _owner(data, names)
    else:
        owner = (_owner_nearby(node, label.split("[")[0], details.version_now, details.shape, names)
                 or _owner_by_version(details.version_now, details.shape, params))
    return SavedTensor(type(node).__name__, label, State.STALE, details.shape, details.version_expected,
                       details.version_now, owner, node)


def saved_tensors_of(node: Any, params: Any = None) -> List[SavedTensor]:
    """The tensors ``node`` saved, with their state; ``params`` names parameters (any form the tools take).

    A tensor the node did not need to save (a gradient nobody asked for) is left out.
    """
    named = read_parameters(params).tensors
    return _saved_tensors_of(node, named, {id(tensor): name for name, tensor in named.items()})


def _saved_tensors_of(node: Any, params: Mapping[str, torch.Tensor], names: Mapping[int, str]) -> List[SavedTensor]:
    name = type(node).__name__
    found = []
    packed_by_checkpoint = regions.checkpoint_packed(node)
    for attribute in _attributes(node):
        try:
            entries = _raw_entries(node, attribute)  # only tensor-valued saved attributes have a raw form
        except RuntimeError:  # freed by a backward pass: how many it held is gone with them
            found.append(SavedTensor(name, attribute, State.FREED, None, None, None, None, node))
            continue
        if not entries:
            continue
        reasons = [unpack_hook_reason(raw) for raw in entries]
        if packed_by_checkpoint or any(reasons):  # never unpack: the hook would run (a checkpoint recomputes)
            for index, reason in enumerate(reasons):
                label = attribute if len(entries) == 1 else f"{attribute}[{index}]"
                found.append(SavedTensor(name, label, State.UNSEEN, None, None, None, None, node,
                                         reason or (CHECKPOINT_UNSEEN if packed_by_checkpoint else HOOK_UNSEEN)))
            continue
        values, error, unread = _read(node, attribute)
        for index, raw in enumerate(entries):
            label = attribute if len(entries) == 1 else f"{attribute}[{index}]"
            if unread is not None:
                found.append(SavedTensor(name, label, State.UNSEEN, None, None, None, None, node, unread))
            elif error is not None and KINDS["backward-twice"].matches(error):
                found.append(SavedTensor(name, label, State.FREED, None, None, None, None, node))
            elif error is not None:
                found.append(_stale(node, label, raw, error, params, names))
            elif index < len(values) and isinstance(values[index], torch.Tensor):
                value = values[index]
                found.append(SavedTensor(name, label, State.ALIVE, tuple(value.shape), value._version,
                                         value._version, _owner(value, names, params), node))
    return found


def saved_tensors(
    outputs: Outputs,
    params: Any = None,
    inputs: Optional[Sequence[torch.Tensor]] = None,
    autograd_grad: bool = False,
) -> List[SavedTensor]:
    """Every saved tensor a backward pass from ``outputs`` would unpack, node by node from the outputs down.

    Without ``inputs``, every saved tensor behind the outputs. With ``inputs``, only those of the nodes
    ``backward(inputs=inputs)`` runs (``autograd_grad=True``: those ``torch.autograd.grad(outputs, inputs)`` runs);
    see ``helpers.tools.traversal`` for the rule.
    """
    named = read_parameters(params).tensors
    names = {id(tensor): name for name, tensor in named.items()}
    tensors = output_tensors(outputs)
    wanted = None if inputs is None else [t for t in inputs if isinstance(t, torch.Tensor)]
    nodes = traversal.nodes_backward_runs(tensors, wanted, autograd_grad)
    return [saved for node in nodes for saved in _saved_tensors_of(node, named, names)]


def count_states(saved: Sequence[SavedTensor]) -> Mapping[State, int]:
    """How many saved tensors are alive, freed, stale and unseen."""
    return {state: sum(1 for s in saved if s.state is state) for state in State}


def iter_problems(saved: Sequence[SavedTensor]) -> Iterator[SavedTensor]:
    """The saved tensors a backward pass would fail on: freed or stale (an unseen one is not known to be either)."""
    return (s for s in saved if s.state in (State.FREED, State.STALE))


def saved_bytes(outputs: Outputs, params: Any = ()) -> int:
    """Bytes of the storages the graph's alive saved tensors use, each storage once, parameters' excluded.

    It counts activations and the inputs the graph saved (``params`` in any form the tools take; their storages are
    left out). It reads the graph and keeps nothing alive, unlike a saved-tensor pack hook that stores tensors.
    Tensors packed by a hook (inside a non-reentrant checkpoint) are not unpacked, so not counted: a checkpoint
    keeps its block's inputs, and recomputes the rest at backward time.
    """
    parameter_storages = {p.untyped_storage().data_ptr() for p in read_parameters(params).values()}
    storages: Dict[int, int] = {}
    for saved in saved_tensors(outputs):
        if saved.state is not State.ALIVE:
            continue
        node_value, _, _ = _read(saved.node, saved.attribute.split("[")[0])
        for value in node_value if isinstance(node_value, (tuple, list)) else [node_value]:
            if isinstance(value, torch.Tensor):
                storage = value.untyped_storage()
                if storage.data_ptr() not in parameter_storages:
                    storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())
