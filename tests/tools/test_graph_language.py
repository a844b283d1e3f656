"""The graph pictures draw their words in the learner's language where graphviz can draw it here; else English, with
a one-line note printed (never boxes for missing characters). The module view's text stays English.

What is looked at is the rendered SVG: each text graphviz laid out, and the box it laid out around it.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from helpers.language import LANGUAGE_VARIABLE, translated
from helpers.tools import draw_graph, draw_module_graph, draw_saved_graph, graph, picture_language
from helpers.tools.graph import GraphPicture
from helpers.tools.picture_language import (
    CANNOT_TELL,
    NO_ANSWER,
    NO_FC_LIST,
    NO_FONT,
    NO_PANGO,
    NO_PLUGIN_LIST,
    catalog_characters,
    fontconfig_draws,
    lays_out_with_pango,
)
from tests.graph_words import CJK, chinese_picture_problems, require_chinese_pictures, words_of
from tests.tools.real_models import diffusion_losses, make_text_unet

needs_dot = pytest.mark.skipif(not graph.dot_available(), reason="graphviz dot is not installed")


def two_models_one_stale() -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor], Dict[str, nn.Module]]:
    """Two models, two losses; L1's backward freed M1's buffers, then M2's last weight changed in place (stale)."""
    torch.manual_seed(0)
    first = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    second = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1))
    out1 = first(torch.randn(64, 4))
    out2 = second(out1)
    loss1, loss2 = out1.pow(2).mean(), out2.pow(2).mean()
    loss1.backward(inputs=list(first.parameters()))
    with torch.no_grad():
        second[2].weight.add_(1.0)
    return {"L1": loss1, "L2": loss2}, {"M1": out1, "M2": out2}, {"M1": first, "M2": second}


def checkpointed() -> Tuple[torch.Tensor, Dict[str, nn.Module]]:
    """A block checkpointed both ways, and a plain tensor leaf (an input box in the module view)."""
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    inputs = torch.randn(3, 4, requires_grad=True)
    return (checkpoint(block, inputs, use_reentrant=False).sum() + checkpoint(block, inputs, use_reentrant=True).sum()
            + (inputs * 2).sum()), {"block": block}


def pictures() -> List[Tuple[str, GraphPicture]]:
    """Every kind of picture: saved tensors in every state but unseen, a checkpoint, the module view (with its
    note, saved counts and a module called twice), one module's inside, and a real text encoder -> UNet."""
    losses, outputs, models = two_models_one_stale()
    region_loss, block = checkpointed()
    layers = nn.Sequential(*[nn.Linear(4, 4) for _ in range(3)])
    twice = layers(layers(torch.randn(2, 4))).sum()
    tenc, unet, tokens, images, noise = make_text_unet()
    text_loss, unet_loss = diffusion_losses(tenc, unet, tokens, images, noise)
    diffusion = {"text_loss": text_loss, "unet_loss": unet_loss}
    return [
        ("saved", draw_saved_graph(losses, outputs, models)),
        ("region", draw_graph(region_loss, block)),
        ("saved region", draw_saved_graph(region_loss, params=block)),
        ("module view", draw_module_graph(region_loss + twice, {"block": block, "layers": layers})),
        ("inside", draw_module_graph(twice, {"layers": layers}, inside="layers.0")),
        ("no such module", draw_module_graph(twice, {"layers": layers}, inside="layers.9")),
        ("saved module view", draw_saved_graph(losses, params=models, full=False)),
        ("real, every node", draw_graph(diffusion, {"tenc": tenc, "unet": unet}, full=True)),
        ("real, module view", draw_saved_graph(diffusion, params={"tenc": tenc, "unet": unet}, full=False)),
    ]


@pytest.fixture
def chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chinese chosen, on a machine where graphviz can draw it (CI installs a font; elsewhere: skipped)."""
    require_chinese_pictures()
    monkeypatch.setenv(LANGUAGE_VARIABLE, "zh_CN")


@needs_dot
def test_chinese_pictures_draw_chinese_words_with_glyphs_in_boxes_that_fit(chinese: None,
                                                                          capsys: pytest.CaptureFixture) -> None:
    for name, picture in pictures():
        svg = picture.svg()
        assert svg is not None, f"{name}: {picture.problem}"
        if name != "real, every node":  # every node's own label is code (the node's class, a parameter's name)
            assert any(CJK.search(word) for word in words_of(svg)), f"{name}: no Chinese word"
        assert not chinese_picture_problems(svg), f"{name}: {chinese_picture_problems(svg)}"
    assert capsys.readouterr().out == "", "a note printed, though the pictures are drawn in Chinese"


@needs_dot
def test_the_legend_and_states_say_what_the_english_says(chinese: None) -> None:
    losses, outputs, models = two_models_one_stale()
    texts = set(words_of(draw_saved_graph(losses, outputs, models).svg() or ""))
    for message in ("legend", "only in {loss}", "saved: stale vM->vN", "saved: freed", "parameter"):
        assert translated(message, loss="L1") in texts, message
    assert translated("stale v{saved}->v{now}", saved=1, now=2) in texts  # M2.2.weight, saved by the last layer
    assert translated("freed") in texts  # L1's backward freed M1's buffers


def test_the_module_views_text_stays_english_in_chinese(chinese: None) -> None:
    """Notebook 06's check reads these lines."""
    layers = nn.Sequential(*[nn.Linear(4, 4) for _ in range(2)])
    text = draw_module_graph(layers(layers(torch.randn(2, 4))).sum(), {"layers": layers}).text
    assert "layers.0 (Linear), call 1 of 2, 2 node(s)" in text and not CJK.search(text)


