"""What a graph picture's words must be in Chinese, read from its SVG: none of the drawing tools' English words left
(code and the learner's own names may stay), a glyph for every character in the fonts graphviz finds (fontconfig's),
and each box at least as wide as the words graphviz laid out in it."""
from __future__ import annotations

import functools
import os
import re
from unittest import mock
import xml.etree.ElementTree as ElementTree
from typing import Iterable, List, Set, Tuple

import polib

from authoring.translation import messages
from tests.paths import ROOT
from helpers.language import LANGUAGE_VARIABLE
from helpers.tools.picture_language import fontconfig_draws, picture_words
from tests.ci import unavailable

SVG = "{http://www.w3.org/2000/svg}"
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
PICTURE_MODULES = ("graph.py", "saved_graph.py", "module_graph.py", "regions.py", "saved.py")
WORD = re.compile(r"[a-z]{2,}[:,;]?")  # a token that is an English word (code has dots, brackets, = or capitals)


def drawn_nodes(svg: str) -> List[Tuple[List[str], float, float]]:
    """Each node and cluster of the SVG: its texts, with its shape's width and the widest text's advance (pt)."""
    found = []
    for group in ElementTree.fromstring(svg).iter(f"{SVG}g"):
        if group.get("class") not in ("node", "cluster"):
            continue
        texts = [element for element in group.iter(f"{SVG}text") if element.text]
        xs = [float(value) for shape in group if shape.tag in (f"{SVG}polygon", f"{SVG}path")
              for value in re.findall(r"(-?[\d.]+),-?[\d.]+", shape.get("points") or shape.get("d") or "")]
        widest = max((advance(text.text, float(text.get("font-size", "14"))) for text in texts), default=0.0)
        found.append(([text.text for text in texts], max(xs) - min(xs) if xs else 0.0, widest))
    return found


def advance(text: str, size: float) -> float:
    """How wide ``text`` is at least: a Chinese character one em, any other half an em (a monospace font's ~0.6)."""
    return sum(size if CJK.match(character) else 0.5 * size for character in text)


@functools.lru_cache(maxsize=None)
def tool_words() -> Set[str]:
    """Every English word of the messages the drawing modules mark (``legend``, ``saved``, ``alive``, ``output``)."""
    words: Set[str] = set()
    for entry in polib.pofile(str(messages.catalog_file(ROOT))):
        if any(path.endswith(PICTURE_MODULES) for path, _ in entry.occurrences):
            words |= {token.rstrip(":,;") for token in entry.msgid.split() if WORD.fullmatch(token)}
    return words


def english_left(texts: List[str], names: Iterable[str] = ()) -> List[str]:
    """The texts that still hold one of the tools' English words, outside code and ``names`` (the learner's own:
    a loss called "critic loss")."""
    longest_first = sorted(set(names), key=len, reverse=True)
    left = []
    for text in texts:
        rest = text
        for name in longest_first:  # whole names only: a name "h" must not hide the words that hold an h
            rest = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", " ", rest)
        if any(WORD.fullmatch(token) and token.rstrip(":,;") in tool_words()
               for token in re.split(r"[\s\u3000-\u303f\uff00-\uffef]+", rest)):
            left.append(text)
    return left


def characters_without_glyphs(texts: List[str]) -> List[str]:
    """The characters of ``texts`` no font fontconfig knows can draw (graphviz would draw a box)."""
    characters = sorted({character for text in texts for character in text if not character.isspace()})
    if not characters or fontconfig_draws("".join(characters)):
        return []
    return [character for character in characters if not fontconfig_draws(character)]


def require_chinese_pictures(language: str = "zh_CN") -> None:
    """Skip where graphviz cannot draw Chinese here (no font for it, or no pango); fail in CI, which installs a font."""
    with mock.patch.dict(os.environ, {LANGUAGE_VARIABLE: language}):
        drawable = picture_words(announce=False).translate
    if not drawable:
        unavailable("graphviz cannot draw Chinese here (no font for it in fontconfig, or no pango): the pictures keep "
                    "their English words, with a note")


def words_of(svg: str) -> List[str]:
    """Every text the SVG draws."""
    return [element.text for element in ElementTree.fromstring(svg).iter(f"{SVG}text") if element.text]


def chinese_picture_problems(svg: str, names: Iterable[str] = ()) -> List[str]:
    """What is wrong with a picture drawn in Chinese: the tools' English left (``names``: the learner's, which
    stay), characters without a glyph, a box narrower than the Chinese words laid out in it."""
    words = words_of(svg)
    english, lacking = english_left(words, names), characters_without_glyphs(words)
    problems = [f"English left: {english}"] if english else []
    if lacking:
        problems.append(f"characters without a glyph: {lacking}")
    for texts, width, widest in drawn_nodes(svg):
        if any(CJK.search(text) for text in texts) and width and width < widest:  # measured without a font for it
            problems.append(f"a box {width:.0f} pt wide around {texts} ({widest:.0f} pt)")
    return problems
