"""What an exercise declares: how to build the objects of one call, what one call may change, and its reference."""
from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Tuple

import torch

from helpers.course.exercises.engine.observe import Key, World
from helpers.course.exercises.engine.situations import Axis, Situation, tried_line
from helpers.course.exercises.solutions import solution_source
from helpers.language import tr

CHANGEABLE = ("value", "grad", "version", "buffer", "state")  # flags, settings, inputs and globals never are


@dataclass(frozen=True)
class Change:
    """What a call may change: the keys whose path matches ``path`` (fnmatch: ``M1.*``) and whose kind is in
    ``kinds`` (some of ``CHANGEABLE``). With ``grad_may_be_cleared``, a ``.grad`` may also come back cleared (None
    or zeros) where the reference leaves the gradient it stepped with: a step that tidies up with ``zero_grad()``
    after ``step()`` is right. Where the reference leaves None, zeros are not: an optimizer reads them as a gradient
    (weight decay and momentum move the weight)."""

    path: str
    kinds: Tuple[str, ...] = CHANGEABLE
    grad_may_be_cleared: bool = False

    def allows(self, key: Key) -> bool:
        return key.kind in self.kinds and fnmatch.fnmatchcase(key.path, self.path)


TRAINING_STEP_TRIED = ("each `.grad` is compared after the call: the gradient its optimizer stepped with, or cleared "
                       "(None, or zeros where there was a gradient); the step returns nothing")


def training_step(modules: Tuple[str, ...], optimizers: Tuple[str, ...]) -> Tuple[Change, ...]:
    """What one training step may change: the models' weights, ``.grad`` (the gradient stepped with, or cleared),
    versions and buffers, and the optimizers' states. Never a flag, a setting, an input or a global."""
    return (tuple(Change(f"{name}.*", grad_may_be_cleared=True) for name in modules)
            + tuple(Change(f"{name}.*", ("state",)) for name in optimizers))


def returns_nothing(actual: Any, expected: Any) -> Optional[str]:
    """The return rule of a training step: None, as the reference returns."""
    if actual is None and expected is None:
        return None
    return tr("returned {value}, where this step returns None (nothing)", value=_a(type(actual).__name__))


def _a(name: str) -> str:
    """``a list``, ``an int``, ``None`` for NoneType."""
    if name == "NoneType":
        return "None"
    return tr("an {type}", type=name) if name[0].lower() in "aeiou" else tr("a {type}", type=name)


def same_type_and_value(actual: Any, expected: Any, rtol: float, atol: float) -> Optional[str]:
    """The default rule for return values: the same type as the reference's (a set is not a list), tensors of
    the same shape and close values, containers element by element. None, or what differs."""
    found = _returned(actual, expected, rtol, atol)
    return None if found is None else found[0]


def _returned(actual: Any, expected: Any, rtol: float, atol: float) -> Optional[Tuple[str, str]]:
    """``same_type_and_value``'s answer, and the same without its leading "returned " (what an enclosing
    container's sentence names), or None."""
    found = _leaf(actual, expected, rtol, atol)
    if found is not None:
        return tr("returned {what}", what=found), found
    if isinstance(expected, (tuple, list)):
        for index, (a, e) in enumerate(zip(actual, expected)):
            inner = _returned(a, e, rtol, atol)
            if inner is not None:
                whole = tr("returned, as item {index}, {what}", index=index, what=inner[1])
                return whole, whole
    if isinstance(expected, dict):
        for key in expected:
            inner = _returned(actual[key], expected[key], rtol, atol)
            if inner is not None:
                whole = tr("returned, under the key {key}, {what}", key=repr(key), what=inner[1])
                return whole, whole
    return None


