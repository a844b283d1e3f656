"""The website's landing page: ``book/intro.md``, with what it takes from the README filled in.

The README stays the one place for what the course is, its two set-up commands and the notebook map (with times):
the template names each part with a marker, and this module puts the README's current text there.
"""
from __future__ import annotations

import re
from typing import Dict, List

from authoring.launch_cells import readme_notebook_row, with_badges
from authoring.site.pages import NOTEBOOK_FOLDER

INTRO_MARKER = "<!-- from README: what the course teaches, and for whom -->"
COMMANDS_MARKER = "<!-- from README: the two set-up commands -->"
MAP_MARKER = "<!-- from README: the notebook map -->"
SETUP_HEADING = "## Set-up"
CHINESE_README = "(README.zh-CN.md)"  # the README's line to its Chinese twin, which the English site does not have


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


def readme_intro(readme: str) -> str:
    """The README's opening paragraphs: between its title and its set-up section, without a released README's
    badges (pictures from the network; each page has its own launch links) and without its line to the Chinese
    README (a file the site does not hold)."""
    opening = with_badges(readme.split(f"\n{SETUP_HEADING}", 1)[0], "")
    opening = "\n".join(line for line in opening.split("\n") if CHINESE_README not in line)  # the language line
    title, _, rest = opening.partition("\n")
    if not title.startswith("# ") or not rest.strip():
        raise LandingError("the README must open with a title and the paragraphs that say what the course is")
    return rest.strip()


def readme_commands(readme: str) -> str:
    """The fenced block of the README's set-up section (the two commands)."""
    match = re.search(r"^```bash\n.*?^```$", _section(readme, SETUP_HEADING), flags=re.MULTILINE | re.DOTALL)
    if not match:
        raise LandingError("the README's set-up section has no ```bash block")
    return match.group(0)


def notebook_map(readme: str, notebooks: List[str]) -> str:
    """The README's notebook table, as links to the pages: notebook, what you learn, time."""
    rows: Dict[str, str] = {}
    for line in readme.splitlines():
        row = readme_notebook_row(line)
        if row and len(row[1]) >= 3:
            stem, (_, what, time, *_) = row
            rows[stem] = f"| [`{stem}`]({NOTEBOOK_FOLDER}/{stem}.ipynb) | {what} | {time} |"
    missing = [stem for stem in notebooks if stem not in rows]
    if missing:
        raise LandingError(f"the README's notebook table has no row for {missing}")
    return "\n".join(["| notebook | what you learn | time |", "|---|---|---|", *(rows[stem] for stem in notebooks)])


def landing_page(template: str, readme: str, notebooks: List[str]) -> str:
    """``template`` with each marker replaced by the README's part."""
    parts = {INTRO_MARKER: readme_intro(readme), COMMANDS_MARKER: readme_commands(readme),
             MAP_MARKER: notebook_map(readme, notebooks)}
    for marker, text in parts.items():
        if marker not in template:
            raise LandingError(f"book/intro.md has no marker {marker}")
        template = template.replace(marker, text)
    return template
