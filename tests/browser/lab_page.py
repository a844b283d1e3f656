"""Drive one notebook in JupyterLab with Playwright: open, Run All, wait, read every cell, click, screenshot.

Everything the tests assert is collected into a ``NotebookRun`` first, so the assertions are plain Python
over data (see checks.py) and each one can be shown to fail on a broken notebook.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional

try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # without Playwright the tests skip (or fail under CI) before any page is driven
    PlaywrightError, PlaywrightTimeout = RuntimeError, TimeoutError

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Locator, Page

APP_TIMEOUT_MS = 90_000          # JupyterLab loaded, the notebook open and its kernel idle
RUN_ALL_TIMEOUT_MS = 300_000     # nbval runs a notebook in 2-6 s; the browser and 2 slow cores add a lot
WIDGET_TIMEOUT_MS = 30_000       # widget views appear after Run All finishes
CLICK_TIMEOUT_MS = 20_000        # a click's answer comes back from the kernel
VIEWPORT = {"width": 1280, "height": 1000}
MAX_SCREENSHOT_HEIGHT = 60_000   # pixels; a taller notebook is cut there (the run records both heights)
SCREENSHOT_QUALITY = 80          # a .jpg screenshot: a whole page costs Chromium about half a PNG's time

OPENED_NOTEBOOK_JS = """
(path) => {
  const app = window.jupyterapp;
  const panel = app && app.shell.currentWidget;
  return !!(panel && panel.context && panel.context.path === path);
}
"""

# In the JupyterLab already loaded in the page: open the notebook at ``path`` in a new tab (a tab already showing it
# is closed first: docmanager:open would show that one again); with ``closeOthers``, then close every other tab
# (a Launcher too). Tabs close without the unsaved-changes dialog; their kernels are shut down through the server's
# API, not here.
OPEN_IN_APP_JS = """
async ({path, closeOthers}) => {
  const app = window.jupyterapp;
  const showsPath = (widget) => !!widget.context && widget.context.path === path;
  for (const widget of Array.from(app.shell.widgets('main'))) if (showsPath(widget)) widget.dispose();
  await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
  if (!closeOthers) return;
  for (const widget of Array.from(app.shell.widgets('main'))) if (!showsPath(widget)) widget.dispose();
}
"""

# Make the open notebook at ``path`` the current tab again.
ACTIVATE_NOTEBOOK_JS = """
(path) => {
  const shell = window.jupyterapp.shell;
  const widget = Array.from(shell.widgets('main')).find((w) => w.context && w.context.path === path);
  if (!widget) return false;
  shell.activateById(widget.id);
  return true;
}
"""

KERNEL_READY_JS = """
async () => {
  const panel = window.jupyterapp.shell.currentWidget;
  await panel.context.ready;
  await panel.sessionContext.ready;
  return panel.content.notebookConfig.windowingMode;
}
"""

KERNEL_IDLE_JS = """
() => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel;
  return !!kernel && kernel.status === 'idle';
}
"""

# Each run writes its outcome only while it is the latest one: a run left pending in another tab (its Run All timed
# out) cannot settle the next notebook's.
START_RUN_ALL_JS = """
(command) => {
  const run = {settled: false, result: null};
  window.__courseRunAll = run;
  const settle = (result) => { if (window.__courseRunAll === run) window.__courseRunAll = {settled: true, result}; };
  window.jupyterapp.commands.execute(command || 'notebook:run-all-cells').then(
    (value) => settle(String(value)), (error) => settle('error: ' + error));
}
"""

# Done: the Run All promise settled, the kernel is idle, and no cell shows the busy prompt [*].
RUN_ALL_DONE_JS = """
() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const kernel = panel.sessionContext.session?.kernel;
  if (!window.__courseRunAll.settled || !kernel || kernel.status !== 'idle') return false;
  const prompts = Array.from(panel.content.node.querySelectorAll('.jp-InputPrompt'));
  return !prompts.some((prompt) => prompt.textContent.includes('*'));
}
"""

RUN_ALL_RESULT_JS = "() => window.__courseRunAll.result"

# Tag every cell's node with its index, for locators: [data-course-cell="5"].
TAG_CELLS_JS = """
() => {
  // Tabs left open keep their cells in the page: only the current notebook's may carry the tags.
  document.querySelectorAll('[data-course-cell]').forEach((node) => { delete node.dataset.courseCell; });
  window.jupyterapp.shell.currentWidget.content.widgets.forEach((cell, index) => {
    cell.node.dataset.courseCell = String(index);
  });
}
"""

IMAGES_LOADED_JS = """
() => Array.from(window.jupyterapp.shell.currentWidget.node.querySelectorAll('.jp-OutputArea-output img'))
  .every((img) => img.complete)
