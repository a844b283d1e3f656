"""Write each edition's book source folder: config, table of contents, landing page, notebook pages, documents.

The English book is staged in the folder named, each translation's beside it (``source-zh``). A file whose
content did not change keeps its time, so Sphinx re-reads only what changed; a file no longer part of the book is
removed.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional

import nbformat
import yaml

from authoring import release_json
from authoring.site.book_config import book_config
from authoring.site.documents import document_page, relinked
from authoring.site.editions import Edition, course_pages, editions, languages_line
from authoring.site.execution_cache import execution_cache
from authoring.site.landing import landing_page
from authoring.site.notebook_page import notebook_page
from authoring.site.pages import DOCS_FOLDER, LANDING_PAGE, STUDENT_FOLDER
from authoring.site.words import ENGLISH_ONLY, MAP_HEADER
from authoring.translation import glossary
from authoring.translation.catalog import CATALOGS
from authoring.translation.cjk import CJK
from authoring.translation.site_words import translated_template

BOOK_FOLDER = "book"
STYLE_SHEET = "_static/course.css"  # Jupyter Book adds every style sheet in the book's _static/ to each page
SEARCH_WORDS = "_search_words.txt"  # a Chinese book's words for its search (Sphinx skips files starting with _)
SEARCH_WORD_COUNT = 100000  # how common jieba takes each to be: high, so that it is kept whole


def _yaml(data: object) -> bytes:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")


def source_folder(english_source: Path, edition: Edition) -> Path:
    """Where ``edition``'s book is staged: the English book's folder, or ``<it>-<site folder>`` beside it."""
    if not edition.site_folder:
        return english_source
    return english_source.with_name(f"{english_source.name}-{edition.site_folder}")


def search_words(root: Path) -> str:
    """The glossary's Chinese terms as a jieba dictionary (one word per line, with a high count): Sphinx's Chinese
    search then indexes 计算图 as one word, which is what a reader types, instead of 计算 and 图."""
    terms = glossary.load(root / CATALOGS / "glossary.csv")
    words = sorted({word for term in terms for word in (term.chinese, *term.also) if re.search(f"[{CJK}]", word)})
    return "".join(f"{word} {SEARCH_WORD_COUNT}\n" for word in words)


def _config(root: Path, release: release_json.Release, cache_base: Path, edition: Edition,
            search_dictionary: Optional[Path] = None) -> dict:
    """The book's ``_config.yml``: the base one with the release's buttons, the edition's title and language, and
    its own execution cache (its kernels speak its language, so its outputs differ from the English ones); with
    ``search_dictionary``, the words its search indexes whole."""
    base = yaml.safe_load((root / BOOK_FOLDER / "_config.yml").read_text(encoding="utf-8"))
    config = book_config(base, release, execution_cache(root, cache_base / edition.site_folder))
    config["title"], config["author"] = edition.say(config["title"]), edition.say(config["author"])
    sphinx = config.setdefault("sphinx", {}).setdefault("config", {})
    sphinx["language"] = edition.language
    if search_dictionary is not None:
        sphinx["html_search_options"] = {"dict": str(search_dictionary)}
    return config


def book_files(root: Path, cache_base: Path, edition: Edition, all_editions: List[Edition],
               folder: Optional[Path] = None) -> Dict[str, bytes]:
    """Every file of ``edition``'s book source folder (to be written in ``folder``), by its path in that folder."""
    release = release_json.load(root)
    pages = course_pages(root, edition)
    stems = {other.site_folder: set(other.notebooks(root)) for other in all_editions}

    def languages(name_in: Dict[str, str]) -> str:
        return languages_line(name_in, edition, all_editions)

    def everywhere(docname: str) -> Dict[str, str]:
        return {other.site_folder: docname for other in all_editions}

    readme = (root / edition.readme).read_text(encoding="utf-8")
    landing = landing_page(translated_template(root, edition.say), readme, pages.notebooks, edition.setup_heading,
                           pages.notebook_folder, edition.say(MAP_HEADER), languages(everywhere(LANDING_PAGE)))
    landing, needed = relinked(root, landing, edition.readme)
    dictionary = folder / SEARCH_WORDS if edition.joins_lines and folder is not None else None
    files = {"_config.yml": _yaml(_config(root, release, cache_base, edition, dictionary)),
             "_toc.yml": _yaml(pages.toc(edition.say)), f"{LANDING_PAGE}.md": edition.prose(landing).encode("utf-8"),
             **needed}
    if dictionary is not None:
        files[SEARCH_WORDS] = search_words(root).encode("utf-8")
    for stem in pages.notebooks:
        solved = nbformat.read(str(edition.solutions(root) / f"{stem}.ipynb"), as_version=4)
        counterparts = {other.site_folder: f"{other.pages_folder}/{stem}" for other in all_editions
                        if stem in stems[other.site_folder]}
        page, pictures = notebook_page(solved, stem, release, pages.notebook_folder, edition.say,
                                       languages(counterparts))
        files[f"{pages.notebook_folder}/{stem}.ipynb"] = nbformat.writes(page).encode("utf-8")
        files.update({f"{pages.notebook_folder}/{path}": content for path, content in pictures.items()})
        files[f"{STUDENT_FOLDER}/{stem}.ipynb"] = (edition.student_copies(root) / f"{stem}.ipynb").read_bytes()
    files[STYLE_SHEET] = (root / BOOK_FOLDER / STYLE_SHEET).read_bytes()
    for name, source in edition.documents:
        under_title = languages(everywhere(f"{DOCS_FOLDER}/{name}"))
        if edition.english_only(source):
            under_title += "\n\n" + edition.say(ENGLISH_ONLY)
        text, needed = document_page(root, source, under_title)
        files[f"{DOCS_FOLDER}/{name}.md"] = edition.prose(text).encode("utf-8")
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


def stage(root: Path, source: Path, cache_base: Path) -> Dict[str, List[str]]:
    """Write each edition's book of the course at ``root`` (the English one into ``source``); returns the paths
    written, by the folder of each book.

    Each edition's execution cache is a folder under ``cache_base`` (a translation's under its site folder) named by
    a fingerprint of the helpers, torch and ``book/build``.
    """
    all_editions = editions(root)
    written = {}
    for edition in all_editions:
        folder = source_folder(source, edition)
        written[str(folder)] = write_tree(folder, book_files(root, cache_base, edition, all_editions, folder))
    return written
