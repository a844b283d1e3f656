"""The virtual environment built from binder/ by ``bash authoring/binder-venv``: where it is, and whether it must be.

CI builds it (.ci/run) and there its absence fails the tests that need it; elsewhere they skip and say how to build it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import pytest

from tests.browser.conftest import in_ci
from tests.paths import ROOT

VENV_VARIABLE = "COURSE_BINDER_VENV"
DEFAULT_VENV = ROOT / "build" / "binder-venv"


def binder_venv() -> Path:
    """$COURSE_BINDER_VENV, else build/binder-venv."""
    return Path(os.environ.get(VENV_VARIABLE) or DEFAULT_VENV)


def binder_python() -> Optional[str]:
    """The Binder venv's Python, or None when the venv has not been built."""
    python = binder_venv() / "bin" / "python"
    return str(python) if python.is_file() else None


def require_binder_python() -> str:
    """The Binder venv's Python; skip without it, or fail under CI=true, where .ci/run builds it."""
    python = binder_python()
    if python:
        return python
    reason = f"no Binder venv at {binder_venv()}: build it with `bash authoring/binder-venv`"
    if in_ci():
        pytest.fail(f"CI is set and {reason}", pytrace=False)
    pytest.skip(reason)
