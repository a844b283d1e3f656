"""Fixtures shared by the test folders that drive a browser (tests/browser/, tests/site/), and the tests' order.

One Playwright per test process: two in one process cannot run (the second finds the first one's event loop), and
one xdist worker may run tests of both folders.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, List

import pytest

from tests.browser.conftest import CHROMIUM_ARGS, chromium_executable, require_browser

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="session")
def chromium() -> Iterator[Browser]:
    """Debian's Chromium, headless, driven by Playwright (never a downloaded browser build)."""
    require_browser()
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=chromium_executable(), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()


def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """The website's tests first: its module is the longest one a single worker runs (it builds the site twice), so
    it starts while the other workers share the rest, instead of running alone at the end."""
    items.sort(key=lambda item: 0 if "tests/site/" in item.nodeid else 1)
