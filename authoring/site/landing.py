"""The website's landing page: ``book/intro.md``, with what it takes from the README filled in.

The README stays the one place for what the course is, its two set-up commands and the notebook map (with times):
the template names each part with a marker, and this module puts the README's current text there. The Chinese
site's landing page is the template translated (``i18n/zh_CN/site.po``) filled from ``README.zh-CN.md``.
"""
from __future__ import annotations

import re
from typing import Dict, List

from authoring.launch_cells import readme_notebook_row, with_badges
from authoring.site.pages import NOTEBOOK_FOLDER
from authoring.site.pages import with_line_under_title
from authoring.site.words import MAP_HEADER

INTRO_MARKER = "<!-- from README: what the course teaches, and for whom -->"
COMMANDS_MARKER = "<!-- from README: the two set-up commands -->"
MAP_MARKER = "<!-- from README: the notebook map -->"
SETUP_HEADING = "## Set-up"
LANGUAGE_LINE = re.compile(r"\]\(README[\w.-]*\.md\)")  # a README's line to its twin in the other language


class LandingError(ValueError):
    """The template or the README lacks a part the landing page needs."""


def _section(readme: str, heading_start: str) -> str:
    """The README's section whose heading starts with ``heading_start``, up to the next heading of its level."""
    level = heading_start.split(" ", 1)[0]
    parts = re.split(rf"^(?={re.escape(level)} )", readme, flags=re.MULTILINE)
    for part in parts:
        if part.startswith(heading_start):
            return part
    raise LandingError(f"the README has no section {heading_start!r}")


def readme_intro(readme: str, setup_heading: str = SETUP_HEADING) -> str:
    """The README's opening paragraphs: between its title and its set-up section, without a released README's
    badges (pictures from the network; each page has its own launch links) and without its line to the README in
    the other language (each page has its own line to its other language)."""
    opening = with_badges(readme.split(f"\n{setup_heading}", 1)[0], "")
    opening = "\n".join(line for line in opening.split("\n") if not LANGUAGE_LINE.search(line))
    title, _, rest = opening.partition("\n")
    if not title.startswith("# ") or not rest.strip():
        raise LandingError("the README must open with a title and the paragraphs that say what the course is")
    return rest.strip()


def readme_commands(readme: str, setup_heading: str = SETUP_HEADING) -> str:
    """The fenced block of the README's set-up section (the two commands)."""
    match = re.search(r"^```bash\n.*?^```$", _section(readme, setup_heading), flags=re.MULTILINE | re.DOTALL)
    if not match:
        raise LandingError("the README's set-up section has no ```bash block")
    return match.group(0)


def notebook_map(readme: str, notebooks: List[str], folder: str = NOTEBOOK_FOLDER, header: str = MAP_HEADER) -> str:
    """The README's notebook table, as links to the pages (in ``folder``): notebook, what you learn, time."""
    rows: Dict[str, str] = {}
    for line in readme.splitlines():
        row = readme_notebook_row(line)
        if row and len(row[1]) >= 3:
            stem, (_, what, time, *_) = row
            rows[stem] = f"| [`{stem}`]({folder}/{stem}.ipynb) | {what} | {time} |"
    missing = [stem for stem in notebooks if stem not in rows]
    if missing:
        raise LandingError(f"the README's notebook table has no row for {missing}")
    return "\n".join([header, "|---|---|---|", *(rows[stem] for stem in notebooks)])


def landing_page(template: str, readme: str, notebooks: List[str], setup_heading: str = SETUP_HEADING,
                 folder: str = NOTEBOOK_FOLDER, map_header: str = MAP_HEADER, under_title: str = "") -> str:
    """``template`` with each marker replaced by the README's part, and ``under_title`` after its title line."""
    parts = {INTRO_MARKER: readme_intro(readme, setup_heading), COMMANDS_MARKER: readme_commands(readme, setup_heading),
             MAP_MARKER: notebook_map(readme, notebooks, folder, map_header)}
    for marker, text in parts.items():
        if marker not in template:
            raise LandingError(f"book/intro.md has no marker {marker}")
        template = template.replace(marker, text)
    template = with_line_under_title(template, under_title)
    return template
