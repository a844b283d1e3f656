"""The Chinese cheat sheet, written from docs/cheatsheet.md and its catalog ``i18n/zh_CN/cheatsheet.po``.

The English sheet is cut into units: each heading, table row, list item and image is one, and so is each paragraph
(its lines together). A unit's English is its ``msgid``; ``python -m authoring.generate --update-catalogs`` keeps the
catalog in step the way it does the helpers' (a changed unit keeps its old Chinese, marked ``fuzzy``, with the old
English beside it). Blank lines and lines without words (a table's ``|---|``) are copied. The Chinese sheet is the
English one with every unit replaced by its current Chinese, so it has the English sheet's structure, and the tests
check that each Chinese unit carries its English unit's code, error lines, images and proof references unchanged:
the live checks of the English sheet's code then hold for the Chinese one.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional, Tuple

from authoring.translation.catalog import CATALOGS, LOCALE
from authoring.translation.messages import Messages, current_translations, file_problems, present, updated_file_text

ENGLISH = Path("docs") / "cheatsheet.md"
CHINESE = Path("docs") / "cheatsheet.zh-CN.md"
CATALOG = CATALOGS / "cheatsheet.po"
FIGURE_LINK = "../helpers/course/figures/images/"
FIGURE_LANGUAGE = LOCALE
_OWN_UNIT = re.compile(r"^(#|\||- |\d+\. |!\[)")

Unit = Tuple[str, bool]  # (text, translated?)


def units(text: str) -> List[Unit]:
    """``text`` cut into units; ``"\\n".join`` of their texts gives ``text`` back."""
    found: List[Unit] = []
    paragraph = False
    for line in text.split("\n"):
        if not re.search(r"[^\W\d_]", line):  # blank, or no letters at all
            found.append((line, False))
            paragraph = False
        elif _OWN_UNIT.match(line):
            found.append((line, True))
            paragraph = False
        elif paragraph:
            found[-1] = (found[-1][0] + "\n" + line, True)
        else:
            found.append((line, True))
            paragraph = True
    return found


def messages(root: Path) -> Messages:
    """The English sheet's units to translate, with where each starts."""
    found: Messages = {}
    line = 1
    for text, translated in units((root / ENGLISH).read_text(encoding="utf-8")):
        if translated:
            found.setdefault(text, []).append(f"{ENGLISH.as_posix()}:{line}")
        line += text.count("\n") + 1
    return found


def chinese_sheet(root: Path) -> Optional[str]:
    """The Chinese sheet as the generator writes it; a unit without current Chinese stays English (``--check``
    reports it). None without a catalog."""
    catalog = present(root / CATALOG)
    if catalog is None:
        return None
    current = current_translations(catalog)
    english = (root / ENGLISH).read_text(encoding="utf-8")
    sheet = "\n".join(current.get(text, text) if translated else text for text, translated in units(english))
    return with_chinese_figures(sheet)


def with_chinese_figures(text: str) -> str:
    """``text`` with each course figure's link pointing at its Chinese drawing (``images/zh_CN/``)."""
    return text.replace(FIGURE_LINK, FIGURE_LINK + FIGURE_LANGUAGE + "/")


def updated_text(root: Path) -> Optional[str]:
    """The sheet's catalog brought in step with the English sheet, as PO text; None without a catalog."""
    return updated_file_text(root / CATALOG, lambda: messages(root))


def catalog_problems(root: Path) -> List[str]:
    """Each unit of the English sheet without a current Chinese entry (nothing without a catalog)."""
    return file_problems(root / CATALOG, lambda: messages(root), CATALOG.as_posix())
