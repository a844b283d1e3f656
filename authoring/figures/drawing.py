"""Drawing primitives shared by the figures, and deterministic rendering to PNG and SVG.

A figure is a matplotlib ``Figure`` (no pyplot: no global state) whose one axes spans it, in inches: ``(0, 0)`` is
the bottom left corner. Fonts are DejaVu Sans and DejaVu Sans Mono, which ship with matplotlib, so every machine
draws the same glyphs; the PNG carries no metadata and the SVG no date, so the bytes depend only on the drawing and
the matplotlib version.

A figure is drawn in English, or in another language (``render(draw, words)``): every text the drawing writes is
looked up in ``words`` (English -> translation; a text not in it, such as code, stays as it is), and a font for
Chinese (``cjk_font``) backs up the two DejaVu fonts for the characters they lack.
"""
from __future__ import annotations

import contextlib
import contextvars
import io
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from authoring.figures.palette import INK, WHITE, Style, grey_level
from helpers.chinese_font import chinese_font

DPI = 150
FONT_SIZE = 11  # points; nothing is written smaller than SMALL
SMALL = 10
MONO = "DejaVu Sans Mono"
RC = {
    "font.family": "DejaVu Sans",
    "font.size": FONT_SIZE,
    "hatch.linewidth": 0.8,
    "svg.fonttype": "path",
    "svg.hashsalt": "two-models-two-losses",
    "path.simplify": False,
}


_WORDS: contextvars.ContextVar[Optional[Dict[str, str]]] = contextvars.ContextVar("words", default=None)
_WRITTEN: contextvars.ContextVar[Optional[List[str]]] = contextvars.ContextVar("written", default=None)


class NoFontForChinese(RuntimeError):
    """No font on this machine draws Chinese."""


def cjk_font() -> str:
    """The name of a font that draws Chinese, from the fonts matplotlib finds.

    Raises:
        NoFontForChinese: there is none (install fonts-wqy-microhei or fonts-noto-cjk).
    """
    name = chinese_font()
    if name is not None:
        return name
    raise NoFontForChinese("no font for Chinese: install one, e.g. apt-get install fonts-wqy-microhei")


class _WordsAxes(Axes):
    """Axes whose texts are written in the language ``render`` was given, in fonts that draw it."""

    def text(self, x, y, s, *args, **kwargs):  # type: ignore[no-untyped-def] # matplotlib's own signature
        written = _WRITTEN.get()
        if written is not None:
            written.append(str(s))
        words = _WORDS.get()
        if words:
            s = words.get(str(s), s)
            family = kwargs.pop("fontfamily", None) or kwargs.pop("family", None)
            if family is not None:
                kwargs["fontfamily"] = [family, cjk_font()]
        return super().text(x, y, s, *args, **kwargs)


def new_figure(width: float, height: float) -> Tuple[Figure, Axes]:
    """A blank white figure ``width`` x ``height`` inches, with an axes in inches and no frame.

    Call it, and draw, inside ``render``: text takes its font from the settings ``render`` holds.
    """
    figure = Figure(figsize=(width, height), dpi=DPI, facecolor=WHITE)
    FigureCanvasAgg(figure)
    axes = figure.add_axes((0, 0, 1, 1), axes_class=_WordsAxes)
    axes.set_xlim(0, width)
    axes.set_ylim(0, height)
    axes.set_axis_off()
    return figure, axes


def hatch_colour(style: Style) -> str:
    """Hatch lines that show on the fill: white on a dark fill, black on a light one."""
    return WHITE if grey_level(style.fill) < 0.45 else INK


def box(axes: Axes, centre: Tuple[float, float], size: Tuple[float, float], style: Style, text: str = "",
        font: str = "DejaVu Sans", size_pt: float = FONT_SIZE, bold: bool = False, width: float = 1.4) -> None:
    """A rounded box in ``style``, with ``text`` centred on a white label when the box is hatched."""
    (x, y), (w, h) = centre, size
    shape = dict(boxstyle="round,pad=0,rounding_size=0.06", mutation_aspect=1)
    axes.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, facecolor=style.fill, edgecolor="none", **shape))
    if style.hatch:
        axes.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, facecolor="none", hatch=style.hatch,
                                      edgecolor=hatch_colour(style), linewidth=0, **shape))
    border = INK if style.text == INK or style.fill != WHITE else style.text
    axes.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, facecolor="none", edgecolor=border,
                                  linewidth=width, linestyle=style.line, **shape))
    if text:
        label = dict(facecolor=WHITE, edgecolor="none", pad=1.5) if style.hatch else None
        axes.text(x, y, text, ha="center", va="center", color=style.text if not style.hatch else INK,
                  fontfamily=font, fontsize=size_pt, fontweight="bold" if bold else "normal", bbox=label,
                  linespacing=1.15)


