"""The course's website, built by ``bash book/build`` and opened page by page in the system Chromium, offline.

Each page is gathered once (tests/site/page_facts.py): its pictures, links, error outputs and text, the requests
it tried to send off the machine; a screenshot of each lands in test-artifacts/site/. The site has two editions,
English at its root and Chinese under zh/: each test of a page runs for the pages of both, with what the page should
say in that page's language.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Dict, List, Tuple
from urllib.parse import unquote, urlparse

import nbformat
import pytest
import yaml

from authoring import release_json
from authoring.launch_cells import SETUP_TAG, is_setup_cell, readme_notebook_row
from authoring.site.editions import Edition, course_pages, editions
from authoring.site.landing import readme_commands
from authoring.site.pages import LANDING_PAGE
from authoring.site.stage import source_folder
from authoring.site.words import DOWNLOAD, ENGLISH_ONLY
from authoring.translation.catalog import title_text
from authoring.translation.edition import CHECKED_EN, CHECKED_ZH
from helpers.course.exercises.registry import exercises
from helpers.course.plots import METADATA_KEY
from helpers.language import tr
from tests.browser.checks import error_card_title, speaking
from tests.chinese_run import chinese_run_problems
from tests.ci import unavailable
from tests.graph_words import chinese_picture_problems, require_chinese_pictures
from tests.plot_words import words_left_in_english, words_without_glyphs
from tests.paths import ROOT
from tests.site.build import THROWAWAY_REF, THROWAWAY_REPOSITORY
from tests.site.page_facts import PageFacts, search_results

EDITIONS = editions(ROOT)
ENGLISH = EDITIONS[0]
BY_NAME = {edition.site_folder or "en": edition for edition in EDITIONS}
PAGES = course_pages(ROOT)
NOTEBOOK_PAGES = [pytest.param(edition, stem, id=f"{name}-{stem}") for name, edition in BY_NAME.items()
                  for stem in edition.notebooks(ROOT)]
CHECKED_LINE = {"": CHECKED_EN.rstrip(": "), "zh-CN": CHECKED_ZH.rstrip("：")}  # how a check's line starts, by folder
GRAPH_TOOLS = "draw_graph|draw_saved_graph|draw_module_graph"
GRAPH_CALL = re.compile(rf"\b({GRAPH_TOOLS})\(")
DRAWING_CALL = re.compile(rf"\b({GRAPH_TOOLS}|show_plot)\(|\bplt\.show\(")
SHOWN_EXPECTED_ERROR = re.compile(r"with expect_error\((?![^)]*show=False)|^%%expect_error", re.MULTILINE)
LAUNCH_ADDRESS = re.compile(r"^https?://(colab\.research\.google\.com/github/|mybinder\.org/v2/)")


def solved(stem: str, edition: Edition = ENGLISH) -> nbformat.NotebookNode:
    return nbformat.read(str(edition.solutions(ROOT) / f"{stem}.ipynb"), as_version=4)


def code_of(notebook: nbformat.NotebookNode) -> List[str]:
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def page_of(stem: str, edition: Edition = ENGLISH) -> str:
    return edition.site_path(f"{edition.pages_folder}/{stem}")


def said(edition: Edition, message: str, **values: object) -> str:
    """What the helpers say for ``message`` in the edition's language."""
    with speaking(edition.language):
        return tr(message, **values)


def card_title(edition: Edition) -> str:
    with speaking(edition.language):
        return error_card_title()


def launch_links(facts: PageFacts) -> List[str]:
    return [link["href"] for link in facts.links if LAUNCH_ADDRESS.match(link["href"])]


# ---------------------------------------------------------------- the pages, in course order

