"""Fixtures for the website's tests: the site built in place, a released copy's site, and what each page shows.

Both builds share this repository's execution cache: the released copy differs only in its launch links, so its
notebooks come from the cache instead of running again.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from authoring.site.editions import editions
from tests.browser.checks import error_card_title, speaking
from tests.browser.conftest import require_browser
from tests.paths import ROOT
from tests.site.build import build_site, released_copy, require_jupyter_book
from tests.site.page_facts import PageFacts, gather


@pytest.fixture(scope="session")
def site() -> Path:
    """``bash book/build`` in this repository: book/_build/html/."""
    require_jupyter_book()
    require_browser()
    return build_site(ROOT)


@pytest.fixture(scope="session")
def released_root(tmp_path_factory: pytest.TempPathFactory, site: Path) -> Path:
    """A copy of the course released as https://github.com/example-org/NAME at v1.0.0 (after ``site``, whose
    build fills the shared execution cache)."""
    return released_copy(tmp_path_factory.mktemp("released-course"))


@pytest.fixture(scope="session")
def released_site(released_root: Path) -> Path:
    """The released copy's website."""
    return build_site(released_root)


def card_titles() -> list:
    """The expected-error card's title in each edition's language."""
    titles = []
    for edition in editions(ROOT):
        with speaking(edition.language):
            titles.append(error_card_title())
    return titles


@pytest.fixture(scope="session")
def pages(chromium, site: Path) -> Dict[str, PageFacts]:
    """Every page of the site, both editions, as the browser showed it; screenshots in
    test-artifacts/site/unreleased/."""
    return gather(chromium, site, card_titles(), screenshots="unreleased")


@pytest.fixture(scope="session")
def released_pages(chromium, released_site: Path) -> Dict[str, PageFacts]:
    """Every page of the released copy's site; its first screen (launch buttons, page note) in
    test-artifacts/site/released/ (the rest of each page is the same as without a release)."""
    return gather(chromium, released_site, card_titles(), screenshots="released", full_page=False)
