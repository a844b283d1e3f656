"""Every student copy, run in real JupyterLab in Debian's Chromium: what a learner sees after Run All.

Per notebook (notebooks/, with COURSE_STRICT=0): open it, Run All, wait for every cell, then check that no
unexpected error shows, every expected-error card explains itself, every exercise card renders, the graph pictures
render, and a predict widget answers a click. The solved notebooks get the same checks in one learner's session
(test_solved_course.py). A full-height screenshot (JPEG) of each
notebook goes to test-artifacts/browser/ (or $COURSE_ARTIFACTS/browser/).
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, List, Tuple

import nbformat
import pytest

from authoring.lab_server import shut_down_kernels
from helpers.course.exercises.result import Status
from tests.browser import checks
from tests.browser.conftest import REPO_ROOT, LabServers
from tests.browser.lab_page import (
    RUN_ALL_TIMEOUT_MS,
    VIEWPORT,
    LiveCell,
    LoadedApp,
    NotebookRun,
    open_notebook,
    read_cells,
    run_all_and_wait,
    run_all_result,
    run_in_page,
)
from tests.browser.notebook_expectations import NotebookExpectations, read_expectations
from tests.browser.solved_session import run_all_again, second_run_problems

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@dataclass(frozen=True)
class NotebookCase:
    """One course notebook: ``solutions`` or ``notebooks``, and its file name."""

    folder: str
    name: str

    def __str__(self) -> str:
        return f"{self.folder}/{Path(self.name).stem}"

    @property
    def slug(self) -> str:
        """``notebooks_00_start_here``; ``notebooks_zh_CN_01_graph_and_saved_tensors`` for a Chinese copy."""
        return f"{self.folder}_{Path(self.name).with_suffix('').as_posix()}".replace("/", "_").replace("-", "_")

    @property
    def class_name(self) -> str:
        """The name of its test class, e.g. ``Test_notebooks_00_start_here``."""
        return f"Test_{self.slug}"

    @property
    def screenshot_name(self) -> str:
        return f"{self.slug}.jpg"

    @property
    def chinese(self) -> bool:
        """A copy of the Chinese edition (notebooks/zh-CN/)."""
        return Path(self.name).parts[0] == "zh-CN"

    @property
    def exercise_status(self) -> Status:
        """What its exercise checks must say: solved in solutions/, untouched stubs in student copies."""
        return Status.PASSED if self.folder == "solutions" else Status.NOT_ATTEMPTED


NOTEBOOK_CASES = [NotebookCase("notebooks", path.name) for path in sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))]
# One Chinese student copy, the first with a predict card, graph pictures and a hint button: its code is the English
# copy's, so what this adds is Chinese text in cells, outputs and widget buttons (tests/authoring has the rest).
NOTEBOOK_CASES.append(NotebookCase("notebooks", "zh-CN/01_graph_and_saved_tensors.ipynb"))
CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass
class BrowserResult:
    """One notebook's expectations (from its source) and what the browser showed."""

    case: NotebookCase
    expected: NotebookExpectations
    run: NotebookRun


@pytest.fixture(scope="session")
def lab_app(chromium: Browser, lab_servers: LabServers) -> Iterator[LoadedApp]:
    """This worker's JupyterLab page, which opens one student copy after another."""
    app = LoadedApp(chromium)
    try:
        yield app
    finally:
        app.close()


def drive(lab_servers: LabServers, app: LoadedApp, folder: str, name: str, screenshot: Path,
          **timeouts: int) -> BrowserResult:
    """Run notebook ``folder/name`` of the temporary copy in JupyterLab and collect what it showed."""
    server = lab_servers.get(folder)
    expected = read_expectations(server.root_dir / name)
    try:
        run = app.drive(
            server.base_url, server.notebook_url(name), name,
            widget_cells=[q.cell_index for q in expected.predict_questions] + sorted(expected.hint_cells),
            predict_cells=[q.cell_index for q in expected.predict_questions],
            answer_marker=checks.answer_marker(expected.language), screenshot=screenshot, **timeouts,
        )
    finally:
        shut_down_kernels(server)  # one notebook's kernel at a time
    return BrowserResult(NotebookCase(folder, name), expected, run)