@pytest.mark.parametrize("edition", BY_NAME.values(), ids=BY_NAME.keys())
def test_the_site_has_every_page_in_course_order(edition: Edition, site: Path, pages: Dict[str, PageFacts]) -> None:
    edition_pages = course_pages(ROOT, edition)
    expected = [edition.site_path(LANDING_PAGE), *(page_of(stem, edition) for stem in edition_pages.notebooks),
                *(edition.site_path(f"docs/{name}") for name in edition_pages.documents)]
    assert set(expected) <= set(pages), f"pages missing: {sorted(set(expected) - set(pages))}"
    navigation = [urlparse(link["href"]).path for link in pages[expected[0]].links]
    positions = [next((i for i, path in enumerate(navigation) if path.endswith("/" + page)), None)
                 for page in expected[1:]]
    assert None not in positions, f"the navigation does not link every page: {list(zip(expected[1:], positions))}"
    assert positions == sorted(positions), "the navigation does not list the pages in course order"


def executed(site: Path, stem: str, edition: Edition = ENGLISH) -> nbformat.NotebookNode:
    """The page's notebook with the outputs its run made, from the build's execution cache (Jupyter Book's own
    copy beside the HTML has no outputs when they came from the cache)."""
    from jupyter_cache import get_cache

    source = source_folder(site.parent / "source", edition)
    cache = get_cache(yaml.safe_load((source / "_config.yml").read_text(encoding="utf-8"))["execute"]["cache"])
    page = nbformat.read(str(source / edition.pages_folder / f"{stem}.ipynb"), as_version=4)
    return cache.get_cache_bundle(cache.match_cache_notebook(page).pk).nb


def outputs_of(notebook: nbformat.NotebookNode) -> List[dict]:
    return [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]


@pytest.mark.parametrize("edition, stem", NOTEBOOK_PAGES)
def test_each_notebook_page_shows_every_output_of_its_run(edition: Edition, stem: str, site: Path,
                                                          pages: Dict[str, PageFacts]) -> None:
    """The pictures, expected-error cards, timelines and checks the build's run made, all on the page; and at
    least one per drawing cell and per expected error the notebook's code shows (in the page's language)."""
    facts = pages[page_of(stem, edition)]
    notebook, run = solved(stem, edition), outputs_of(executed(site, stem, edition))
    attachments = sum(len(cell.get("attachments", {})) for cell in notebook.cells if cell.cell_type == "markdown")
    pictures_run = sum(any(kind.startswith("image/") for kind in output.get("data", {})) for output in run)
    pictures = [image for image in facts.images if "/_images/" in image["src"]]
    assert len(pictures) == attachments + pictures_run, (
        f"{stem}: {len(pictures)} pictures on the page; {attachments} figures and {pictures_run} drawn by the run")
    assert pictures_run >= sum(bool(DRAWING_CALL.search(source)) for source in code_of(notebook)), (
        f"{stem}: a drawing cell drew no picture (is graphviz's dot installed?)")

    def shown(title: str) -> int:
        return sum(title in output.get("data", {}).get("text/html", "") for output in run)

    def in_prose(title: str) -> int:  # the words of a card's title in the notebook's text (the Chinese says 版本时间线)
        return sum(cell.source.count(title) for cell in notebook.cells if cell.cell_type == "markdown")

    cards = shown(card_title(edition))
    assert facts.text.count(card_title(edition)) == cards + in_prose(card_title(edition)), (
        f"{stem}: expected-error cards")
    assert cards >= sum(len(SHOWN_EXPECTED_ERROR.findall(source)) for source in code_of(notebook)), stem
    timeline = said(edition, "Version timeline")
    assert facts.text.count(timeline) == shown(timeline) + in_prose(timeline), f"{stem}: version timelines"
    checks = [cell for cell in notebook.cells if "check" in cell.metadata.get("tags", [])]
    assert facts.text.count(CHECKED_LINE[edition.folder]) >= len(checks), (
        f"{stem}: fewer check lines on the page than check cells")
    for exercise_id, exercise in exercises().items():
        if exercise.notebook == stem:
            passed = said(edition, "{status} - exercise {exercise}", status=said(edition, "Correct"),
                          exercise=exercise_id)
            assert passed in facts.text, f"{stem}: no passed card for {exercise_id}"


