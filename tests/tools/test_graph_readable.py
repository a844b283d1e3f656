"""Graph pictures read at any size: text at least 9 pt at natural size, never shrunk, a UNet-size graph in ~1 s."""
import re
import time
import xml.etree.ElementTree as ET
from typing import List

import pytest
import torch

from helpers.tools import graph
from helpers.tools.graph import FULL_DRAWING_MAX_NODES, draw_graph, named_parameters
from helpers.tools.saved_graph import draw_saved_graph
from tests.tools.real_models import SmallUNet, TextEncoder, diffusion_losses, make_dcgan, make_text_unet

needs_dot = pytest.mark.skipif(not graph.dot_available(), reason="graphviz dot is not installed")
MIN_PT = 9.0
SVG = "{http://www.w3.org/2000/svg}"


def displayed_font_sizes(svg: str) -> List[float]:
    """Each <text>'s size in pt as shown at the SVG's natural size: font-size x (width in pt / viewBox width) x the
    scale() of every enclosing group (graphviz writes lengths in pt and shrinks a drawing with scale())."""
    root = ET.fromstring(svg.encode("utf-8"))
    width = root.get("width", "")
    assert width.endswith("pt"), f"the svg's width is {width!r}, not in pt"
    view_box_width = float(root.get("viewBox").split()[2])
    sizes: List[float] = []

    def walk(element: ET.Element, scale: float) -> None:
        found = re.search(r"scale\(([\d.]+)", element.get("transform", ""))
        scale *= float(found[1]) if found else 1.0
        if element.tag == f"{SVG}text":
            sizes.append(float(element.get("font-size", "14")) * scale)
        for child in element:
            walk(child, scale)

    walk(root, float(width[:-2]) / view_box_width)
    return sizes


def gan_losses():
    netg, netd, noise, real = make_dcgan()
    fake = netg(noise)
    bce = torch.nn.BCELoss()
    d_loss = bce(netd(real), torch.ones(2)) + bce(netd(fake.detach()), torch.zeros(2))
    g_loss = bce(netd(fake), torch.ones(2))
    return {"d_loss": d_loss, "g_loss": g_loss}, fake, {"G": netg, "D": netd}


def big_unet_loss(unets: int = 8):
    """A text encoder and ``unets`` UNets in a row: about 870 autograd nodes."""
    torch.manual_seed(0)
    tenc, chain = TextEncoder(), [SmallUNet() for _ in range(unets)]
    text, image = tenc(torch.randint(0, 100, (2, 8))), torch.randn(2, 3, 16, 16)
    for unet in chain:
        image = unet(image, text)
    return image.pow(2).mean(), {"tenc": tenc, **{f"unet{i}": unet for i, unet in enumerate(chain)}}


def pictures():
    losses, fake, models = gan_losses()
    params = named_parameters(**models)
    return {
        "full": draw_graph(losses, params),
        "saved": draw_saved_graph(losses, {"G": fake}, params),
        "modules": graph.draw_module_graph(losses, models, depth=3),
        "inside": graph.draw_module_graph(losses, models, inside="D.main.3"),
    }


@needs_dot
@pytest.mark.parametrize("kind", ["full", "saved", "modules", "inside"])
def test_every_text_is_at_least_9pt_at_natural_size(kind):
    sizes = displayed_font_sizes(pictures()[kind].svg())
    assert sizes and min(sizes) >= MIN_PT, f"{kind}: smallest text {min(sizes):.1f} pt"


@needs_dot
def test_jupyterlab_is_asked_to_scroll_not_shrink():
    data, metadata = pictures()["saved"]._repr_mimebundle_()
    assert metadata["image/svg+xml"] == {"unconfined": True}  # JupyterLab: max-width none, the output scrolls
    assert "text/html" not in data, "JupyterLab would render text/html first"
    root = ET.fromstring(data["image/svg+xml"].encode("utf-8"))
    assert root.get("height", "").endswith("pt") and "max-width" not in root.get("style", "")
    assert "width:100%" not in data["image/svg+xml"].replace(" ", "")


@needs_dot
def test_a_unet_size_graph_is_drawn_in_about_a_second():
    tenc, unet, tokens, images, noise = make_text_unet()
    losses = dict(zip(("loss_tenc", "loss_unet"), diffusion_losses(tenc, unet, tokens, images, noise)))
    params = named_parameters(tenc=tenc, unet=unet)
    seconds = min(_timed(lambda: draw_graph(losses, params).svg()) for _ in range(2))
    assert seconds < 1.5, f"{seconds:.2f} s"


@needs_dot
def test_a_bigger_graph_switches_to_the_module_view_and_says_how_to_get_every_node():
    loss, models = big_unet_loss()
    picture = draw_graph(loss, models)
    assert len(picture.text.splitlines()) < 100 and "full=True" in picture.note
    assert int(picture.note.split()[0]) > FULL_DRAWING_MAX_NODES
    seconds = min(_timed(lambda: draw_graph(loss, models).svg()) for _ in range(2))
    assert seconds < 1.5, f"{seconds:.2f} s"
    assert "full=True" in picture._repr_mimebundle_()[0]["image/svg+xml"]


def _timed(work) -> float:
    start = time.perf_counter()
    assert work() is not None
    return time.perf_counter() - start
