"""The pages of an edition of the website, in course order: the landing page, the notebooks, then the teachers'
documents (``editions.course_pages`` lists them)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from authoring.site.words import COURSE_PART, TEACHERS_PART

NOTEBOOK_FOLDER = "notebooks"
STUDENT_FOLDER = "student"
DOCS_FOLDER = "docs"
LANDING_PAGE = "intro"
TEACHER_DOCUMENTS = ("workshop", "cheatsheet", "hosting")


def with_line_under_title(markdown: str, text: str) -> str:
    """``markdown`` (a page, or a notebook's first cell) with ``text`` as a paragraph after its title line."""
    if not text:
        return markdown
    title, _, rest = markdown.partition("\n")
    return f"{title}\n\n{text}\n\n{rest.lstrip(chr(10))}"


@dataclass(frozen=True)
class Pages:
    """The notebooks' stems (``00_start_here``, ...) and the teachers' documents, each in course order, and the
    notebook pages' folder in the book."""

    notebooks: List[str]
    documents: List[str]
    notebook_folder: str = NOTEBOOK_FOLDER
    document_titles: Optional[Dict[str, str]] = None  # a translated site's names for them (else their own titles)

    def toc(self, say: Callable[[str], str] = str) -> Dict[str, object]:
        """The book's ``_toc.yml`` as a dict: the landing page, then one part for the course and one for teachers
        (their captions in the edition's language, by ``say``)."""
        course = [{"file": f"{self.notebook_folder}/{stem}"} for stem in self.notebooks]
        titles = self.document_titles or {}
        teachers = [{"file": f"{DOCS_FOLDER}/{name}", **({"title": titles[name]} if name in titles else {})}
                    for name in self.documents]
        return {"format": "jb-book", "root": LANDING_PAGE,
                "parts": [{"caption": say(COURSE_PART), "chapters": course},
                          {"caption": say(TEACHERS_PART), "chapters": teachers}]}