def arrow(axes: Axes, start: Tuple[float, float], end: Tuple[float, float], colour: str = INK,
          line: str = "solid", width: float = 1.4, bend: float = 0.0) -> None:
    """An arrow from ``start`` to ``end``; ``bend`` curves it (an arc's rad, as in matplotlib)."""
    axes.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=13, color=colour,
                                   linewidth=width, linestyle=line, shrinkA=0, shrinkB=0,
                                   connectionstyle=f"arc3,rad={bend}"))


def legend(axes: Axes, left: float, y: float, styles: Dict[str, Style], swatch: Tuple[float, float] = (0.42, 0.26),
           gap: float = 0.22, border: float = 1.0) -> float:
    """One row of swatches with their labels from ``left`` at height ``y``; returns where the row ends."""
    x = left
    for style in styles.values():
        box(axes, (x + swatch[0] / 2, y), swatch, style, width=border)
        text = axes.text(x + swatch[0] + 0.08, y, style.label, ha="left", va="center", fontsize=SMALL, color=INK)
        x += swatch[0] + 0.08 + text_width(axes, text) + gap
    return x


def text_width(axes: Axes, text: matplotlib.text.Text) -> float:
    """How wide ``text`` is drawn, in the axes' inches."""
    figure = axes.figure
    bounds = text.get_window_extent(renderer=figure.canvas.get_renderer())
    return bounds.width / figure.dpi


@contextlib.contextmanager
def _drawing(words: Optional[Dict[str, str]] = None, texts: Optional[List[str]] = None) -> Iterator[None]:
    """The settings a figure is drawn in: English, or ``words`` with a font for Chinese behind DejaVu; every text
    written is appended to ``texts`` when given."""
    settings = dict(RC, **({"font.family": [RC["font.family"], cjk_font()]} if words else {}))
    tokens = _WORDS.set(words), _WRITTEN.set(texts)
    try:
        with matplotlib.rc_context(settings):
            yield
    finally:
        _WORDS.reset(tokens[0])
        _WRITTEN.reset(tokens[1])


def written(draw: Callable[[], Figure]) -> List[str]:
    """Every text ``draw()`` writes, in English, in the order it writes them."""
    texts: List[str] = []
    with _drawing(texts=texts):
        draw()
    return texts


def render(draw: Callable[[], Figure], words: Optional[Dict[str, str]] = None) -> Dict[str, bytes]:
    """The figure ``draw()`` makes, as PNG and SVG bytes, with no metadata that changes between runs; with
    ``words``, its texts translated (see the module's docstring)."""
    with _drawing(words):
        return _saved(draw())


def missing_glyphs(draw: Callable[[], Figure], words: Optional[Dict[str, str]] = None) -> List[str]:
    """Each text ``draw()`` writes (with ``words``) that has a character none of its fonts can draw, with those
    characters: what would show as a box."""
    from matplotlib.font_manager import FontProperties, findfont, get_font

    found = []
    with _drawing(words):
        for text in draw().findobj(matplotlib.text.Text):
            families = text.get_fontfamily()
            fonts = [get_font(findfont(FontProperties(family=family), fallback_to_default=False))
                     for family in (families if isinstance(families, list) else [families])]
            lacking = sorted({character for character in text.get_text() if not character.isspace()
                              and not any(font.get_char_index(ord(character)) for font in fonts)})
            if lacking:
                found.append(f"{text.get_text()!r}: no glyph for {''.join(lacking)}")
    return found


def _saved(figure: Figure) -> Dict[str, bytes]:
    """``figure`` as PNG and SVG bytes (inside the settings it was drawn with)."""
    images = {}
    for kind, metadata in (("png", {"Software": None}), ("svg", {"Date": None})):
        buffer = io.BytesIO()
        figure.savefig(buffer, format=kind, dpi=DPI, metadata=metadata, facecolor=WHITE)
        images[kind] = buffer.getvalue()
    return images
