"""The contract of notebook 02's exercise: ``two_grads(l1, l2, params1, params2)`` returns the pair (gradients of
``l1`` for ``params1``, gradients of ``l2`` for ``params2``) and changes nothing: every ``.grad`` as it was, every
parameter and its version as they were, and the graph whole for the caller's own backward afterwards.

Each situation makes three calls on one pair of models, new data written into the same input tensors each time,
the second loss first on the third call (as the hand-written checker does); each call's losses are freed before the
next call's are made, the first of them at the freed one's ``id`` where it can (an answer remembered by ``id(l1)``
is then stale). ``.grad`` is handed over empty, zero or filled; the models vary in depth, in having biases in their
heads, in their number of outputs, and M1 and M2 can differ in size.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import torch
from torch import nn

from helpers.course.exercises.compare import scale_factor
from helpers.course.exercises.engine.build import mlp, randn, seeded
from helpers.course.exercises.engine.contract import Contract
from helpers.course.exercises.engine.observe import World
from helpers.course.exercises.engine.parts import RecordedReference, at_the_same_id, graph_state
from helpers.course.exercises.engine.situations import FROZEN, GRADS, Axis, Situation, shapes
from helpers.course.models import BATCH, IN_FEATURES, make_model, own_term, shared_term
from helpers.language import marked, tr
from helpers.tools.graph import named_parameters

CALLS = 3
RTOL, ATOL = 1e-4, 1e-5  # the contract's default tolerance, for the gradients returned
REFERENCE = RecordedReference("two_grads", "two_grads")


def _widths(*widths: int, bias: bool = True) -> Callable[[int], nn.Module]:
    return lambda seed: seeded(seed, lambda: mlp((IN_FEATURES, *widths), bias_last=bias))


MODELS: Dict[str, Tuple[Callable[[int], nn.Module], Callable[[int], nn.Module]]] = {  # name -> (make M1, make M2)
    marked("the notebook's two models"): (make_model, make_model),
    marked("deeper models (4 layers each)"): (_widths(32, 32, 32, 1), _widths(32, 32, 32, 1)),
    marked("M1 deeper than M2 (3 layers and 2)"): (_widths(32, 32, 1), make_model),
    marked("heads without bias"): (_widths(64, 1, bias=False), _widths(64, 1, bias=False)),
    marked("heads with 3 outputs"): (_widths(64, 3), _widths(64, 3)),
}

AXES: tuple = (
    Axis("calls", (CALLS,), lambda count: tr("{count} calls in a row", count=count),
         "3 calls in a row on one pair of models, new data in the same input tensors, the losses in both orders"),
    Axis("grads", ("filled", "none", "zero"), GRADS.describe, GRADS.tried),  # the hand-written checker fills them
    Axis("frozen", FROZEN.values, lambda frozen: tr("a frozen first layer (requires_grad=False, left out of params1 "
                                                    "and params2)") if frozen else tr("no frozen weights"),
         "a frozen first layer (not in params1 or params2)"),
    shapes(*MODELS, tried="deeper models, M1 and M2 of different sizes, heads without bias or with 3 outputs"),
)


def _orders(call: int) -> Tuple[str, str]:
    """Which loss comes first on call ``call``: L2 on the last, as in the hand-written checker."""
    return ("L2", "L1") if call == CALLS else ("L1", "L2")


def _ordinal(number: int) -> str:
    return {1: tr("1st"), 2: tr("2nd"), 3: tr("3rd")}.get(number) or tr("{number}th", number=number)


def _close_pairs(actual: Any, expected: Any) -> bool:
    """Both pairs of sequences of tensors, of the same shapes and close values."""
    try:
        return len(actual) == len(expected) and all(
            len(got) == len(want) and all(isinstance(g, torch.Tensor) and g.shape == w.shape and torch.allclose(
                g.detach().float(), w.float(), rtol=RTOL, atol=ATOL) for g, w in zip(got, want))
            for got, want in zip(actual, expected))
    except TypeError:
        return False


def same_gradients(actual: Any, expected: Any) -> Optional[str]:
    """None when ``actual`` is a pair (tuple or list) of sequences of tensors close to the reference's."""
    problem = _what_differs(actual, expected)
    if problem is None:
        return None
    for earlier, answer in enumerate(REFERENCE.answers[:-1], 1):
        if _close_pairs(actual, answer):
            return tr("returned the gradients of the {ordinal} call's losses, not of this call's: does it remember "
                      "an earlier call (a cache keyed on id(l1): a freed loss's id is given to the next one, a global, "
                      "a default argument)? Differentiate the losses it is given, every time",
                      ordinal=_ordinal(earlier))
    return problem


