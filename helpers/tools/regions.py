"""Regions of an autograd graph whose inside the tools cannot see, recognised by their nodes, without running them.

- ``torch.utils.checkpoint(..., use_reentrant=True)``: one ``CheckpointFunctionBackward`` node; its forward recorded
  nothing inside, and its backward runs the block again, with the weights as they are then.
- ``torch.utils.checkpoint(..., use_reentrant=False)``: ordinary nodes whose saved tensors are packed by the
  checkpoint's hooks; *reading* one recomputes the block (a side effect: BatchNorm statistics, RNG state), so the
  tools never unpack them.
- ``torch.compile``: one ``CompiledFunctionBackward`` node; what it saved is inside the compiled graph.

Older torch releases (2.4 among them) do not show a saved tensor's unpack hook (``SavedTensor.unpack_hook``). There
the tools cannot tell which nodes a non-reentrant checkpoint packed: while one is alive in the process
(``hidden_checkpoints``) they read no saved tensor and say so.
"""
from __future__ import annotations

import contextvars
import functools
import gc
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

import torch

from helpers.tools import traversal

REENTRANT_CHECKPOINT = "checkpoint (use_reentrant=True)"
NON_REENTRANT_CHECKPOINT = "checkpoint (use_reentrant=False)"
COMPILED = "torch.compile region"

_OPAQUE_NODES = {"CheckpointFunctionBackward": REENTRANT_CHECKPOINT, "CompiledFunctionBackward": COMPILED}


def opaque_region(node: Any) -> Optional[str]:
    """The kind of region ``node`` stands for when the tools cannot see inside it, else None."""
    if node is None:
        return None
    label = _OPAQUE_NODES.get(type(node).__name__)
    if label is not None:
        return label
    return NON_REENTRANT_CHECKPOINT if checkpoint_packed(node) else None


_LOOK: contextvars.ContextVar[Optional[int]] = contextvars.ContextVar("hidden_checkpoints", default=None)
Call = TypeVar("Call", bound=Callable[..., Any])


def hooks_shown() -> bool:
    """Whether this torch shows a saved tensor's unpack hook (``SavedTensor.unpack_hook``; older releases do not)."""
    return hasattr(torch._C._autograd.SavedTensor, "unpack_hook")


def _live_checkpoint_frames() -> int:
    module = sys.modules.get("torch.utils.checkpoint")  # not imported: no checkpoint ran
    frame_type = getattr(module, "_CheckpointFrame", None)
    if frame_type is None:
        return 0
    return sum(1 for found in gc.get_referrers(frame_type) if type(found) is frame_type and any(
        holder() is not None for holder in getattr(found, "weak_holders", [lambda: True])))  # a tensor still packed


def hidden_checkpoints() -> int:
    """How many non-reentrant checkpoints are alive in this process while this torch cannot show which saved tensors
    they packed; 0 where it can. Counted once per tool call (``one_look``), by a scan of the garbage collector's
    objects."""
    if hooks_shown():
        return 0
    counted = _LOOK.get()
    return _live_checkpoint_frames() if counted is None else counted


def one_look(function: Call) -> Call:
    """Count ``hidden_checkpoints`` once for the whole call of ``function`` (a tool's public entry point)."""
    @functools.wraps(function)
    def looking(*args: Any, **kwargs: Any) -> Any:
        if hooks_shown() or _LOOK.get() is not None:
            return function(*args, **kwargs)
        token = _LOOK.set(_live_checkpoint_frames())
        try:
            return function(*args, **kwargs)
        finally:
            _LOOK.reset(token)
    return looking  # type: ignore[return-value]


def hidden_note() -> Optional[str]:
    """A picture's line for ``hidden_checkpoints``, or None when nothing is hidden."""
    hidden = hidden_checkpoints()
    if not hidden:
        return None
    return (f"this torch ({torch.__version__}) does not show which nodes a non-reentrant checkpoint packed, and "
            f"{hidden} {'is' if hidden == 1 else 'are'} alive in this process: a checkpointed block is drawn as "
            "plain nodes, not as one box, and no saved tensor is read")


def notes_hidden_checkpoints(function: Call) -> Call:
    """Add ``hidden_note`` to the note of the picture ``function`` (a drawing tool) returns, within one look."""
    @functools.wraps(function)
    def drawing(*args: Any, **kwargs: Any) -> Any:
        picture = function(*args, **kwargs)
        note = hidden_note()
        if note is not None and getattr(picture, "mistake", None) is None and hasattr(picture, "note"):
            picture.note = f"{picture.note}. {note}" if picture.note else note[0].upper() + note[1:]
        return picture
    return one_look(drawing)  # type: ignore[return-value]


def checkpoint_packed(node: Any) -> bool:
    """True when one of ``node``'s saved tensors is packed by ``torch.utils.checkpoint``'s hooks (reading it would
    recompute the block). Looks at the unpack hooks only; never unpacks."""
    for attribute in dir(node):
        if not attribute.startswith("_raw_saved_"):
            continue
        try:
            raw = getattr(node, attribute)
        except Exception:
            continue
        for entry in raw if isinstance(raw, (list, tuple)) else [raw]:
            hook = getattr(entry, "unpack_hook", None)
            if hook is not None and getattr(hook, "__module__", "") == "torch.utils.checkpoint":
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
