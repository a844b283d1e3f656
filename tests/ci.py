"""Whether this run is CI's: there a test that cannot run here (no browser, no font for Chinese) fails instead of
skipping."""
from __future__ import annotations

import os


def in_ci() -> bool:
    """True when the CI variable is set (CI=true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