def assert_no_problems(problems: List[str], result: BrowserResult) -> None:
    """Fail with every problem found, and where the screenshot is."""
    assert not problems, (f"{result.case}: {len(problems)} problem(s) (ran {result.run.seconds:.0f} s; "
                          f"screenshot {result.run.screenshot})\n" + "\n\n".join(problems))


def require(present: object, what: str, result: BrowserResult) -> None:
    """Skip when the notebook has no ``what``; fail when the browser's cells do not line up with the file's."""
    if not present:
        pytest.skip(f"{result.case} has no {what}")
    if len(result.run.cells) != result.expected.cell_count:
        pytest.fail(f"{result.case}: the browser shows {len(result.run.cells)} cells, the file has "
                    f"{result.expected.cell_count}", pytrace=False)


def check_run_all(result: BrowserResult) -> None:
    """Run All ended, every cell ran, and no cell shows an unexpected error."""
    problems = checks.structure_problems(result.run, result.expected)
    if len(result.run.cells) == result.expected.cell_count:
        problems += checks.unfinished_cells(result.run, result.expected)
    problems += checks.unexpected_errors(result.run)
    assert_no_problems(problems, result)


def check_error_explanations(result: BrowserResult) -> None:
    require(result.expected.error_cards, "expect_error cell", result)
    assert_no_problems(checks.missing_error_explanations(result.run, result.expected), result)


def check_exercise_cards(result: BrowserResult) -> None:
    require(result.expected.exercise_checks, "exercises.check cell", result)
    problems = checks.missing_exercise_cards(result.run, result.expected, result.case.exercise_status)
    assert_no_problems(problems, result)


def check_graph_pictures(result: BrowserResult) -> None:
    require(result.expected.graph_cells, "draw_graph/draw_saved_graph cell", result)
    assert_no_problems(checks.missing_graph_pictures(result.run, result.expected), result)


def check_widgets(result: BrowserResult) -> None:
    require(result.expected.predict_questions or result.expected.hint_cells, "widget cell", result)
    assert_no_problems(checks.missing_widgets(result.run, result.expected), result)


def check_clicks(result: BrowserResult) -> None:
    require(result.expected.predict_questions, "predict cell", result)
    assert_no_problems(checks.unanswered_clicks(result.run, result.expected), result)


def check_screenshot(result: BrowserResult) -> None:
    path = result.run.screenshot
    assert path is not None and path.is_file(), f"no screenshot for {result.case}"
    width, height = image_size(path)
    assert width >= 1000 and height >= result.run.shown_height, (width, height, result.run.shown_height)
    assert result.run.shown_height >= result.run.content_height, (
        f"the screenshot shows {result.run.shown_height} of the notebook's {result.run.content_height} pixels")


def cjk_fonts() -> List[str]:
    """The fonts fontconfig (which Chromium uses on Linux) has for Chinese."""
    try:
        listed = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return []
    return [line for line in listed.stdout.splitlines() if line.strip()]


def check_chinese_text(result: BrowserResult) -> None:
    """Every check line prints in Chinese, the predict buttons read Chinese, and a font can draw it."""
    check_cells = [cell for cell in result.run.cells if cell.source.startswith("#@title ✓ 检查：")]
    assert check_cells, f"{result.case}: no Chinese check cell"
    problems = [f"cell {cell.index}: its output shows {cell.shown_text[-80:]!r}" for cell in check_cells
                if "✓ 已检查：" not in cell.shown_text]
    buttons = [label for cell in result.run.cells for label in cell.buttons]
    if not any(CJK.search(label) for label in buttons):
        problems.append(f"no button shows Chinese: {buttons}")
    markdown = [cell for cell in result.run.cells if cell.cell_type == "markdown"]
    if not all(CJK.search(cell.source) for cell in markdown if cell.source.strip()):
        problems.append("a markdown cell holds no Chinese")
    assert_no_problems(problems, result)
    if not cjk_fonts():
        message = ("no font for Chinese (fc-list :lang=zh): the browser would draw boxes; "
                   "apt-get install fonts-wqy-microhei")
        assert not os.environ.get("CI"), message
        pytest.skip(message)


