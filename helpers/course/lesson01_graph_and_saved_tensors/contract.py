"""The contract of notebook 01's exercise: ``parameters_reached(loss, named_params)`` returns the set of names of
the parameters the graph of ``loss`` reaches, and changes nothing: every saved tensor stays alive, every ``.grad``
as it was.

Each situation hands over five losses in a row, built on one pair of models with one ``named_params``, each loss
freed before the next is made, so the next may land at the freed one's ``id``: an answer remembered by
``id(loss)`` is then stale. The models vary where identity and value part ways (M2 a copy of M1, zero biases: a
walk that matches parameters by value names the wrong ones) and in depth (a walk that stops after a few levels
misses the first layers).
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch
from torch import nn

from helpers.course.exercises.engine.build import mlp, randn, seeded
from helpers.course.exercises.engine.contract import Contract
from helpers.course.exercises.engine.observe import World
from helpers.course.exercises.engine.parts import RecordedReference, at_the_same_id, graph_state
from helpers.course.exercises.engine.situations import FROZEN, GRADS, Axis, Situation, shapes
from helpers.course.models import BATCH, IN_FEATURES, make_model, own_term, shared_term
from helpers.language import marked, tr, translated
from helpers.tools.graph import named_parameters

GRAPH = marked("the loss's graph (a backward without retain_graph=True frees its saved tensors, an in-place write "
               "makes them stale)")
DEEP_LAYERS = 12  # Linear layers of the deeper models: their first layer lies about 25 nodes below the loss
DEEPER = marked("deeper models (12 layers each)")  # the name of _deeper_models, DEEP_LAYERS written out
assert str(DEEP_LAYERS) in DEEPER, "DEEPER names DEEP_LAYERS: change both"


def _notebook_models(seed: int) -> Tuple[nn.Module, nn.Module]:
    return make_model(seed), make_model(seed + 1)


def _deeper_models(seed: int) -> Tuple[nn.Module, nn.Module]:
    widths = (IN_FEATURES, *[8] * (DEEP_LAYERS - 1), 1)
    return seeded(seed, lambda: mlp(widths)), seeded(seed + 1, lambda: mlp(widths))


def _copied_models(seed: int) -> Tuple[nn.Module, nn.Module]:
    m1 = make_model(seed)
    return m1, copy.deepcopy(m1)


def _zero_biases(seed: int) -> Tuple[nn.Module, nn.Module]:
    models = _notebook_models(seed)
    with torch.no_grad():
        for model in models:
            for name, param in model.named_parameters():
                if name.endswith("bias"):
                    param.zero_()
    return models


MODELS: Dict[str, Callable[[int], Tuple[nn.Module, nn.Module]]] = {
    marked("the notebook's two models"): _notebook_models,
    DEEPER: _deeper_models,
    marked("M2 a copy of M1 (every weight equal to its twin's)"): _copied_models,
    marked("zero-initialised biases (equal across the models)"): _zero_biases,
}

# the five losses of each situation, in the order they are handed over (the hand-written checker's five)
LOSSES = ("L1 = shared(O1, O2) + own(O1)", marked("own(O1) alone"), "shared(O1, O2.detach()) + own(O1)",
          marked("M2's head on a detached hidden layer"), "L2 = shared(O1, O2) + own(O2)")  # formulas stay as they are

AXES: tuple = (
    Axis("calls", (len(LOSSES),), lambda count: tr("{count} losses in a row", count=count),
         "five losses in a row on one pair of models, each freed before the next is made (which may reuse its id)"),
    Axis("grads", ("none", "filled", "zero"), GRADS.describe, GRADS.tried),
    FROZEN,
    shapes(*MODELS, tried=f"deeper models ({DEEP_LAYERS} layers), M2 a copy of M1, zero-initialised biases"),
)


REFERENCE = RecordedReference("parameters_reached", "parameters_reached")


def _ordinal(number: int) -> str:
    return {1: tr("1st"), 2: tr("2nd"), 3: tr("3rd")}.get(number) or tr("{number}th", number=number)


def _in_layer_order(name: str) -> Tuple[Any, ...]:
    """``M1.10.weight`` after ``M1.2.weight``."""
    return tuple(int(part) if part.isdigit() else part for part in name.split("."))


def _listed(names: Sequence[str], shown: int = 4) -> str:
    names = sorted(names, key=_in_layer_order)
    listed = ", ".join(names[:shown])
    return tr("{names} and {count} more", names=listed, count=len(names) - shown) if len(names) > shown else listed


def _twin(name: str, reached: frozenset) -> Optional[str]:
    """A reached parameter whose values equal those of the parameter ``name`` (which is not reached)."""
    params = REFERENCE.params
    value = params.get(name)
    for other in sorted(reached):
        candidate = params.get(other)
        if value is not None and candidate is not None and candidate.shape == value.shape and bool(
                torch.equal(candidate, value)):
            return other
    return None


def same_names(actual: Any, expected: Any) -> Optional[str]:
    """None when ``actual`` is a set (or frozenset) of exactly the expected names; else what differs, in words."""
    if not isinstance(actual, (set, frozenset)):
        return tr("returned a {kind}, where the exercise asks for a set of names (a set, not a list or a tuple: "
                  "`set(...)`, or a set built with `.add`)", kind=type(actual).__name__)
    if not all(isinstance(name, str) for name in actual):
        return tr("returned a set holding other things than names (strings such as 'M1.0.weight')")
    if actual == expected:
        return None
    call = len(REFERENCE.answers)
    loss = translated(LOSSES[call - 1]) if 0 < call <= len(LOSSES) else tr("this loss")
    missing, extra = sorted(expected - actual), sorted(actual - expected)
    twins = {name: _twin(name, frozenset(expected)) for name in extra}
    if extra and all(twins.values()):
        return tr("named {names} for {loss}, which its graph never reaches; {name} only holds the same values as "
                  "{twin}, which it does reach. Match each node's .variable with a parameter by identity (`is`, or "
                  "id()), not by value (torch.equal, ==)", names=_listed(extra), loss=loss, name=extra[0],
                  twin=twins[extra[0]])
    for earlier, answer in enumerate(REFERENCE.answers[:-1], 1):
        if actual == answer:
            return tr("returned, for {loss}, exactly the names of the {ordinal} loss ({earlier}): does it remember an "
                      "earlier call (a cache keyed on id(loss): a freed loss's id is given to the next one, a global, "
                      "a default argument)? Walk this loss's own graph on every call", loss=loss,
                      ordinal=_ordinal(earlier), earlier=translated(LOSSES[earlier - 1]))
    if missing:
        return tr("missed {names} for {loss}, though its graph reaches them: follow every entry of next_functions, "
                  "all the way down to the first layer", names=_listed(missing), loss=loss)
    return tr("named {names} for {loss}, which its graph never reaches (it does not use them, or only through "
              "detach()): walk the graph itself", names=_listed(extra), loss=loss)


def build(situation: Situation) -> World:
    """Two models, one ``named_params``, and the first of the five losses; each further call frees the last loss
    and hands over the next one, made at its ``id`` where it can."""
    m1, m2 = MODELS[situation["shape"]](situation.seed)
    if situation["frozen"]:  # before the forward pass: a frozen parameter has no node in the graph
        for model in (m1, m2):
            model[0].requires_grad_(False)
    params = named_parameters(M1=m1, M2=m2)
    REFERENCE.reset(params)
    x1, x2 = randn(situation.seed + 1, BATCH, IN_FEATURES), randn(situation.seed + 2, BATCH, IN_FEATURES)
    o1, o2 = m1(x1), m2(x2)
    shared, own1, own2 = shared_term(o1, o2), own_term(o1), own_term(o2)
    detached = shared_term(o1, o2.detach())
    squares1, head_squares = (o1 - 1).pow(2), (m2[-1](m2[:-1](x2).detach()) - 1).pow(2)  # own_term but its mean
    last_steps: Tuple[Callable[[], torch.Tensor], ...] = (  # each loss's last operation, the one that makes it
        lambda: shared + own1, squares1.mean, lambda: detached + own1, head_squares.mean, lambda: shared + own2)
    world = World(args=(last_steps[0](), params), modules={"M1": m1, "M2": m2}, inputs={"x1": x1, "x2": x2},
                  freezable=[])

    def next_loss(call: int) -> None:
        old_id = id(world.args[0])
        world.args = ()
        world.args = (at_the_same_id(old_id, last_steps[call - 1]), params)

    world.refill = next_loss
    world.extra = {GRAPH: graph_state(lambda: world.args[:1], params)}
    return world


CONTRACT = Contract(
    exercise_id="parameters_reached",
    answer_name="parameters_reached",
    build=build,
    axes=AXES,
    returns=same_names,
    reference_function=REFERENCE,
    tried_extra=("it must return a set (a list or a tuple is rejected)",),
)
