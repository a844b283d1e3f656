"""Draw every figure into the helpers package, or check that the shipped images are current: the English ones in
``images/``, each translated set in ``images/<language>/`` (its words from ``i18n/<language>/figures.po``)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

import matplotlib

from authoring.figures.compare import png_difference, same_minor_release, svg_difference, svg_drawn_by
from authoring.figures.drawing import NoFontForChinese, cjk_font, render
from authoring.figures.drawings import DRAWINGS
from authoring.translation import figure_words
from helpers.course.figures import FIGURES, IMAGES

ROOT = Path(__file__).resolve().parents[2]  # the repository: where i18n/ is

KINDS = ("png", "svg")


def translations() -> Dict[str, Dict[str, str]]:
    """language -> its figure words (English -> translation), for each language with a figures catalog."""
    words = figure_words.words(ROOT)
    return {figure_words.LANGUAGE: words} if words else {}


def drawable_translations() -> Dict[str, Dict[str, str]]:
    """``translations()`` that this machine has a font for (none for Chinese without a font for Chinese)."""
    try:
        cjk_font()
    except NoFontForChinese:
        return {}
    return translations()


def draw_all(words: Optional[Dict[str, str]] = None) -> Dict[str, Dict[str, bytes]]:
    """name -> {"png": bytes, "svg": bytes} for every figure, in English or with ``words``."""
    assert set(DRAWINGS) == set(FIGURES), "every figure needs a drawing and an alt text in helpers.course.figures"
    return {name: render(draw, words) for name, draw in DRAWINGS.items()}


def write(folder: Path = IMAGES) -> List[Path]:
    """Draw every figure into ``folder``, and each translated set into its language's folder below it; returns the
    files written."""
    written = _write(folder, draw_all())
    for language, words in translations().items():
        written += _write(folder / language, draw_all(words))
    return written


def _write(folder: Path, drawn: Dict[str, Dict[str, bytes]]) -> List[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, images in drawn.items():
        for kind in KINDS:
            path = folder / f"{name}.{kind}"
            path.write_bytes(images[kind])
            written.append(path)
    return written


def problems(folder: Path = IMAGES) -> List[str]:
    """What is missing or stale in ``folder`` or a language's folder below it, one line each; empty when every image
    is current."""
    found = _problems(folder, draw_all())
    for language, words in drawable_translations().items():
        found += [f"{language}/{line}" for line in _problems(folder / language, draw_all(words))]
    return found


def _problems(folder: Path, drawn: Dict[str, Dict[str, bytes]]) -> List[str]:
    found = []
    for name, images in drawn.items():
        svg = folder / f"{name}.svg"
        comparable = not svg.exists() or same_minor_release(svg_drawn_by(svg.read_bytes()))
        for kind, differs in (("png", png_difference), ("svg", svg_difference)):
            path = folder / f"{name}.{kind}"
            if not path.exists():
                found.append(f"{path.name}: it is missing")
                continue
            difference = differs(path.read_bytes(), images[kind]) if comparable else None
            if difference:
                found.append(f"{path.name}: {difference}")
    return found


def notes(folder: Path = IMAGES) -> List[str]:
    """What the check could not compare exactly: images drawn by another matplotlib version, and translated ones
    this machine has no font to draw."""
    found = [f"{language}: not compared: no font for Chinese here (apt-get install fonts-wqy-microhei)"
             for language in translations() if language not in drawable_translations()]
    for name in DRAWINGS:
        path = folder / f"{name}.svg"
        version = svg_drawn_by(path.read_bytes()) if path.exists() else None
        if version and not same_minor_release(version):
            found.append(f"{name}: drawn with matplotlib {version}, this is {matplotlib.__version__}, which lays text "
                         "out differently; not compared (redraw with the release that drew them)")
        elif version and version != matplotlib.__version__:
            found.append(f"{path.name}: drawn with matplotlib {version}, this is {matplotlib.__version__}; "
                         "compared through its PNG")
    return found
