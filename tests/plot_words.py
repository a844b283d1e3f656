"""What a plot's words must be in Chinese: no English prose left, and a glyph for every character in its fonts."""
from __future__ import annotations

import re
from typing import List, Optional

from helpers.chinese_font import chinese_font

ENGLISH_PROSE = re.compile(r"[A-Za-z]{2,} [A-Za-z]{2,}")  # two English words in a row ("copied fix"); code such as
#                                                           "autograd.grad" or "inputs= + retain_graph" may stay


def words_left_in_english(words: List[str]) -> List[str]:
    return [word for word in words if ENGLISH_PROSE.search(word)]


def words_without_glyphs(words: List[str], font: Optional[str]) -> List[str]:
    """Each word with a character neither ``font`` nor matplotlib's default font can draw (it would be a box)."""
    from matplotlib.font_manager import FontProperties, findfont, get_font

    chinese_font()  # this process's matplotlib may not know the font yet: it adds the system's fonts for Chinese
    fonts = [get_font(findfont(FontProperties(family=[family]), fallback_to_default=False))
             for family in ([font] if font else []) + ["DejaVu Sans"]]
    return [word for word in words if any(not character.isspace() and not any(
        one.get_char_index(ord(character)) for one in fonts) for character in word)]


def texts_without_glyphs(figure) -> List[str]:  # type: ignore[no-untyped-def] # a matplotlib Figure
    """Each text ``figure`` draws (it is drawn once) with a character none of its own fonts has: a box."""
    from matplotlib.font_manager import FontProperties, findfont, get_font
    from matplotlib.text import Text

    chinese_font()  # this process's matplotlib may not know the font yet
    figure.canvas.draw()
    lacking = []
    for text in figure.findobj(Text):
        if not text.get_visible() or not text.get_text().strip():
            continue
        fonts = [get_font(findfont(FontProperties(family=[family]))) for family in text.get_fontfamily()]
        if any(not character.isspace() and not any(font.get_char_index(ord(character)) for font in fonts)
               for character in text.get_text()):
            lacking.append(text.get_text())
    return lacking