def _leaf(actual: Any, expected: Any, rtol: float, atol: float) -> Optional[str]:
    """What differs, said after "returned " (``a list, where the reference returns a tuple``), where it is not
    inside one item of a container; None when the values agree or the difference is inside an item."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return tr("{value}, where the reference returns a tensor", value=_a(type(actual).__name__))
        if actual.shape != expected.shape:
            return tr("a tensor of shape {shape}, where the reference's is {expected}", shape=list(actual.shape),
                      expected=list(expected.shape))
        if not torch.allclose(actual.detach().float().cpu(), expected.detach().float().cpu(), rtol=rtol, atol=atol):
            return tr("a tensor whose values differ from the reference's")
        return None
    if type(actual) is not type(expected):
        return tr("{value}, where the reference returns {expected}", value=_a(type(actual).__name__),
                  expected=_a(type(expected).__name__))
    if isinstance(expected, (tuple, list)):
        if len(actual) != len(expected):
            return tr("{count} items, where the reference returns {expected}", count=len(actual),
                      expected=len(expected))
        return None
    if isinstance(expected, dict):
        if set(actual) != set(expected):
            return tr("keys {keys}, where the reference returns {expected}", keys=sorted(map(str, actual)),
                      expected=sorted(map(str, expected)))
        return None
    if actual != expected:
        return tr("{value}, where the reference returns {expected}", value=repr(actual), expected=repr(expected))
    return None


@functools.lru_cache(maxsize=None)
def solution_function(exercise_id: str, name: str) -> Callable[..., Any]:
    """The solution cell's own function (from solutions.json), run in a namespace holding ``torch``."""
    source = solution_source(exercise_id)
    if source is None:
        raise LookupError(f"no solution recorded for {exercise_id!r}")
    namespace: dict = {"torch": torch, "__name__": f"solution_{exercise_id}"}
    exec(compile(source, f"<solution of {exercise_id}>", "exec"), namespace)  # the course's own source
    return namespace[name]


@dataclass(frozen=True)
class Contract:
    """One exercise's contract.

    Attributes:
        exercise_id, answer_name: the exercise, and the name its solution cell defines.
        build: ``build(situation) -> World``: the objects of one call; called twice, it makes identical twins.
        axes: the situations the contract allows (``situations.py``), the notebook's values first.
        may_change: what one call may change (``Change``); everything else must stay exactly as it was.
        generic_axes: the engine applies the ``grads``, ``mode`` and ``frozen`` axes to the world's modules.
        tolerance: (rtol, atol) for what may change, compared with the reference's.
        returns: how to compare return values: ``returns(actual, expected) -> None or what differs``.
        tried_extra: what the notebook's "what the check tries" line adds (a return type, for example).
        combinations: seeded combinations of several axes, after the one-axis changes.
        seed: the first seed.
        sync: for a contract judged on several processes of one distributed group: ``sync(found_here) ->
            found_on_any`` (an all-reduce), so that every process tries the same situations and stops together.
        judged_in_checker: the exercise's checker runs the engine itself (in processes of its own), so
            ``api.evaluate`` does not judge again.
        wider_judge: for such a contract, ``wider_judge(contract, answer, seed=, combinations=)``: the engine on a
            wider sweep, in those processes (the mutation benchmark's oracle).
        observed_return: what of a return value ``returns`` compares, as data (tensors, plain values), computed
            where the call was made: a returned graph's gradients, say. By default the return value itself.
    """

    exercise_id: str
    answer_name: str
    build: Callable[[Situation], World]
    axes: Tuple[Axis, ...]
    may_change: Tuple[Change, ...] = ()
    generic_axes: bool = True
    tolerance: Tuple[float, float] = (1e-4, 1e-5)
    returns: Optional[Callable[[Any, Any], Optional[str]]] = None
    tried_extra: Tuple[str, ...] = ()
    combinations: int = 6
    seed: int = 500
    reference_function: Optional[Callable[..., Any]] = field(default=None, compare=False)
    sync: Optional[Callable[[bool], bool]] = field(default=None, compare=False)
    judged_in_checker: bool = False
    wider_judge: Optional[Callable[..., Optional[str]]] = field(default=None, compare=False)
    observed_return: Optional[Callable[[Any], Any]] = field(default=None, compare=False)

    def allows(self, key: Key) -> bool:
        """True when one call may change what ``key`` names."""
        return any(change.allows(key) for change in self.may_change)

    def may_be_cleared(self, key: Key) -> bool:
        """True when ``key`` is a ``.grad`` that may come back cleared instead of as the reference's."""
        return key.kind == "grad" and any(change.grad_may_be_cleared and change.allows(key)
                                          for change in self.may_change)

    def reference(self) -> Callable[..., Any]:
        """The function the learner's is compared with: the solution's own, unless the contract gives one."""
        return self.reference_function or solution_function(self.exercise_id, self.answer_name)

    def observe_return(self, returned: Any) -> Any:
        """What of ``returned`` is kept for comparing (``observed_return``; the value itself by default)."""
        return returned if self.observed_return is None else self.observed_return(returned)

    def compare_return(self, actual: Any, expected: Any) -> Optional[str]:
        if self.returns is not None:
            return self.returns(actual, expected)
        return same_type_and_value(actual, expected, *self.tolerance)

    def tried_line(self) -> str:
        """The line the exercise's text carries: what the check varies (and where it is stricter than the text)."""
        return tried_line(self.axes, self.tried_extra)
