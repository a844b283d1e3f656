"""The Chinese solved notebooks run strict, every check printing its line in Chinese, and the helpers speaking
Chinese (the set-up cell chose it): no message of theirs that has a Chinese entry is shown in English.

A Chinese notebook's code cells are the English ones but for each check's title and printed line
(tests/authoring/test_chinese_edition.py). So this run proves those lines; the student copies' cells are the English
student copies' (run in JupyterLab by tests/browser/test_jupyterlab.py) with the same lines, and are not run again.
Where the website can be built, its build runs these notebooks strict in Chinese, and tests/site checks the same of
that run: this module's own run is then skipped, so the suite runs each Chinese notebook once.
"""

import nbformat
import pytest
from nbclient import NotebookClient

from authoring import generate
from authoring.translation.edition import FOLDER
from helpers.course.exercises.api import STRICT_VARIABLE
from tests.chinese_run import chinese_run_problems
from tests.paths import ROOT
from tests.site.build import site_unbuildable_reason

STEMS = generate.translated_stems(ROOT)


def _run_strict(path, monkeypatch):
    monkeypatch.setenv(STRICT_VARIABLE, "1")  # the kernel inherits it
    notebook = nbformat.read(str(path), as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return notebook


@pytest.mark.parametrize("stem", STEMS)
def test_the_chinese_solution_runs_strict_and_each_check_speaks_chinese(stem, monkeypatch, request):
    site_checks = any(item.name.startswith("test_the_chinese_pages_ran_strict_in_chinese")
                      for item in request.session.items)
    if site_checks and site_unbuildable_reason() is None:
        pytest.skip("the website's build runs the Chinese notebooks strict; tests/site/test_site.py checks that run")
    notebook = _run_strict(ROOT / "solutions" / FOLDER / f"{stem}.ipynb", monkeypatch)
    problems = chinese_run_problems(notebook)
    assert not problems, f"{stem}: " + "; ".join(problems)
