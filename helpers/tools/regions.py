"""Regions of an autograd graph whose inside the tools cannot see, recognised by their nodes, without running them.

- ``torch.utils.checkpoint(..., use_reentrant=True)``: one ``CheckpointFunctionBackward`` node; its forward recorded
  nothing inside, and its backward runs the block again, with the weights as they are then.
- ``torch.utils.checkpoint(..., use_reentrant=False)``: ordinary nodes whose saved tensors are packed by the
  checkpoint's hooks; *reading* one recomputes the block (a side effect: BatchNorm statistics, RNG state), so the
  tools never unpack them.
- ``torch.compile``: one ``CompiledFunctionBackward`` node; what it saved is inside the compiled graph.

Older torch releases (2.4 to 2.11, measured) do not show a saved tensor's unpack hook (``SavedTensor.unpack_hook``);
there ``hook_probe`` tells whose hook would run, stopping it before its first line.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from helpers.language import marked
from helpers.tools import hook_probe, traversal

REENTRANT_CHECKPOINT = "checkpoint (use_reentrant=True)"
NON_REENTRANT_CHECKPOINT = "checkpoint (use_reentrant=False)"
COMPILED = marked("torch.compile region")  # shown translated in pictures (module_graph.region_kind)
CHECKPOINT_MODULE = "torch.utils.checkpoint"

_OPAQUE_NODES = {"CheckpointFunctionBackward": REENTRANT_CHECKPOINT, "CompiledFunctionBackward": COMPILED}


def opaque_region(node: Any) -> Optional[str]:
    """The kind of region ``node`` stands for when the tools cannot see inside it, else None."""
    if node is None:
        return None
    label = _OPAQUE_NODES.get(type(node).__name__)
    if label is not None:
        return label
    return NON_REENTRANT_CHECKPOINT if checkpoint_packed(node) else None


def checkpoint_packed(node: Any) -> bool:
    """True when one of ``node``'s saved tensors is packed by ``torch.utils.checkpoint``'s hooks (reading it would
    recompute the block). Looks at the unpack hooks only; never unpacks one that a hook packed."""
    if not hook_probe.hooks_shown():
        return any(hook_probe.read_saved(node, name).hook_module == CHECKPOINT_MODULE
                   for name in hook_probe.saved_names(node))
    for attribute in dir(node):
        if not attribute.startswith("_raw_saved_"):
            continue
        try:
            raw = getattr(node, attribute)
        except Exception:
            continue
        for entry in raw if isinstance(raw, (list, tuple)) else [raw]:
            hook = getattr(entry, "unpack_hook", None)
            if hook is not None and getattr(hook, "__module__", "") == CHECKPOINT_MODULE:
                return True
    return False


@dataclass(frozen=True)
class Region:
    """One opaque region a backward pass runs through.

    Attributes:
        kind: REENTRANT_CHECKPOINT, NON_REENTRANT_CHECKPOINT or COMPILED.
        nodes: its nodes (one for a reentrant checkpoint or a compiled region; the packed ones of a non-reentrant
            checkpoint, connected directly or through nodes that save nothing).
        parameters: the tensors its block reads as weights, where they can be found without running anything
            (the leaves a non-reentrant checkpoint's nodes reach; a reentrant checkpoint's block when it is a
            module); None when they cannot be known.
    """

    kind: str
    nodes: Tuple[Any, ...]
    parameters: Optional[Tuple[torch.Tensor, ...]]


def _saves_nothing(node: Any) -> bool:
    return not any(attribute.startswith("_raw_saved_") for attribute in dir(node))


def _leaves_below(node: Any) -> List[torch.Tensor]:
    """The leaf tensors ``node`` reads directly or through nodes that save nothing (``weight.t()``)."""
    found: List[torch.Tensor] = []
    frontier, seen = [node], {id(node): node}  # keeps the nodes alive: ids stay unique
    while frontier:
        following = []
        for current in frontier:
            for child in traversal.children(current):
                if id(child) in seen:
                    continue
                seen[id(child)] = child
                variable = getattr(child, "variable", None)
                if variable is not None:
                    found.append(variable)
                elif _saves_nothing(child) and not checkpoint_packed(child):
                    following.append(child)
        frontier = following
    return found


def _block_parameters(node: Any) -> Optional[Tuple[torch.Tensor, ...]]:
    """A reentrant checkpoint's block's parameters when the block is a module (``ctx.run_function``), else None."""
    block = getattr(node, "run_function", None)
    if isinstance(block, torch.nn.Module):
        return tuple(block.parameters())
    return None


def regions_on_the_way(nodes: Sequence[Any]) -> List[Region]:
    """The opaque regions among ``nodes`` (those a backward runs), nearest the outputs first. Reads no saved tensor."""
    found: List[Region] = []
    packed = [node for node in nodes if opaque_region(node) == NON_REENTRANT_CHECKPOINT]
    for node in nodes:
        kind = opaque_region(node)
        if kind == REENTRANT_CHECKPOINT:
            found.append(Region(kind, (node,), _block_parameters(node)))
        elif kind == COMPILED:
            found.append(Region(kind, (node,), None))
    groups: Dict[int, List[Any]] = {}
    group_of: Dict[int, int] = {}
    for node in packed:  # nodes before their children (breadth-first from the outputs)
        key = group_of.setdefault(id(node), id(node))
        groups.setdefault(key, []).append(node)
        for child in _packed_below(node):
            if id(child) not in group_of:
                group_of[id(child)] = key
    for members in groups.values():
        leaves = {id(t): t for member in members for t in _leaves_below(member)}
        found.append(Region(NON_REENTRANT_CHECKPOINT, tuple(members), tuple(leaves.values())))
    return found


def _packed_below(node: Any) -> List[Any]:
    """The packed nodes ``node`` reaches directly or through nodes that save nothing (one checkpointed block)."""
    found, frontier, seen = [], [node], {id(node): node}  # keeps the nodes alive
    while frontier:
        following = []
        for current in frontier:
            for child in traversal.children(current):
                if id(child) in seen:
                    continue
                seen[id(child)] = child
                if checkpoint_packed(child):
                    found.append(child)
                    following.append(child)
                elif _saves_nothing(child) and getattr(child, "variable", None) is None:
                    following.append(child)
        frontier = following
    return found


def checkpoint_inputs(region: Region) -> Optional[List[Any]]:
    """The raw saved entries of a non-reentrant checkpoint's inputs (its frame's ``saved_args``), found through the
    unpack hook's closure without calling it; None when this torch keeps them elsewhere. Unpacking one of these (when
    it has no unpack hook of its own) checks its version and recomputes nothing."""
    for node in region.nodes:
        for attribute in dir(node):
            if not attribute.startswith("_raw_saved_"):
                continue
            raw = getattr(node, attribute, None)
            for entry in raw if isinstance(raw, (list, tuple)) else [raw]:
                hook = getattr(entry, "unpack_hook", None)
                for cell in getattr(hook, "__closure__", None) or ():
                    try:
                        saved_args = getattr(cell.cell_contents, "saved_args", None)
                    except ValueError:  # an empty cell
                        continue
                    if isinstance(saved_args, list):
                        return [arg for arg in saved_args if type(arg).__name__ == "SavedTensor"]
    return None