"""

# Every cell's model (source, execution count, outputs) and what the DOM shows for it.
READ_CELLS_JS = """
() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.widgets.map((cell, index) => {
    const model = cell.model;
    const isCode = model.type === 'code';
    const outputNodes = Array.from(cell.node.querySelectorAll('.jp-OutputArea-output'));
    const images = Array.from(cell.node.querySelectorAll('.jp-OutputArea-output img')).map((img) => {
      const box = img.getBoundingClientRect();
      return {
        mime: img.closest('[data-mime-type]')?.getAttribute('data-mime-type') ?? null,
        natural_width: img.naturalWidth, natural_height: img.naturalHeight,
        width: box.width, height: box.height, complete: img.complete,
      };
    });
    return {
      index,
      cell_type: model.type,
      source: model.sharedModel.getSource(),
      execution_count: isCode ? model.executionCount : null,
      prompt: (cell.node.querySelector('.jp-InputPrompt')?.textContent ?? '').trim(),
      outputs: isCode ? model.outputs.toJSON() : [],
      rendered: outputNodes.map((node) => ({mime: node.getAttribute('data-mime-type'), text: node.innerText})),
      images,
      buttons: Array.from(cell.node.querySelectorAll('.jp-OutputArea-output button')).map((b) => b.innerText.trim()),
    };
  });
  const kernel = panel.sessionContext.session?.kernel;
  const openDocuments = Array.from(window.jupyterapp.shell.widgets('main')).length;
  return {path: panel.context.path, kernel_status: kernel ? kernel.status : 'no kernel', open_documents: openDocuments,
          cells};
}
"""

KERNEL_ID_JS = "() => window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel?.id ?? null"

COLLAPSE_SIDEBARS_JS = """
async () => {
  window.jupyterapp.shell.collapseLeft();
  window.jupyterapp.shell.collapseRight();
  await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
}
"""

# The notebook's scroll area: its full content height and the part of it the viewport shows.
NOTEBOOK_HEIGHTS_JS = """
() => {
  const scroller = window.jupyterapp.shell.currentWidget.node.querySelector('.jp-WindowedPanel-outer');
  scroller.scrollTop = 0;
  return {content: scroller.scrollHeight, visible: scroller.clientHeight, window: window.innerHeight};
}
"""


@dataclass(frozen=True)
class RenderedImage:
    """An <img> in an output: an SVG graph shows as one with a data: address."""

    mime: Optional[str]
    natural_width: int
    natural_height: int
    width: float
    height: float
    complete: bool

    @property
    def drawn(self) -> bool:
        """Decoded (a broken image has natural size 0) and laid out at a visible size."""
        return self.complete and min(self.natural_width, self.natural_height, self.width, self.height) > 0


@dataclass
class LiveCell:
    """One cell as JupyterLab holds and shows it after Run All."""

    index: int
    cell_type: str
    source: str
    execution_count: Optional[int]
    prompt: str
    outputs: List[Dict[str, Any]]
    rendered: List[Dict[str, Optional[str]]]
    images: List[RenderedImage]
    buttons: List[str]

    @classmethod
    def from_js(cls, data: Dict[str, Any]) -> LiveCell:
        return cls(**{**data, "images": [RenderedImage(**image) for image in data["images"]]})

    @property
    def shown_text(self) -> str:
        """All the text the cell's outputs show, as a learner would read it."""
        return "\n".join(output["text"] or "" for output in self.rendered)


