"""A font that draws Chinese, among those matplotlib can find: for the plots of the Chinese notebooks and the
Chinese figures."""
from __future__ import annotations

from typing import Optional

CJK_FONTS = ("Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Microsoft YaHei",
             "PingFang SC", "SimHei")  # the first one found draws the Chinese characters
_NAME_HINTS = ("CJK", "Source Han Sans", "WenQuanYi")  # else any font of these families (a .ttc file's first face
#                                                         may be Noto Sans CJK JP: it draws Chinese too)
_FILE_HINTS = ("cjk", "wqy", "sourcehan", "msyh", "pingfang", "simhei")


def chinese_font() -> Optional[str]:
    """The name of a font that draws Chinese, or None where this machine has none.

    matplotlib's font cache may predate a font installed since: the system's files whose names look like a Chinese
    font are added to it once, and looked at again.
    """
    from matplotlib.font_manager import findSystemFonts, fontManager

    for attempt in range(2):
        names = {font.name for font in fontManager.ttflist}
        for name in CJK_FONTS:
            if name in names:
                return name
        similar = sorted(name for name in names if any(hint in name for hint in _NAME_HINTS))
        if similar:
            return similar[0]
        if attempt == 0:
            for path in findSystemFonts():
                if any(hint in path.lower() for hint in _FILE_HINTS):
                    fontManager.addfont(path)
    return None
