"""What a plot's words must be in Chinese: no English prose left, and a glyph for every character in its fonts."""
from __future__ import annotations

import re
from typing import List, Optional

from helpers.course.chinese_font import chinese_font

ENGLISH_PROSE = re.compile(r"[A-Za-z]{2,} [A-Za-z]{2,}")  # two English words in a row ("copied fix"); code such as
#                                                           "autograd.grad" or "inputs= + retain_graph" may stay


def words_left_in_english(words: List[str]) -> List[str]:
    return [word for word in words if ENGLISH_PROSE.search(word)]


def words_without_glyphs(words: List[str], font: Optional[str]) -> List[str]:
    """Each word with a character neither ``font`` nor matplotlib's default font can draw (it would be a box)."""
    from matplotlib.font_manager import FontProperties, findfont, get_font

    chinese_font()  # this process's matplotlib may not know the font yet: it adds the system's fonts for Chinese
    fonts = [get_font(findfont(FontProperties(family=family), fallback_to_default=False))
             for family in ([font] if font else []) + ["DejaVu Sans"]]
    return [word for word in words if any(not character.isspace() and not any(
        one.get_char_index(ord(character)) for one in fonts) for character in word)]