@dataclass(frozen=True)
class WidgetClick:
    """A click on a widget button, and the output text that appeared after it (None: nothing came)."""

    cell_index: int
    label: str
    answer_text: Optional[str]


@dataclass
class NotebookRun:
    """Everything the browser showed for one notebook."""

    path: str
    windowing_mode: str
    finished: bool
    run_all_result: Optional[str]
    kernel_status: str
    open_documents: int
    seconds: float
    cells: List[LiveCell] = field(default_factory=list)
    clicks: List[WidgetClick] = field(default_factory=list)
    screenshot: Optional[Path] = None
    shown_height: int = 0      # how much of the notebook's height the screenshot shows
    content_height: int = 0    # the notebook's full height
    tabs_expected: int = 1     # the documents JupyterLab should have open: this one, and the tabs left open before
    requested_path: str = ""   # the notebook the test opened (``path`` is the one the page showed when read)

    def cell(self, index: int) -> LiveCell:
        """Cell ``index`` as the browser shows it."""
        if not 0 <= index < len(self.cells):
            raise IndexError(f"cell {index} is not in the browser's notebook, which has {len(self.cells)} cells")
        return self.cells[index]


def _wait_until_open(page: Page, path: str) -> str:
    """Wait until the current tab shows the notebook at ``path`` and its kernel is idle; the windowing mode."""
    page.wait_for_function(OPENED_NOTEBOOK_JS, arg=path, timeout=APP_TIMEOUT_MS)
    windowing_mode = page.evaluate(KERNEL_READY_JS)
    page.wait_for_function(KERNEL_IDLE_JS, timeout=APP_TIMEOUT_MS)
    return windowing_mode


def open_notebook(page: Page, url: str, path: str) -> str:
    """Open ``url`` and wait until the notebook at ``path`` is loaded and its kernel idle; the windowing mode."""
    page.goto(url)
    return _wait_until_open(page, path)


def open_in_app(page: Page, path: str, close_others: bool = True) -> str:
    """In a page where JupyterLab is loaded: open the notebook at ``path`` in a tab of its own, without loading the
    application again (about 4 s of Chromium's CPU); alone, as ``open_notebook`` leaves it, unless ``close_others``
    is False. Returns the windowing mode."""
    page.set_viewport_size(VIEWPORT)  # the last screenshot made the viewport as tall as its notebook
    page.evaluate(OPEN_IN_APP_JS, {"path": path, "closeOthers": close_others})
    return _wait_until_open(page, path)


def activate_notebook(page: Page, path: str) -> bool:
    """Make the notebook at ``path``, open in a tab of the page's JupyterLab, the current one; False when it is not
    open."""
    if not page.evaluate(ACTIVATE_NOTEBOOK_JS, path):
        return False
    page.wait_for_function(OPENED_NOTEBOOK_JS, arg=path, timeout=APP_TIMEOUT_MS)  # the shell follows the focus
    return True


def run_all_and_wait(page: Page, timeout_ms: int = RUN_ALL_TIMEOUT_MS) -> bool:
    """Run All; True when every execution ended (a cell error ends Run All too) within ``timeout_ms``."""
    page.evaluate(START_RUN_ALL_JS)
    try:
        page.wait_for_function(RUN_ALL_DONE_JS, timeout=timeout_ms, polling=250)
    except PlaywrightTimeout:
        return False
    return True


def run_all_result(page: Page) -> Optional[str]:
    """What the last Run All's command resolved to: "false" when a cell raised (or the run was cancelled, or found no
    kernel ready); "true" otherwise (also when there was no kernel at all: check the execution counts too)."""
    return page.evaluate(RUN_ALL_RESULT_JS)


