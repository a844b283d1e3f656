"""The Chinese solved notebooks run strict, every check printing its line in Chinese, and the helpers speaking
Chinese (the set-up cell chose it): no message of theirs that has a Chinese entry is shown in English.

A Chinese notebook's code cells are the English ones but for each check's title and printed line
(tests/authoring/test_chinese_edition.py). So this run proves those lines; the student copies' cells are the English
student copies' (run in JupyterLab by tests/browser/test_jupyterlab.py) with the same lines, and are not run again."""

import html
import re

import nbformat
import polib
import pytest
from nbclient import NotebookClient

from authoring import generate
from authoring.translation import messages as zh_messages
from authoring.translation.edition import CHECK_TITLE_ZH, CHECKED_ZH, FOLDER
from helpers.course.exercises.api import STRICT_VARIABLE
from tests.paths import ROOT

STEMS = generate.translated_stems(ROOT)
CATALOG = [entry for entry in polib.pofile(str(zh_messages.catalog_file(ROOT))) if entry.translated()]
LONG = 30  # a run of a message's English this long in an output: the helpers spoke English (shorter runs, such as
#           "'s gradient differs from ", also occur in what the notebooks' own English code prints)


def _english_runs(entry):
    """The stretches of a message's English between its fields, as long as ``LONG``."""
    return [run for run in re.split(r"\{\w*\}", entry.msgid) for run in run.split("\n") if len(run) >= LONG]


def _shown(notebook):
    """Everything the run showed: printed text, and each output's plain and HTML forms (unescaped)."""
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", ""))
            data = output.get("data", {})
            parts += [data.get("text/plain", ""), html.unescape(re.sub(r"<[^>]+>", "", data.get("text/html", "")))]
    return "\n".join(parts)


def _run_strict(path, monkeypatch):
    monkeypatch.setenv(STRICT_VARIABLE, "1")  # the kernel inherits it
    notebook = nbformat.read(str(path), as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return notebook


def _printed(cell):
    return "".join(output.get("text", "") for output in cell.outputs if output.get("name") == "stdout")


@pytest.mark.parametrize("stem", STEMS)
def test_the_chinese_solution_runs_strict_and_each_check_speaks_chinese(stem, monkeypatch):
    notebook = _run_strict(ROOT / "solutions" / FOLDER / f"{stem}.ipynb", monkeypatch)
    checks = [cell for cell in notebook.cells if cell.source.startswith(CHECK_TITLE_ZH)]
    assert checks
    for cell in checks:
        title = cell.source.split("\n", 1)[0][len(CHECK_TITLE_ZH):]
        assert _printed(cell).strip().split("\n")[-1] == CHECKED_ZH + title
    shown = _shown(notebook)
    english = [run for entry in CATALOG for run in _english_runs(entry) if run in shown]
    assert not english, f"the helpers spoke English in the Chinese notebook: {english[:5]}"
    assert any(entry.msgstr.split("{")[0] in shown for entry in CATALOG if len(entry.msgstr.split("{")[0]) >= 4)
