"""Which pages the website has, in course order: the landing page, the notebooks, then the teachers' documents."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

NOTEBOOK_FOLDER = "notebooks"
STUDENT_FOLDER = "student"
DOCS_FOLDER = "docs"
LANDING_PAGE = "intro"
TEACHER_DOCUMENTS = ("workshop", "cheatsheet", "hosting")


@dataclass(frozen=True)
class Pages:
    """The notebooks' stems (``00_start_here``, ...) and the teachers' documents, each in course order."""

    notebooks: List[str]
    documents: List[str]

    def toc(self) -> Dict[str, object]:
        """The book's ``_toc.yml`` as a dict: the landing page, then one part for the course and one for teachers."""
        course = [{"file": f"{NOTEBOOK_FOLDER}/{stem}"} for stem in self.notebooks]
        teachers = [{"file": f"{DOCS_FOLDER}/{name}"} for name in self.documents]
        return {"format": "jb-book", "root": LANDING_PAGE,
                "parts": [{"caption": "The course", "chapters": course},
                          {"caption": "For teachers", "chapters": teachers}]}


def course_pages(root: Path) -> Pages:
    """The pages of the course at ``root``: every solved notebook, and the teachers' documents that exist."""
    notebooks = sorted(path.stem for path in (root / "solutions").glob("[0-9][0-9]_*.ipynb"))
    documents = [name for name in TEACHER_DOCUMENTS if (root / DOCS_FOLDER / f"{name}.md").exists()]
    return Pages(notebooks=notebooks, documents=documents)
