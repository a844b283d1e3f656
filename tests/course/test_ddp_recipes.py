"""Notebook 08's measurements, on 2 CPU processes with gloo: the recipes, their drift, when a wrapper averages,
DDP's own errors and the silent cases next to them, find_unused_parameters, Accelerate, and the torchrun script.

Each claim the notebook makes is asserted there, in its own run; these tests pin the same behaviour with the
helpers alone, and the pieces the notebook does not show (the table's comparison can fail, the kinds match the
real messages, the script it shows runs under torchrun).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

from helpers.course.lesson08_past_one_machine import accelerated, chained, failures, find_unused, recipes, reduction
from helpers.course.lesson08_past_one_machine.replicas import drift, recipe_table, same
from helpers.tools.errors import classify, get_kind
from helpers.tools.spawn import run_distributed
from tests.paths import ROOT

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
    from helpers.course.lesson08_past_one_machine import watched

    for name, watch in runs[0]["watched"].items():
        wrong = "copied fix" in name or "autograd.grad" in name or name == watched.STEP_BETWEEN
        assert bool(watch["unreduced"]) == wrong, (name, watch["report"])


@pytest.fixture(scope="module")
def tour():
    return run_distributed(failures.tour, world_size=WORLD_SIZE, backend="gloo", timeout_s=240)


@pytest.mark.parametrize("scenario, kind", [
    ("one DDP around both models; inputs=M1, then l2.backward()", "ddp-ready-twice"),
    ("one DDP around both models; inputs=M1, then inputs=M2", None),
    ("one DDP around both models; the copied fix", None),         # silent: the wrapper had finished
    ("one DDP per model; inputs=M1, then l2.backward()", None),   # silent: M1's wrapper had finished
    ("one DDP per model; inputs=M1, then inputs=M2", None),
    ("two heads, one loss: find_unused_parameters=False", "ddp-unfinished-reduction"),
    ("two heads, one loss: find_unused_parameters=True", None),
    ("inputs=M1's head only, find_unused_parameters=True", "ddp-unfinished-reduction"),
    ("static_graph=True, one model trained per step", "ddp-graph-changed"),
    ("reentrant checkpoint, find_unused_parameters=True", "ddp-ready-twice"),
    ("reentrant checkpoint, no find_unused_parameters", None),
    ("reentrant checkpoint, static_graph=True", None),
    ("non-reentrant checkpoint, find_unused_parameters=True", None),
])
def test_each_ddp_failure_is_real_on_every_rank_and_of_its_kind(tour, scenario, kind):
    assert set(failures.SCENARIOS) | {"sink", "gradients", "uneven use", "checkpoint walk", "cost",
                                      "peak MiB"} == set(tour[0])
    for rank in tour:
        raised = rank[scenario]
        assert (raised is None) if kind is None else (classify(raised) is get_kind(kind)), (scenario, raised)
    if kind is not None:
        with pytest.raises(RuntimeError) as caught:
            failures.reraise(tour, scenario)
        assert get_kind(kind).matches(caught.value)
    else:
        failures.reraise(tour, scenario)  # raises nothing


def _shard_parts(runs):
    """Per rank, each loss's gradient on that rank's shard, and each loss's gradient averaged over the ranks."""
    shard = [run["shard"] for run in runs]
    averaged = {loss: {n: sum(rank[loss][n] for rank in shard) / len(shard) for n in shard[0][loss]}
                for loss in ("L1", "L2")}
    return shard, averaged


def test_a_late_gradient_is_not_averaged_and_raises_nothing(runs, tour):
    """One DDP around both models with the copied fix, and one DDP per model with a full second backward: M1 ends
    with L1 averaged plus the rank's own L2; restricting both backward passes gives the reference."""
    reference = recipes.reference_gradients(0, WORLD_SIZE)
    shard, averaged = _shard_parts(runs)
    for rank, seen in enumerate(tour):
        left = seen["gradients"]
        assert same(left["one DDP around both models; the copied fix"],
                    {n: averaged["L1"][n] + shard[rank]["L2"][n] for n in reference})
        assert same(left["one DDP per model; inputs=M1, then l2.backward()"],
                    {n: averaged["L1"][n] + shard[rank]["L2"][n] if n.startswith("M1.") else averaged["L2"][n]
                     for n in reference})
        assert same(left["one DDP per model; inputs=M1, then inputs=M2"], reference)
        assert same(left["one DDP around both models; inputs=M1, then inputs=M2"], reference)


