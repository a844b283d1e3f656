"""What a run of a Chinese solved notebook must show: each check's printed line in Chinese, and the helpers speaking
Chinese (no message of theirs that has a Chinese entry shown in English).

The run is either tests/authoring/test_chinese_notebooks_run.py's own, or the website's build of the Chinese
edition (tests/site), whichever the machine can do: both run the notebooks with COURSE_STRICT=1 in Chinese.
"""
from __future__ import annotations

import functools
import html
import re
from typing import List

import nbformat
import polib

from authoring.translation import messages as zh_messages
from authoring.translation.edition import CHECK_TITLE_ZH, CHECKED_ZH
from tests.paths import ROOT

LONG = 30  # a run of a message's English this long in an output: the helpers spoke English (shorter runs, such as
#           "'s gradient differs from ", also occur in what the notebooks' own English code prints)


@functools.lru_cache(maxsize=None)
def _catalog() -> List[polib.POEntry]:
    return [entry for entry in polib.pofile(str(zh_messages.catalog_file(ROOT))) if entry.translated()]


def _english_runs(entry: polib.POEntry) -> List[str]:
    """The stretches of a message's English between its fields, as long as ``LONG``."""
    return [run for run in re.split(r"\{\w*\}", entry.msgid) for run in run.split("\n") if len(run) >= LONG]


def shown(notebook: nbformat.NotebookNode) -> str:
    """Everything the run showed: printed text, and each output's plain and HTML forms (unescaped)."""
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", ""))
            data = output.get("data", {})
            parts += [data.get("text/plain", ""), html.unescape(re.sub(r"<[^>]+>", "", data.get("text/html", "")))]
    return "\n".join(parts)


def _printed(cell: nbformat.NotebookNode) -> str:
    return "".join(output.get("text", "") for output in cell.get("outputs", []) if output.get("name") == "stdout")


def chinese_run_problems(notebook: nbformat.NotebookNode) -> List[str]:
    """What is wrong with a run of a Chinese solved notebook (``notebook`` with its outputs): a check cell whose
    last printed line is not its Chinese ``✓ 已检查：`` line, English the helpers spoke, no Chinese they spoke."""
    problems = []
    checks = [cell for cell in notebook.cells if cell.cell_type == "code" and cell.source.startswith(CHECK_TITLE_ZH)]
    if not checks:
        problems.append("no check cell with a Chinese title")
    for cell in checks:
        title = cell.source.split("\n", 1)[0][len(CHECK_TITLE_ZH):]
        last = _printed(cell).strip().split("\n")[-1]
        if last != CHECKED_ZH + title:
            problems.append(f"the check {title!r} printed {last!r} last")
    text, catalog = shown(notebook), _catalog()
    english = [run for entry in catalog for run in _english_runs(entry) if run in text]
    if english:
        problems.append(f"the helpers spoke English in the Chinese notebook: {english[:5]}")
    if not any(entry.msgstr.split("{")[0] in text for entry in catalog if len(entry.msgstr.split("{")[0]) >= 4):
        problems.append("none of the helpers' Chinese messages shows")
    return problems
