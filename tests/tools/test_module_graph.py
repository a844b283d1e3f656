"""The module view: one box per module call, read from the graph alone, on real architectures."""
from typing import Dict, List

import torch
from torch import nn

from helpers.tools import graph
from helpers.tools.arguments import read_parameters
from helpers.tools.graph import draw_graph, draw_module_graph
from helpers.tools.module_calls import ModuleCalls, module_calls
from tests.tools.real_models import ResnetGenerator, diffusion_losses, make_dcgan, make_text_unet


def calls_of(outputs: Dict[str, torch.Tensor], models: Dict[str, nn.Module], depth=None) -> ModuleCalls:
    return module_calls(outputs, read_parameters(models).names_by_id(), depth)


def names(calls: ModuleCalls) -> List[str]:
    return [box.name for box in calls.boxes]


def feeders(calls: ModuleCalls, name: str) -> List[List[str]]:
    """For each box called ``name``, the names of the boxes that feed it."""
    title = {box.key: box.name for box in calls.boxes}
    return [sorted(title[source] for source, target in calls.edges if target == box.key)
            for box in calls.boxes if box.name == name]


def gan():
    netg, netd, noise, real = make_dcgan()
    fake = netg(noise)
    bce = nn.BCELoss()
    d_loss = bce(netd(real), torch.ones(2)) + bce(netd(fake.detach()), torch.zeros(2))
    g_loss = bce(netd(fake), torch.ones(2))
    return {"d_loss": d_loss, "g_loss": g_loss}, {"G": netg, "D": netd}


def test_a_gan_discriminator_called_three_times_gives_three_boxes():
    losses, models = gan()
    calls = calls_of(losses, models, depth=2)
    assert sorted(names(calls)) == ["D.main"] * 3 + ["G.main", "d_loss", "g_loss"]
    assert sorted((box.call, box.calls) for box in calls.boxes if box.name == "D.main") == [(1, 3), (2, 3), (3, 3)]
    assert sorted(feeders(calls, "d_loss")[0]) == ["D.main", "D.main"] and feeders(calls, "g_loss") == [["D.main"]]
    assert [] in feeders(calls, "D.main") and ["G.main"] in feeders(calls, "D.main")  # real; fake (not detached)
    assert sum(len(box.nodes) for box in calls.boxes) + len(list(netd_and_netg_parameters(models))) == calls.node_count


def netd_and_netg_parameters(models):
    return [p for model in models.values() for p in model.parameters()]


def test_layers_keep_their_activations_and_norms_at_depth_3():
    losses, models = gan()
    calls = calls_of(losses, models, depth=3)
    batch_norm = next(box for box in calls.boxes if box.name == "G.main.1")
    assert sorted(type(node).__name__ for node in batch_norm.nodes) == ["NativeBatchNormBackward0", "ReluBackward0"]
    assert feeders(calls, "G.main.3") == [["G.main.1"]] and feeders(calls, "D.main.0")[2] == ["G.main.12"]


def test_a_unet_shows_its_skip_connections_and_the_text_going_into_it():
    tenc, unet, tokens, images, noise = make_text_unet()
    losses = dict(zip(("loss_tenc", "loss_unet"), diffusion_losses(tenc, unet, tokens, images, noise)))
    calls = calls_of(losses, {"tenc": tenc, "unet": unet})
    cats = feeders(calls, "Cat")
    assert ["unet.stem", "unet.up1.2"] in cats and ["unet.down1.2", "unet.up2.2"] in cats  # the two skips
    assert "tenc.final_norm" in feeders(calls, "unet.middle.attention")[0]
    assert feeders(calls, "loss_tenc") == [["MseLoss"]] and feeders(calls, "loss_unet") == [["MseLoss"]]
    assert all(box.calls == 1 for box in calls.boxes)
    assert len(calls_of(losses, {"tenc": tenc, "unet": unet}, depth=1).boxes) < len(calls.boxes) <= 40


def test_two_sequentials_with_the_same_parameter_names_stay_apart():
    torch.manual_seed(0)
    m1, m2 = (nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)) for _ in range(2))
    x = torch.randn(3, 4)
    losses = {"L1": m1(x).pow(2).mean(), "L2": (m2(x) - m1(x).detach()).abs().mean()}
    calls = calls_of(losses, {"M1": m1, "M2": m2})
    assert sorted(names(calls)) == ["L1", "L2", "M1.0", "M1.2", "M2.0", "M2.2"]
    assert feeders(calls, "L2") == [["M2.2"]] and feeders(calls, "M2.2") == [["M2.0"]]
    assert "M1.0 (Linear)" in draw_module_graph(losses, {"M1": m1, "M2": m2}).text


def test_residual_blocks_are_one_box_each():
    torch.manual_seed(0)
    generator = ResnetGenerator(ngf=8, blocks=3)
    calls = calls_of({"loss": generator(torch.randn(1, 3, 32, 32)).mean()}, {"G": generator}, depth=3)
    blocks = [box for box in calls.boxes if box.name in ("G.model.10", "G.model.11", "G.model.12")]
    assert len(blocks) == 3 and all(len(box.nodes) >= 8 for box in blocks)


def test_inside_draws_every_node_of_one_module_and_names_the_boxes_around_it():
    losses, models = gan()
    picture = draw_module_graph(losses, models, inside="D.main.3")
    source = picture.digraph.source
    assert source.count("NativeBatchNormBackward0") == 3 and "D.main.3.weight" in source
    assert "from D.main.2, call 1 of 3" in source and "to D.main.5" in source
    wrong = draw_module_graph(losses, models, inside="D.nothing")
    assert "no module call named 'D.nothing'" in wrong.note and "D.main" in wrong.note


def test_full_false_draws_the_module_view_and_small_graphs_stay_full():
    losses, models = gan()
    assert "call 3 of 3" in draw_graph(losses, models, full=False).text
    assert "AccumulateGrad" in draw_graph(losses, models).text  # 84 nodes: every node, as before


def test_without_dot_the_module_view_is_text(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    losses, models = gan()
    picture = draw_module_graph(losses, models)
    bundle = picture._repr_mimebundle_()
    assert "image/svg+xml" not in bundle and "D.main.0 (Conv2d), call 2 of 3" in bundle["text/html"]
    assert "apt-get install graphviz" in str(picture)


def test_a_freed_graph_and_odd_arguments_draw_without_raising():
    losses, models = gan()
    (losses["d_loss"] + losses["g_loss"]).backward()
    assert "call 3 of 3" in str(draw_module_graph(losses, models))
    for odd in (None, 3, "x", [], {"a": None}, torch.ones(2)):
        str(draw_module_graph(odd, odd)), draw_module_graph(losses, odd, depth=odd)
        draw_module_graph(losses, models, inside=odd)._repr_mimebundle_()
    assert graph.draw_module_graph(torch.ones(2)).text.startswith("(no graph")
