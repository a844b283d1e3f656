"""The contract of notebook 03's exercise: ``bumps_per_step(make_optimizer)`` returns the pair (bumps of one step
with ``weight_decay=0.01``, bumps of one step with ``weight_decay=0``) that ``make_optimizer`` gives, measured on
parameters of the learner's own, and changes no global setting.

Its one input is the optimizer factory, so that is what varies: optimizer classes and their settings (momentum,
nesterov, amsgrad, foreach, fused, decoupled weight decay, a hand-written optimizer), each where this torch has it,
and several calls in a row, each on a new factory made where the last one was freed (at its ``id``): the next
optimizer of the list, often of the same class with other counts, so that an answer remembered by class or by
``id(make_optimizer)`` is stale. There are no models, batches, ``.grad`` or modes to vary: the learner makes them.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from helpers.course.exercises.engine.contract import Contract
from helpers.course.exercises.engine.observe import World
from helpers.course.exercises.engine.parts import RecordedReference, at_the_same_id
from helpers.course.exercises.engine.situations import Axis, Situation
from helpers.course.lesson03_inplace_version.optimizers import DecoupledSGD
from helpers.language import tr

Make = Callable[..., torch.optim.Optimizer]
optim = torch.optim


# in this order, so that the next one is often of the same class and bumps another number of times
CANDIDATES: Dict[str, Make] = {
    "SGD(lr=0.1)": lambda params, weight_decay: optim.SGD(params, lr=0.1, weight_decay=weight_decay),
    "SGD(lr=0.1, fused=True)": lambda params, weight_decay: optim.SGD(params, lr=0.1, weight_decay=weight_decay,
                                                                  fused=True),
    "AdamW()": lambda params, weight_decay: optim.AdamW(params, weight_decay=weight_decay),
    "AdamW(fused=True)": lambda params, weight_decay: optim.AdamW(params, weight_decay=weight_decay, fused=True),
    "AdamW(amsgrad=True, foreach=True)": lambda params, weight_decay: optim.AdamW(
        params, weight_decay=weight_decay, amsgrad=True, foreach=True),
    "Adam()": lambda params, weight_decay: optim.Adam(params, weight_decay=weight_decay),
    "Adam(decoupled_weight_decay=True)": lambda params, weight_decay: optim.Adam(
        params, weight_decay=weight_decay, decoupled_weight_decay=True),
    "NAdam()": lambda params, weight_decay: optim.NAdam(params, weight_decay=weight_decay),
    "NAdam(decoupled_weight_decay=True)": lambda params, weight_decay: optim.NAdam(
        params, weight_decay=weight_decay, decoupled_weight_decay=True),
    "ASGD()": lambda params, weight_decay: optim.ASGD(params, weight_decay=weight_decay),
    "ASGD(foreach=True)": lambda params, weight_decay: optim.ASGD(params, weight_decay=weight_decay, foreach=True),
    "SGD(lr=0.1, momentum=0.9, nesterov=True)": lambda params, weight_decay: optim.SGD(
        params, lr=0.1, momentum=0.9, nesterov=True, weight_decay=weight_decay),
    "RAdam(decoupled_weight_decay=True)": lambda params, weight_decay: optim.RAdam(
        params, weight_decay=weight_decay, decoupled_weight_decay=True),
    "RMSprop(momentum=0.9, centered=True)": lambda params, weight_decay: optim.RMSprop(
        params, weight_decay=weight_decay, momentum=0.9, centered=True),
    "Adagrad()": lambda params, weight_decay: optim.Adagrad(params, weight_decay=weight_decay),
    "DecoupledSGD (hand-written)": lambda params, weight_decay: DecoupledSGD(params, weight_decay=weight_decay),
}


def _works(make: Make) -> bool:
    """True when this torch builds and steps it (fused kernels on the CPU and decoupled_weight_decay are recent)."""
    try:
        param = torch.nn.Parameter(torch.ones(2))
        param.grad = torch.ones(2)
        make([param], weight_decay=0.01).step()
        return True
    except (RuntimeError, TypeError, ValueError):
        return False


@functools.lru_cache(maxsize=None)
def available() -> Tuple[str, ...]:
    """The candidates this torch has, in order."""
    return tuple(name for name, make in CANDIDATES.items() if _works(make))


class Factory:
    """``make_optimizer(params, weight_decay)``, with the name of the optimizer it builds."""

    __slots__ = ("name", "make")

    def __init__(self, name: str, make: Make) -> None:
        self.name, self.make = name, make

    def __call__(self, params: Any, weight_decay: float) -> torch.optim.Optimizer:
        return self.make(params, weight_decay=weight_decay)

    def __repr__(self) -> str:
        return f"make_optimizer building {self.name}"


REFERENCE = RecordedReference("bumps_per_step", "bumps_per_step")
_SEQUENCE: List[str] = []  # the optimizer of each call in the situation being run


def _sequence(first: str, calls: int) -> List[str]:
    """The optimizers of ``calls`` calls from ``first`` on (or from the next one this torch has)."""
    names = available()
    order = list(CANDIDATES)
    start = next(names.index(name) for name in order[order.index(first):] + order if name in names)
    return [names[(start + offset) % len(names)] for offset in range(calls)]


def _times(count: int) -> str:
    if count == 1:
        return tr("once")
    return tr("twice") if count == 2 else tr("{count} times", count=count)


def _before(calls: int) -> str:
    return tr("handed over on the call before") if calls == 1 else tr("handed over {count} calls before", count=calls)


def same_pair(actual: Any, expected: Any) -> Optional[str]:
    """None when ``actual`` is the reference's pair of ints (as a tuple or a list); else what differs."""
    call = len(REFERENCE.answers)
    name = _SEQUENCE[call - 1] if 0 < call <= len(_SEQUENCE) else tr("this optimizer")
    if not (isinstance(actual, (tuple, list)) and len(actual) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in actual)):
        return tr("returned {value} for {name}, where the exercise asks for a pair of ints: (bumps of one step with "
                  "weight_decay=0.01, bumps of one step without)", value=f"{actual!r:.60}", name=name)
    got, right = tuple(actual), tuple(expected)
    if got == right:
        return None
    if got == right[::-1]:
        return tr("returned {got} for {name}, the wrong way round: first the bumps with weight decay, then without "
                  "({right})", got=got, name=name, right=right)
    for earlier, answer in enumerate(REFERENCE.answers[:-1], 1):
        if got == tuple(answer) and _SEQUENCE[earlier - 1] != name:
            return tr("returned {got} for {name}, which bumps {right} (with weight decay, without): that is the "
                      "answer for {other}, {when}. Does it remember an earlier answer (a cache keyed on the "
                      "optimizer's class or on id(make_optimizer), a global)? Measure on every call", got=got,
                      name=name, right=right, other=_SEQUENCE[earlier - 1], when=_before(call - earlier))
    return tr("returned {got} for {name}, where one step bumps a parameter's _version {with_decay} with "
              "weight_decay=0.01 and {without} without: measure one step() of an optimizer make_optimizer builds, "
              "on a parameter with a .grad, on every call (an answer remembered from an earlier one is stale)",
              got=got, name=name, with_decay=_times(right[0]), without=_times(right[1]))


