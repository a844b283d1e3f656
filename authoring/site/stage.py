"""Write the book's source folder: config, table of contents, landing page, notebook pages, documents.

A file whose content did not change keeps its time, so Sphinx re-reads only what changed; a file no longer part
of the book is removed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import nbformat
import yaml

from authoring import release_json
from authoring.site.book_config import book_config
from authoring.site.documents import document_page
from authoring.site.execution_cache import execution_cache
from authoring.site.landing import landing_page
from authoring.site.notebook_page import notebook_page
from authoring.site.pages import DOCS_FOLDER, LANDING_PAGE, NOTEBOOK_FOLDER, STUDENT_FOLDER, course_pages

BOOK_FOLDER = "book"
STYLE_SHEET = "_static/course.css"  # Jupyter Book adds every style sheet in the book's _static/ to each page


def _yaml(data: object) -> bytes:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")


def book_files(root: Path, execution_cache: Path) -> Dict[str, bytes]:
    """Every file of the book's source folder, by its path in that folder."""
    release = release_json.load(root)
    pages = course_pages(root)
    base = yaml.safe_load((root / BOOK_FOLDER / "_config.yml").read_text(encoding="utf-8"))
    readme = (root / "README.md").read_text(encoding="utf-8")
    template = (root / BOOK_FOLDER / f"{LANDING_PAGE}.md").read_text(encoding="utf-8")
    files = {
        "_config.yml": _yaml(book_config(base, release, execution_cache)),
        "_toc.yml": _yaml(pages.toc()),
        f"{LANDING_PAGE}.md": landing_page(template, readme, pages.notebooks).encode("utf-8"),
    }
    for stem in pages.notebooks:
        solved = nbformat.read(str(root / "solutions" / f"{stem}.ipynb"), as_version=4)
        page, pictures = notebook_page(solved, stem, release)
        files[f"{NOTEBOOK_FOLDER}/{stem}.ipynb"] = nbformat.writes(page).encode("utf-8")
        files.update({f"{NOTEBOOK_FOLDER}/{path}": content for path, content in pictures.items()})
        files[f"{STUDENT_FOLDER}/{stem}.ipynb"] = (root / "notebooks" / f"{stem}.ipynb").read_bytes()
    files[STYLE_SHEET] = (root / BOOK_FOLDER / STYLE_SHEET).read_bytes()
    for name in pages.documents:
        text, needed = document_page(root, name)
        files[f"{DOCS_FOLDER}/{name}.md"] = text.encode("utf-8")
        files.update(needed)
    return files


def write_tree(folder: Path, files: Dict[str, bytes]) -> List[str]:
    """Make ``folder`` hold exactly ``files``; returns the paths written (changed or new)."""
    written = []
    for relative, content in sorted(files.items()):
        path = folder / relative
        if path.is_file() and path.read_bytes() == content:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        written.append(relative)
    for path in sorted(folder.rglob("*"), reverse=True):
        relative = path.relative_to(folder).as_posix()
        if path.is_file() and relative not in files:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    return written


def stage(root: Path, source: Path, cache_base: Path) -> List[str]:
    """Write the book of the course at ``root`` into ``source``; returns the paths written.

    The execution cache is a folder under ``cache_base`` named by a fingerprint of the helpers, torch and
    ``book/build``.
    """
    return write_tree(source, book_files(root, execution_cache(root, cache_base)))
