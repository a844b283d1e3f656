"""pytest set-up for the whole course: solution notebooks run strict, student copies do not.

nbval starts each notebook's kernel with this process's environment, so setting COURSE_STRICT
just before a notebook's first cell decides how that notebook's checks behave.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.exercises.api import STRICT_VARIABLE
from helpers.generate import is_solution_notebook

ROOT = Path(__file__).resolve().parent
collect_ignore_glob = ["tests/fixtures/*", "build/*", "*.ipynb_checkpoints*"]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    path = Path(str(item.fspath))
    if path.suffix == ".ipynb":
        os.environ[STRICT_VARIABLE] = "1" if is_solution_notebook(path, ROOT) else "0"
    else:
        os.environ.pop(STRICT_VARIABLE, None)
