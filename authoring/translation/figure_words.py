"""The words of the conceptual figures in Chinese: ``i18n/zh_CN/figures.po``.

Its entries are the texts the English drawings write (``authoring.figures.drawing.written``) that hold words, not
only code or numbers; ``msgid`` is the English text, line breaks included. A text may stay as it is in Chinese: code,
a PyTorch message's words. ``python -m authoring.generate --update-catalogs`` keeps the catalog in step the way it
does the helpers' messages; ``python -m authoring.figures`` draws the Chinese figures from its current entries.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional

from authoring.translation.catalog import CATALOGS, LOCALE
from authoring.translation.messages import Messages, current_translations, file_problems, present, updated_file_text

CATALOG = CATALOGS / "figures.po"
LANGUAGE = LOCALE
_CODE = re.compile(r"\S*[.()=_\[\]]\S*")


def has_words(text: str) -> bool:
    """True for a text with a word of three letters or more outside its code (``L2.backward()``, ``v1``: no)."""
    return bool(re.search(r"[A-Za-z]{3,}", _CODE.sub(" ", text)))


def english_texts() -> Messages:
    """Each text with words that the English figures write, with the figure that writes it."""
    from authoring.figures.drawing import written
    from authoring.figures.drawings import DRAWINGS

    found: Messages = {}
    for name, draw in DRAWINGS.items():
        for text in written(draw):
            if has_words(text) and f"authoring/figures:{name}" not in found.get(text, []):
                found.setdefault(text, []).append(f"authoring/figures:{name}")
    return found


def words(root: Path) -> Dict[str, str]:
    """English -> Chinese for every current entry."""
    catalog = present(root / CATALOG)
    return {} if catalog is None else current_translations(catalog)


def updated_text(root: Path) -> Optional[str]:
    """The catalog brought in step with the English figures, as PO text; None without a catalog."""
    return updated_file_text(root / CATALOG, english_texts)


def catalog_problems(root: Path) -> List[str]:
    """Each text of the English figures without a current Chinese entry (nothing without a catalog)."""
    return file_problems(root / CATALOG, english_texts, CATALOG.as_posix(), copies_allowed=True)
