"""Chinese prose as a browser should lay it out: a line break between two Chinese characters, or after a full-width
punctuation mark, is no space.

The Chinese texts are wrapped at about 120 columns, as the English are. HTML turns a line break inside a paragraph
into a space, which Chinese does not have between its characters (Chromium does not drop it, as CSS Text 3 allows),
so the pages join such lines. Fenced code blocks are left as they are (an indented block, or inline code across
two lines, is joined too).
"""
from __future__ import annotations

import re

CJK = "\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef"  # CJK punctuation, ideographs, full-width forms
FULL_WIDTH_PUNCTUATION = "\u3000-\u303f\uff01-\uff0f\uff1a-\uff20"  # 、。「」 ，：；？！（）
_BLOCK_START = r"(?![-*+>#|]\s|\d+[.)]\s|```|~~~)"  # a list item, quote, heading, table row or fence: a new block
_BREAK = re.compile(rf"(?<=[{CJK}])\n[ \t]*(?=[{CJK}])|(?<=[{FULL_WIDTH_PUNCTUATION}])\n[ \t]*{_BLOCK_START}(?=\S)")
_FENCE = re.compile(r"^(```|~~~)", re.MULTILINE)


def joined(markdown: str) -> str:
    """``markdown`` with every line break between two Chinese characters, or after full-width punctuation (unless a
    new block starts there), removed with the next line's indent, outside fenced code blocks."""
    parts = re.split(r"(^(?:```|~~~).*?^(?:```|~~~)[^\n]*$)", markdown, flags=re.MULTILINE | re.DOTALL)
    return "".join(part if _FENCE.match(part) else _BREAK.sub("", part) for part in parts)