class NotebookInTheBrowser:
    """What a learner sees after Run All in one student copy, ``case``.

    Each notebook gets a subclass (made below), so that pytest-xdist's ``--dist loadscope``, which keeps a class on
    one worker, spreads the notebooks over the workers while each notebook runs once. (The solved notebooks run in
    one session instead: tests/browser/test_solved_course.py.)
    """

    case: NotebookCase

    @pytest.fixture(scope="class")
    @classmethod
    def notebook(
        cls, lab_app: LoadedApp, lab_servers: LabServers, artifacts_dir: Path
    ) -> BrowserResult:
        """The notebook run once in the browser; every test of the class reads this one run."""
        case: NotebookCase = cls.case
        return drive(lab_servers, lab_app, case.folder, case.name, artifacts_dir / case.screenshot_name)

    def test_run_all_runs_every_cell_without_unexpected_errors(self, notebook: BrowserResult) -> None:
        check_run_all(notebook)

    def test_every_expected_error_cell_shows_its_explanation(self, notebook: BrowserResult) -> None:
        check_error_explanations(notebook)

    def test_every_exercise_check_shows_its_card_passed_or_not_attempted(self, notebook: BrowserResult) -> None:
        check_exercise_cards(notebook)

    def test_every_graph_picture_renders_as_a_drawn_svg(self, notebook: BrowserResult) -> None:
        check_graph_pictures(notebook)

    def test_every_predict_and_hint_widget_renders_its_buttons(self, notebook: BrowserResult) -> None:
        check_widgets(notebook)

    def test_clicking_a_predict_choice_reveals_the_answer(self, notebook: BrowserResult) -> None:
        check_clicks(notebook)

    def test_screenshot_shows_the_whole_notebook(self, notebook: BrowserResult) -> None:
        check_screenshot(notebook)


class ChineseNotebookInTheBrowser(NotebookInTheBrowser):
    """A Chinese student copy: the same checks, and its Chinese text."""

    def test_its_check_lines_buttons_and_markdown_show_chinese_with_a_font_for_it(
            self, notebook: BrowserResult) -> None:
        check_chinese_text(notebook)


for _case in NOTEBOOK_CASES:
    _base = ChineseNotebookInTheBrowser if _case.chinese else NotebookInTheBrowser
    globals()[_case.class_name] = type(_case.class_name, (_base,), {"case": _case})


def image_size(path: Path) -> Tuple[int, int]:
    """(width, height) of a JPEG or PNG screenshot, read from its header."""
    from PIL import Image

    with Image.open(path) as image:
        assert image.format in ("JPEG", "PNG"), f"{path} is a {image.format}, not a JPEG or PNG"
        return image.size


def test_the_course_uses_every_feature_these_tests_check() -> None:
    """Guards the source parser: if it stopped finding cells, the tests above would skip instead of failing."""
    found = [read_expectations(path) for path in sorted((REPO_ROOT / "solutions").glob("*.ipynb"))]
    assert found, "no solution notebooks"
    assert sum(len(e.error_cards) for e in found) > 0, "no expect_error cell found"
    assert sum(len(e.exercise_checks) for e in found) > 0, "no exercises.check cell found"
    assert sum(len(e.hint_cells) for e in found) > 0, "no exercises.hint cell found"
    assert sum(len(e.graph_cells) for e in found) > 0, "no draw_graph/draw_saved_graph cell found"
    assert sum(len(e.predict_questions) for e in found) > 0, "no predict cell found"


