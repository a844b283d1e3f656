"""Fixtures for the browser tests: one Chromium, and one JupyterLab server per course folder, per session.

Two servers, because a kernel inherits its server's environment: the one serving solutions/ runs with
COURSE_STRICT=1 (a check that does not pass raises), the one serving notebooks/ with COURSE_STRICT=0, as the
root conftest.py sets it for nbval. Both serve temporary copies, so the browser never writes into the repo.
"""
from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterator, Optional

import pytest

from authoring.generate import is_solution_notebook
from authoring.lab_server import LabServer, start_lab_server, stop_lab_server
from helpers.course.exercises.api import STRICT_VARIABLE
from tests.ci import in_ci

if TYPE_CHECKING:
    from playwright.sync_api import Browser

REPO_ROOT = Path(__file__).resolve().parents[2]
COURSE_FOLDERS = ("solutions", "notebooks")
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
# Without the networking switches Chromium keeps calling Google services, which a closed network refuses.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]


def chromium_executable() -> Optional[str]:
    """The system Chromium: $COURSE_CHROMIUM, else Debian's /usr/bin/chromium, else one on PATH."""
    configured = os.environ.get("COURSE_CHROMIUM")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    for candidate in CHROMIUM_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


def browser_unavailable_reason() -> Optional[str]:
    """Why the browser tests cannot run here, or None when they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed: pip install playwright (no browser download needed)"
    if chromium_executable() is None:
        return "no system Chromium found: apt-get install chromium (or set COURSE_CHROMIUM to its path)"
    return None


def require_browser() -> None:
    """Skip when Playwright or Chromium is missing; fail instead under CI=true, where they must be installed."""
    reason = browser_unavailable_reason()
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI is set and the browser tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def strict_value(folder: str) -> str:
    """COURSE_STRICT for a folder's kernels, by the rule the root conftest.py applies for nbval."""
    return "1" if is_solution_notebook(REPO_ROOT / folder / "any.ipynb", REPO_ROOT) else "0"


class LabServers:
    """One JupyterLab server per course folder, started on first use, all stopped by ``stop_all``."""

    def __init__(self, course_copy: Path, state_root: Path) -> None:
        self.course_copy = course_copy
        self.state_root = state_root
        self.servers: Dict[str, LabServer] = {}

    def get(self, folder: str) -> LabServer:
        """The server whose root is the copy of ``folder``."""
        if folder not in self.servers:
            self.servers[folder] = start_lab_server(
                self.course_copy / folder, self.state_root / folder, {STRICT_VARIABLE: strict_value(folder)}
            )
        return self.servers[folder]

    def stop_all(self) -> None:
        """Stop every server and its kernels, each even when stopping another failed; warn about killed kernels."""
        servers, self.servers = list(self.servers.values()), {}
        failures = []
        for server in servers:
            try:
                killed = stop_lab_server(server)
            except Exception as error:  # noqa: BLE001 - the other servers must still stop; re-raised below
                failures.append(error)
                continue
            if killed:
                warnings.warn(f"killed kernels that outlived their server:\n{killed}", stacklevel=1)
        if failures:
            raise failures[0]


@pytest.fixture(scope="session")
def course_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary copy of solutions/ and notebooks/: what the servers serve and the browser may change."""
    copy = tmp_path_factory.mktemp("course")
    for folder in COURSE_FOLDERS:
        shutil.copytree(REPO_ROOT / folder, copy / folder,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "*.bak", "__pycache__"))
    return copy


@pytest.fixture(scope="session")
def lab_servers(
    chromium: Browser, course_copy: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LabServers]:
    """The JupyterLab servers, stopped with all their kernels at the end of the session, whatever happened.

    It asks for ``chromium`` first so that a missing browser skips (or fails) before any server starts.
    """
    servers = LabServers(course_copy, tmp_path_factory.mktemp("jupyter-state"))
    try:
        yield servers
    finally:
        servers.stop_all()


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """Where screenshots go: $COURSE_ARTIFACTS/browser, else test-artifacts/browser at the repo root."""
    base = Path(os.environ["COURSE_ARTIFACTS"]) if os.environ.get("COURSE_ARTIFACTS") else REPO_ROOT / "test-artifacts"
    return base / "browser"