@needs_dot
@pytest.mark.parametrize("missing", ["font", "fc-list", "an answer", "pango", "the plugin list"])
def test_where_graphviz_cannot_draw_chinese_the_words_stay_english_with_a_note(
        missing: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """No font for Chinese in fontconfig (a font matplotlib loaded from a file does not count), no way to ask
    fontconfig or no answer, a graphviz that lays text out without pango or whose plugins cannot be read: the
    English pictures, and one line printed per drawing saying why."""
    def sources(drawn: List[Tuple[str, GraphPicture]]) -> List[str]:  # without the node ids (``id()`` of objects)
        return [re.sub(r"\d{6,}", "ID", picture.digraph.source) for _, picture in drawn]

    english = sources(pictures())
    capsys.readouterr()
    monkeypatch.setenv(LANGUAGE_VARIABLE, "zh_CN")
    if missing == "font":
        monkeypatch.setattr(picture_language, "fontconfig_draws", lambda text: False)
        note = translated(NO_FONT)
    elif missing == "fc-list":
        real_which = picture_language.shutil.which
        monkeypatch.setattr(picture_language.shutil, "which",
                            lambda name: None if name == "fc-list" else real_which(name))
        note = translated(CANNOT_TELL, reason=translated(NO_FC_LIST))
    elif missing == "an answer":
        monkeypatch.setattr(picture_language, "fontconfig_draws", lambda text: None)
        monkeypatch.setattr(picture_language.shutil, "which", lambda name: f"/usr/bin/{name}")
        note = translated(CANNOT_TELL, reason=translated(NO_ANSWER))
    else:
        pango = False if missing == "pango" else None
        monkeypatch.setattr(picture_language, "lays_out_with_pango", lambda dot: pango)
        note = translated(CANNOT_TELL, reason=translated(NO_PANGO if missing == "pango" else NO_PLUGIN_LIST))
    drawn = pictures()
    assert sources(drawn) == english
    assert CJK.search(note) and capsys.readouterr().out.splitlines() == [note] * len(drawn)


def test_in_english_nothing_is_asked_or_printed(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    monkeypatch.delenv(LANGUAGE_VARIABLE, raising=False)
    monkeypatch.setattr(picture_language, "fontconfig_draws", lambda text: pytest.fail("fontconfig asked in English"))
    draw_saved_graph(*two_models_one_stale())
    assert capsys.readouterr().out == ""


def test_fontconfig_is_asked_for_every_character() -> None:
    if picture_language.shutil.which("fc-list") is None:
        pytest.skip("fontconfig's fc-list is not installed")
    assert fontconfig_draws("\U0010fffd") is False  # a private-use character: no font has it
    assert fontconfig_draws("abc") is True
    assert fontconfig_draws("a\U0010fffd") is False, "every character is asked for, not the first"


@needs_dot
def test_fontconfig_is_asked_for_every_chinese_character_of_the_catalog(chinese: None,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A font with a few of the characters is not enough: the pictures draw any of the catalog's."""
    characters = catalog_characters("zh_CN")
    assert len(characters) > 500 and all(character in characters for character in "图例保存的张量已释放过期")
    asked: List[str] = []
    monkeypatch.setattr(picture_language, "fontconfig_draws", lambda text: asked.append(text) or True)
    draw_saved_graph(*two_models_one_stale())
    assert asked == [characters]


def test_a_graphviz_whose_text_layout_is_not_pango_is_told_apart(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gd's plugin lays text out too (and draws Chinese as boxes): only pango's counts."""
    dot = picture_language.shutil.which("dot")
    if dot is None:
        pytest.skip("graphviz dot is not installed")
    said = subprocess.run([dot, "-v"], input=b"", capture_output=True, timeout=10).stderr.decode()
    folder = Path(said.split('libdir = "')[1].split('"')[0]) if 'libdir = "' in said else None
    wanted = ("libgvplugin_core", "libgvplugin_dot_layout", "libgvplugin_gd")
    libraries = [path for path in folder.iterdir() if path.name.startswith(wanted)] if folder else []
    if {name for name in wanted if any(path.name.startswith(name) for path in libraries)} != set(wanted):
        pytest.skip("this graphviz has no gd plugin to try")
    assert lays_out_with_pango(dot) is True
    for library in libraries:
        shutil.copy(library, tmp_path)
    monkeypatch.setenv("GVBINDIR", str(tmp_path))
    subprocess.run([dot, "-c"], check=True, timeout=30)
    lays_out_with_pango.cache_clear()
    try:
        assert lays_out_with_pango(dot) is False
    finally:
        lays_out_with_pango.cache_clear()


@needs_dot
def test_the_names_the_tools_give_are_translated_and_the_learners_stay(chinese: None) -> None:
    torch.manual_seed(0)
    weight = torch.randn(3, requires_grad=True)
    given = words_of(draw_graph([weight.sum(), weight.pow(2).sum()], {"weight": weight}).svg() or "")
    assert translated("output {number}", number=1) in given and "output 1" not in given
    own = words_of(draw_saved_graph({"output": weight.sum()}, {"output 2": weight * 2}).svg() or "")
    assert "output" in own and "output 2" in own and translated("output") not in own
