"""Notebook 08's measurements, on 2 CPU processes with gloo: the recipes, their drift, DDP's own errors, Accelerate.

Each claim the notebook makes is asserted there, in its own run; these tests pin the same behaviour with the
helpers alone, and the pieces the notebook does not show (the table's comparison can fail, the kinds match the
real messages).
"""
from __future__ import annotations

import pytest
import torch

from helpers.course.lesson08_past_one_machine import accelerated, chained, failures, recipes
from helpers.course.lesson08_past_one_machine.replicas import drift, recipe_table, same
from helpers.tools.errors import classify, get_kind
from helpers.tools.spawn import run_distributed

WORLD_SIZE = 2


@pytest.fixture(scope="module")
def runs():
    return run_distributed(recipes.measure_everything, world_size=WORLD_SIZE, args=(0, 4), backend="gloo",
                           timeout_s=240)


def _verdicts(per_rank, reference):
    return {name: (equal, right) for name, equal, right in recipe_table(per_rank, reference)}


@pytest.mark.parametrize("fragment, equal_on_ranks, own_loss", [
    ("seed's copied fix", False, False),    # the second backward adds local gradients DDP never averages
    ("inputs=M1", True, True),
    ("torch.autograd.grad", False, False),  # never reaches DDP's hooks: nothing is averaged
    ("detach the other", True, True),
])
def test_each_recipe_under_ddp_on_this_build(runs, fragment, equal_on_ranks, own_loss):
    table = _verdicts([run["grads"] for run in runs], recipes.reference_gradients(0, WORLD_SIZE))
    assert set(table) == set(recipes.RECIPES)
    (name,) = [name for name in table if fragment in name]
    assert table[name] == (equal_on_ranks, own_loss), f"{name}: (equal on ranks, own loss) = {table[name]}"


def test_the_comparison_can_tell_gradients_apart():
    reference = recipes.reference_gradients(0, WORLD_SIZE)
    changed = dict(reference, **{"M1.0.weight": reference["M1.0.weight"] * 1.01})
    assert same(reference, reference) and not same(changed, reference)
    assert not same(dict(reference, **{"M1.0.weight": None}), reference)


@pytest.mark.parametrize("fragment, drifts_apart", [
    ("seed's copied fix", True), ("inputs=M1", False), ("torch.autograd.grad", True), ("detach the other", False),
])
def test_replicas_drift_apart_step_after_step_with_nothing_raised(runs, fragment, drifts_apart):
    (name,) = [name for name in recipes.RECIPES if fragment in name]
    steps = drift([run["weights"][name] for run in runs])
    if drifts_apart:
        assert 0 < steps[0] < steps[-1], f"{name}: largest weight difference between ranks per step {steps}"
    else:
        assert steps == [0.0] * len(steps), f"{name}: the replicas should stay identical, got {steps}"


def test_the_shard_gradients_account_for_the_two_wrong_recipes(runs):
    reference = recipes.reference_gradients(0, WORLD_SIZE)
    shard = [run["shard"] for run in runs]
    averaged_l1 = {name: (shard[0]["L1"][name] + shard[1]["L1"][name]) / 2 for name in reference}
    copied = next(name for name in recipes.RECIPES if "copied fix" in name)
    autograd = next(name for name in recipes.RECIPES if "autograd.grad" in name)
    for rank in range(WORLD_SIZE):
        assert same(runs[rank]["grads"][copied], {n: averaged_l1[n] + shard[rank]["L2"][n] for n in reference})
        own = {n: shard[rank]["L1" if n.startswith("M1.") else "L2"][n] for n in reference}
        assert same(runs[rank]["grads"][autograd], own)


def test_the_chained_recipes_under_ddp(runs):
    table = _verdicts([run["chained"] for run in runs], chained.chained_reference(0, WORLD_SIZE))
    assert {name.split(":")[0]: verdict for name, verdict in table.items()} == {
        "copied fix": (False, False), "keep the graph": (True, True), "run unet twice": (True, True),
        "torch.autograd.grad for each module, written into .grad": (False, False)}


def test_the_watch_reports_what_ddp_did_not_average(runs):
    for name, watch in runs[0]["watched"].items():
        wrong = "copied fix" in name or "autograd.grad" in name
        assert bool(watch["unreduced"]) == wrong, (name, watch["report"])


@pytest.fixture(scope="module")
def tour():
    return run_distributed(failures.tour, world_size=WORLD_SIZE, backend="gloo", timeout_s=240)


@pytest.mark.parametrize("scenario, kind", [
    ("one DDP around both models; inputs=M1, then l2.backward()", "ddp-ready-twice"),
    ("one DDP around both models; inputs=M1, then inputs=M2", None),
    ("two heads, one loss: find_unused_parameters=False", "ddp-unfinished-reduction"),
    ("two heads, one loss: find_unused_parameters=True", None),
    ("inputs=M1's head only, find_unused_parameters=True", "ddp-unfinished-reduction"),
    ("static_graph=True, one model trained per step", "ddp-graph-changed"),
    ("reentrant checkpoint, find_unused_parameters=True", "ddp-ready-twice"),
    ("reentrant checkpoint, static_graph=True", None),
    ("non-reentrant checkpoint, find_unused_parameters=True", None),
])
def test_each_ddp_failure_is_real_on_every_rank_and_of_its_kind(tour, scenario, kind):
    assert set(failures.SCENARIOS) | {"cost"} == set(tour[0])
    for rank in tour:
        raised = rank[scenario]
        assert (raised is None) if kind is None else (classify(raised) is get_kind(kind)), (scenario, raised)
    if kind is not None:
        with pytest.raises(RuntimeError) as caught:
            failures.reraise(tour, scenario)
        assert get_kind(kind).matches(caught.value)
    else:
        failures.reraise(tour, scenario)  # raises nothing


def test_find_unused_parameters_was_timed_both_ways(tour):
    for rank in tour:
        assert {k: len(v) for k, v in rank["cost"].items()} == {"find_unused_parameters=False": 2,
                                                                 "find_unused_parameters=True": 2}


@pytest.fixture(scope="module")
def accelerate_runs():
    pytest.importorskip("accelerate")
    return run_distributed(accelerated.accelerated_gradients, world_size=WORLD_SIZE, backend="gloo", timeout_s=240)


def test_accelerate_wraps_both_modules_in_ddp_on_two_processes(accelerate_runs):
    for run in accelerate_runs:
        for found in run.values():
            assert found["wrapped"] == ["DistributedDataParallel"] * 2 and found["processes"] == WORLD_SIZE
            assert found["distributed"].endswith("MULTI_CPU") and found["mixed_precision"] == "bf16"
            assert found["steps"] == 2  # one real step per optimizer, after 2 micro-batches
            assert found["synchronised"] == [False, True]  # the first micro-batch under no_sync()


@pytest.mark.parametrize("fragment, right", [("copied fix", False), ("keep the graph", True),
                                             ("run unet twice", True), ("autograd.grad", False)])
def test_which_recipes_stay_right_under_accelerate(accelerate_runs, fragment, right):
    reference = accelerated.accelerated_reference(0, WORLD_SIZE)
    (name,) = [name for name in accelerated.ACCELERATE_RECIPES if fragment in name]
    grads = [run[name]["grads"] for run in accelerate_runs]
    equal = all(torch.equal(grads[0][k], grads[1][k]) for k in grads[0])
    error = max(float((grads[0][k] - reference[k]).norm() / reference[k].norm()) for k in reference)
    assert (equal and error < 0.02) if right else (not equal and error > 0.2), (name, equal, error)