def test_one_wrapper_averages_when_all_its_buckets_are_ready(runs):
    reference = recipes.reference_gradients(0, WORLD_SIZE)
    shard, _ = _shard_parts(runs)
    m1 = [n for n in reference if n.startswith("M1.")]
    for rank, run in enumerate(runs):
        early, late = (run["reduction"]["timeline"][moment] for moment in ("after l1.backward", "after l2.backward"))
        assert not early["finished"] and early["buckets all-reduced"] == []
        assert same({n: early["grads"][n] for n in m1}, {n: shard[rank]["L1"][n] for n in m1})
        assert all(early["grads"][n] is None for n in reference if n.startswith("M2."))
        assert late["finished"] and late["buckets all-reduced"] == [len(reference)]
        assert same(late["grads"], reference)


def test_a_step_before_the_wrapper_finished_lets_the_replicas_drift(runs):
    ways = {way: drift([run["reduction"]["weights"][way] for run in runs]) for way in reduction.WAYS}
    between, after, per_model = ways.values()
    assert all(value > 0 for value in between), between
    assert after == [0.0] * len(after) and per_model == [0.0] * len(per_model), (after, per_model)


def test_find_unused_parameters_runs_b_accumulators_through_the_sink(tour):
    for rank in tour:
        on, off = rank["sink"]["find_unused_parameters=True"], rank["sink"]["find_unused_parameters=False"]
        assert on["grad_fn"] == "_DDPSinkBackward" and off["grad_fn"] == "AddmmBackward0"
        assert all(on["loss reaches b"]) and not any(off["loss reaches b"])
        assert on["hook on b.weight saw"] == [[None]] and off["hook on b.weight saw"] == []
        assert on["b.weight.grad"] is None and off["b.weight.grad"] is None
        assert on["reduction finished"] and not off["reduction finished"]
        assert find_unused.NO_UNUSED_WARNING in on["stderr"] and find_unused.NO_UNUSED_WARNING not in off["stderr"]


def test_a_head_used_on_one_rank_only_is_averaged_on_both(tour):
    uneven = [rank["uneven use"] for rank in tour]
    for rank in uneven:
        assert torch.allclose(rank["b.weight.grad"], uneven[0]["own"] / WORLD_SIZE, rtol=1e-5, atol=1e-7)


def test_find_unused_parameters_adds_one_all_reduce_per_wrapper_in_the_backward(tour):
    for rank in tour:
        cost = rank["cost"]
        assert cost["find_unused_parameters=False"]["all-reduces per step"] == {"forward": 0, "backward": 2}
        assert cost["find_unused_parameters=True"]["all-reduces per step"] == {"forward": 0, "backward": 4}
        assert {len(measured[part]) for measured in cost.values() for part in ("forward", "backward")} == {20}
        assert all(seconds > 0 for measured in cost.values() for part in ("forward", "backward")
                   for seconds in measured[part])


def test_the_reentrant_checkpoint_hides_the_head_from_the_search_and_works_without_the_flag(tour):
    reference = recipes.reference_gradients(0, WORLD_SIZE)
    m1 = {n: reference[n] for n in reference if n.startswith("M1.")}
    for rank in tour:
        assert rank["checkpoint walk"] == [True, True, False, False]
        index = int(re.search(r"Parameter at index (\d+)",
                              str(rank["reentrant checkpoint, find_unused_parameters=True"])).group(1))
        assert index in (2, 3)  # the head's weight or bias
        for name in ("reentrant checkpoint, no find_unused_parameters", "reentrant checkpoint, static_graph=True",
                     "non-reentrant checkpoint, find_unused_parameters=True"):
            assert same(rank["gradients"][name], m1), name


