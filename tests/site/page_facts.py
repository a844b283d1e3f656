"""What a reader's browser finds on each page of a built website, gathered once per page with Playwright."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

from tests.browser.lab_page import screenshot_options

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "site"
# A page that only sends the browser on (Jupyter Book's index.html): read as its link, never opened, since the
# browser may be half-way to the next page when it is read.
REDIRECT = re.compile(r'^<meta http-equiv="Refresh" content="0; url=(?P<target>[^"]+)" />\s*$', re.IGNORECASE)
TRACEBACK_LINE = "Traceback (most recent call last)"

# Run in the page: pictures, links, error outputs, and every traceback text with the place it stands.
_GATHER = """
([cardTitles, tracebackLine]) => {
  const article = document.querySelector('article') || document.body;
  const images = [...document.images].map(i => ({src: i.currentSrc || i.src, complete: i.complete,
                                                  width: i.naturalWidth, height: i.naturalHeight}));
  const links = [...document.querySelectorAll('a[href]')].map(a => ({href: a.href, text: a.textContent.trim()}));
  const errorOutputs = [...document.querySelectorAll('.output.traceback, .output.error')]
    .map(e => e.textContent.slice(0, 300));
  const strayTracebacks = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.textContent.includes(tracebackLine)) continue;
    const details = node.parentElement.closest('details');
    const output = details && details.closest('.output');
    const card = output && cardTitles.some(title => output.textContent.trimStart().startsWith(title));
    if (!card) {
      strayTracebacks.push(node.parentElement.textContent.slice(0, 300));
    }
  }
  return {images, links, errorOutputs, strayTracebacks, text: article.textContent, lang: document.documentElement.lang,
          scripts: [...document.scripts].map(s => s.src).filter(Boolean)};
}
"""


@dataclass
class PageFacts:
    """One page as the browser showed it."""

    path: str
    text: str
    images: List[dict]
    links: List[dict]
    error_outputs: List[str]
    stray_tracebacks: List[str]
    scripts: List[str]
    lang: str = ""
    network_requests: List[str] = field(default_factory=list)


def html_pages(site: Path) -> List[str]:
    """Every page of the site, relative to its root (Sphinx's own folders, such as _static, left out)."""
    return sorted(path.relative_to(site).as_posix() for path in site.rglob("*.html")
                  if not any(part.startswith("_") for part in path.relative_to(site).parts))


def offline_context(browser, refused: List[str], **options):
    """A browser context in which every request that would leave the machine is refused, and added to ``refused``."""
    context = browser.new_context(**options)

    def refuse_network(route) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    context.route("**/*", refuse_network)
    return context


def gather(browser, site: Path, card_titles: List[str], screenshots: str = "", full_page: bool = True
           ) -> Dict[str, PageFacts]:
    """Open every page of ``site`` offline (requests off the machine are refused and recorded per page); a
    traceback counts as folded in an expected-error card when its output starts with one of ``card_titles``. With
    ``screenshots``, save a screenshot of each (the whole page, or its first screen) under
    test-artifacts/site/<screenshots>/."""
    requests: List[str] = []
    context = offline_context(browser, requests, viewport={"width": 1300, "height": 900})
    facts: Dict[str, PageFacts] = {}
    try:
        page = context.new_page()
        for relative in html_pages(site):
            redirect = REDIRECT.match((site / relative).read_text(encoding="utf-8"))
            if redirect:
                target = (site / relative).parent / redirect["target"]
                facts[relative] = PageFacts(path=relative, text="", images=[], error_outputs=[],
                                            links=[{"href": target.as_uri(), "text": "redirect"}],
                                            stray_tracebacks=[], scripts=[])
                continue
            requests.clear()
            try:
                page.goto((site / relative).as_uri(), wait_until="load")
                page.wait_for_function("[...document.images].every(image => image.complete)", timeout=30_000)
                data = page.evaluate(_GATHER, [card_titles, TRACEBACK_LINE])
            except Exception as error:  # say which page, whatever Playwright raised
                raise AssertionError(f"{relative}: the browser could not open it: {error}") from error
            facts[relative] = PageFacts(
                path=relative, text=data["text"], images=data["images"], links=data["links"],
                error_outputs=data["errorOutputs"], stray_tracebacks=data["strayTracebacks"],
                scripts=data["scripts"], lang=data["lang"], network_requests=list(requests))
            if screenshots:
                target = ARTIFACTS / screenshots / (relative.replace("/", "__").removesuffix(".html") + ".jpg")
                target.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(**screenshot_options(target), full_page=full_page)
    finally:
        context.close()
    return facts


def search_results(browser, site: Path, query: str) -> List[str]:
    """The pages Sphinx's search page lists for ``query``, as the addresses of their links."""
    context = offline_context(browser, [])
    try:
        page = context.new_page()
        page.goto((site / "search.html").as_uri() + f"?q={query}", wait_until="load")
        page.wait_for_function("document.querySelectorAll('#search-results li a').length > 0", timeout=30_000)
        return page.eval_on_selector_all("#search-results li a", "links => links.map(a => a.href)")
    finally:
        context.close()
