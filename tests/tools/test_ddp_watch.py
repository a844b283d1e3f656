"""ReductionWatch and replicas_differ on real architectures under DDP (2 gloo processes, each on its own data)."""
from __future__ import annotations

import pytest

from helpers.tools.spawn import run_distributed
from tests.tools.spawn_workers import watch_real_architectures


@pytest.fixture(scope="module")
def watched():
    return run_distributed(watch_real_architectures, world_size=2, backend="gloo", timeout_s=240)


@pytest.mark.parametrize("model", ["dcgan", "text_unet"])
def test_a_right_step_is_clean_and_the_replicas_agree(watched, model):
    for rank in watched:
        result = rank[model]["restricted"]
        assert result["unreduced"] == [] and result["differ"] == [], result


@pytest.mark.parametrize("model", ["dcgan", "text_unet"])
@pytest.mark.parametrize("way, how", [("second backward", "a second backward after DDP had averaged"),
                                      ("autograd.grad", "torch.autograd.grad"),
                                      ("through .module", "skipped the DDP wrapper")])
def test_each_way_around_the_average_is_named_and_the_replicas_really_differ(watched, model, way, how):
    for rank in watched:
        result = rank[model][way]
        assert result["unreduced"] and all(how in text for text in result["how"]), result["how"]
        assert set(result["unreduced"]) <= set(result["parameters"])
        assert result["differ"], "the watch's claim must show in the gradients"
        assert set(result["differ"]) <= set(result["unreduced"]), "only what the watch named may differ"


def test_clashing_parameter_names_are_kept_apart(watched):
    names = watched[0]["dcgan"]["autograd.grad"]["unreduced"]
    assert "G.main.0.weight" in names and "D.main.0.weight" in names
