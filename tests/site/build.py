"""Building the course's website for the tests: in place (reusing its execution cache) and as a released copy."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from tests.browser.conftest import browser_unavailable_reason
from tests.ci import unavailable
from tests.paths import ROOT

BUILD_TIMEOUT_S = 1800
CACHE_BASE = ROOT / "book" / "_build" / ".jupyter_cache"
THROWAWAY_REPOSITORY = "https://github.com/example-org/NAME"
THROWAWAY_REF = "v1.0.0"
TOOLS_MISSING = "the website's tools are not installed: pip install -r book/requirements.txt"
KERNEL_START_FAILED = "Kernel died before replying to kernel_info"  # nbclient's words


def site_unbuildable_reason() -> Optional[str]:
    """Why tests/site cannot build and open the website here (no Jupyter Book, no graphviz, no browser), or None."""
    if importlib.util.find_spec("jupyter_book") is None:
        return TOOLS_MISSING
    if shutil.which("dot") is None:
        return "graphviz's dot is missing (bash book/build needs it)"
    return browser_unavailable_reason()


def require_jupyter_book() -> None:
    """Skip without the site's tools (book/requirements.txt); fail instead under CI=true, which installs them."""
    if importlib.util.find_spec("jupyter_book") is not None:
        return
    unavailable(f"the website cannot be built: {TOOLS_MISSING}")


def build_site(root: Path) -> Path:
    """Run ``bash book/build`` for the course at ``root`` (sharing this repository's cache); its HTML folder.

    A build whose kernel died at its start is run once more: jupyter_client picks a kernel's ports before the kernel
    binds them, and another process of the run (a kernel, a server, a process group's store) can take one in between
    (jupyter/jupyter_client#154). The execution cache keeps the notebooks that ran, so only the rest run again.
    """
    command = ["bash", str(root / "book" / "build"), "--execution-cache", str(CACHE_BASE)]
    result = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if result.returncode != 0 and KERNEL_START_FAILED in result.stdout + result.stderr:
        print(f"bash book/build: {KERNEL_START_FAILED}; building again")
        result = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if result.returncode != 0:
        log = (result.stdout + result.stderr)[-6000:]
        pytest.fail(f"bash book/build failed (exit {result.returncode}):\n{log}", pytrace=False)
    return root / "book" / "_build" / "html"


def tracked_and_new_files(root: Path) -> list:
    """The course's files as a clean clone would have them (plus files not yet committed, not ignored ones)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    return [name for name in listed if name and (root / name).is_file()]


def released_copy(destination: Path) -> Path:
    """A copy of the course, released as the throwaway repository and ref by the real release step."""
    for name in tracked_and_new_files(ROOT):
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    command = [sys.executable, "-m", "authoring.release", "--root", str(destination),
               "--repository", THROWAWAY_REPOSITORY, "--ref", THROWAWAY_REF]
    subprocess.run(command, cwd=destination, check=True, capture_output=True, text=True)
    return destination
