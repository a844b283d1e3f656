"""The two-loss recipes under DDP, measured on 2 CPU processes with gloo (groundwork for the DDP notebook)."""
from __future__ import annotations

import pytest

from helpers.course.distributed_recipes import (
    RECIPES,
    drift,
    every_recipe_drift,
    recipe_gradients,
    recipe_table,
    reference_gradients,
    same,
    unfinished_reduction,
)
from helpers.tools.errors import get_kind
from helpers.tools.spawn import run_distributed

WORLD_SIZE = 2


@pytest.fixture(scope="module")
def table():
    per_rank = run_distributed(recipe_gradients, world_size=WORLD_SIZE, args=(0,), backend="gloo", timeout_s=180)
    return {name: (equal, right) for name, equal, right in recipe_table(per_rank, reference_gradients(0, WORLD_SIZE))}


def test_every_recipe_was_measured(table):
    assert set(table) == set(RECIPES)


@pytest.mark.parametrize("fragment, equal_on_ranks, own_loss", [
    ("seed's copied fix", False, False),    # the second backward adds local gradients DDP never averages
    ("inputs=M1", True, True),
    ("torch.autograd.grad", False, False),  # never reaches DDP's hooks: nothing is averaged
    ("detach the other", True, True),
])
def test_each_recipe_under_ddp_on_this_build(table, fragment, equal_on_ranks, own_loss):
    (name,) = [name for name in table if fragment in name]
    assert table[name] == (equal_on_ranks, own_loss), f"{name}: (equal on ranks, own loss) = {table[name]}"


def test_the_comparison_can_tell_gradients_apart():
    reference = reference_gradients(0, WORLD_SIZE)
    changed = dict(reference, **{"M1.0.weight": reference["M1.0.weight"] * 1.01})
    assert same(reference, reference) and not same(changed, reference)


@pytest.fixture(scope="module")
def drifts():
    per_rank = run_distributed(every_recipe_drift, world_size=WORLD_SIZE, args=(4,), backend="gloo", timeout_s=180)
    return {name: drift([rank_result[name] for rank_result in per_rank]) for name in RECIPES}


@pytest.mark.parametrize("fragment, drifts_apart", [
    ("seed's copied fix", True), ("inputs=M1", False), ("torch.autograd.grad", True), ("detach the other", False),
])
def test_replicas_drift_apart_step_after_step_with_nothing_raised(drifts, fragment, drifts_apart):
    (name,) = [name for name in drifts if fragment in name]
    steps = drifts[name]
    if drifts_apart:
        assert 0 < steps[0] < steps[-1], f"{name}: largest weight difference between ranks per step {steps}"
    else:
        assert steps == [0.0] * len(steps), f"{name}: the replicas should stay identical, got {steps}"


def test_a_backward_restricted_to_part_of_a_ddp_model_makes_the_next_forward_raise():
    raised = run_distributed(unfinished_reduction, world_size=WORLD_SIZE, backend="gloo", timeout_s=120)
    kind = get_kind("ddp-unfinished-reduction")
    assert all(message and kind.matches(RuntimeError(message)) for message in raised), raised