# A notebook that breaks every rule above, with stand-ins for the helpers that display nothing or the wrong thing.
BROKEN_NOTEBOOK_CELLS = [
    ("markdown", "# A deliberately broken notebook (the browser tests' self-test)"),
    ("code", '''import contextlib
import sys

import ipywidgets
from IPython.display import HTML, display


def expect_error(kind, show=True):          # swallows the error; for one kind a card without its explanation
    if kind == "inplace-version":
        display(HTML("<b>Expected error reproduced - Error 2: a saved tensor was modified by an in-place operation</b>"))
    return contextlib.suppress(Exception)


class exercises:                             # checks and hints that show nothing
    check = staticmethod(lambda exercise_id, answer: None)
    hint = staticmethod(lambda exercise_id: None)


class BrokenPicture:                         # an SVG that cannot be decoded
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg'><unclosed", "text/plain": "broken"}


def draw_graph(*args):
    return BrokenPicture()


def predict(question, choices, **kwargs):    # buttons that do nothing when clicked
    return ipywidgets.HBox([ipywidgets.Button(description=label) for label in choices])'''),
    ("code", 'with expect_error("backward-twice"):\n    raise RuntimeError("Trying to backward through the graph a second time")'),
    ("code", 'with expect_error("inplace-version"):\n    raise RuntimeError("modified by an inplace operation")'),
    ("code", 'exercises.check("head_weight_grad", None)'),
    ("code", 'exercises.hint("head_weight_grad")'),
    ("code", "draw_graph(None)"),
    ("code", 'predict("What happens?", {"It runs": None, "Error 1": "backward-twice"}, run=None, expected=None)'),
    ("code", 'print("Traceback (most recent call last): printed, not raised", file=sys.stderr)'),
    ("code", "1 / 0"),
    ("code", 'print("never runs: Run All stops at the error above")'),
]


def write_broken_notebook(path: Path) -> None:
    """Write BROKEN_NOTEBOOK_CELLS as a notebook at ``path``."""
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    make = {"markdown": nbformat.v4.new_markdown_cell, "code": nbformat.v4.new_code_cell}
    notebook.cells = [make[kind](source) for kind, source in BROKEN_NOTEBOOK_CELLS]
    nbformat.write(notebook, str(path))


@pytest.fixture
def broken_notebook(lab_app: LoadedApp, lab_servers: LabServers, tmp_path: Path) -> Iterator[BrowserResult]:
    """The broken notebook, written into the student server's temporary root and run like the others."""
    root = lab_servers.get("notebooks").root_dir
    name = "zz_broken_selftest.ipynb"
    write_broken_notebook(root / name)
    try:
        yield drive(lab_servers, lab_app, "notebooks", name, tmp_path / "broken.jpg",
                    widget_timeout_ms=3_000, click_timeout_ms=3_000)
    finally:
        (root / name).unlink(missing_ok=True)


def test_every_check_fails_on_a_broken_notebook(broken_notebook: BrowserResult) -> None:
    """Each assertion above can fail: on a notebook that breaks every rule, each check reports it."""
    run, expected = broken_notebook.run, broken_notebook.expected
    assert checks.structure_problems(run, expected) == [], "Run All must end (stopped by the error) and show all cells"
    unfinished = checks.unfinished_cells(run, expected)
    assert len(unfinished) == 1 and "never runs" in unfinished[0], unfinished
    errors = "\n".join(checks.unexpected_errors(run))
    assert "ZeroDivisionError" in errors and "printed a traceback to stderr" in errors and "in the page" in errors
    explanations = "\n".join(checks.missing_error_explanations(run, expected))
    assert "shows 0 'Expected error reproduced' card(s)" in explanations, explanations  # no card at all
    assert "missing 'Autograd saved this tensor" in explanations, explanations          # a card, no explanation
    for status in (Status.PASSED, Status.NOT_ATTEMPTED):
        assert checks.missing_exercise_cards(run, expected, status), f"a missing {status.value} card went unnoticed"
    assert checks.missing_graph_pictures(run, expected), "an SVG that does not render went unnoticed"
    widgets = "\n".join(checks.missing_widgets(run, expected))
    assert "Show hint 1 of" in widgets and "predict" not in widgets, widgets  # predict buttons exist; no hint
    clicks = checks.unanswered_clicks(run, expected)
    assert len(clicks) == 1 and "revealed no answer" in clicks[0], clicks


