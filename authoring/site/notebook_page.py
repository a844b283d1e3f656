"""One solved notebook as a page of the website: the cells learners do not see are hidden there too."""
from __future__ import annotations

import base64
import copy
import posixpath
from typing import Callable, Dict, Tuple

import nbformat

from authoring.launch_cells import is_setup_cell, with_badges
from authoring.release_json import Release
from authoring.site.pages import NOTEBOOK_FOLDER, STUDENT_FOLDER, with_line_under_title
from authoring.site.words import DOWNLOAD, LAUNCH, PAGE_NOTE

REMOVE_INPUT = "remove-input"  # Jupyter Book shows the cell's output, not its code
ATTACHMENT_FOLDER = "attachments"


def _hidden(cell: nbformat.NotebookNode) -> bool:
    return bool(cell.get("metadata", {}).get("jupyter", {}).get("source_hidden"))


def _tags(cell: nbformat.NotebookNode) -> list:
    return cell.get("metadata", {}).get("tags", [])


def page_note(stem: str, release: Release, folder: str = NOTEBOOK_FOLDER, say: Callable[[str], str] = str) -> str:
    """The line under the title: what the page is, and how to do the exercises yourself (the student copy, at
    ``folder/stem.ipynb`` in the repository and at the page's path in the book), in the words ``say`` gives."""
    student_copy = f"{folder}/{stem}.ipynb"
    launch = (say(LAUNCH).format(colab=release.colab_url(student_copy), binder=release.binder_url(student_copy))
              if release.is_set else "")
    download_path = posixpath.relpath(f"{STUDENT_FOLDER}/{stem}.ipynb", folder)
    download = f"{{download}}`{say(DOWNLOAD)} <{download_path}>`"
    return say(PAGE_NOTE).format(download=download, launch=launch)


def _attachments_as_files(cell: nbformat.NotebookNode, stem: str) -> Dict[str, bytes]:
    """A markdown cell's attached pictures as files beside the page (Sphinx cannot read ``attachment:``)."""
    files = {}
    for name, bundle in cell.pop("attachments", {}).items():
        data = next(iter(bundle.values()))
        relative = f"{ATTACHMENT_FOLDER}/{stem}/{name}"
        files[relative] = base64.b64decode(data)
        cell.source = cell.source.replace(f"(attachment:{name}", f"({relative}")
    return files


def notebook_page(solved: nbformat.NotebookNode, stem: str, release: Release, folder: str = NOTEBOOK_FOLDER,
                  say: Callable[[str], str] = str, languages: str = ""
                  ) -> Tuple[nbformat.NotebookNode, Dict[str, bytes]]:
    """``solved`` as a page, and the pictures it needs by their path beside it.

    The page has no Colab set-up cell (it does nothing off Colab), no code of a folded cell, its attached
    pictures as files, no badges (pictures from the network), and a note under the title with the student
    notebook's download link and, once released, its Colab and Binder links; ``languages``, the line to the page in
    the other language, goes under the title. ``folder`` is the page's folder in the book, its student copy's in the
    repository.
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
    titled = bool(cells) and cells[0].cell_type == "markdown" and cells[0].source.startswith("# ")
    if titled:
        cells[0].source = with_line_under_title(cells[0].source, languages)
    elif languages:
        cells.insert(0, nbformat.v4.new_markdown_cell(languages))
    note = nbformat.v4.new_markdown_cell(page_note(stem, release, folder, say))
    note["id"] = "site-page-note"
    position = 1 if cells and cells[0].cell_type == "markdown" else 0
    cells.insert(position, note)
    page.cells = cells
    return page, pictures
