"""The Chinese website's own words, from ``i18n/zh_CN/site.po``: the book's title and author, the landing page's
template (``book/intro.md``, cut into units as the cheat sheet is, an indented line joined to the list item
above it) and the words of ``authoring/site/words.py``.

A unit's English is its ``msgid``; ``python -m authoring.generate --update-catalogs`` keeps the catalog in step and
``--check`` reports what has no current Chinese. The template's markers (``<!-- from README: ... -->``) are not
translated: the Chinese README fills them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional, Tuple

import yaml

from authoring.site.words import WORDS
from authoring.translation.catalog import CATALOGS
from authoring.translation.messages import Messages, current_translations, file_problems, present, updated_file_text
from authoring.translation.sheet import units

CATALOG = CATALOGS / "site.po"
TEMPLATE = Path("book") / "intro.md"
CONFIG = Path("book") / "_config.yml"
WORDS_FILE = "authoring/site/words.py"
MARKER = "<!--"

Translate = Callable[[str], str]


def _template_units(text: str) -> List[Tuple[str, bool]]:
    """The template's units (a list item with its indented lines is one), a marker line never translated."""
    found: List[Tuple[str, bool]] = []
    for unit, translated in units(text):
        if translated and unit.startswith("  ") and found and found[-1][1]:
            found[-1] = (found[-1][0] + "\n" + unit, True)
        else:
            found.append((unit, translated and not unit.startswith(MARKER)))
    return found


def messages(root: Path) -> Messages:
    """The English to translate: the book's title, the template's units, the site's words."""
    found: Messages = {}
    config = yaml.safe_load((root / CONFIG).read_text(encoding="utf-8"))
    for key in ("title", "author"):
        found.setdefault(config[key], []).append(f"{CONFIG.as_posix()}:{key}")
    line = 1
    for text, translated in _template_units((root / TEMPLATE).read_text(encoding="utf-8")):
        if translated:
            found.setdefault(text, []).append(f"{TEMPLATE.as_posix()}:{line}")
        line += text.count("\n") + 1
    for text in WORDS:
        found.setdefault(text, []).append(WORDS_FILE)
    return found


def translator(root: Path) -> Optional[Translate]:
    """English -> its current Chinese (the English where there is none: ``--check`` reports it); None without a
    catalog."""
    catalog = present(root / CATALOG)
    if catalog is None:
        return None
    current = current_translations(catalog)
    return lambda english: current.get(english, english)


def translated_template(root: Path, translate: Translate) -> str:
    """The landing page's template with every unit translated and the markers kept."""
    text = (root / TEMPLATE).read_text(encoding="utf-8")
    return "\n".join(translate(unit) if translated else unit for unit, translated in _template_units(text))


def updated_text(root: Path) -> Optional[str]:
    """The site's catalog brought in step with its English, as PO text; None without a catalog."""
    return updated_file_text(root / CATALOG, lambda: messages(root))


def catalog_problems(root: Path) -> List[str]:
    """Each English text of the site without a current Chinese entry (nothing without a catalog)."""
    return file_problems(root / CATALOG, lambda: messages(root), CATALOG.as_posix())
