"""The contract of notebook 07's ``fixed_forward(encoder, cls_head, reg_head, x) -> (logits, value)``: the values the
in-place residual head computes, through a graph that gives every parameter and ``x`` the reference's gradient, and
nothing changed (weights, ``.grad``, modes, flags, ``x``).

A return value is compared by its type and values and, since a forward's graph is part of what it returns, by the
gradient a backward through it gives each parameter and ``x`` (``autograd.grad`` from a fixed random direction, so no
``.grad`` is touched).
"""
from __future__ import annotations

import weakref
from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import nn

from helpers.course.exercises.engine.build import randn, refill_with, seeded
from helpers.course.exercises.engine.contract import Contract, _returned, same_type_and_value
from helpers.course.exercises.engine.observe import World
from helpers.course.exercises.engine.situations import FROZEN, GRADS, MODE, Situation, batch, calls, shapes
from helpers.course.lesson07_bug_clinic_continued.inplace_activation import (
    BATCH,
    CLASSES,
    IN_FEATURES,
    WIDTH,
    ResidualHead,
    multitask_parameters,
)
from helpers.language import marked, tr, translated
from helpers.tools.errors import short_description

TOLERANCE = (1e-4, 1e-5)
MODELS = {  # name -> (input features, width, classes)
    marked("the notebook's models"): (IN_FEATURES, WIDTH, CLASSES),
    marked("6 input features, width 20 and 5 classes"): (6, 20, 5),
}
AXES: tuple = (
    batch(BATCH, 1, 5, 32),
    GRADS,
    MODE,
    FROZEN,
    calls(1, 3),
    replace(shapes(*MODELS, tried="another input size, width and number of classes"), describe=translated),
)

_NAMES: Dict[int, Tuple[weakref.ref, int, str]] = {}  # id(leaf) -> (the leaf, its place, its name) of built worlds


def _remember(named: Dict[str, torch.Tensor]) -> None:
    """Name the leaves of a world just built, so a graph's leaves can be named (``reg_head.fc.weight``, ``x``)."""
    for key in [key for key, (leaf, _, _) in _NAMES.items() if leaf() is None]:
        del _NAMES[key]
    for place, (name, tensor) in enumerate(named.items()):
        _NAMES[id(tensor)] = (weakref.ref(tensor), place, name)


def _named_leaves(outputs: List[torch.Tensor]) -> Dict[str, torch.Tensor]:
    """The named leaves behind ``outputs``, in the world's order."""
    found: Dict[int, Tuple[int, str, torch.Tensor]] = {}
    stack, seen = [t.grad_fn for t in outputs], {}  # seen keeps the nodes alive, so their ids stay unique
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        leaf = getattr(node, "variable", None)
        entry = _NAMES.get(id(leaf)) if leaf is not None else None
        if entry is not None and entry[0]() is leaf:
            found[id(leaf)] = (entry[1], entry[2], leaf)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return {name: leaf for _, name, leaf in sorted(found.values(), key=lambda item: item[0])}


def _gradients(outputs: tuple) -> Dict[str, torch.Tensor]:
    """The gradient of ``sum(output * direction)`` for every named leaf, ``direction`` fixed per output."""
    tracked = [t for t in outputs if t.requires_grad]
    leaves = _named_leaves(tracked)
    if not leaves:
        return {}
    directions = [torch.randn(t.shape, generator=torch.Generator().manual_seed(index + 1)).to(t.dtype)
                  for index, t in enumerate(tracked)]
    grads = torch.autograd.grad(tracked, list(leaves.values()), directions, allow_unused=True)
    return {name: grad for name, grad in zip(leaves, grads) if grad is not None}


def observed_outputs(returned: Any) -> Dict[str, Any]:
    """What the return rule needs of a returned forward, as data, taken where the call was made: the outputs, and
    the gradients a backward through their graph gives each named leaf (or what that backward raised)."""
    observed: Dict[str, Any] = {"returned": returned, "gradients": None, "raised": None}
    if type(returned) is tuple and all(isinstance(t, torch.Tensor) for t in returned):
        try:
            observed["gradients"] = _gradients(returned)
        except Exception as error:  # a backward the learner's graph cannot run: part of what it returned
            observed["raised"] = short_description(error)
    return observed


def outputs_and_gradients(actual: Dict[str, Any], expected: Dict[str, Any]) -> Optional[str]:
    """The return rule: the reference's type and values, then the same gradients through the returned graph."""
    returned, right = actual["returned"], expected["returned"]
    if type(returned) is not tuple or len(returned) != len(right):
        return same_type_and_value(returned, right, *TOLERANCE)
    for name, mine, theirs in zip(("logits", "value"), returned, right):
        problem = _returned(mine, theirs, *TOLERANCE)  # what differs, and the same said after "returned "
        if problem is not None:
            return tr("returned as `{name}` {what}", name=name, what=problem[1])
        if theirs.requires_grad and not mine.requires_grad:
            return tr("returned a `{name}` that carries no gradient (torch.no_grad(), or a detached tensor): a loss on "
                      "it trains nothing", name=name)
    if actual["raised"] is not None:
        return tr("returned outputs that backward cannot run through: it raised {error}", error=actual["raised"])
    mine, theirs = actual["gradients"] or {}, expected["gradients"] or {}
    for name, right_grad in theirs.items():
        if name not in mine:
            return tr("returned outputs through which no gradient reaches `{name}` (a detach, .data or "
                      "torch.no_grad() on the way?)", name=name)
        if not torch.allclose(mine[name], right_grad, *TOLERANCE):
            gap = float((mine[name] - right_grad).abs().max())
            return tr("returned outputs whose backward gives `{name}` a gradient up to {gap} away from the "
                      "reference's (a path cut by a detach or .data, or a saved tensor changed behind autograd's "
                      "back?)", name=name, gap=f"{gap:.3g}")
    extra = [name for name in mine if name not in theirs]
    if extra:
        return tr("returned outputs that give `{name}` a gradient, where the reference's give it none", name=extra[0])
    return None


def _models(situation: Situation) -> Tuple[nn.Module, nn.Module, ResidualHead]:
    features, width, classes = MODELS[situation["shape"]]
    return seeded(situation.seed, lambda: nn.ModuleList([
        nn.Sequential(nn.Linear(features, width), nn.ReLU(), nn.Linear(width, width)),
        nn.Linear(width, classes), ResidualHead(width)]))


def build(situation: Situation) -> World:
    """The encoder and both heads, and a batch ``x`` that requires grad (as the checker's training step's)."""
    encoder, cls_head, reg_head = _models(situation)
    features = MODELS[situation["shape"]][0]

    def batch_for(call: int) -> Dict[str, torch.Tensor]:
        return {"x": randn(situation.seed + 10 * call, situation["batch"], features)}

    data = batch_for(1)
    data["x"].requires_grad_(True)
    _remember({**multitask_parameters(encoder, cls_head, reg_head), "x": data["x"]})
    return World(args=(encoder, cls_head, reg_head, data["x"]),
                 modules={"encoder": encoder, "cls_head": cls_head, "reg_head": reg_head}, inputs=data,
                 refill=refill_with(data, batch_for))


CONTRACT = Contract(
    exercise_id="fixed_forward",
    answer_name="fixed_forward",
    build=build,
    axes=AXES,
    returns=outputs_and_gradients,
    observed_return=observed_outputs,
    tolerance=TOLERANCE,
)
