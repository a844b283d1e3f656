"""Exercise of notebook 03: how many times does one optimizer step bump a parameter's version?"""
from __future__ import annotations

from typing import Any, Callable, Dict

import torch

from helpers.course.exercises.exercise import Exercise
from helpers.course.exercises.guard import run_learner
from helpers.course.exercises.result import CheckResult, failed, passed

EXERCISE_ID = "bumps_per_step"

HINTS = (
    "A right answer returns an int that your code measured. The checker tries several optimizers, and they do "
    "not all bump the version the same number of times per step.",
    "Every in-place change adds 1 to tensor._version. An optimizer skips parameters whose .grad is None, and "
    "nn.Linear's initialisation already bumped its weight once.",
    "Make a parameter of your own and give it a gradient (an optimizer skips parameters without one), build "
    "the optimizer on it, read _version before and after one step(), and return the difference.",
)


def optimizer_factories() -> Dict[str, Callable[[Any], torch.optim.Optimizer]]:
    """The optimizers the checker measures; fused AdamW on the CPU needs torch >= 2.4."""
    return {
        "SGD(lr=0.1)": lambda params: torch.optim.SGD(params, lr=0.1),
        "Adam()": lambda params: torch.optim.Adam(params),
        "AdamW()": lambda params: torch.optim.AdamW(params),
        "AdamW(fused=True)": lambda params: torch.optim.AdamW(params, fused=True),
    }


def measure_bumps(make_optimizer: Callable[[Any], torch.optim.Optimizer]) -> int:
    """The reference: version change of a parameter with a gradient over one step."""
    param = torch.nn.Parameter(torch.ones(4))
    param.grad = torch.ones(4)
    optimizer = make_optimizer([param])
    before = param._version
    optimizer.step()
    return param._version - before


def _diagnose(results: Dict[str, int], expected: Dict[str, int]) -> str:
    """Read the pattern across optimizers: the same mistake shows the same way in each."""
    pairs = [(results[name], expected[name]) for name in expected]
    if all(r == 0 for r, _ in pairs):
        return ("You measured 0 for every optimizer. Did the parameter have a .grad (an optimizer skips parameters "
                "whose grad is None)? And did you read _version of the parameter itself, not of .data or .grad?")
    if all(r == e + 1 for r, e in pairs):
        return ("You measured one bump too many for every optimizer: return the change in _version over the step, "
                "not the version itself (nn.Linear's init already bumped the weight once).")
    if all(r == 2 * e for r, e in pairs):
        return "You measured twice the bumps of one step for every optimizer: did you step twice?"
    if len(set(results.values())) == 1:
        return (f"You returned {pairs[0][0]} for every optimizer, but they differ "
                f"({', '.join(f'{n}: {e}' for n, e in expected.items())}). Measure it on each.")
    name = next(n for n in expected if results[n] != expected[n])
    return f"For {name} one step bumps the version {expected[name]} time(s); you returned {results[name]}."


def check_bumps_per_step(bumps_per_step: Callable[..., Any]) -> CheckResult:
    """Call the learner's ``bumps_per_step(make_optimizer)`` for several optimizers and compare."""
    expected, results = {}, {}
    for name, factory in optimizer_factories().items():
        expected[name] = measure_bumps(factory)
        result = run_learner(f"Your function (for {name})", bumps_per_step, factory)
        if isinstance(result, bool) or not isinstance(result, int):
            return failed(EXERCISE_ID, f"Return an int (the number of bumps); for {name} you returned {result!r}.")
        results[name] = result
    if results != expected:
        return failed(EXERCISE_ID, _diagnose(results, expected))
    measured = ", ".join(f"{name}: {count}" for name, count in expected.items())
    return passed(EXERCISE_ID, f"Right for every optimizer tried - {measured}.")


EXERCISE = Exercise(
    id=EXERCISE_ID,
    answer_name="bumps_per_step",
    checker=check_bumps_per_step,
    hints=HINTS,
)
