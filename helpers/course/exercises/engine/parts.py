"""Building blocks for contracts whose calls receive graphs or factories rather than models: a new object made where
a freed one lived (an ``id()``-keyed cache then goes stale), the state of a graph's saved tensors as an observation,
and a reference that records its answers so a wrong answer can be read as an earlier call's (notebooks 01-03)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, TypeVar

import torch

from helpers.course.exercises.engine.contract import solution_function
from helpers.language import tr
from helpers.tools import State, count_states, saved_tensors

T = TypeVar("T")


def at_the_same_id(old_id: int, make: Callable[[], T], tries: int = 500) -> T:
    """``make()`` until what it returns lands at ``old_id``, the address of an object just freed (CPython gives a
    freed object's memory to the next object of its size): an answer that remembers results by ``id()`` of an
    argument then sees a new object under an old key, as it would in a long run. After ``tries``, any new one."""
    kept: List[T] = []  # the misses stay alive meanwhile, so each try gets fresh memory
    for _ in range(tries):
        made = make()
        if id(made) == old_id:
            return made
        kept.append(made)
    return kept[-1]


class SavedCounts(NamedTuple):
    """The state of a graph's saved tensors, as an observation (``World.extra``)."""

    alive: int
    freed: int
    stale: int

    def __repr__(self) -> str:  # short: a diagnosis shows "<the learner's> instead of <the reference's>"
        if not self.freed and not self.stale:
            return tr("all {alive} of its saved tensors alive", alive=self.alive)
        if not self.stale:
            return tr("{freed} of its saved tensors freed", freed=self.freed)
        if not self.freed:
            return tr("{stale} stale", stale=self.stale)
        return tr("{freed} of its saved tensors freed, {stale} stale", freed=self.freed, stale=self.stale)


def graph_state(losses: Callable[[], Sequence[torch.Tensor]], params: Dict[str, torch.Tensor]) -> Callable[
        [], SavedCounts]:
    """A ``World.extra`` reader: the saved tensors of the graphs of ``losses()`` (read at each observation)."""
    def read() -> SavedCounts:
        counts = count_states(saved_tensors(tuple(losses()), params))
        return SavedCounts(counts[State.ALIVE], counts[State.FREED], counts[State.STALE])

    return read


class RecordedReference:
    """The solution's own function, recording what it returns in the situation being run (``reset`` by the
    contract's ``build``), so that a wrong answer can be read as an earlier call's."""

    def __init__(self, exercise_id: str, name: str) -> None:
        self.exercise_id, self.name = exercise_id, name
        self.answers: List[Any] = []
        self.params: Dict[str, torch.Tensor] = {}  # what build handed over, for reading a wrong answer

    def reset(self, params: Optional[Dict[str, torch.Tensor]] = None) -> None:
        self.answers, self.params = [], dict(params or {})

    def __call__(self, *args: Any) -> Any:
        answer = solution_function(self.exercise_id, self.name)(*args)
        self.answers.append(answer)
        return answer
