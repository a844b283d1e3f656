"""The generated parts that open the course elsewhere: Colab and Binder badges, and the Colab set-up cell.

All of them come from ``release.json`` (see ``authoring.release_json``). ``python -m authoring.generate`` writes them
into every solution notebook (and so into the student copies) and into the README's notebook table.
"""
from __future__ import annotations

import copy
import json
import re
from typing import List, Optional, Tuple

import nbformat

from authoring.release_json import Release

SETUP_TAG = "colab-setup"
BADGES_START = "<!-- launch badges: generated from release.json by `python -m authoring.generate` -->"
BADGES_END = "<!-- end of launch badges -->"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
KAGGLE_BADGE = "https://kaggle.com/static/images/open-in-kaggle.svg"
BINDER_BADGE = "https://mybinder.org/badge_logo.svg"
COURSE_DISTRIBUTION = "two-losses-course-helpers"
# Installed on Colab with --no-deps, beside the helpers: Colab has torch, ipywidgets, numpy, IPython.
COLAB_EXTRA_PACKAGES = ("torchviz==0.0.3", "graphviz")
# Folded on Colab (a form shows only the title) and collapsed in JupyterLab: learners see one line.
README_NOTEBOOK_ROW = re.compile(r"^\| `(?P<stem>\d\d_\w+)` \|")
FOLDED_METADATA = {"cellView": "form", "jupyter": {"source_hidden": True}}

_SETUP_TEMPLATE = '''\
#@title Set-up for Google Colab and Kaggle: run it first. Anywhere else it does nothing.
# There it installs this course's helpers, pinned to the release; --no-deps keeps their torch and ipywidgets.
import importlib.metadata
import os
from importlib.util import find_spec
{language}
if (find_spec("google") and find_spec("google.colab")) or os.getenv("KAGGLE_KERNEL_RUN_TYPE"):
    try:
        importlib.metadata.version("{distribution}")
    except importlib.metadata.PackageNotFoundError:
        import subprocess
        import sys

        # The helpers at this release, filled in by the release step from release.json:
        COURSE_HELPERS = {requirement}
        if COURSE_HELPERS is None:
            raise RuntimeError("This copy of the course has no release yet: open it from a release's badge.")
        command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", COURSE_HELPERS, {extras}]
        subprocess.run(command, check=True)
        importlib.invalidate_caches()'''


def _literal(value: Optional[str]) -> str:
    """``value`` as Python source, in double quotes like the rest of the cell."""
    return "None" if value is None else json.dumps(value)


def helpers_requirement(release: Release) -> Optional[str]:
    """The helpers at the release, as pip takes them (``NAME @ git+https://github.com/OWNER/REPO@REF``); None before."""
    if not release.is_set:
        return None
    return f"{COURSE_DISTRIBUTION} @ git+{release.repository}@{release.ref}"


def language_line(language: Optional[str]) -> str:
    """The set-up cell's line that makes the helpers speak ``language`` (``zh_CN``); none for English."""
    if language is None:
        return ""
    comment = "# the language of the helpers' hints and feedback"
    return f'\nos.environ["COURSE_LANGUAGE"] = {_literal(language)}  {comment}\n'


def setup_source(release: Release, language: Optional[str] = None) -> str:
    """The source of the Colab set-up cell for ``release``; with ``language``, it also chooses the language the
    helpers speak, in every environment."""
    return _SETUP_TEMPLATE.format(
        language=language_line(language),
        requirement=_literal(helpers_requirement(release)),
        distribution=COURSE_DISTRIBUTION,
        extras=", ".join(_literal(package) for package in COLAB_EXTRA_PACKAGES),
    )


def badges_markdown(release: Release, notebook_path: str, kaggle: bool = False) -> str:
    """Colab and Binder badges (and with ``kaggle``, Kaggle's) that open ``notebook_path``; empty before a release."""
    if not release.is_set:
        return ""
    colab = f"[![Open in Colab]({COLAB_BADGE})]({release.colab_url(notebook_path)})"
    binder = f"[![Launch on Binder]({BINDER_BADGE})]({release.binder_url(notebook_path)})"
    opened = f" [![Open in Kaggle]({KAGGLE_BADGE})]({release.kaggle_url(notebook_path)})" if kaggle else ""
    return f"{colab} {binder}{opened}"


def _without_badges(markdown: str) -> str:
    pattern = re.compile(re.escape(BADGES_START) + r".*?" + re.escape(BADGES_END) + r"\n?", re.DOTALL)
    return pattern.sub("", markdown)


def with_badges(markdown: str, badges: str) -> str:
    """``markdown`` (a notebook's first cell) with its badge block replaced: after the title line, or none."""
    markdown = _without_badges(markdown)
    if not badges:
        return markdown
    title, newline, rest = markdown.partition("\n")
    return f"{title}\n{BADGES_START}\n{badges}\n{BADGES_END}{newline}{rest}"


def is_setup_cell(cell: nbformat.NotebookNode) -> bool:
    """True for the Colab set-up cell (tagged ``colab-setup``)."""
    return cell.cell_type == "code" and SETUP_TAG in cell.get("metadata", {}).get("tags", [])


def with_launch_cells(notebook: nbformat.NotebookNode, release: Release, notebook_path: str,
                      kaggle: bool = False, language: Optional[str] = None) -> nbformat.NotebookNode:
    """A copy of ``notebook`` with fresh badges in its first cell and the set-up cell right below that cell (choosing
    ``language`` for the helpers, when given)."""
    notebook = copy.deepcopy(notebook)
    cells: List[nbformat.NotebookNode] = [cell for cell in notebook.cells if not is_setup_cell(cell)]
    if cells and cells[0].cell_type == "markdown":
        cells[0].source = with_badges(cells[0].source, badges_markdown(release, notebook_path, kaggle))
    first_code = 1 if cells and cells[0].cell_type == "markdown" else 0
    metadata = {"tags": [SETUP_TAG], **copy.deepcopy(FOLDED_METADATA)}
    setup = nbformat.v4.new_code_cell(setup_source(release, language), metadata=metadata)
    setup["id"] = SETUP_TAG  # stable, so regenerating changes nothing
    cells.insert(first_code, setup)
    notebook.cells = cells
    return notebook


def readme_open_cell(release: Release, notebook_path: Optional[str], kaggle: bool = False,
                     before_release: str = "after the first release") -> str:
    """What the README's "open" column shows for one notebook."""
    if notebook_path is None:
        return ""
    return badges_markdown(release, notebook_path, kaggle) or before_release


def readme_notebook_row(line: str) -> Optional[Tuple[str, List[str]]]:
    """For a row of the README's notebook table (``| `00_start_here` | ... |``): the stem and the row's cells."""
    match = README_NOTEBOOK_ROW.match(line)
    if not match:
        return None
    return match["stem"], [cell.strip() for cell in line.strip().strip("|").split("|")]


def readme_with_badges(readme: str, release: Release, notebook_folder: str, existing: List[str],
                       kaggle: bool = False, before_release: str = "after the first release") -> str:
    """``readme`` with the last column ("open") of its notebook table regenerated.

    The table's rows start with the notebook's stem in backticks, e.g. ``| `00_start_here` |``; a row whose
    notebook does not exist yet gets an empty cell.
    """
    lines = []
    for line in readme.split("\n"):
        row = readme_notebook_row(line)
        if row:
            stem, cells = row
            cells[-1] = readme_open_cell(release, f"{notebook_folder}/{stem}.ipynb" if stem in existing else None,
                                         kaggle, before_release)
            line = "| " + " | ".join(cells) + " |"
        lines.append(line)
    return "\n".join(lines)
