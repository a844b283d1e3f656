"""The course's website, built by ``bash book/build`` and opened page by page in the system Chromium, offline.

Each page is gathered once (tests/site/page_facts.py): its pictures, links, error outputs and text, the requests
it tried to send off the machine; a screenshot of each lands in test-artifacts/site/.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List, Tuple
from urllib.parse import unquote, urlparse

import nbformat
import pytest
import yaml

from authoring import release_json
from authoring.launch_cells import SETUP_TAG
from authoring.site.landing import readme_commands
from authoring.site.pages import course_pages
from helpers.course.exercises.registry import exercises
from tests.paths import ROOT
from tests.site.build import THROWAWAY_REF, THROWAWAY_REPOSITORY
from tests.site.page_facts import PageFacts, search_results

PAGES = course_pages(ROOT)
DRAWING_CALL = re.compile(r"\b(draw_graph|draw_saved_graph|draw_module_graph)\(|\bplt\.show\(")
SHOWN_EXPECTED_ERROR = re.compile(r"with expect_error\((?![^)]*show=False)|^%%expect_error", re.MULTILINE)
LAUNCH_ADDRESS = re.compile(r"^https?://(colab\.research\.google\.com/github/|mybinder\.org/v2/)")


def solved(stem: str) -> nbformat.NotebookNode:
    return nbformat.read(str(ROOT / "solutions" / f"{stem}.ipynb"), as_version=4)


def code_of(notebook: nbformat.NotebookNode) -> List[str]:
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def page_of(stem: str) -> str:
    return f"notebooks/{stem}.html"


def launch_links(facts: PageFacts) -> List[str]:
    return [link["href"] for link in facts.links if LAUNCH_ADDRESS.match(link["href"])]


# ---------------------------------------------------------------- the pages, in course order

def test_the_site_has_every_page_in_course_order(site: Path, pages: Dict[str, PageFacts]) -> None:
    expected = ["intro.html", *(page_of(stem) for stem in PAGES.notebooks),
                *(f"docs/{name}.html" for name in PAGES.documents)]
    assert set(expected) <= set(pages), f"pages missing: {sorted(set(expected) - set(pages))}"
    navigation = [urlparse(link["href"]).path for link in pages["intro.html"].links]
    positions = [next((i for i, path in enumerate(navigation) if path.endswith("/" + page)), None)
                 for page in expected[1:]]
    assert None not in positions, f"the navigation does not link every page: {list(zip(expected[1:], positions))}"
    assert positions == sorted(positions), "the navigation does not list the pages in course order"


def executed(site: Path, stem: str) -> nbformat.NotebookNode:
    """The page's notebook with the outputs its run made, from the build's execution cache (Jupyter Book's own
    copy beside the HTML has no outputs when they came from the cache)."""
    from jupyter_cache import get_cache

    source = site.parent / "source"
    cache = get_cache(yaml.safe_load((source / "_config.yml").read_text(encoding="utf-8"))["execute"]["cache"])
    page = nbformat.read(str(source / "notebooks" / f"{stem}.ipynb"), as_version=4)
    return cache.get_cache_bundle(cache.match_cache_notebook(page).pk).nb


def outputs_of(notebook: nbformat.NotebookNode) -> List[dict]:
    return [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]


@pytest.mark.parametrize("stem", PAGES.notebooks)
def test_each_notebook_page_shows_every_output_of_its_run(stem: str, site: Path, pages: Dict[str, PageFacts]) -> None:
    """The pictures, expected-error cards, timelines and checks the build's run made, all on the page; and at
    least one per drawing cell and per expected error the notebook's code shows."""
    facts = pages[page_of(stem)]
    notebook, run = solved(stem), outputs_of(executed(site, stem))
    attachments = sum(len(cell.get("attachments", {})) for cell in notebook.cells if cell.cell_type == "markdown")
    pictures_run = sum(any(kind.startswith("image/") for kind in output.get("data", {})) for output in run)
    pictures = [image for image in facts.images if "/_images/" in image["src"]]
    assert len(pictures) == attachments + pictures_run, (
        f"{stem}: {len(pictures)} pictures on the page; {attachments} figures and {pictures_run} drawn by the run")
    assert pictures_run >= sum(bool(DRAWING_CALL.search(source)) for source in code_of(notebook)), (
        f"{stem}: a drawing cell drew no picture (is graphviz's dot installed?)")

    def shown(title: str) -> int:
        return sum(title in output.get("data", {}).get("text/html", "") for output in run)

    cards = shown("Expected error reproduced")
    assert facts.text.count("Expected error reproduced") == cards, f"{stem}: expected-error cards"
    assert cards >= sum(len(SHOWN_EXPECTED_ERROR.findall(source)) for source in code_of(notebook)), stem
    assert facts.text.count("Version timeline") == shown("Version timeline"), f"{stem}: version timelines"
    checks = [cell for cell in notebook.cells if "check" in cell.metadata.get("tags", [])]
    assert facts.text.count("✓ checked") >= len(checks), f"{stem}: fewer check lines on the page than check cells"
    for exercise_id, exercise in exercises().items():
        if exercise.notebook == stem:
            assert f"Correct - exercise {exercise_id}" in facts.text, f"{stem}: no passed card for {exercise_id}"


