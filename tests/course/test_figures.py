"""The conceptual figures: shipped and current, readable in grey, colour-blind safe, and true to PyTorch.

What each figure states lives in ``authoring/figures/facts.py``; these tests run the same computations with
PyTorch and compare, so a figure cannot drift from what autograd does.
"""
from __future__ import annotations

import base64
import io
import itertools
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import matplotlib
import nbformat
import numpy
import pytest
import torch
import torch.nn.functional as F
from matplotlib.text import Text
from PIL import Image, ImageDraw
from torch import nn

from authoring.figures import build, facts
from authoring.translation import figure_words
from authoring.figures.compare import png_difference
from authoring.figures.drawing import RC
from authoring.figures.palette import MIN_GREY_STEP, OKABE_ITO, STYLES, WHITE, grey_level
from helpers.course import figures
from helpers.course.lesson04_whose_gradient.recipes import RECIPES
from helpers.course.models import make_inputs, make_two_models, two_losses
from helpers.tools import named_parameters, saved_tensors_of, traversal
from helpers.tools.errors import classify
from helpers.tools.saved import graph_nodes
from tests.paths import ROOT

# ---------------------------------------------------------------- shipped, current, described


def test_the_shipped_images_are_what_the_code_draws() -> None:
    assert build.problems() == [], "run: python -m authoring.figures"


def test_the_chinese_figures_write_every_text_of_the_catalog_with_glyphs_for_each_character() -> None:
    """The Chinese drawings exist for every figure, write the catalog's Chinese, and every character of every text
    they write has a glyph in its fonts (the Chinese ones from a font for Chinese): no boxes."""
    from authoring.figures import drawing

    if not build.drawable_translations():
        assert not os.environ.get("CI"), "CI must have a font for Chinese (fonts-wqy-microhei)"
        pytest.skip("no font for Chinese here: apt-get install fonts-wqy-microhei")
    words = build.translations()[figure_words.LANGUAGE]
    chinese = {text for text in words.values() if re.search(r"[\u4e00-\u9fff]", text)}
    assert len(chinese) >= 20
    for name, draw in build.DRAWINGS.items():
        assert figures.figure_path(name, "png", figure_words.LANGUAGE).exists(), name
        assert drawing.missing_glyphs(draw, words) == [], name
    written = set(itertools.chain.from_iterable(drawing.written(draw) for draw in build.DRAWINGS.values()))
    assert chinese - {words.get(text, "") for text in written} == set(), "a translation no figure writes"


def test_the_glyph_check_sees_boxes(monkeypatch: pytest.MonkeyPatch) -> None:
    from authoring.figures import drawing

    monkeypatch.setattr(drawing, "cjk_font", lambda: "DejaVu Sans")  # no font for Chinese
    found = drawing.missing_glyphs(build.DRAWINGS["step_timeline"], {"time": "时间"})
    assert found == ["'时间': no glyph for 时间"]


def test_images_from_another_matplotlib_release_are_reported_not_compared(tmp_path: Path) -> None:
    build.write(tmp_path)
    svg = tmp_path / "who_trains_whom.svg"
    svg.write_bytes(re.sub(rb"Matplotlib v[^,<]+", b"Matplotlib v2.0.0", svg.read_bytes()))
    (tmp_path / "who_trains_whom.png").write_bytes(figures.figure_path("step_timeline").read_bytes())
    assert build.problems(tmp_path) == []
    assert any(note.startswith("who_trains_whom: drawn with matplotlib 2.0.0") for note in build.notes(tmp_path))


def test_the_check_reports_a_changed_or_missing_image(tmp_path: Path) -> None:
    build.write(tmp_path)  # drawn here, by this matplotlib: comparable on any release
    changed = Image.open(tmp_path / "who_trains_whom.png").convert("RGB")
    ImageDraw.Draw(changed).rectangle((100, 100, 300, 200), fill=OKABE_ITO["vermillion"])
    changed.save(tmp_path / "who_trains_whom.png")
    (tmp_path / "step_timeline.svg").unlink()
    found = build.problems(tmp_path)
    assert [line.split(":")[0] for line in found] == ["step_timeline.svg", "who_trains_whom.png"], found


