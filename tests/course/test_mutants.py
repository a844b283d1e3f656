"""Checkers against mutants of each solution made by code (authoring/mutants.py): every mutant that changes what a
caller can observe must fail its exercise's check."""
import pytest

from authoring.mutants import OPERATORS, judge_mutant, mutants
from helpers import exercises
from helpers.course.exercises.registry import get_exercise
from helpers.course.exercises.solutions import solution_source
from helpers.course.lesson08_past_one_machine import exercise as ddp_exercise

# A DDP mutant whose two ranks stop running the same collectives (its cache, keyed on id(), hits on one rank only
# when an address is reused) waits for the check's timeout: 90 s, for a learner on a slow machine. Here it waits
# this long instead, above the 3-8 s the check takes under load. A shorter wait cannot fail this test: a check
# stopped by it says "failed", which is what a mutant that changes the observable state must get.
DDP_CHECK_TIMEOUT_S = 15.0

ON_THE_ENGINE = [exercise_id for exercise_id in exercises.ids() if get_exercise(exercise_id).contract is not None]


def _mutants(exercise_id):
    exercise = get_exercise(exercise_id)
    return mutants(exercise_id, exercise.answer_name, solution_source(exercise_id))


CASES = [(exercise_id, mutant.operator) for exercise_id in ON_THE_ENGINE for mutant in _mutants(exercise_id)]


@pytest.mark.parametrize("exercise_id, operator", CASES)
def test_every_mutant_that_changes_the_observable_state_fails_its_check(exercise_id, operator, monkeypatch):
    monkeypatch.setattr(ddp_exercise, "TIMEOUT_S", min(ddp_exercise.TIMEOUT_S, DDP_CHECK_TIMEOUT_S))
    mutant = next(m for m in _mutants(exercise_id) if m.operator == operator)
    verdict = judge_mutant(mutant)
    assert verdict.caught or not verdict.matters, f"{operator} passed the check: {verdict.message}"


@pytest.mark.parametrize("exercise_id", ON_THE_ENGINE)
def test_the_usual_mistakes_apply_to_every_exercise(exercise_id):
    applied = {m.operator for m in _mutants(exercise_id)}
    assert {".train() added", ".eval() added", "a cache keyed on an argument"} <= applied
    assert applied <= set(OPERATORS)


def test_a_fixed_batch_size_is_made_from_a_mean():
    (mutant,) = [m for m in _mutants("head_weight_grad") if m.operator == "a fixed batch size"]
    code = mutant.source.split("loss =", 1)[1]
    assert ".sum() / 32" in code and ".mean()" not in code