# ---------------------------------------------------------------- what a reader must never see

@pytest.fixture(params=["unreleased", "released"])
def any_site(request: pytest.FixtureRequest) -> Tuple[Path, Dict[str, PageFacts]]:
    """This repository's site and its pages, then the released copy's."""
    prefix = "" if request.param == "unreleased" else "released_"
    return request.getfixturevalue(f"{prefix}site"), request.getfixturevalue(f"{prefix}pages")


def test_no_page_shows_a_python_traceback(any_site: Tuple[Path, Dict[str, PageFacts]]) -> None:
    """Error outputs, or a traceback anywhere but folded inside an expected-error card."""
    site, pages = any_site
    for path, facts in pages.items():
        assert not facts.error_outputs, f"{path} shows an error output: {facts.error_outputs[0]}"
        assert not facts.stray_tracebacks, f"{path} shows a traceback: {facts.stray_tracebacks[0]}"


def test_cells_hidden_in_the_notebooks_are_hidden_on_the_site(pages: Dict[str, PageFacts]) -> None:
    for stem in PAGES.notebooks:
        text = pages[page_of(stem)].text
        assert "Set-up for Google Colab" not in text and "COURSE_HELPERS" not in text, f"{stem}: the set-up cell"
        for cell in solved(stem).cells:
            hidden = cell.metadata.get("jupyter", {}).get("source_hidden") and SETUP_TAG not in cell.metadata.get(
                "tags", [])
            asserts = [line.strip() for line in cell.source.splitlines() if line.strip().startswith("assert ")]
            if hidden and asserts:
                assert asserts[0] not in text, f"{stem}: a folded cell's code is on the page: {asserts[0]}"


def test_widgets_are_shown_in_their_static_form(pages: Dict[str, PageFacts]) -> None:
    for path, facts in pages.items():
        for widget_text in ("VBox(", "HBox(", "Button(", "FloatProgress("):
            assert widget_text not in facts.text, f"{path} shows a widget's text form: {widget_text}"
    for stem in PAGES.notebooks:
        predictions = sum(source.count("predict(") for source in code_of(solved(stem)))
        assert pages[page_of(stem)].text.count("Predict what happens") == predictions, f"{stem}: predictions"


# ---------------------------------------------------------------- pictures, links, search, offline

def test_every_picture_decodes_with_a_size(any_site: Tuple[Path, Dict[str, PageFacts]]) -> None:
    site, pages = any_site
    for path, facts in pages.items():
        for image in facts.images:
            assert image["complete"] and image["width"] > 0 and image["height"] > 0, f"{path}: {image['src']}"