def build(situation: Situation) -> World:
    """The first call's factory; each further call frees it and hands over the next optimizer's, at its id."""
    REFERENCE.reset()
    _SEQUENCE[:] = _sequence(situation["optimizer"], int(situation["calls"]))
    world = World(args=(Factory(_SEQUENCE[0], CANDIDATES[_SEQUENCE[0]]),))

    def next_factory(call: int) -> None:
        name = _SEQUENCE[call - 1]
        old_id = id(world.args[0])
        world.args = ()
        world.args = (at_the_same_id(old_id, lambda: Factory(name, CANDIDATES[name])),)

    world.refill = next_factory
    return world


TRIED = ("optimizers SGD, Adam, AdamW, NAdam, RAdam, ASGD, RMSprop, Adagrad and one written by hand, with momentum, "
         "nesterov, amsgrad, foreach, fused and decoupled weight decay where this torch has them")


AXES: tuple = (
    Axis("optimizer", tuple(CANDIDATES), lambda name: tr("make_optimizer building {name}", name=name), TRIED),
    # this torch's, when a situation is built (``available``): nothing is built on import
    Axis("calls", (1, 4), lambda count: tr("{count} calls in a row, each with a new make_optimizer (the next "
                                           "optimizer of the list, often of the same class)", count=count),
         "4 calls in a row, each with a new make_optimizer, often for another optimizer of the same class"),
)

CONTRACT = Contract(
    exercise_id="bumps_per_step",
    answer_name="bumps_per_step",
    build=build,
    axes=AXES,
    generic_axes=False,
    returns=same_pair,
    reference_function=REFERENCE,
    tried_extra=("it must return a pair of ints (a tuple or a list)",),
    combinations=8,
)