@pytest.mark.parametrize("stem", BY_NAME["zh"].notebooks(ROOT) if "zh" in BY_NAME else [])
def test_the_chinese_pages_ran_strict_in_chinese(stem: str, site: Path) -> None:
    """The build ran each Chinese notebook (COURSE_STRICT=1, COURSE_LANGUAGE=zh_CN): every check printed its
    Chinese line, and the helpers spoke Chinese. (tests/authoring/test_chinese_notebooks_run.py checks the same
    of its own run where the site cannot be built.)"""
    problems = chinese_run_problems(executed(site, stem, BY_NAME["zh"]))
    assert not problems, f"{stem}: " + "; ".join(problems)


@pytest.mark.parametrize("stem", [stem for stem in PAGES.notebooks if "show_plot(" in "".join(code_of(solved(stem)))])
def test_the_chinese_pages_plots_are_drawn_in_chinese(stem: str, site: Path) -> None:
    """Each plot the notebook's own code draws (``show_plot``), on its Chinese page: every word Chinese (code may
    stay), each character drawn by the font for Chinese the build found."""
    plotted = [output["metadata"][METADATA_KEY] for output in outputs_of(executed(site, stem, BY_NAME["zh"]))
               if METADATA_KEY in output.get("metadata", {})]
    assert len(plotted) == "".join(code_of(solved(stem))).count("show_plot("), f"{stem}: {len(plotted)} plots"
    for facts in plotted:
        if facts["font"] is None:
            unavailable("this machine has no font for Chinese: the plots kept their English words, with a note")
        assert not words_left_in_english(facts["words"]), f"{stem}: English words in a plot: {facts['words']}"
        assert not words_without_glyphs(facts["words"], facts["font"]), f"{stem}: {facts['words']}"


@pytest.mark.parametrize("stem", [stem for stem in PAGES.notebooks
                                  if GRAPH_CALL.search("".join(code_of(solved(stem))))])
def test_the_chinese_pages_graph_pictures_are_drawn_in_chinese(stem: str, site: Path) -> None:
    """Each picture the graph tools draw on a Chinese page: none of the tools' English words (code and the names
    the notebook's code gives, such as a loss called "critic loss", stay), a glyph for every character, each box as
    wide as its Chinese words."""
    require_chinese_pictures(BY_NAME["zh"].language)
    notebook = executed(site, stem, BY_NAME["zh"])
    names = [node.value for source in code_of(notebook) for node in ast.walk(parsed(source))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    svgs = [output["data"]["image/svg+xml"] for cell in notebook.cells
            if cell.cell_type == "code" and GRAPH_CALL.search(cell.source)
            for output in cell.get("outputs", []) if "image/svg+xml" in output.get("data", {})]
    assert svgs, f"{stem}: no graph picture on the Chinese page"
    for index, svg in enumerate(svgs, 1):
        problems = chinese_picture_problems(svg, names)
        assert not problems, f"{stem}, picture {index}: {problems}"


def parsed(source: str) -> ast.AST:
    """A code cell as Python, its IPython magics and shell lines left out."""
    return ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))


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


@pytest.mark.parametrize("edition, stem", NOTEBOOK_PAGES)
def test_cells_hidden_in_the_notebooks_are_hidden_on_the_site(edition: Edition, stem: str,
                                                              pages: Dict[str, PageFacts]) -> None:
    text, notebook = pages[page_of(stem, edition)].text, solved(stem, edition)
    setup_titles = [title_text(cell, checks_only=False) for cell in notebook.cells if is_setup_cell(cell)]
    assert setup_titles and setup_titles[0], f"{stem}: no titled set-up cell in the solved notebook"
    assert setup_titles[0] not in text and "COURSE_HELPERS" not in text, f"{stem}: the set-up cell"
    for cell in notebook.cells:
        hidden = cell.metadata.get("jupyter", {}).get("source_hidden") and SETUP_TAG not in cell.metadata.get(
            "tags", [])
        asserts = [line.strip() for line in cell.source.splitlines() if line.strip().startswith("assert ")]
        if hidden and asserts:
            assert asserts[0] not in text, f"{stem}: a folded cell's code is on the page: {asserts[0]}"