def wait_for_widgets(page: Page, cell_indices: Iterable[int], timeout_ms: int = WIDGET_TIMEOUT_MS) -> None:
    """Give widget views and images time to appear; missing ones are reported by the checks, not here."""
    deadline = time.monotonic() + timeout_ms / 1000
    for index in cell_indices:
        remaining_ms = max(1, int((deadline - time.monotonic()) * 1000))
        try:
            cell_button(page, index).wait_for(state="visible", timeout=remaining_ms)
        except PlaywrightTimeout:
            pass
    try:
        page.wait_for_function(IMAGES_LOADED_JS, timeout=max(1, int((deadline - time.monotonic()) * 1000)))
    except PlaywrightTimeout:
        pass


def cell_button(page: Page, cell_index: int, button_index: int = 0) -> Locator:
    """The ``button_index``-th button in cell ``cell_index``'s outputs (cells are tagged by TAG_CELLS_JS)."""
    return page.locator(f'[data-course-cell="{cell_index}"] .jp-OutputArea-output button').nth(button_index)


def click_first_choice(page: Page, cell_index: int, answer_marker: str,
                       timeout_ms: int = CLICK_TIMEOUT_MS) -> Optional[WidgetClick]:
    """Click the first button of the widget in ``cell_index``; wait for ``answer_marker`` in its outputs.

    Returns None when the cell shows no button at all.
    """
    button = cell_button(page, cell_index)
    if button.count() == 0:
        return None
    label = button.inner_text().strip()
    button.click()
    outputs = page.locator(f'[data-course-cell="{cell_index}"] .jp-Cell-outputArea')
    try:
        outputs.get_by_text(answer_marker).first.wait_for(state="visible", timeout=timeout_ms)
    except PlaywrightTimeout:
        return WidgetClick(cell_index, label, None)
    return WidgetClick(cell_index, label, outputs.inner_text())


def read_cells(page: Page) -> Dict[str, Any]:
    """The live notebook: its path, kernel status and every cell (see READ_CELLS_JS)."""
    return page.evaluate(READ_CELLS_JS)


def screenshot_options(path: Path) -> Dict[str, Any]:
    """Playwright's screenshot arguments for ``path``: JPEG at SCREENSHOT_QUALITY for a .jpg, else PNG."""
    return {"path": str(path), **({"quality": SCREENSHOT_QUALITY} if path.suffix == ".jpg" else {})}


def save_screenshot(page: Page, path: Path) -> Dict[str, int]:
    """Screenshot the whole notebook into ``path``: sidebars closed, a viewport as tall as the notebook.

    Returns the notebook's content height and the height of it the screenshot shows, in pixels.
    """
    page.evaluate(COLLAPSE_SIDEBARS_JS)
    sizes = page.evaluate(NOTEBOOK_HEIGHTS_JS)
    chrome = sizes["window"] - sizes["visible"]  # menu, tabs, toolbar and status bar
    height = min(chrome + sizes["content"] + 16, MAX_SCREENSHOT_HEIGHT)
    page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
    page.wait_for_function(
        "(height) => window.jupyterapp.shell.currentWidget.node.querySelector('.jp-WindowedPanel-outer')"
        ".clientHeight >= height",
        arg=height - chrome - 16, timeout=10_000,
    )
    page.wait_for_timeout(300)  # let the relayout paint
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(**screenshot_options(path))
    sizes = page.evaluate(NOTEBOOK_HEIGHTS_JS)
    return {"content": sizes["content"], "shown": sizes["visible"]}


