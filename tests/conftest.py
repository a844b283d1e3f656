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


# The modules one worker runs whole for longest (about 110-135 s each on 2 cores), longest first: started first, so
# that the short tests fill the other workers meanwhile and at the end, instead of one of them running alone last.
LONGEST_FIRST = ("tests/site/", "tests/browser/test_solved_course.py", "tests/grade/test_grade_room.py")


def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """The longest modules first (``LONGEST_FIRST``), then every other test in its usual order."""
    def rank(item: pytest.Item) -> int:
        return next((place for place, start in enumerate(LONGEST_FIRST) if item.nodeid.startswith(start)),
                    len(LONGEST_FIRST))

    items.sort(key=rank)