def test_widgets_are_shown_in_their_static_form(pages: Dict[str, PageFacts]) -> None:
    for path, facts in pages.items():
        for widget_text in ("VBox(", "HBox(", "Button(", "FloatProgress("):
            assert widget_text not in facts.text, f"{path} shows a widget's text form: {widget_text}"
    for edition in EDITIONS:
        card = said(edition, "Predict what happens")
        for stem in edition.notebooks(ROOT):
            predictions = sum(source.count("predict(") for source in code_of(solved(stem, edition)))
            assert pages[page_of(stem, edition)].text.count(card) == predictions, f"{edition.name} {stem}: predictions"


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


@pytest.mark.parametrize("edition", BY_NAME.values(), ids=BY_NAME.keys())
def test_search_finds_retain_graph(edition: Edition, chromium, site: Path) -> None:
    found = [urlparse(address).path for address in search_results(chromium, site / edition.site_folder,
                                                                     "retain_graph")]
    assert any(path.endswith(page_of("02_backward_twice", edition)) for path in found), found


def test_the_chinese_search_finds_a_glossary_term_of_the_text(chromium, site: Path) -> None:
    """Sphinx cuts Chinese into words with jieba (book/requirements.txt), the glossary's terms kept whole
    (_search_words.txt). 梯度累积 is in notebook 03's text and in no heading, which Sphinx would match without jieba."""
    term, chinese = "梯度累积", BY_NAME["zh"]
    headings = [line for stem in chinese.notebooks(ROOT) for cell in solved(stem, chinese).cells
                if cell.cell_type == "markdown" for line in cell.source.splitlines() if line.startswith("#")]
    assert not any(term in heading for heading in headings), "the term must be found in text, not in a heading"
    found = [urlparse(address).path for address in search_results(chromium, site / "zh", term)]
    assert any(path.endswith(page_of("03_inplace_version", chinese)) for path in found), found


def test_no_page_needs_the_network(any_site: Tuple[Path, Dict[str, PageFacts]]) -> None:
    site, pages = any_site
    for path, facts in pages.items():
        assert not facts.network_requests, f"{path} asked the network for {facts.network_requests}"
        assert all(script.startswith("file://") for script in facts.scripts), f"{path}: {facts.scripts}"


# ---------------------------------------------------------------- the student notebook, launch buttons

@pytest.mark.parametrize("edition, stem", NOTEBOOK_PAGES)
def test_each_page_links_the_student_notebook_to_download(edition: Edition, stem: str,
                                                          pages: Dict[str, PageFacts]) -> None:
    links = [link for link in pages[page_of(stem, edition)].links if link["text"] == edition.say(DOWNLOAD)]
    assert len(links) == 1, f"{stem}: {len(links)} download links"
    target = Path(unquote(urlparse(links[0]["href"]).path))
    assert target.name == f"{stem}.ipynb"
    assert json.loads(target.read_bytes()) == json.loads((edition.student_copies(ROOT) / f"{stem}.ipynb").read_bytes())


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
    for edition, stem in ((edition, stem) for edition in EDITIONS for stem in edition.notebooks(released_root)):
        student = f"{edition.pages_folder}/{stem}.ipynb"
        assert (released_root / student).is_file(), f"no student copy {student}"
        found = {unquote(address) for address in launch_links(released_pages[page_of(stem, edition)])}
        expected = {unquote(release.colab_url(student)), unquote(release.binder_url(student))}
        assert expected <= found, f"{stem}: launch links {sorted(found)}; expected {sorted(expected)}"
        assert all(student in address for address in found), f"{stem}: a launch link opens another file: {found}"
        repository = [link["href"] for link in released_pages[page_of(stem, edition)].links
                      if link["href"].rstrip("/") == THROWAWAY_REPOSITORY]
        assert repository, f"{stem}: no link to the repository"


# ---------------------------------------------------------------- the landing page

@pytest.mark.parametrize("edition", BY_NAME.values(), ids=BY_NAME.keys())
def test_the_landing_page_has_the_map_the_commands_and_the_teachers_documents(
        edition: Edition, site: Path, pages: Dict[str, PageFacts]) -> None:
    """The landing page of each edition, from its README (README.zh-CN.md for the Chinese one)."""
    landing = pages[edition.site_path(LANDING_PAGE)]
    readme = (ROOT / edition.readme).read_text(encoding="utf-8")
    for command in readme_commands(readme, edition.setup_heading).splitlines()[1:-1]:
        assert command.strip() in landing.text, f"the landing page lacks the README's command {command!r}"
    linked = {Path(unquote(urlparse(link["href"]).path)).resolve() for link in landing.links
              if link["href"].startswith("file://")}
    times = {row[0]: row[1][2] for row in map(readme_notebook_row, readme.splitlines()) if row}
    for stem in edition.notebooks(ROOT):
        assert (site / page_of(stem, edition)).resolve() in linked, f"the landing page does not link {stem}"
        assert times.get(stem) and times[stem] in landing.text, f"the landing page lacks {stem}'s time"
    for name in ("workshop", "cheatsheet"):
        page = (site / edition.site_path(f"docs/{name}")).resolve()
        assert page in linked, f"the landing page does not link docs/{name}"


# ---------------------------------------------------------------- the two editions

def _page_names(edition: Edition) -> Dict[str, str]:
    """Each page of ``edition`` by a name both editions share (``intro``, ``docs/workshop``, a notebook's stem)."""
    names = {LANDING_PAGE: edition.site_path(LANDING_PAGE)}
    names.update({f"docs/{name}": edition.site_path(f"docs/{name}") for name, _ in edition.documents})
    names.update({stem: page_of(stem, edition) for stem in edition.notebooks(ROOT)})
    return names


def test_each_page_links_its_counterpart_in_the_other_language(site: Path, pages: Dict[str, PageFacts]) -> None:
    """English · 中文 under each title: the other edition's name, a link to the same page there."""
    assert len(EDITIONS) == 2, "the course has a Chinese edition: the site must have it too"
    for edition in EDITIONS:
        for other in EDITIONS:
            if other is edition:
                continue
            theirs = _page_names(other)
            for name, path in _page_names(edition).items():
                if name not in theirs:
                    continue
                targets = [Path(unquote(urlparse(link["href"]).path)).resolve() for link in pages[path].links
                           if link["text"] == other.name]
                assert targets == [(site / theirs[name]).resolve()], (
                    f"{path}: its links named {other.name!r} lead to {targets}, not to {theirs[name]}")


def test_the_chinese_pages_are_in_chinese(site: Path, pages: Dict[str, PageFacts]) -> None:
    """The Chinese site's pages declare their language (the browser picks a Chinese font by it), show each
    notebook's Chinese title and the site's words in Chinese; its English-only documents say so."""
    chinese = BY_NAME["zh"]
    for name, path in _page_names(chinese).items():
        assert pages[path].lang == "zh-CN", f"{path}: <html lang={pages[path].lang!r}>"
    for name, path in _page_names(ENGLISH).items():
        assert pages[path].lang == "en", f"{path}: <html lang={pages[path].lang!r}>"
    for stem in chinese.notebooks(ROOT):
        title = solved(stem, chinese).cells[0].source.split("\n", 1)[0].lstrip("# ").strip()
        assert re.search(r"[\u4e00-\u9fff]", title) and title in pages[page_of(stem, chinese)].text, stem
    for name, source in chinese.documents:
        text = pages[chinese.site_path(f"docs/{name}")].text
        english_only = chinese.say(ENGLISH_ONLY).strip("*")
        assert (english_only in text) == chinese.english_only(source), f"docs/{name}: the English-only note"