def run_in_page(
    page: Page,
    url: str,
    path: str,
    widget_cells: Iterable[int],
    predict_cells: Iterable[int],
    answer_marker: str,
    screenshot: Path,
    run_all_timeout_ms: int = RUN_ALL_TIMEOUT_MS,
    widget_timeout_ms: int = WIDGET_TIMEOUT_MS,
    click_timeout_ms: int = CLICK_TIMEOUT_MS,
    in_loaded_app: bool = False,
    tabs: int = 1,
) -> NotebookRun:
    """In ``page``: open ``url``, Run All, read every cell, click each predict widget's first choice, screenshot.

    Args:
        page: a page of a browser context the caller owns (and closes, or leaves open as a learner's tab).
        url: the address that opens the notebook in JupyterLab (with the token).
        path: the notebook's path relative to the server root, to recognise it.
        widget_cells: cells whose widgets must have appeared before reading.
        predict_cells: cells whose widget to click.
        answer_marker: text that appears in a predict cell once a click was answered.
        screenshot: where to write the PNG (also when something fails on the way, as far as the page got).
        run_all_timeout_ms, widget_timeout_ms, click_timeout_ms: how long to wait for each step.
        in_loaded_app: JupyterLab is already loaded in ``page``: open the notebook there (``open_in_app``).
        tabs: the documents JupyterLab must have open once it is (1: this one alone; more: tabs left open before
            it stay open).
    """
    started = time.monotonic()
    try:
        if in_loaded_app:
            windowing_mode = open_in_app(page, path, close_others=tabs == 1)
        else:
            windowing_mode = open_notebook(page, url, path)
        finished = run_all_and_wait(page, run_all_timeout_ms)
        result = run_all_result(page)
        page.evaluate(TAG_CELLS_JS)
        if finished:
            wait_for_widgets(page, widget_cells, widget_timeout_ms)
        live = read_cells(page)
        clicks = []
        if finished:
            for index in predict_cells:
                click = click_first_choice(page, index, answer_marker, click_timeout_ms)
                if click is not None:
                    clicks.append(click)
        run = NotebookRun(
            path=live["path"], windowing_mode=windowing_mode, finished=finished, run_all_result=result,
            kernel_status=live["kernel_status"], open_documents=live["open_documents"], seconds=0.0,
            cells=[LiveCell.from_js(cell) for cell in live["cells"]], clicks=clicks, tabs_expected=tabs,
            requested_path=path,
        )
        heights = save_screenshot(page, screenshot)
        run.screenshot, run.shown_height, run.content_height = screenshot, heights["shown"], heights["content"]
        run.seconds = time.monotonic() - started
        return run
    except Exception:
        save_failure_screenshot(page, screenshot)
        raise


class LoadedApp:
    """One page with JupyterLab loaded, reused notebook after notebook (each one alone in it, in a kernel of its own):
    loading the application and a notebook in a new page cost Chromium about 4 s of CPU on 2 cores, more than Run All
    of a student copy then costs it (1-2 s)."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.context: Optional[BrowserContext] = None
        self.page: Optional[Page] = None
        self.server_url = ""

    def drive(self, server_url: str, url: str, path: str, **arguments: Any) -> NotebookRun:
        """``run_in_page`` for the notebook at ``url`` (of the server at ``server_url``): in the page already loaded
        from that server, else in a new one. After a failure the page is closed, so the next notebook loads anew."""
        loaded = self.page is not None and server_url == self.server_url
        if not loaded:
            self.close()
            self.context = self.browser.new_context(viewport=VIEWPORT)
            self.page, self.server_url = self.context.new_page(), server_url
        try:
            return run_in_page(self.page, url, path, in_loaded_app=loaded, **arguments)
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        """Close the page (and its browser context)."""
        if self.context is not None:
            self.context.close()
        self.context, self.page, self.server_url = None, None, ""


def save_failure_screenshot(page: Page, path: Path) -> None:
    """Best effort: what the page showed when driving it failed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(**screenshot_options(path), timeout=10_000)
    except (PlaywrightError, OSError) as error:  # the page may be gone; the original error matters more
        print(f"no failure screenshot: {error}")