def test_the_check_allows_antialiasing_shades_but_not_a_moved_label() -> None:
    shipped = figures.figure_path("step_timeline").read_bytes()
    image = Image.open(io.BytesIO(shipped)).convert("RGB")
    shaded = image.point(lambda value: max(value - 20, 0))  # every pixel a shade darker
    moved = image.transform(image.size, Image.AFFINE, (1, 0, 4, 0, 1, 0), fillcolor="white")  # 4 px left
    assert png_difference(shipped, _png(shaded)) is None
    assert "pixels differ" in png_difference(shipped, _png(moved))


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_the_command_line_check_passes_on_the_shipped_images() -> None:
    result = subprocess.run([sys.executable, "-m", "authoring.figures", "--check"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", list(figures.FIGURES))
def test_each_figure_is_shipped_as_png_and_svg_with_one_line_alt_text(name: str) -> None:
    png, svg = figures.figure_path(name), figures.figure_path(name, "svg")
    assert png.read_bytes().startswith(b"\x89PNG") and svg.read_bytes().startswith(b"<?xml")
    assert Image.open(png).size[0] == 1200
    alt = figures.FIGURES[name]
    assert 80 <= len(alt) <= 400 and "\n" not in alt and not set("[]") & set(alt), alt


def test_every_figure_has_a_drawing_and_every_drawing_a_name() -> None:
    assert set(build.DRAWINGS) == set(figures.FIGURES) == set(STYLES)


# ---------------------------------------------------------------- readable: grey, colour-blind safe, font size


@pytest.mark.parametrize("name", list(STYLES))
def test_the_categories_of_a_figure_are_apart_in_grey_and_by_pattern(name: str) -> None:
    styles = list(STYLES[name].values())
    for one, other in itertools.combinations(styles, 2):
        step = abs(grey_level(one.fill) - grey_level(other.fill))
        assert step >= MIN_GREY_STEP, f"{name}: {one.label} and {other.label} are {step:.0%} apart in grey"
        assert (one.hatch, one.line, one.text) != (other.hatch, other.line, other.text), (one.label, other.label)


def pixels(name: str, mode: str = "RGB") -> numpy.ndarray:
    """The PNG of figure ``name``, one row per pixel (RGB) or one value per pixel (L: grey as PIL converts)."""
    image = numpy.asarray(Image.open(figures.figure_path(name)).convert(mode))
    return image.reshape(-1, 3) if mode == "RGB" else image.reshape(-1)


def rgb(colour: str) -> Tuple[int, int, int]:
    """"#RRGGBB" as integers."""
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


@pytest.mark.parametrize("name", list(STYLES))
def test_every_fill_is_an_okabe_ito_colour_and_shows_in_the_picture_as_its_grey(name: str) -> None:
    colours, greys = pixels(name), pixels(name, "L")
    for style in STYLES[name].values():
        assert style.fill in set(OKABE_ITO.values()) | {WHITE}, style
        where = numpy.flatnonzero((colours == rgb(style.fill)).all(axis=1))
        assert len(where) > 500, f"{name}: the fill of {style.label} is not in the picture"
        assert numpy.abs(greys[where] / 255 - grey_level(style.fill)).max() < 0.01


@pytest.mark.parametrize("name", list(STYLES))
def test_every_coloured_area_of_the_picture_is_a_palette_colour(name: str) -> None:
    """Colours covering more than 0.5% of the picture are palette colours or neutral greys (text antialiasing)."""
    colours, counts = numpy.unique(pixels(name), axis=0, return_counts=True)
    large = colours[counts > 0.005 * counts.sum()].astype(int)
    coloured = {tuple(colour) for colour in large if colour.max() - colour.min() > 24}
    allowed = {rgb(colour) for colour in OKABE_ITO.values()}
    assert coloured <= allowed, f"{name}: colours outside the palette: {sorted(coloured - allowed)}"


@pytest.mark.parametrize("name", list(STYLES))
def test_no_text_is_smaller_than_10_points_at_8_inches_wide(name: str) -> None:
    with matplotlib.rc_context(RC):
        figure = build.DRAWINGS[name]()
    texts = [text for text in figure.findobj(Text) if text.get_text().strip()]
    assert texts and min(text.get_fontsize() for text in texts) >= 10
    assert figure.get_figwidth() == 8.0


# ---------------------------------------------------------------- true to PyTorch: the step timeline


def run_timeline(retain_graph: bool) -> Tuple[List[int], List[str]]:
    """Notebook 03's step, M2 first, with Adam: W's version and its saved copy's state after each stage."""
    m1, m2 = make_two_models(seed=0)
    x1, x2 = make_inputs(seed=0)
    opt2 = torch.optim.Adam(m2.parameters(), lr=1e-3)
    params = named_parameters(M1=m1, M2=m2)
    weight = m2[2].weight
    versions: List[int] = []
    states: List[str] = []

    def record(node) -> None:
        versions.append(weight._version)
        (saved,) = [s for s in saved_tensors_of(node, params) if s.attribute == "mat2"]
        states.append(saved.state_label)

    o1, o2 = m1(x1), m2(x2)
    l1, l2 = two_losses(o1, o2)
    record(o2.grad_fn)
    l2.backward(retain_graph=retain_graph)
    record(o2.grad_fn)
    opt2.step()
    record(o2.grad_fn)
    with pytest.raises(RuntimeError) as caught:
        l1.backward()
    versions.append(weight._version)
    states.append(classify(caught.value).name)
    if retain_graph:
        assert "is at version 2; expected version 1" in str(caught.value)
    return versions, states


@pytest.mark.parametrize("lane", list(facts.LANES))
def test_the_step_timeline_is_what_pytorch_does(lane: str) -> None:
    versions, states = run_timeline(retain_graph="retain_graph=True" in lane)
    assert tuple(versions) == facts.W_VERSIONS
    assert tuple(states) == facts.LANES[lane]


def test_the_step_timelines_error_words_are_pytorchs() -> None:
    for name, (_, words) in facts.ERROR_LINES.items():
        flat = " ".join(words.split())
        assert flat in {"backward-twice": "Trying to backward through the graph a second time",
                        "inplace-version": "is at version 2; expected version 1 instead"}[name]


# ---------------------------------------------------------------- true to PyTorch: what a backward visits


def chain_graph() -> Tuple[Dict[str, object], torch.Tensor, List[nn.Parameter]]:
    """The figure's chain, built: its nodes by the figure's names, L1, and M1's parameters."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        m1, m2 = nn.Linear(4, 3), nn.Linear(3, 2)
    x, target, mask = torch.randn(5, 4), torch.randn(5, 2), (torch.rand(5, 2) > 0.5).float()
    hidden = m1(x)
    error = F.mse_loss(m2(hidden), target, reduction="none")
    l1, l2 = error.mean(), (error * mask).mean()
    nodes: Dict[str, object] = {"L1": l1.grad_fn, "L2": l2.grad_fn, "mse": error.grad_fn}
    nodes["mask"] = l2.grad_fn.next_functions[0][0]
    for name, model, addmm in (("M2", m2, error.grad_fn.next_functions[0][0]), ("M1", m1, hidden.grad_fn)):
        nodes[f"{name}.addmm"] = addmm
        nodes[f"{name}.t"] = next(c for c in traversal.children(addmm) if type(c).__name__ == "TBackward0")
    for node in graph_nodes([l1, l2]):
        for name, model in (("M1", m1), ("M2", m2)):
            for kind in ("weight", "bias"):
                if getattr(node, "variable", None) is getattr(model, kind):
                    nodes[f"{name}.{kind}"] = node
    assert len(graph_nodes([l1, l2])) == len(nodes) == len(facts.GRAPH)
    return nodes, l1, list(m1.parameters())


def test_backward_visits_draws_the_graph_pytorch_builds() -> None:
    nodes, _, _ = chain_graph()
    names = {id(node): key for key, node in nodes.items()}
    for key, node in nodes.items():
        assert node.name().endswith(facts.GRAPH[key].name), (key, node.name())
    edges = {(key, names[id(child)]) for key, node in nodes.items() for child in traversal.children(node)}
    assert edges == set(facts.EDGES)


def test_backward_visits_shows_the_nodes_a_restricted_backward_runs_and_frees() -> None:
    nodes, l1, m1_parameters = chain_graph()
    ran: List[str] = []
    for key, node in nodes.items():
        if not key.endswith((".weight", ".bias")):
            node.register_prehook(lambda grad, key=key: ran.append(key))
    rule = {key for key, node in nodes.items()
            if any(node is n for n in traversal.nodes_backward_runs([l1], m1_parameters))}
    l1.backward(inputs=m1_parameters)
    got_gradient = {key for key, node in nodes.items() if getattr(node, "variable", None) is not None
                    and node.variable.grad is not None}
    assert set(ran) | got_gradient == facts.VISITED == rule
    assert got_gradient == set(facts.REQUESTED)
    for key, node in nodes.items():
        states = {saved.state.value for saved in saved_tensors_of(node)}
        assert states <= ({"freed"} if key in facts.VISITED else {"alive"}), (key, states)
    assert {key for key, node in nodes.items() if saved_tensors_of(node) and key not in facts.VISITED} == {"mask"}


# ---------------------------------------------------------------- true to PyTorch: who trains whom


def received(model: nn.Module, m1: nn.Module, m2: nn.Module, x1: torch.Tensor, x2: torch.Tensor) -> str:
    """Which loss's gradient ``model``'s ``.grad`` holds: "L1", "L2" or "L1+L2" (references on a fresh forward)."""
    for which in ("L1", "L2", "L1+L2"):
        l1, l2 = two_losses(m1(x1), m2(x2))
        loss = {"L1": l1, "L2": l2, "L1+L2": l1 + l2}[which]
        reference = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
        if all(g is not None and torch.allclose(p.grad, g, rtol=1e-4, atol=1e-6)
               for p, g in zip(model.parameters(), reference)):
            return which
    return "something else"


def test_who_trains_whom_has_a_row_for_every_recipe_of_notebook_04() -> None:
    assert [recipe.key for recipe in facts.RECIPES] == list(RECIPES)


@pytest.mark.parametrize("recipe", facts.RECIPES, ids=lambda recipe: recipe.key)
def test_who_trains_whom_is_what_each_recipe_gives(recipe: facts.Recipe) -> None:
    m1, m2 = make_two_models(seed=0)
    x1, x2 = make_inputs(seed=0)
    RECIPES[recipe.key](m1, m2, x1, x2, two_losses)
    assert (received(m1, m1, m2, x1, x2), received(m2, m1, m2, x1, x2)) == (recipe.m1, recipe.m2)


# ---------------------------------------------------------------- the package's API, as a notebook uses it


def test_show_figure_displays_the_png_with_its_alt_text() -> None:
    from IPython.core.formatters import format_display_data

    data, metadata = format_display_data(figures.show_figure("backward_visits"))
    assert data["image/png"] == figures.figure_path("backward_visits").read_bytes()
    assert metadata["image/png"] == {"alt": figures.FIGURES["backward_visits"], "width": figures.DISPLAY_WIDTH}


def test_an_unknown_figure_is_named_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="step_timeline"):
        figures.show_figure("timeline")
    with pytest.raises(ValueError, match="png"):
        figures.figure_path("step_timeline", "jpg")


def test_a_markdown_cell_attachment_round_trips_through_a_saved_notebook(tmp_path: Path) -> None:
    cell = nbformat.v4.new_markdown_cell(f"Before the step:\n\n{figures.markdown_image('step_timeline')}")
    cell["attachments"] = figures.attachments("step_timeline", "who_trains_whom")
    notebook = nbformat.v4.new_notebook(cells=[cell])
    nbformat.validate(notebook)
    nbformat.write(notebook, str(tmp_path / "figure.ipynb"))
    (read,) = nbformat.read(str(tmp_path / "figure.ipynb"), as_version=4).cells
    assert "](attachment:step_timeline.png)" in read.source
    for name in ("step_timeline", "who_trains_whom"):
        bundle = read.attachments[figures.attachment_name(name)]
        assert bundle == figures.attachment(name)
        assert base64.b64decode(bundle["image/png"]) == figures.figure_path(name).read_bytes()


def test_importing_the_figures_loads_neither_matplotlib_nor_ipython() -> None:
    probe = "import sys, helpers.course.figures; print(sorted({'matplotlib', 'IPython', 'PIL'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr
