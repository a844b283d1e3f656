"""The website's editions: the English one at the site's root, and the Chinese one under ``zh/``.

Jupyter Book 1 builds one language per book, so each edition is a book of its own, which ``bash book/build`` builds
in turn; a translation's HTML goes into its folder of the English site. An edition's notebook pages stand at its
student copies' path in the repository (``notebooks/``, ``notebooks/zh-CN/``): Jupyter Book's Colab and Binder
buttons open the repository's file at the page's path. The landing page, each notebook page and each teachers'
document link their counterpart in the other edition.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from authoring.translation.cjk import joined
from authoring.site.pages import DOCS_FOLDER, NOTEBOOK_FOLDER, TEACHER_DOCUMENTS, Pages
from authoring.site.words import DOCUMENT_NAMES, IN_ENGLISH
from authoring.translation import site_words
from authoring.translation.catalog import LOCALE
from authoring.translation.edition import FOLDER as CHINESE_FOLDER

SOLUTIONS, STUDENT_COPIES = "solutions", NOTEBOOK_FOLDER


@dataclass(frozen=True)
class Edition:
    """One language of the course as a website."""

    name: str  # the language's own name, as the other edition's link to it reads
    language: str  # Sphinx's language for its pages ("en", "zh_CN"); book/build gives a translation's kernels the
    #                same as COURSE_LANGUAGE
    site_folder: str  # where its HTML stands in the site: "" (the root) or "zh"
    folder: str  # its notebooks' folder under solutions/ and notebooks/: "" or "zh-CN"
    readme: str  # the README its landing page takes the map, the commands and the opening from
    setup_heading: str  # the start of that README's set-up section's heading
    documents: Tuple[Tuple[str, str], ...]  # (name, source): each teachers' document, English where untranslated
    joins_lines: bool = False  # its prose is Chinese: a line break between two of its characters is no space
    say: Callable[[str], str] = field(default=str, compare=False)  # the site's own words in this language

    @property
    def pages_folder(self) -> str:
        """Its notebook pages' folder in its book, which is its student copies' path in the repository."""
        return posixpath.join(STUDENT_COPIES, self.folder) if self.folder else STUDENT_COPIES

    def solutions(self, root: Path) -> Path:
        return root / SOLUTIONS / self.folder

    def student_copies(self, root: Path) -> Path:
        return root / STUDENT_COPIES / self.folder

    def notebooks(self, root: Path) -> List[str]:
        """Its solved notebooks' stems, in course order."""
        return sorted(path.stem for path in self.solutions(root).glob("[0-9][0-9]_*.ipynb"))

    def english_only(self, source: str) -> bool:
        """True for a document this (translated) edition shows in English."""
        return bool(self.folder) and not Path(source).stem.endswith(self.folder)

    def prose(self, markdown: str) -> str:
        """``markdown`` as its pages show it (Chinese lines joined: authoring/translation/cjk.py)."""
        return joined(markdown) if self.joins_lines else markdown

    def site_path(self, docname: str) -> str:
        """Where the page of ``docname`` (a path in its book, without suffix) stands in the whole site."""
        return posixpath.join(self.site_folder, f"{docname}.html")


def _documents(root: Path, translation: str = "") -> Tuple[Tuple[str, str], ...]:
    """The teachers' documents that exist, each from its translation ``docs/NAME.<translation>.md`` if there is one."""
    found = []
    for name in TEACHER_DOCUMENTS:
        translated, english = f"{DOCS_FOLDER}/{name}.{translation}.md", f"{DOCS_FOLDER}/{name}.md"
        if translation and (root / translated).is_file():
            found.append((name, translated))
        elif (root / english).is_file():
            found.append((name, english))
    return tuple(found)


def editions(root: Path) -> List[Edition]:
    """The English edition, and the Chinese one where the course has Chinese notebooks and the site's catalog."""
    found = [Edition(name="English", language="en", site_folder="", folder="", readme="README.md",
                     setup_heading="## Set-up", documents=_documents(root))]
    translate = site_words.translator(root)
    if translate is not None:
        chinese = Edition(name="中文", language=LOCALE, site_folder="zh", folder=CHINESE_FOLDER,
                          readme="README.zh-CN.md", setup_heading="## 安装", documents=_documents(root, CHINESE_FOLDER),
                          joins_lines=True, say=translate)
        if chinese.notebooks(root):
            found.append(chinese)
    return found


def languages_line(page: Dict[str, str], current: Edition, all_editions: List[Edition]) -> str:
    """``English · 中文``, each edition but ``current`` a link to its page of the same document.

    ``page`` maps an edition's site folder to the document's name in its book; an edition without the page is left
    out. Raw HTML: the link leaves the book, where a Markdown link would be a missing document to Sphinx.
    """
    here = posixpath.dirname(current.site_path(page[current.site_folder]))
    parts = []
    for edition in all_editions:
        if edition.site_folder not in page:
            continue
        if edition == current:
            parts.append(edition.name)
        else:
            target = posixpath.relpath(edition.site_path(page[edition.site_folder]), here or ".")
            parts.append(f'<a class="course-language" href="{target}" hreflang="{edition.language.replace("_", "-")}">'
                         f'{edition.name}</a>')
    return " · ".join(parts) if len(parts) > 1 else ""


def course_pages(root: Path, edition: Optional[Edition] = None) -> Pages:
    """The pages of ``edition`` of the course at ``root`` (the English one by default): every solved notebook, and
    the teachers' documents that exist."""
    edition = edition or editions(root)[0]
    titles = None
    if edition.folder:  # a translated site: the documents by their names in its language, "(in English)" where so
        titles = {name: edition.say(IN_ENGLISH).format(name=edition.say(DOCUMENT_NAMES[name]))
                  if edition.english_only(source) else edition.say(DOCUMENT_NAMES[name])
                  for name, source in edition.documents if name in DOCUMENT_NAMES}
    return Pages(notebooks=edition.notebooks(root), documents=[name for name, _ in edition.documents],
                 notebook_folder=edition.pages_folder, document_titles=titles)
