"""Exercise of notebook 03: how many times does one optimizer step bump a parameter's version - with weight decay,
and without?"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import torch

from helpers.course.exercises.engine.untouched import settings, settings_change
from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_learner
from helpers.course.exercises.result import CheckResult, failed, passed
from helpers.course.lesson03_inplace_version.contract import CONTRACT
from helpers.course.lesson03_inplace_version.optimizers import DecoupledSGD
from helpers.language import marked, tr

EXERCISE_ID = "bumps_per_step"
DECAY = 0.01  # the weight decay of the first measurement; the second has none

HINTS = (
    marked("A right answer returns a pair of ints that your code measured: the bumps of one step with weight decay, "
           "then without. The checker tries several optimizers; they differ, and for some the two numbers differ too."),
    marked("Every in-place change adds 1 to tensor._version, and an optimizer may change a parameter in place more "
           "than once per step: decoupled weight decay is one more change. An optimizer skips parameters whose .grad "
           "is None."),
    marked("Measure twice, once per weight-decay setting: each time make a parameter of your own, give it a "
           "gradient, build the optimizer on it with make_optimizer (passing that weight decay), read _version before "
           "and after one step(), and keep the difference. Measure on every call: do not reuse an answer."),
)

Factory = Callable[..., torch.optim.Optimizer]


def optimizer_factories() -> Dict[str, Factory]:
    """The optimizers the checker measures, as ``make_optimizer(params, weight_decay)``; the two AdamW of one class
    differ (fused or not), so an answer remembered by class is wrong for one of them."""
    return {
        "SGD(lr=0.1)": lambda params, weight_decay: torch.optim.SGD(params, lr=0.1, weight_decay=weight_decay),
        "AdamW()": lambda params, weight_decay: torch.optim.AdamW(params, weight_decay=weight_decay),
        "AdamW(fused=True)": lambda params, weight_decay: torch.optim.AdamW(params, weight_decay=weight_decay,
                                                                            fused=True),
        "Adam()": lambda params, weight_decay: torch.optim.Adam(params, weight_decay=weight_decay),
        "SGD(momentum=0.9)": lambda params, weight_decay: torch.optim.SGD(params, lr=0.1, momentum=0.9,
                                                                          weight_decay=weight_decay),
        "DecoupledSGD (hand-written)": lambda params, weight_decay: DecoupledSGD(params, weight_decay=weight_decay),
    }


def measure_bumps(make_optimizer: Callable[[Any], torch.optim.Optimizer]) -> int:
    """The version change of a parameter with a gradient over one step of ``make_optimizer([param])``."""
    param = torch.nn.Parameter(torch.ones(4))
    param.grad = torch.ones(4)
    optimizer = make_optimizer([param])
    before = param._version
    optimizer.step()
    return param._version - before


def measure_pair(make_optimizer: Factory) -> Tuple[int, int]:
    """The reference: (bumps with weight decay ``DECAY``, bumps without)."""
    return (measure_bumps(lambda params: make_optimizer(params, weight_decay=DECAY)),
            measure_bumps(lambda params: make_optimizer(params, weight_decay=0.0)))


Pair = Tuple[int, int]


def _diagnose(results: Dict[str, Pair], expected: Dict[str, Pair], order: List[str]) -> str:
    """Read the pattern across optimizers: the same mistake shows the same way in each."""
    pairs = [(results[name], expected[name]) for name in results]
    flat = [(r, e) for result, want in pairs for r, e in zip(result, want)]
    if all(r == 0 for r, _ in flat):
        return tr("You measured 0 for every optimizer. Did the parameter have a .grad (an optimizer skips parameters "
                  "whose grad is None)? And did you read _version of the parameter itself, not of .data or .grad?")
    if all(r == e + 1 for r, e in flat):
        return tr("You measured one bump too many everywhere: return the change in _version over the step, not the "
                  "version itself (nn.Linear's init already bumped the weight once).")
    if all(r == 2 * e for r, e in flat):
        return tr("You measured twice the bumps of one step everywhere: did you step twice?")
    if all(result == (want[1], want[0]) for result, want in pairs):
        return tr("Your pairs are the wrong way round: first the bumps with weight decay, then without.")
    if len(set(results.values())) == 1 and len(set(expected.values())) > 1:
        bumps = ", ".join(tr("{name} bumps {pair}", name=name, pair=want) for name, want in expected.items())
        return tr("You returned {pair} for every optimizer, but they differ: {bumps}. Does your function remember an "
                  "earlier answer (a cache, a global, a default argument), or return fixed numbers? Measure on every "
                  "call.", pair=next(iter(results.values())), bumps=bumps)
    mixed = [name for name in results if expected[name][0] != expected[name][1]]
    if mixed and all(results[name][0] == results[name][1] for name in mixed):
        name = mixed[0]
        return tr("For {name} your two numbers are the same, {pair}, but with weight decay one step bumps "
                  "{with_decay} times and without {without}: did you pass weight_decay to make_optimizer in each "
                  "measurement?", name=name, pair=results[name], with_decay=expected[name][0],
                  without=expected[name][1])
    for index, name in enumerate(order):
        if results[name] != expected[name] and any(results[name] == results[old] for old in order[:index]):
            old = next(old for old in order[:index] if results[name] == results[old])
            return tr("For {name} you returned {pair}, exactly your answer for {old}, but one step of {name} bumps "
                      "{right}. Does your function remember an earlier answer (a cache keyed on the optimizer's "
                      "class, a global, a default argument), or return fixed numbers? Measure on every call.",
                      name=name, pair=results[name], old=old, right=expected[name])
    name = next(n for n in results if results[n] != expected[n])
    return tr("For {name} one step bumps {right} (with weight decay, without); you returned {pair}.", name=name,
              right=expected[name], pair=results[name])


def _as_pair(result: Any) -> Pair:
    if not (isinstance(result, (tuple, list)) and len(result) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in result)):
        raise TypeError(repr(result)[:80])
    return int(result[0]), int(result[1])


def check_bumps_per_step(bumps_per_step: Callable[..., Any]) -> CheckResult:
    """Call the learner's ``bumps_per_step(make_optimizer)`` for several optimizers and compare."""
    expected: Dict[str, Pair] = {}
    results: Dict[str, Pair] = {}
    order = list(optimizer_factories())
    for name, factory in optimizer_factories().items():
        expected[name] = measure_pair(factory)
        global_settings = settings()
        result = run_learner(tr("Your function (for {name})", name=name), bumps_per_step, factory)
        problem = settings_change(global_settings)
        if problem is not None:
            return failed(EXERCISE_ID, tr("For {name}, your function {problem}: a measurement must leave global "
                                          "settings as it found them.", name=name, problem=problem))
        try:
            results[name] = _as_pair(result)
        except TypeError:
            return failed(EXERCISE_ID, tr("Return a pair of ints (bumps with weight decay, bumps without); for {name} "
                                          "you returned {value}.", name=name, value=f"{result!r:.80}"))
    if results != expected:
        return failed(EXERCISE_ID, _diagnose(results, expected, order))
    measured = ", ".join(f"{name}: {pair}" for name, pair in expected.items())
    return passed(EXERCISE_ID, tr("Right for every optimizer tried (with weight decay, without) - {measured}.",
                                  measured=measured))


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="bumps_per_step",
    checker=check_bumps_per_step,
    hints=HINTS,
    contract=CONTRACT,
)
