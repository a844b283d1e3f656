"""Fresh seeds: the grader shifts every checker's seeds by a salt; the checkers must stay right on any salt."""
from __future__ import annotations

from typing import Any, Dict, Iterator

import pytest
import torch
import torch.nn.functional as functional
from torch import nn

from helpers.course import seeds
from helpers.course.exercises.api import evaluate
from helpers.course.exercises.registry import exercises
from helpers.course.exercises.solutions import solution_source
from helpers.course.models import make_inputs, make_two_models

SALTS = (7919, 1_000_003)


@pytest.fixture
def salted() -> Iterator[None]:
    yield
    seeds.set_salt(0)


def test_a_salt_shifts_every_seed_and_nothing_else(salted: None) -> None:
    plain = make_two_models(5)[0][0].weight.detach().clone(), make_inputs(5)[0]
    shifted_by_hand = make_two_models(5 + 11)[0][0].weight.detach().clone(), make_inputs(5 + 11)[0]
    seeds.set_salt(11)
    salted_now = make_two_models(5)[0][0].weight.detach().clone(), make_inputs(5)[0]
    assert all(torch.equal(a, b) for a, b in zip(salted_now, shifted_by_hand))
    assert not any(torch.equal(a, b) for a, b in zip(salted_now, plain))


def _solution(exercise_id: str) -> Any:
    namespace: Dict[str, Any] = {"torch": torch, "nn": nn, "F": functional}
    exec(compile(solution_source(exercise_id), f"<solution of {exercise_id}>", "exec"), namespace)
    return namespace[exercises()[exercise_id].answer_name]


@pytest.mark.parametrize("salt", SALTS)
@pytest.mark.parametrize("exercise_id", [e for e in exercises() if e != "ddp_two_loss_step"])
def test_every_solution_passes_on_fresh_seeds(exercise_id: str, salt: int, salted: None) -> None:
    seeds.set_salt(salt)
    result = evaluate(exercise_id, _solution(exercise_id))
    assert result.passed, result


def test_the_distributed_solution_passes_on_fresh_seeds(salted: None) -> None:
    seeds.set_salt(SALTS[0])  # its checker's processes read the salt from the environment they inherit
    result = evaluate("ddp_two_loss_step", _solution("ddp_two_loss_step"))
    assert result.passed, result
