"""The teachers' documents (``docs/*.md``) as pages, with the files their links point to."""
from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Dict, Tuple

from authoring.site.pages import DOCS_FOLDER, LANDING_PAGE

LINK = re.compile(r"\]\((?P<target>[^)#\s:]+)(?P<anchor>#[^)\s]*)?\)")


def document_page(root: Path, name: str) -> Tuple[str, Dict[str, bytes]]:
    """``docs/NAME.md`` as a page, and the repository files its relative links need, by their path.

    A link to the README points at the landing page, which carries the README's map and set-up.
    """
    text = (root / DOCS_FOLDER / f"{name}.md").read_text(encoding="utf-8")
    needed: Dict[str, bytes] = {}

    def relink(match: re.Match) -> str:
        target = match["target"]
        in_repository = posixpath.normpath(posixpath.join(DOCS_FOLDER, target))
        if in_repository.startswith("../"):
            raise ValueError(f"docs/{name}.md links {target}, outside the repository")
        if in_repository == "README.md":
            return f"](../{LANDING_PAGE}.md)"
        source = root / in_repository
        if source.is_file() and source.suffix != ".md":
            needed[in_repository] = source.read_bytes()
        return match.group(0)

    return LINK.sub(relink, text), needed
