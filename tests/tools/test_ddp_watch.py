"""ReductionWatch and replicas_differ against what really happens under DDP, on 2 gloo processes, each on its own
data: every way two losses' gradients meet DDP (tests/tools/ddp_watch_scenarios.py), and real architectures.

The watch is right when what it says matches the ranks: no all-clear while any parameter differs between them, a
step named exactly where the weights really moved apart, a held gradient where only ``.grad`` differs, and the cause
it names the one each scenario set up.
"""
from __future__ import annotations

from typing import Dict, Set

import pytest

from helpers.tools import ddp_watch
from helpers.tools.spawn import run_distributed
from tests.tools.ddp_watch_scenarios import SCENARIOS, run_scenarios
from tests.tools.spawn_workers import watch_real_architectures

ALL_CLEAR = "DDP averaged every gradient these models received before any step used it."

# scenario -> the causes the watch must name, by fate (nothing listed: none)
EXPECTED: Dict[str, Dict[str, Set[str]]] = {
    "per model, both restricted": {},
    "per model, copied fix": {"stepped": {ddp_watch.SECOND_BACKWARD}},
    "per model, inputs=M1 then full": {"stepped": {ddp_watch.SECOND_BACKWARD}},
    "per model, autograd.grad": {"stepped": {ddp_watch.AUTOGRAD_GRAD}},
    "per model, detach": {},
    "one wrapper, restricted, steps after": {},
    "one wrapper, restricted, M1 steps between": {"stepped": {"a step before DDP had averaged it"}},
    "one wrapper, copied fix": {"stepped": {ddp_watch.SECOND_BACKWARD}},
    "copied fix, before any step": {"held": {ddp_watch.SECOND_BACKWARD}},
    "M1 through .module, restricted": {"stepped": {ddp_watch.THROUGH_MODULE}},
    "actor-critic through .module, cleared": {"cleared": {ddp_watch.THROUGH_MODULE}},
    "actor-critic through .module, not cleared": {},   # the critic's own backward averaged its whole .grad
    "accumulation, step after the synced micro-batch": {},
    "accumulation, step inside no_sync": {"stepped": {ddp_watch.UNDER_NO_SYNC}},
    "unused head, find_unused_parameters=True": {},
    "static_graph=True": {},
    "a comm hook that does not average": {},                   # cannot see
    "clipped out of place": {},                                # cannot see
    "autograd.grad copied into .grad": {"stepped": {ddp_watch.AUTOGRAD_GRAD}},
    "torch.func gradients, gradient_as_bucket_view=True": {"stepped": {ddp_watch.SET_BY_HAND}},
    "zero local gradient on rank 0": {"stepped": {ddp_watch.THROUGH_MODULE}},
    "copied fix in a closure": {"stepped": {ddp_watch.SECOND_BACKWARD}},
    "frozen after wrapping": {},                               # cannot see
    "an update by hand": {"cleared": {ddp_watch.SECOND_BACKWARD}},
    "head b used on rank 1 only": {},
    "dataclass output, copied fix": {"stepped": {ddp_watch.SECOND_BACKWARD}},
    "reentrant checkpoint": {},
    "non-reentrant checkpoint, copied fix": {"stepped": {ddp_watch.SECOND_BACKWARD}},
    "GradScaler, clipping in place": {},
}

# scenarios whose steps the watch cannot see (an update written by hand): it must not give the all-clear
INVISIBLE_STEPS = {"an update by hand"}
CANNOT_SEE = {"static_graph=True", "a comm hook that does not average", "clipped out of place", "frozen after wrapping"}


@pytest.fixture(scope="module")
def scenarios():
    return run_distributed(run_scenarios, world_size=2, backend="gloo", timeout_s=300)


@pytest.fixture(scope="module")
def watched():
    return run_distributed(watch_real_architectures, world_size=2, backend="gloo", timeout_s=240)


def _parameters(differ, what: str) -> Set[str]:
    """The parameter names ``replicas_differ`` listed with ``what`` ("value" or ".grad") differing."""
    return {entry.split(" (")[0] for entry in differ if what in entry.split(" (")[1]}


