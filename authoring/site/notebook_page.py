"""One solved notebook as a page of the website: the cells learners do not see are hidden there too."""
from __future__ import annotations

import base64
import copy
from typing import Dict, Tuple

import nbformat

from authoring.launch_cells import is_setup_cell, with_badges
from authoring.release_json import Release
from authoring.site.pages import NOTEBOOK_FOLDER, STUDENT_FOLDER

REMOVE_INPUT = "remove-input"  # Jupyter Book shows the cell's output, not its code
ATTACHMENT_FOLDER = "attachments"


def _hidden(cell: nbformat.NotebookNode) -> bool:
    return bool(cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"))


def _tags(cell: nbformat.NotebookNode) -> list:
    return cell.get("metadata", {}).get("tags", [])


def page_note(stem: str, release: Release) -> str:
    """The line under the title: what the page is, and how to do the exercises yourself (the student copy)."""
    student_copy = f"{NOTEBOOK_FOLDER}/{stem}.ipynb"
    launch = (f", or open it on [Colab]({release.colab_url(student_copy)}) or "
              f"[Binder]({release.binder_url(student_copy)})" if release.is_set else "")
    return (f"*This page is the notebook solved, and run when the site was built.* To do its exercises yourself, "
            f"{{download}}`download the student notebook <../{STUDENT_FOLDER}/{stem}.ipynb>`{launch}.")


def _attachments_as_files(cell: nbformat.NotebookNode, stem: str) -> Dict[str, bytes]:
    """A markdown cell's attached pictures as files beside the page (Sphinx cannot read ``attachment:``)."""
    files = {}
    for name, bundle in cell.pop("attachments", {}).items():
        data = next(iter(bundle.values()))
        relative = f"{ATTACHMENT_FOLDER}/{stem}/{name}"
        files[relative] = base64.b64decode(data)
        cell.source = cell.source.replace(f"(attachment:{name}", f"({relative}")
    return files


def notebook_page(solved: nbformat.NotebookNode, stem: str, release: Release
                  ) -> Tuple[nbformat.NotebookNode, Dict[str, bytes]]:
    """``solved`` as a page, and the pictures it needs by their path beside it.

    The page has no Colab set-up cell (it does nothing off Colab), no code of a folded cell, its attached
    pictures as files, no badges (pictures from the network), and a note under the title with the student
    notebook's download link and, once released, its Colab and Binder links.
    """
    page = copy.deepcopy(solved)
    if page.cells and page.cells[0].cell_type == "markdown":
        page.cells[0].source = with_badges(page.cells[0].source, "")
    cells = [cell for cell in page.cells if not is_setup_cell(cell)]
    pictures: Dict[str, bytes] = {}
    for cell in cells:
        if cell.cell_type == "code" and _hidden(cell) and REMOVE_INPUT not in _tags(cell):
            cell.setdefault("metadata", {})["tags"] = [*_tags(cell), REMOVE_INPUT]
        if cell.cell_type == "markdown":
            pictures.update(_attachments_as_files(cell, stem))
    note = nbformat.v4.new_markdown_cell(page_note(stem, release))
    note["id"] = "site-page-note"
    position = 1 if cells and cells[0].cell_type == "markdown" else 0
    cells.insert(position, note)
    page.cells = cells
    return page, pictures