def test_every_run_reports_its_peak_memory(runs, tour):
    assert all(run["peak MiB"] > 0 for run in [*runs, *tour])


@pytest.fixture(scope="module")
def accelerate_runs():
    pytest.importorskip("accelerate")
    return run_distributed(accelerated.accelerated_gradients, world_size=WORLD_SIZE, backend="gloo", timeout_s=240)


def test_accelerate_wraps_both_modules_in_ddp_on_two_processes(accelerate_runs):
    for run in accelerate_runs:
        for found in run["recipes"].values():
            assert found["wrapped"] == ["DistributedDataParallel"] * 2 and found["processes"] == WORLD_SIZE
            assert found["distributed"].endswith("MULTI_CPU") and found["mixed_precision"] == "bf16"
            assert not found["scaler"]
            assert found["steps"] == 2  # one real step per optimizer, after 2 micro-batches
            assert found["synchronised"] == [False, True]  # the first micro-batch under no_sync()


@pytest.mark.parametrize("fragment, right", [("copied fix", False), ("keep the graph", True),
                                             ("run unet twice", True), ("autograd.grad", False)])
def test_which_recipes_stay_right_under_accelerate(accelerate_runs, fragment, right):
    reference = accelerated.accelerated_reference(0, WORLD_SIZE)
    (name,) = [name for name in accelerated.ACCELERATE_RECIPES if fragment in name]
    grads = [run["recipes"][name]["grads"] for run in accelerate_runs]
    equal = all(torch.equal(grads[0][k], grads[1][k]) for k in grads[0])
    error = max(float((grads[0][k] - reference[k]).norm() / reference[k].norm()) for k in reference)
    assert (equal and error < 0.02) if right else (not equal and error > 0.2), (name, equal, error)


def test_accelerate_backward_calls_loss_backward_on_the_ddp_path_only(accelerate_runs):
    paths = accelerate_runs[0]["backward"]
    tests = {branch["test"]: branch for branch in paths["branches"]}
    assert tests["else"]["calls"] == ["loss.backward(**kwargs)"]
    deepspeed = tests["self.distributed_type == DistributedType.DEEPSPEED"]["calls"]
    assert not any(call.startswith("loss.backward") for call in deepspeed)
    assert any(call.startswith("self.engine.step(") for call in paths["deepspeed"]["calls"])
    assert tests["self.distributed_type == DistributedType.MEGATRON_LM"] == {
        "test": "self.distributed_type == DistributedType.MEGATRON_LM", "calls": [], "returns": True}


def test_the_source_reader_sees_calls_and_returns():
    def sample(x, flag):
        if flag:
            return x.backward()
        elif x is None:
            print(x)
        else:
            x.step(1)

    branches = accelerated._branches(sample)
    assert branches == [{"test": "flag", "calls": ["x.backward()"], "returns": True},
                        {"test": "x is None", "calls": ["print(x)"], "returns": False},
                        {"test": "else", "calls": ["x.step(1)"], "returns": False}]


def test_the_torchrun_script_the_notebook_shows_trains_equal_replicas():
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(WORLD_SIZE),
               "-m", "helpers.course.lesson08_past_one_machine.torchrun_script"]
    environment = dict(os.environ)
    if torch.cuda.device_count() < WORLD_SIZE:  # the script takes NCCL whenever it sees a GPU: one per process
        environment["CUDA_VISIBLE_DEVICES"] = ""
    done = subprocess.run(command, check=False, cwd=ROOT, capture_output=True, text=True, timeout=180,
                          env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    checksums = dict(re.findall(r"rank (\d) of 2: weights checksum (-?\d\.\d{12}e[+-]\d+)", done.stdout))
    assert sorted(checksums) == ["0", "1"] and len(set(checksums.values())) == 1, done.stdout