# Fine at the first Run All; raises at the second, so that Run All stops there and the cell after it does not run again.
SECOND_RUN_RAISES = "runs = globals().get('runs', 0) + 1\nif runs == 2:\n    raise ValueError('only on its second run')"


def test_running_all_again_catches_a_cell_that_raises_only_the_second_time(chromium: Browser,
                                                                           lab_servers: LabServers) -> None:
    """What tests/browser/test_solved_course.py runs again with: a cell that raises only on its second run is caught,
    and so is every cell Run All did not reach after it; a notebook that runs again cleanly has no problem."""
    server = lab_servers.get("notebooks")
    name = "zz_second_run_raises.ipynb"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('fine')"),
                                               nbformat.v4.new_code_cell(SECOND_RUN_RAISES),
                                               nbformat.v4.new_code_cell("print('fine')")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, str(server.root_dir / name))
    context = chromium.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        open_notebook(page, server.notebook_url(name), name)
        assert run_all_and_wait(page, RUN_ALL_TIMEOUT_MS) and run_all_result(page) == "true"
        first = [LiveCell.from_js(cell) for cell in read_cells(page)["cells"]]
        second = run_all_again(page)
        third = run_all_again(page)  # runs == 3: nothing raises any more
    finally:
        context.close()
        shut_down_kernels(server)
        (server.root_dir / name).unlink(missing_ok=True)
    problems = second_run_problems(name, [0, 1, 2], first, second)
    assert "resolved to 'false'" in problems[0], problems
    assert problems[1] == "cells that did not run again: [2]", problems
    assert "cell 1 raised ValueError: only on its second run" in problems[2], problems
    assert all(problem.startswith("cell 1 ") for problem in problems[2:]), problems  # its error, in model and page
    assert second_run_problems(name, [0, 1, 2], second.cells, third) == []


def test_a_tab_left_open_stays_out_of_the_next_notebooks_reading(chromium: Browser, lab_servers: LabServers,
                                                                 tmp_path: Path) -> None:
    """The solved session leaves each notebook's tab open in one page: what is read, clicked and checked in the next
    notebook is that notebook's alone, not the hidden tab's errors, cells or buttons."""
    server = lab_servers.get("notebooks")
    broken, clean = "zz_tab_left_open.ipynb", "zz_tab_opened_next.ipynb"
    write_broken_notebook(server.root_dir / broken)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('fine')")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, str(server.root_dir / clean))
    broken_expected, clean_expected = (read_expectations(server.root_dir / name) for name in (broken, clean))
    predict_cells = [question.cell_index for question in broken_expected.predict_questions]
    context = chromium.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        common = dict(widget_cells=[], answer_marker=checks.PREDICT_ANSWER_MARKER, widget_timeout_ms=3_000,
                      click_timeout_ms=3_000)
        left_open = run_in_page(page, server.notebook_url(broken), broken, predict_cells=predict_cells,
                                screenshot=tmp_path / "left_open.jpg", **common)
        # The broken notebook's predict cell index, asked of the next one: its button must not be found.
        next_one = run_in_page(page, server.notebook_url(clean), clean, predict_cells=predict_cells,
                               screenshot=tmp_path / "next.jpg", in_loaded_app=True, tabs=2, **common)
    finally:
        context.close()
        shut_down_kernels(server)
        for name in (broken, clean):
            (server.root_dir / name).unlink(missing_ok=True)
    assert predict_cells and left_open.clicks and checks.unexpected_errors(left_open)
    assert checks.structure_problems(next_one, clean_expected) == []  # both tabs open, the new one read
    assert checks.unfinished_cells(next_one, clean_expected) == []
    assert checks.unexpected_errors(next_one) == [] and next_one.clicks == []
