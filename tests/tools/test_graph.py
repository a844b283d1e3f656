"""Graph drawing never crashes: not without distutils (Python 3.12+), not without graphviz's dot."""
import importlib.util
import sys

import pytest

from helpers.course.models import make_inputs, make_two_models, two_losses
from helpers.tools import graph
from helpers.tools.graph import draw_graph, graph_as_text, named_parameters


@pytest.fixture
def losses_and_params():
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    return two_losses(m1(x1), m2(x2)), named_parameters(M1=m1, M2=m2)


@pytest.mark.skipif(not graph.dot_available(), reason="graphviz dot is not installed")
def test_draws_svg_with_parameter_names(losses_and_params):
    losses, params = losses_and_params
    bundle, metadata = draw_graph(losses, params)._repr_mimebundle_()
    assert "image/svg+xml" in bundle and "M1.2.weight" in bundle["image/svg+xml"]
    assert metadata == {"image/svg+xml": {"unconfined": True}}


def test_text_form_names_every_parameter_once(losses_and_params):
    losses, params = losses_and_params
    text = graph_as_text(losses, params)
    for name in params:
        assert text.count(f"{name} ") == 1, name
    assert text.startswith("[1] AddBackward0  (output 1)") and "[2] AddBackward0  (output 2)" in text


def test_without_dot_shows_text_and_how_to_install(losses_and_params, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no dot anywhere
    assert not graph.dot_available()
    picture = draw_graph(*losses_and_params)
    bundle = picture._repr_mimebundle_()
    assert "image/svg+xml" not in bundle
    assert "M2.0.weight" in bundle["text/html"] and "apt-get install graphviz" in bundle["text/html"]
    assert "brew install graphviz" in str(picture)
    assert picture.save_png(str(tmp_path / "g.png")) is False


def test_works_when_distutils_cannot_be_imported(losses_and_params, monkeypatch):
    for name in [n for n in sys.modules if n == "torchviz" or n.startswith("torchviz.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "distutils", None)  # `import distutils` now raises ImportError
    with pytest.raises(ImportError):
        import distutils  # noqa: F401
    if importlib.util.find_spec("torchviz") is None:
        pytest.skip("torchviz is not installed")
    assert graph.import_torchviz() is not None, "torchviz (for the lessons that show it) imports without distutils"
    assert sys.modules["distutils"] is None, "the stand-in must not outlive the import"
    picture = draw_graph(*losses_and_params)  # the drawing itself does not need torchviz
    assert picture.digraph is not None, picture.problem


def test_draws_a_graph_whose_buffers_were_freed(losses_and_params):
    (l1, l2), params = losses_and_params
    (l1 + l2).backward()
    picture = draw_graph((l1, l2), params)
    assert "AccumulateGrad" in picture.text
    assert picture.problem is None or "graphviz" in picture.problem


def test_a_tensor_without_graph_is_described():
    import torch

    assert "no graph" in graph_as_text(torch.ones(2))