def test_every_internal_link_resolves(any_site: Tuple[Path, Dict[str, PageFacts]]) -> None:
    site, pages = any_site
    ids: Dict[Path, set] = {}
    for path, facts in pages.items():
        for link in facts.links:
            address = urlparse(link["href"])
            if address.scheme != "file":
                continue
            target = Path(unquote(address.path))
            assert target.is_file(), f"{path}: the link {link['text']!r} leads to a missing {target}"
            assert target.resolve().is_relative_to(site.resolve()), f"{path}: a link leaves the site: {target}"
            if address.fragment and target.suffix == ".html":
                if target not in ids:
                    ids[target] = set(re.findall(r'\bid="([^"]+)"', target.read_text(encoding="utf-8")))
                assert unquote(address.fragment) in ids[target], f"{path}: no #{address.fragment} in {target.name}"


def test_search_finds_retain_graph(chromium, site: Path) -> None:
    found = [urlparse(address).path for address in search_results(chromium, site, "retain_graph")]
    assert any(path.endswith(page_of("02_backward_twice")) for path in found), found


def test_no_page_needs_the_network(any_site: Tuple[Path, Dict[str, PageFacts]]) -> None:
    site, pages = any_site
    for path, facts in pages.items():
        assert not facts.network_requests, f"{path} asked the network for {facts.network_requests}"
        assert all(script.startswith("file://") for script in facts.scripts), f"{path}: {facts.scripts}"


# ---------------------------------------------------------------- the student notebook, launch buttons

def test_each_page_links_the_student_notebook_to_download(pages: Dict[str, PageFacts]) -> None:
    for stem in PAGES.notebooks:
        links = [link for link in pages[page_of(stem)].links if link["text"] == "download the student notebook"]
        assert len(links) == 1, f"{stem}: {len(links)} download links"
        target = Path(unquote(urlparse(links[0]["href"]).path))
        assert target.name == f"{stem}.ipynb"
        assert json.loads(target.read_bytes()) == json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_bytes())


def test_no_launch_button_before_a_release(pages: Dict[str, PageFacts]) -> None:
    if release_json.load(ROOT).is_set:
        pytest.skip("this repository has a release: the released copy's test covers its buttons")
    for path, facts in pages.items():
        assert not launch_links(facts), f"{path} has launch links before a release: {launch_links(facts)}"
        assert "executablebooks" not in " ".join(link["href"] for link in facts.links), (
            f"{path} links Jupyter Book's default repository")


def test_launch_buttons_open_the_student_copy_at_the_release(released_root: Path,
                                                              released_pages: Dict[str, PageFacts]) -> None:
    release = release_json.load(released_root)
    assert (release.repository, release.ref) == (THROWAWAY_REPOSITORY, THROWAWAY_REF)
    for stem in PAGES.notebooks:
        student = f"notebooks/{stem}.ipynb"
        found = {unquote(address) for address in launch_links(released_pages[page_of(stem)])}
        expected = {unquote(release.colab_url(student)), unquote(release.binder_url(student))}
        assert expected <= found, f"{stem}: launch links {sorted(found)}; expected {sorted(expected)}"
        assert all(student in address for address in found), f"{stem}: a launch link opens another file: {found}"
        repository = [link["href"] for link in released_pages[page_of(stem)].links
                      if link["href"].rstrip("/") == THROWAWAY_REPOSITORY]
        assert repository, f"{stem}: no link to the repository"


# ---------------------------------------------------------------- the landing page

def test_the_landing_page_has_the_map_the_commands_and_the_teachers_documents(pages: Dict[str, PageFacts]) -> None:
    landing = pages["intro.html"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for command in readme_commands(readme).splitlines()[1:-1]:
        assert command.strip() in landing.text, f"the landing page lacks the README's command {command!r}"
    linked = {urlparse(link["href"]).path.rsplit("/", 2)[-2] + "/" + urlparse(link["href"]).path.rsplit("/", 1)[-1]
              for link in landing.links if link["href"].startswith("file://")}
    for stem in PAGES.notebooks:
        assert page_of(stem) in linked, f"the landing page does not link {stem}"
        row = re.search(rf"^\| `{stem}` \|.*?\| (?P<time>\d+ min) \|", readme, flags=re.MULTILINE)
        assert row and row["time"] in landing.text, f"the landing page lacks {stem}'s time"
    for name in ("workshop", "cheatsheet"):
        assert f"docs/{name}.html" in linked, f"the landing page does not link docs/{name}.md"
