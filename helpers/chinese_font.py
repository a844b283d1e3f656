"""A font that draws Chinese, among those matplotlib can find: for the plots of the Chinese notebooks and the Chinese
figures. (The graph pictures ask fontconfig instead: ``helpers.tools.picture_language``.)"""
from __future__ import annotations

from typing import Iterable, Optional

CJK_FONTS = ("Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Microsoft YaHei",
             "PingFang SC", "SimHei")  # preferred, in this order
SAMPLE = "中文图的梯度"  # a font that has a glyph for each of these draws the course's Chinese
PLACEHOLDER_FONTS = ("Last Resort",)  # fonts with a glyph for every character: a box (matplotlib ships one)


def _draws_chinese(path: str) -> bool:
    from matplotlib.ft2font import FT2Font

    try:
        font = FT2Font(path)
    except (OSError, RuntimeError, ValueError):
        return False
    return all(font.get_char_index(ord(character)) for character in SAMPLE)


def _first_drawing_chinese(entries: Iterable) -> Optional[str]:  # type: ignore[type-arg] # matplotlib FontEntry
    """The name of the first font entry whose file draws the sample, the preferred names first."""
    entries = sorted(entries, key=lambda entry: (CJK_FONTS.index(entry.name) if entry.name in CJK_FONTS
                                                 else len(CJK_FONTS), entry.name))
    return next((entry.name for entry in entries if not entry.name.startswith(PLACEHOLDER_FONTS)
                 and _draws_chinese(entry.fname)), None)


def chinese_font() -> Optional[str]:
    """The name of a font that draws Chinese (it has a glyph for each character of ``SAMPLE``), or None where this
    machine has none.

    The preferred names are tried first, then every font matplotlib knows. Its font list may predate a font
    installed since (``apt-get install fonts-noto-cjk`` on Colab): the system's font files it does not list yet are
    then added to it and looked at too, so running the cell again finds the new font.
    """
    from matplotlib.font_manager import findSystemFonts, fontManager

    known = {entry.name for entry in fontManager.ttflist}
    for name in CJK_FONTS:
        if name in known:
            return name
    found = _first_drawing_chinese(fontManager.ttflist)
    if found is not None:
        return found
    listed = {entry.fname for entry in fontManager.ttflist}
    for path in findSystemFonts():
        if path not in listed and _draws_chinese(path):
            fontManager.addfont(path)
    return _first_drawing_chinese(entry for entry in fontManager.ttflist if entry.fname not in listed)