def test_every_scenario_is_expected() -> None:
    assert set(EXPECTED) == set(SCENARIOS)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_the_watch_says_what_the_ranks_show(scenarios, name) -> None:
    for rank in scenarios:
        found = rank[name]
        by_fate: Dict[str, Set[str]] = {}
        for parameter, how, fate in found["unreduced"]:
            by_fate.setdefault(fate, set()).add(parameter)
        stepped, held = by_fate.get("stepped", set()), by_fate.get("held", set())
        moved, grads_differ = _parameters(found["differ"], "value"), _parameters(found["differ"], ".grad")
        assert bool(found["cannot_see"]) == (name in CANNOT_SEE), found["cannot_see"]
        if found["cannot_see"]:
            assert found["report"].startswith("Cannot see") and found["report"] != ALL_CLEAR
            continue
        if name in INVISIBLE_STEPS:
            assert found["report"] != ALL_CLEAR and "invisible to the watch" in found["report"] and found["differ"]
            continue
        assert (found["report"] == ALL_CLEAR) == (not found["unreduced"] and not found["pending"])
        if found["report"] == ALL_CLEAR:
            assert not found["differ"], f"an all-clear while the ranks differ: {found['differ']}"
        assert stepped == moved, f"named as stepped: {sorted(stepped)}; really moved apart: {sorted(moved)}"
        assert grads_differ - moved <= held, "a .grad that differs and no step used must be named as held"
        hows = {fate: {how for _, how, f in found["unreduced"] if f == fate} for fate in ("stepped", "held", "cleared")}
        for fate, expected in EXPECTED[name].items():
            assert all(any(how.startswith(e) for e in expected) for how in hows[fate]), (fate, hows[fate])
            assert all(any(how.startswith(e) for how in hows[fate]) for e in expected), (fate, hows[fate])
        for fate in set(hows) - set(EXPECTED[name]):
            assert not hows[fate], (fate, hows[fate])


def test_only_a_step_is_said_to_move_the_replicas(scenarios) -> None:
    held = scenarios[0]["copied fix, before any step"]
    assert "a step now would use" in held["report"] and "replicas now differ" not in held["report"]
    cleared = scenarios[0]["actor-critic through .module, cleared"]
    assert "no optimizer step moved the replicas" in cleared["report"]
    assert "replicas now differ" not in cleared["report"]
    stepped = scenarios[0]["per model, copied fix"]
    assert "replicas now differ" in stepped["report"]


def test_a_pending_reduction_names_what_the_wrapper_waits_for(scenarios) -> None:
    report = scenarios[0]["one wrapper, restricted, M1 steps between"]["report"]
    assert "both still waited for both.m2." in report


def test_static_graph_is_a_wrapper_it_cannot_see(scenarios) -> None:
    assert "static_graph=True" in scenarios[0]["static_graph=True"]["cannot_see"]["M1"]


@pytest.mark.parametrize("model", ["dcgan", "text_unet"])
def test_a_right_step_is_clean_and_the_replicas_agree(watched, model):
    for rank in watched:
        result = rank[model]["restricted"]
        assert result["unreduced"] == [] and result["differ"] == [], result


@pytest.mark.parametrize("model", ["dcgan", "text_unet"])
@pytest.mark.parametrize("way, how", [("second backward", ddp_watch.SECOND_BACKWARD),
                                      ("autograd.grad", ddp_watch.AUTOGRAD_GRAD),
                                      ("through .module", ddp_watch.THROUGH_MODULE)])
def test_each_way_around_the_average_is_named_and_the_replicas_really_differ(watched, model, way, how):
    for rank in watched:
        result = rank[model][way]
        assert result["unreduced"] and all(text == how for text in result["how"]), result["how"]
        assert set(result["unreduced"]) <= set(result["parameters"])
        moved = {entry.split(" (")[0] for entry in result["differ"]}
        assert moved, "the watch's claim must show in the weights"
        assert moved <= set(result["unreduced"]), "only what the watch named may differ"


def test_clashing_parameter_names_are_kept_apart(watched):
    names = watched[0]["dcgan"]["autograd.grad"]["unreduced"]
    assert "G.main.0.weight" in names and "D.main.0.weight" in names
