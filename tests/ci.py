"""Whether this run is CI's: there a test that cannot run here (no browser, no font for Chinese) fails instead of
skipping."""
from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    """True when the CI variable is set (CI=true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> None:
    """The test cannot run here for ``reason``: it fails under CI, which installs what it needs, and skips elsewhere."""
    if in_ci():
        pytest.fail(f"CI is set: {reason}", pytrace=False)
    pytest.skip(reason)