def _what_differs(actual: Any, expected: Any) -> Optional[str]:
    if not (isinstance(actual, (tuple, list)) and len(actual) == 2):
        if isinstance(actual, (tuple, list)):
            return tr("returned a {kind} of {count} items, where the exercise asks for a pair: (gradients of l1 for "
                      "params1, gradients of l2 for params2)", kind=type(actual).__name__, count=len(actual))
        return tr("returned a {kind}, where the exercise asks for a pair: (gradients of l1 for params1, gradients of "
                  "l2 for params2)", kind=type(actual).__name__)
    parts = (tr("the first item of your pair (the gradients of the first loss for the first parameters)"),
             tr("the second item of your pair (the gradients of the second loss for the second parameters)"))
    for what, got, want in zip(parts, actual, expected):
        if not isinstance(got, (tuple, list)):
            return tr("returned a {kind} as {what}, where it should hold one gradient per parameter",
                      kind=type(got).__name__, what=what)
        if len(got) != len(want):
            return tr("returned {count} gradients as {what}, for {parameters} parameters", count=len(got), what=what,
                      parameters=len(want))
        for index, (grad, right) in enumerate(zip(got, want), 1):
            if not isinstance(grad, torch.Tensor):
                return tr("returned {kind} as the {ordinal} gradient of {what}", kind=type(grad).__name__,
                          ordinal=_ordinal(index), what=what)
            if grad.shape != right.shape:
                return tr("returned a gradient of shape {shape} as the {ordinal} of {what}, for a parameter of shape "
                          "{right}", shape=str(list(grad.shape)), ordinal=_ordinal(index), what=what,
                          right=str(list(right.shape)))
            if not torch.allclose(grad.detach().float(), right.float(), rtol=RTOL, atol=ATOL):
                factor = scale_factor(grad.detach(), right)
                if factor is None:
                    return tr("returned, as the {ordinal} gradient of {what}, another gradient than the right one: "
                              "differentiate that loss alone for those parameters, on this call's losses",
                              ordinal=_ordinal(index), what=what)
                return tr("returned, as the {ordinal} gradient of {what}, {factor}x the right one: differentiate that "
                          "loss alone for those parameters, on this call's losses", ordinal=_ordinal(index),
                          what=what, factor=f"{factor:.3g}")
    return None


def build(situation: Situation) -> World:
    """Two models, their trainable parameters, one batch each and the call's losses; each further call frees the
    losses, writes new data into the same inputs and makes the next losses."""
    REFERENCE.reset()
    make1, make2 = MODELS[situation["shape"]]
    m1, m2 = make1(situation.seed), make2(situation.seed + 1)
    if situation["frozen"]:
        for model in (m1, m2):
            model[0].requires_grad_(False)
    params = {"L1": [p for p in m1.parameters() if p.requires_grad], "L2": [p for p in m2.parameters() if
                                                                         p.requires_grad]}
    inputs = {"x1": randn(situation.seed + 10, BATCH, IN_FEATURES), "x2": randn(situation.seed + 11, BATCH,
                                                                                   IN_FEATURES)}
    world = World(args=(), modules={"M1": m1, "M2": m2}, inputs=inputs, freezable=[])

    def losses_for(call: int) -> None:
        if call > 1:
            with torch.no_grad():
                for offset, tensor in enumerate(inputs.values()):
                    tensor.copy_(randn(situation.seed + 10 * call + offset, BATCH, IN_FEATURES))
        o1, o2 = m1(inputs["x1"]), m2(inputs["x2"])
        shared, own = shared_term(o1, o2), {"L1": own_term(o1), "L2": own_term(o2)}
        first, second = _orders(call)
        old_id = id(world.args[0]) if world.args else None
        world.args = ()  # the last call's losses are freed here, after the forward pass: their memory is free
        made = at_the_same_id(old_id, lambda: shared + own[first]) if old_id is not None else shared + own[first]
        world.args = (made, shared + own[second], params[first], params[second])

    losses_for(1)
    world.refill = losses_for
    world.extra = {marked("the losses' graph"): graph_state(lambda: world.args[:2], named_parameters(M1=m1, M2=m2))}
    return world


CONTRACT = Contract(
    exercise_id="two_grads",
    answer_name="two_grads",
    build=build,
    axes=AXES,
    returns=same_gradients,
    reference_function=REFERENCE,
    tolerance=(RTOL, ATOL),
)
