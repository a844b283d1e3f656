"""The teachers' documents (``docs/*.md``, or an edition's translation of one) as pages, with the files their links
point to."""
from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Dict, Tuple

from authoring.site.pages import LANDING_PAGE
from authoring.site.pages import with_line_under_title

LINK = re.compile(r"\]\((?P<target>[^)#\s:]+)(?P<anchor>#[^)\s]*)?\)")
READMES = ("README.md", "README.zh-CN.md")  # a link to either points at the landing page


def relinked(root: Path, text: str, source: str) -> Tuple[str, Dict[str, bytes]]:
    """``text``, from the repository's file ``source``, with its relative links made to work in the book, and the
    repository files they need there, by their path (a page in the book's root or in ``docs/`` is where its source
    is in the repository).

    A link to a README points at the landing page, which carries the README's map and set-up.
    """
    folder = posixpath.dirname(source)
    needed: Dict[str, bytes] = {}

    def relink(match: re.Match) -> str:
        target = match["target"]
        in_repository = posixpath.normpath(posixpath.join(folder, target))
        if in_repository.startswith("../"):
            raise ValueError(f"{source} links {target}, outside the repository")
        if in_repository in READMES:
            return f"]({posixpath.relpath(LANDING_PAGE, folder or '.')}.md)"
        found = root / in_repository
        if found.is_file() and found.suffix != ".md":
            needed[in_repository] = found.read_bytes()
        return match.group(0)

    return LINK.sub(relink, text), needed


def document_page(root: Path, source: str, under_title: str = "") -> Tuple[str, Dict[str, bytes]]:
    """The document at ``source`` (``docs/NAME.md``) as a page, with ``under_title`` after its title line, and the
    repository files its relative links need, by their path."""
    text, needed = relinked(root, (root / source).read_text(encoding="utf-8"), source)
    text = with_line_under_title(text, under_title)
    return text, needed
